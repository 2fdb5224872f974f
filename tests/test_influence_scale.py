"""Accuracy and scale of the exact decomposition: QR-based fit against a 50-digit reference,
the fused top-k scan, memmaps (float32 included) and dask arrays (App. C.7, Sec. 3)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from _tolerance import assert_rounding_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from cbdt import CaseInfluence
from cbdt import InputError as cbdt_InputError
from cbdt._ranking import merge_top_k, scan_top_k

EPS = np.finfo(np.float64).eps


def with_condition(seed: int, n: int, H: int, cond: float) -> np.ndarray:
    """Phi = U diag(s) V^T with singular values spread log-uniformly over [1/cond, 1]."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(n, H)))
    V, _ = np.linalg.qr(rng.normal(size=(H, H)))
    return (U * np.logspace(0, -np.log10(cond), H)) @ V.T


def alpha_50_digits(Phi: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """alpha = Phi (Phi^T Phi)^-1 phi in 50-digit arithmetic (mpmath)."""
    with mpmath.workdps(50):
        P = mpmath.matrix(Phi.tolist())
        z = mpmath.lu_solve(P.T * P, mpmath.matrix(phi.tolist()))
        return np.array([float(v) for v in P * z])


@pytest.mark.parametrize("cond", [1e2, 1e4, 1e5, 8e5])
def test_alpha_error_grows_with_cond_phi_not_its_square(cond, tmp_path):
    Phi = with_condition(3, 160, 10, cond)
    phi = np.random.default_rng(4).normal(size=10)
    ref = alpha_50_digits(Phi, phi)
    mm = np.lib.format.open_memmap(tmp_path / "phi.npy", mode="w+", dtype=np.float64,
                                   shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    mm = np.load(tmp_path / "phi.npy", mmap_mode="r")
    # the bound: <= 1e-9 relative at cond(Phi) = 1e5, growing linearly with cond
    bound = 1e-9 * max(cond / 1e5, 1e-2)
    for fitted in (CaseInfluence().fit(Phi, np.ones((160, 1))),  # cached dual matrix
                   CaseInfluence(chunk_size=37).fit(mm, np.ones((160, 1)))):  # Phi (G^-1 phi)
        err = np.linalg.norm(fitted.coefficients(phi) - ref) / np.linalg.norm(ref)
        assert err <= bound, (cond, err)
    # the normal equations (what the fit used to do) lose cond^2: far above the bound at 8e5
    if cond >= 8e5:
        G = Phi.T @ Phi
        ne = Phi @ np.linalg.solve(G, phi)
        assert np.linalg.norm(ne - ref) / np.linalg.norm(ref) > 10 * bound


def test_rank_is_the_rank_of_phi_not_of_the_gram_matrix():
    # singular values down to 1e-10 of the largest: Phi has full rank (numpy's matrix_rank),
    # while G's eigenvalues reach 1e-20 and an eigenvalue cut at ~1e-13 would drop some
    Phi = with_condition(5, 200, 12, 1e10)
    assert np.linalg.matrix_rank(Phi) == 12
    ci = CaseInfluence(solver="lstsq").fit(Phi, np.ones((200, 1)))
    assert ci.rank_ == 12
    assert ci.condition_number_ == pytest.approx(1e20, rel=1e-3)  # of G = (cond Phi)^2
    # an exactly repeated column is rank-deficient by one, found from Phi's singular values
    P2 = np.hstack([Phi, Phi[:, :1]])
    assert CaseInfluence(solver="lstsq").fit(P2, np.ones((200, 1))).rank_ == 12


# ---------------------------------------------------------------- fused top-k scan
def reference_top_k(key: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-key, axis=1, kind="stable")[:, :k]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 300),
    m=st.integers(1, 70),
    levels=st.sampled_from([3, 50, 0]),  # 3 or 50 distinct values (many exact ties), or continuous
    key=st.sampled_from(["abs", "positive", "negative"]),
    entries=st.sampled_from([8, 64, 1000, 1 << 17]),
    threads=st.sampled_from([1, 2]),
)
def test_scan_equals_a_stable_full_sort(seed, n, m, levels, key, entries, threads):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, n + 1))
    h = 3
    X = rng.integers(-levels, levels + 1, size=(n, h)).astype(float) if levels else rng.normal(
        size=(n, h))
    Y = rng.integers(-2, 3, size=(h, m)).astype(float)
    Rt = rng.integers(-2, 3, size=(2, n)).astype(float)
    acts = np.sort(rng.integers(0, 2, size=m))
    cut = int(rng.integers(0, n + 1))
    chunks = [(0, X[:cut]), (cut, X[cut:])] if 0 < cut < n else [(0, X)]
    keys, idx, signed = scan_top_k(chunks, Y, None, Rt, acts, k, key, entries, n, threads)
    psi = (X @ Y).T * Rt[acts]
    full = {"abs": np.abs(psi), "positive": psi, "negative": -psi}[key]
    expect = reference_top_k(full, k)
    np.testing.assert_array_equal(idx, expect)
    np.testing.assert_allclose(signed, np.take_along_axis(psi, expect, axis=1), atol=1e-12)
    np.testing.assert_allclose(keys, np.take_along_axis(full, expect, axis=1), atol=1e-12)


