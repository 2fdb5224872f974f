"""The GIL-free kernels of :mod:`cbdt._blas`: the very results of scipy's f2py wrappers,
computed while other Python threads run."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import linalg
from threadpoolctl import threadpool_limits

from cbdt._blas import geqrf_r, trsm_right_upper, trsm_rows_upper


def _upper(k: int, rng: np.random.Generator) -> np.ndarray:
    return np.asfortranarray(np.triu(rng.normal(size=(k, k))) + 4 * np.eye(k))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 300), k=st.integers(1, 70), seed=st.integers(0, 2**32 - 1))
def test_trsm_is_scipys_dtrsm_bit_for_bit(m: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    R = _upper(k, rng)
    B = np.asfortranarray(rng.normal(size=(m, k)))
    want = linalg.blas.dtrsm(1.0, R, B.copy(order="F"), side=1, lower=0, trans_a=0)
    got = B.copy(order="F")
    out = trsm_right_upper(R, got)
    assert out is got  # in place
    assert np.array_equal(got, want)
    assert np.abs(got @ R - B).max() <= 1e-10 * max(1.0, np.abs(B).max())


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 300), k=st.integers(1, 70), extra=st.integers(0, 5),
       seed=st.integers(0, 2**32 - 1))
def test_trsm_rows_is_scipys_left_dtrsm_bit_for_bit(m: int, k: int, extra: int,
                                                     seed: int) -> None:
    """``Y R = X`` for the rows of a C-ordered block (the first k columns of a buffer
    ``extra`` columns wider): the left-side, transposed ``dtrsm`` on ``X^T``, bit for bit
    scipy's wrapper, the other columns untouched, and ``Y R = X`` to rounding."""
    rng = np.random.default_rng(seed)
    R = _upper(k, rng)
    X = rng.normal(size=(m, k))
    want = linalg.blas.dtrsm(1.0, R, np.asfortranarray(X.T), side=0, lower=0, trans_a=1).T
    buf = rng.normal(size=(m, k + extra))
    rest = buf[:, k:].copy()
    buf[:, :k] = X
    out = trsm_rows_upper(R, buf[:, :k])
    assert np.shares_memory(out, buf)  # in place
    assert np.array_equal(buf[:, :k], want)
    assert np.array_equal(buf[:, k:], rest)
    assert np.abs(buf[:, :k] @ R - X).max() <= 1e-10 * max(1.0, np.abs(X).max())


def test_trsm_rows_layout_errors_are_named() -> None:
    rng = np.random.default_rng(0)
    R = _upper(4, rng)
    with pytest.raises(ValueError, match="contiguous rows"):
        trsm_rows_upper(R, np.asfortranarray(rng.normal(size=(5, 4))))
    with pytest.raises(ValueError, match=r"expected \(4, 4\)"):
        trsm_rows_upper(_upper(3, rng), rng.normal(size=(5, 4)))
    with pytest.raises(ValueError, match="R must be"):
        trsm_rows_upper(np.ascontiguousarray(R + np.tril(R.T, -1)), rng.normal(size=(5, 4)))


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 400), q=st.integers(1, 60), seed=st.integers(0, 2**32 - 1))
def test_geqrf_is_scipys_dgeqrf_bit_for_bit(p: int, q: int, seed: int) -> None:
    p = max(p, q)
    rng = np.random.default_rng(seed)
    A = np.asfortranarray(rng.normal(size=(p, q)))
    qr, _, _, _ = linalg.lapack.dgeqrf(A.copy(order="F"), lwork=64 * q)
    R = geqrf_r(A.copy(order="F"))
    assert np.array_equal(R, np.triu(qr[:q]))
    G = A.T @ A
    assert np.abs(R.T @ R - G).max() <= 1e-10 * np.abs(G).max()


def test_layout_and_shape_errors_are_named() -> None:
    rng = np.random.default_rng(0)
    R = _upper(4, rng)
    with pytest.raises(ValueError, match="Fortran-ordered float64"):
        trsm_right_upper(R, rng.normal(size=(5, 4)))  # C order
    with pytest.raises(ValueError, match=r"expected \(4, 4\)"):
        trsm_right_upper(_upper(3, rng), np.asfortranarray(rng.normal(size=(5, 4))))
    with pytest.raises(ValueError, match="R must be"):
        trsm_right_upper(np.ascontiguousarray(R + np.tril(R.T, -1)),
                         np.asfortranarray(rng.normal(size=(5, 4))))
    with pytest.raises(ValueError, match="Fortran-ordered float64"):
        geqrf_r(rng.normal(size=(5, 4)).astype(np.float32, order="F"))


def test_trsm_releases_the_gil() -> None:
    """While one thread solves a large system, the main thread keeps running Python code:
    the longest pause between its loop iterations is a small part of the solve (an f2py
    wrapper, holding the GIL, would stop it for the whole solve)."""
    rng = np.random.default_rng(1)
    R = _upper(1500, rng)
    B = np.asfortranarray(rng.normal(size=(4000, 1500)))
    span: list[float] = []

    def solve() -> None:
        t0 = time.perf_counter()
        trsm_right_upper(R, B)
        span.append(time.perf_counter() - t0)

    with threadpool_limits(1):
        t = threading.Thread(target=solve)
        last, gap = time.perf_counter(), 0.0
        t.start()
        while t.is_alive():
            now = time.perf_counter()
            gap, last = max(gap, now - last), now
        t.join()
    assert span and span[0] > 0.05, span  # the solve is long enough to tell
    assert gap < 0.5 * span[0], (gap, span[0])
