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

from cbdt._blas import (
    TRSM_LEAF,
    _solve_plan,
    geqrf_r,
    symmetric_from_lower,
    syrk_add,
    transpose_into,
    trsm_right_upper,
    trsm_right_upper_recursive,
)


def _longest_pause_beside(work) -> tuple[float, float]:
    """Run ``work()`` on another thread while this one loops in Python; returns the longest
    pause between two of this thread's iterations and the time ``work`` took (a kernel that
    holds the GIL pauses this thread for all of it)."""
    span: list[float] = []

    def run() -> None:
        t0 = time.perf_counter()
        work()
        span.append(time.perf_counter() - t0)

    t = threading.Thread(target=run)
    last, gap = time.perf_counter(), 0.0
    t.start()
    while t.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    t.join()
    assert span, "the work raised"
    return gap, span[0]


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


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 300), k=st.integers(1, 300), seed=st.integers(0, 2**32 - 1),
       spread=st.integers(0, 8))
def test_recursive_trsm_is_backward_stable(m: int, k: int, seed: int, spread: int) -> None:
    """The recursive solve: ``Y R = B`` with a backward error of the order of the unit
    roundoff (normwise, ``||Y R - B|| <= 4 k eps ||Y|| ||R||``), ``Y`` within ``cond(R)``
    times that of one ``dtrsm``'s, the same call repeated bit for bit, and one ``dtrsm``
    itself (bit for bit) up to :data:`cbdt._blas.TRSM_LEAF` columns. ``spread`` grades the
    diagonal of ``R`` over up to 8 decades."""
    rng = np.random.default_rng(seed)
    R = _upper(k, rng) * np.logspace(0, -spread, k)[None, :]
    R = np.asfortranarray(R)
    B = np.asfortranarray(rng.normal(size=(m, k)))
    got = B.copy(order="F")
    out = trsm_right_upper_recursive(R, got)
    assert out is got  # in place
    eps = np.finfo(float).eps
    res = np.linalg.norm(got @ R - B)
    assert res <= 4 * k * eps * np.linalg.norm(got) * np.linalg.norm(R), res
    want = linalg.blas.dtrsm(1.0, R, B.copy(order="F"), side=1, lower=0, trans_a=0)
    cond = np.linalg.cond(R)
    assert np.linalg.norm(got - want) <= 8 * k * eps * cond * np.linalg.norm(want)
    again = trsm_right_upper_recursive(R, B.copy(order="F"))
    assert np.array_equal(again, got)
    if k <= TRSM_LEAF:
        assert np.array_equal(got, want)


@pytest.mark.parametrize("k", [1, 63, 64, 65, 129, 257, 1025])
def test_recursive_plan_solves_every_column_once_after_its_updates(k: int) -> None:
    """The plan's leaves tile ``0..k`` in order, none wider than a leaf; every update
    ``(k0, km, k1)`` reads columns ``k0..km`` after they are solved and writes ``km..k1``
    before they are, and every pair of columns ``i < j`` in different leaves is updated
    exactly once (a pair within a leaf is the leaf's ``dtrsm``'s)."""
    plan = _solve_plan(k)
    solved = 0
    updated = np.zeros((k, k), dtype=int)
    want = np.triu(np.ones((k, k), dtype=int), 1)
    for k0, km, k1 in plan:
        if km < 0:
            assert k0 == solved and 0 < k1 - k0 <= TRSM_LEAF
            solved = k1
            want[k0:k1, k0:k1] = 0
        else:
            assert k0 < km < k1 and solved == km  # the left part just solved, the right not
            updated[k0:km, km:k1] += 1
    assert solved == k
    assert np.array_equal(updated, want)


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
    for solve in (trsm_right_upper, trsm_right_upper_recursive):
        with pytest.raises(ValueError, match="Fortran-ordered float64"):
            solve(R, rng.normal(size=(5, 4)))  # C order
        with pytest.raises(ValueError, match=r"expected \(4, 4\)"):
            solve(_upper(3, rng), np.asfortranarray(rng.normal(size=(5, 4))))
    with pytest.raises(ValueError, match="Fortran-ordered float64"):
        geqrf_r(rng.normal(size=(5, 4)).astype(np.float32, order="F"))


