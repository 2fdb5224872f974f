"""Shared pytest configuration: deterministic settings and hypothesis profiles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "cbdt",
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same examples every run: CI is reproducible
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("cbdt")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240601)
