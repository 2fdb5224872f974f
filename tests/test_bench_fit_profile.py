"""The fit benchmark's one-thread profile (``benchmarks/bench_fit.py``) on a small memory.

The profile wraps the fit's kernels and the writes of its copy by monkeypatching
:mod:`cbdt._tsqr`; a change of their signatures broke it once (a stored benchmark run
stopped with a ``TypeError``, caught only when the 9-minute benchmark was run). Here it runs
in a second on a small memory, for both paths, and its numbers must hang together: the
kernels' times inside the fit's, shares between 0 and 1, the copy's writes seen where the
fit copies, and the library's functions restored afterwards.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

import cbdt._tsqr as ts
from cbdt import _blas, _pages

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench_fit():
    pytest.importorskip("pandas")
    folder = str(ROOT / "benchmarks")
    sys.path.insert(0, folder)  # the benchmarks import their _common module from there
    try:
        return importlib.import_module("bench_fit")
    finally:
        sys.path.remove(folder)


@pytest.mark.parametrize("copy", [True, False])
def test_profile_runs_and_its_numbers_hang_together(bench_fit, copy: bool) -> None:
    rng = np.random.default_rng(0)
    n, H = 140_000, 8  # more than 64 blocks: the sampled first pass, as at n = 1e6
    Phi = np.tanh(rng.normal(size=(n, H)))
    R = rng.normal(size=(n, 2))
    before = (ts.populate, ts._syrk, ts.trsm_right_upper, ts.trsm_right_upper_recursive,
              ts._Source.fill)
    out = bench_fit.profile(Phi, R, repeats=1, copy=copy)
    assert (ts.populate, ts._syrk, ts.trsm_right_upper, ts.trsm_right_upper_recursive,
            ts._Source.fill) == before
    assert ts.populate is _pages.populate and ts.trsm_right_upper is _blas.trsm_right_upper
    pre = "profile_" if copy else "profile_nocopy_"
    total = out[f"{pre}fit_1thread_cpu_s"]
    kernels = [out[f"{pre}{k}_cpu_s"] for k in ("trsm", "syrk", "potrf")]
    assert all(k > 0 for k in kernels)
    assert sum(kernels) < total
    share = out["outside_share_cpu" if copy else "outside_share_nocopy_cpu"]
    assert 0.0 < share < 1.0
    if copy:
        assert 0.0 < out["profile_copy_cpu_s"] < total  # the fit's writes of its copy
        assert out["outside_share_cpu_less_copy"] < share
    else:
        assert out["stream_1thread_cpu_s"] > 0
        assert out["outside_share_nocopy_cpu_less_stream"] < share
