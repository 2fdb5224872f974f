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


@pytest.fixture
def rewrite_npz():
    """``rewrite(path, **changes)``: rewrite an ``.npz`` file with entries replaced (an array)
    or removed (None), as a damaged or older file would be."""

    def rewrite(path, **changes) -> None:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        for k, v in changes.items():
            if v is None:
                arrays.pop(k)
            else:
                arrays[k] = v
        np.savez(path, **arrays)

    return rewrite


def pytest_report_header(config) -> list[str]:
    """The kernels this run computes with (the leg of the kernel matrix, TESTING.md)."""
    from nbcheck import kernel_report

    return kernel_report()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Under -q the header is not shown: print the kernels after the results instead."""
    from nbcheck import kernel_report

    if config.get_verbosity() < 0:
        for line in kernel_report():
            terminalreporter.write_line(line)