def test_scan_worst_case_order_every_case_beats_the_last():
    # values increase with the case index: every sub-chunk replaces the whole top-k
    n, m, k = 5000, 300, 25
    X = np.arange(n, dtype=float)[:, None]
    Y = np.linspace(1, 2, m)[None, :]
    keys, idx, _ = scan_top_k([(0, X)], Y, None, None, np.zeros(m, dtype=np.intp), k,
                               "positive", 4096, n, 2)
    assert np.array_equal(idx, np.tile(np.arange(n - 1, n - k - 1, -1), (m, 1)))


def test_merge_keeps_earlier_index_on_ties():
    best_v = np.array([[3.0, 2.0, 2.0]])
    best_i = np.array([[7, 1, 4]])
    merge_top_k(best_v, best_i, np.array([0, 0]), np.array([9, 8]), np.array([2.0, 5.0]))
    assert best_i.tolist() == [[8, 7, 1]] and best_v.tolist() == [[5.0, 3.0, 2.0]]


# ---------------------------------------------------------------- memmaps and threads
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_memmap_of_any_dtype_matches_the_in_memory_fit(tmp_path, dtype, intercept):
    rng = np.random.default_rng(11)
    Phi = rng.normal(size=(3000, 6)).astype(dtype)  # values exactly representable in dtype
    R = rng.normal(size=(3000, 3))
    Q = rng.normal(size=(70, 6))
    mm = np.lib.format.open_memmap(tmp_path / "p.npy", mode="w+", dtype=dtype, shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    mm = np.load(tmp_path / "p.npy", mmap_mode="r")
    ref = CaseInfluence(intercept=intercept).fit(np.array(Phi, dtype=np.float64), R)
    ci = CaseInfluence(intercept=intercept, chunk_size=701).fit(mm, R)
    assert ci._dual is None and isinstance(ci._Phi, np.memmap)  # read from the file
    np.testing.assert_allclose(ci.coefficients(Q), ref.coefficients(Q), rtol=1e-9, atol=1e-12)
    acts = rng.integers(0, 3, size=70)
    a, b = ci.top_cases(Q, acts, k=9), ref.top_cases(Q, acts, k=9)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.contributions, b.contributions, rtol=1e-9, atol=1e-12)
    ea, eb = ci.explain(Q, k=5), ref.explain(Q, k=5)
    np.testing.assert_allclose(ea.signals.to_numpy(float), eb.signals.to_numpy(float),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ci.leverage(Q), ref.leverage(Q), rtol=1e-9)