@pytest.mark.parametrize("solve", [trsm_right_upper, trsm_right_upper_recursive])
def test_trsm_releases_the_gil(solve) -> None:
    """While one thread solves a large system, the main thread keeps running Python code:
    the longest pause between its loop iterations is a small part of the solve (an f2py
    wrapper, holding the GIL, would stop it for the whole solve)."""
    rng = np.random.default_rng(1)
    R = _upper(1500, rng)
    B = np.asfortranarray(rng.normal(size=(4000, 1500)))
    with threadpool_limits(1):
        gap, span = _longest_pause_beside(lambda: solve(R, B))
    assert span > 0.05, span  # the solve is long enough to tell
    assert gap < 0.5 * span, (gap, span)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 200), p=st.integers(1, 40), extra=st.integers(0, 3),
       order=st.sampled_from("CF"), seed=st.integers(0, 2**32 - 1))
def test_syrk_add_accumulates_the_gram_product(m: int, p: int, extra: int, order: str,
                                               seed: int) -> None:
    """``syrk_add`` adds ``X^T X`` to the lower triangle of a C-ordered accumulator, for a
    Fortran- or C-ordered block (a C one possibly the first columns of a wider buffer), and
    leaves the strict upper triangle alone: two blocks added in turn give the Gram matrix
    of both to rounding."""
    rng = np.random.default_rng(seed)
    buf = rng.normal(size=(m, p + extra))
    X = np.asfortranarray(buf[:, :p]) if order == "F" else buf[:, :p]
    X2 = rng.normal(size=(m, p))
    acc = np.zeros((p, p))
    acc[np.triu_indices(p, 1)] = 7.0  # must stay
    syrk_add(X, acc)
    syrk_add(X2, acc)
    assert np.all(acc[np.triu_indices(p, 1)] == 7.0)
    want = X.T @ X + X2.T @ X2
    got = symmetric_from_lower(acc)
    eps = np.finfo(float).eps
    tol = 4 * m * eps * (np.abs(X).T @ np.abs(X) + np.abs(X2).T @ np.abs(X2))
    assert np.all(np.abs(got - want) <= tol)
    assert np.array_equal(got, got.T)


def test_syrk_add_names_a_wrong_accumulator_or_layout() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"shape \(3, 3\)"):
        syrk_add(rng.normal(size=(5, 3)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="contiguous rows or contiguous columns"):
        syrk_add(rng.normal(size=(10, 6))[::2, ::2], np.zeros((3, 3)))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 300), k=st.integers(1, 80), lda_extra=st.integers(0, 3),
       ldb_extra=st.integers(0, 3), exponent=st.integers(-60, 60),
       seed=st.integers(0, 2**32 - 1))
def test_transpose_into_is_an_exact_copy_into_columns(m, k, lda_extra, ldb_extra, exponent,
                                                      seed) -> None:
    """``B = 2^e A`` from a row-major block (possibly the first columns of a wider array)
    into a column-major one (possibly the first rows and columns of a larger buffer): a
    copy times a power of two is exact, so the result is bit for bit ``2^e A``; the rest
    of the buffer is untouched."""
    pytest.importorskip("scipy.linalg.cython_blas")
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, k + lda_extra))[:, :k]
    buf = np.full((m + ldb_extra, k + 1), -7.0, order="F")
    alpha = 2.0**exponent
    if not transpose_into(A, buf[:m, :k], alpha):
        pytest.skip("this BLAS has no domatcopy (numpy copies instead)")
    assert np.array_equal(buf[:m, :k], alpha * A)
    assert np.all(buf[m:, :] == -7.0) and np.all(buf[:, k] == -7.0)


def test_transpose_into_declines_what_it_cannot_copy() -> None:
    """It returns False, writing nothing, for another dtype, a column-major source, a
    row-major target, shapes that differ or an empty block."""
    rng = np.random.default_rng(2)
    A = rng.normal(size=(50, 6))
    B = np.zeros((50, 6), order="F")
    assert not transpose_into(A.astype(np.float32), B)
    assert not transpose_into(np.asfortranarray(A), B)
    assert not transpose_into(A, np.zeros((50, 6)))
    assert not transpose_into(A, np.zeros((50, 5), order="F"))
    assert not transpose_into(A[:0], B[:0])
    assert not B.any()


def test_transpose_into_releases_the_gil() -> None:
    """As for the solves: the main thread keeps running while another transposes a large
    block (numpy's transposing copy in pieces would hand the GIL back and forth)."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(4000, 3000))
    B = np.empty((4000, 3000), order="F")
    if not transpose_into(A[:2], B[:2]):
        pytest.skip("this BLAS has no domatcopy")
    gap, span = _longest_pause_beside(lambda: [transpose_into(A, B) for _ in range(3)])
    assert np.array_equal(B, A)
    assert span > 0.05, span
    assert gap < 0.5 * span, (gap, span)
