"""The exact top-k selection equals a stable full sort, ties included."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cbdt._ranking import top_k_indices


@given(
    st.integers(0, 10_000),
    st.integers(1, 6),
    st.integers(1, 3000),
    st.integers(1, 40),
    st.booleans(),
)
def test_top_k_equals_stable_argsort(seed, m, n, k, ties):
    rng = np.random.default_rng(seed)
    k = min(k, n)
    v = rng.integers(0, 4, size=(m, n)).astype(float) if ties else rng.normal(size=(m, n))
    expect = np.argsort(-v, axis=1, kind="stable")[:, :k]
    assert np.array_equal(top_k_indices(v, k), expect)