def test_threaded_scan_equals_single_threaded(monkeypatch):
    rng = np.random.default_rng(2)
    Phi, R, Q = rng.normal(size=(20_000, 8)), rng.normal(size=(20_000, 2)), rng.normal(
        size=(400, 8))
    ci = CaseInfluence().fit(Phi, R)
    assert ci._threads(400) >= 1
    monkeypatch.setattr(CaseInfluence, "_threads", lambda self, m: 1)
    one = ci.top_cases(Q, 1, k=12)
    monkeypatch.setattr(CaseInfluence, "_threads", lambda self, m: 3)
    three = ci.top_cases(Q, 1, k=12)
    np.testing.assert_array_equal(one.indices, three.indices)
    # the same ranks; values to the last bits (the GEMM blocks differ by thread)
    np.testing.assert_allclose(one.contributions, three.contributions, rtol=1e-13, atol=0)
    psi = ci.contributions(Q, 1)
    np.testing.assert_array_equal(one.indices, reference_top_k(np.abs(psi), 12))


def test_coefficients_into_a_preallocated_output():
    rng = np.random.default_rng(6)
    Phi, R, Q = rng.normal(size=(500, 5)), rng.normal(size=(500, 2)), rng.normal(size=(9, 5))
    ci = CaseInfluence(batch_size=4).fit(Phi, R)
    buf = np.full((9, 500), np.nan)
    res = ci.coefficients(Q, out=buf)
    assert res is buf and np.array_equal(buf, ci.coefficients(Q))
    one = np.empty(500)
    assert ci.coefficients(Q[3], out=one) is one  # GEMV: equal to the GEMM row to rounding,
    # alpha_i = d_i . phi, H terms: |Delta alpha_i| <= H eps |d_i| . |phi| (an entry near 0
    # has no relative bound)
    assert_rounding_equal(one, buf[3], ulps=5, scale=np.abs(ci.dual_) @ np.abs(Q[3]))
    for bad in (np.empty((9, 499)), np.empty((9, 500), dtype=np.float32),
                np.empty((500, 9)).T, [[0.0] * 500] * 9):
        with pytest.raises(cbdt_InputError, match="out must be a writeable C-contiguous"):
            ci.coefficients(Q, out=bad)


@pytest.mark.parametrize("key", ["abs", "positive", "negative"])
def test_float32_screen_is_exact_below_float32_resolution(key):
    # keys that differ only beyond float32's precision: the float32 screen cannot order them,
    # the float64 recomputation of its candidates must
    rng = np.random.default_rng(3)
    n, m, h, k = 6000, 300, 5, 17
    X = np.tile(rng.normal(size=(1, h)), (n, 1)) + 1e-9 * rng.normal(size=(n, h))
    X[::7] *= -1.0
    Y = rng.normal(size=(h, m))
    Rt = 1.0 + 1e-10 * rng.normal(size=(2, n))
    acts = np.sort(rng.integers(0, 2, size=m))
    keys, idx, signed = scan_top_k([(0, X)], Y, None, Rt, acts, k, key, 1 << 14, n, 1)
    psi = (X @ Y).T * Rt[acts]
    full = {"abs": np.abs(psi), "positive": psi, "negative": -psi}[key]
    top = np.take_along_axis(full, reference_top_k(full, k), axis=1)
    # the keys of the chosen cases are the k largest, in order, up to float64 rounding (1e-15
    # of the products' scale), although neighbouring keys differ only at 1e-9 relative
    tol = 1e-13 * np.abs(X).max() * np.abs(Y).max() * h
    np.testing.assert_allclose(keys, top, rtol=0, atol=tol)
    np.testing.assert_allclose(np.take_along_axis(full, idx, axis=1), top, rtol=0, atol=tol)
    np.testing.assert_allclose(signed, np.take_along_axis(psi, idx, axis=1), rtol=0, atol=tol)
    gaps = np.diff(np.sort(full, axis=1)[:, ::-1][:, : k + 1], axis=1)
    assert np.median(np.abs(gaps)) < 5e-8 * np.abs(full).max()  # below float32 resolution
