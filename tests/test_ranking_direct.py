"""The direct path of ``top_cases``/``explain`` for one query or a few (issue 31, item 2): a
GEMV or small GEMM per block of cases, ranked exactly per block and merged
(:func:`cbdt._ranking.rank_direct`), at every n, with the row-norm bounds of the fit.

Its results are those of the path it replaced above ``_SCAN_ENTRIES`` (2^19) entries, the
fused float32 scan (:func:`cbdt._ranking.scan_top_k`, forced here as it ran before, without
the fit's bounds): the same case indices, on both sides of the old boundary, for every key,
weight, action mix and storage (in memory, a dual matrix, float64 and float32 memmaps, a
constant term). Only integers are compared exactly; values with the rounding bound of
``tests/_tolerance.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _tolerance import assert_rounding_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from cbdt import CaseInfluence, _ranking
from cbdt._ranking import RowNormBounds, block_max_row_norms, scan_top_k

BOUNDARY = CaseInfluence._SCAN_ENTRIES  # 2^19 entries (queries x cases)


def old_path(ci: CaseInfluence, Q: np.ndarray, acts: np.ndarray, k: int, key: str,
             weight: str) -> tuple[np.ndarray, np.ndarray]:
    """(indices, values) of the fused scan as it ran before (row norms measured per
    sub-chunk, no fit-time bounds), queries sorted by action as ``_rank`` does."""
    perm = np.argsort(acts, kind="stable")
    Y, bias = ci._query_side(Q[perm])
    Rt = ci._returns_t if weight == "psi" else None
    keys, idx, vals = scan_top_k(ci._chunks(), Y, bias, Rt, acts[perm], k, key,
                                 ci._SCAN_ENTRIES, ci.n_cases_, 1, ci._returns_absmax)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    return idx[inv], vals[inv]


def fitted(n: int, H: int, seed: int, **kw) -> tuple[CaseInfluence, np.ndarray]:
    rng = np.random.default_rng(seed)
    Phi = np.tanh(rng.normal(size=(n, H)))
    R = rng.normal(size=(n, 3))
    Q = np.tanh(rng.normal(size=(16, H)))
    return CaseInfluence(**kw).fit(Phi, R), Q


@pytest.mark.parametrize("m", [1, 2, 16])
@pytest.mark.parametrize("side", [-1, 0, 1])
def test_direct_equals_the_old_path_across_the_boundary(m: int, side: int) -> None:
    """n with m n just below, at and just above 2^19: the indices of the direct path are
    those of the path each size took before (the one-block path below, the scan above)."""
    n = BOUNDARY // m + side
    ci, Q = fitted(n, 4, seed=m + 3 * side + 7)
    rng = np.random.default_rng(m)
    acts = rng.integers(0, 3, size=m)
    for key in ("abs", "positive", "negative"):
        for weight in ("psi", "alpha"):
            idx, _, vals = ci._rank(Q[:m], acts, 10, key, weight, "queries")
            want_i, want_v = old_path(ci, Q[:m], acts, 10, key, weight)
            assert np.array_equal(idx, want_i), (key, weight)
            assert_rounding_equal(vals, want_v, ulps=16)


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_memmap_direct_equals_the_old_path(tmp_path, intercept: bool, dtype: type) -> None:
    """A memmap (the constant term separate, a float32 file converted chunk by chunk):
    one query and 16 over several chunks of the memmap, the same indices as the scan."""
    rng = np.random.default_rng(5)
    n, H = 150_000, 6
    Phi = np.tanh(rng.normal(size=(n, H))).astype(dtype)
    path = tmp_path / "phi.npy"
    np.save(path, Phi)
    mm = np.load(path, mmap_mode="r")
    R = rng.normal(size=(n, 3))
    ci = CaseInfluence(intercept=intercept, chunk_size=40_000).fit(mm, R)
    Q = np.tanh(rng.normal(size=(16, H)))
    for m in (1, 16):
        acts = rng.integers(0, 3, size=m)
        for key in ("abs", "negative"):
            idx, _, _ = ci._rank(Q[:m], acts, 7, key, "psi", "queries")
            want, _ = old_path(ci, Q[:m], acts, 7, key, "psi")
            assert np.array_equal(idx, want), (m, key)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("intercept", [False, True])
def test_float32_memmap_widened_in_pieces_ranks_like_float64(monkeypatch, tmp_path,
                                                             threads: int,
                                                             intercept: bool) -> None:
    """A float32 memmap's blocks are widened, multiplied and keyed in pieces on Python
    threads (:class:`cbdt._ranking.Widener`). With pieces of a few dozen rows (the last
    one short) on one to three threads, the indices, keys and values are bit for bit those
    of a float64 memmap holding the same numbers (its fit is bit for bit the same), one
    query and 16, every key and weight; and a query ranks the same alone and in the batch."""
    from cbdt import _threads

    monkeypatch.setattr(_ranking, "widen_rows", lambda h: 37)
    monkeypatch.setattr(_threads, "blas_threads", lambda: threads)
    rng = np.random.default_rng(9)
    n, H = 20_011, 6
    Phi = np.tanh(rng.normal(size=(n, H))).astype(np.float32)
    np.save(tmp_path / "f32.npy", Phi)
    np.save(tmp_path / "f64.npy", Phi.astype(np.float64))
    R = rng.normal(size=(n, 3))
    fits = [CaseInfluence(intercept=intercept, chunk_size=7_000).fit(
        np.load(tmp_path / name, mmap_mode="r"), R) for name in ("f32.npy", "f64.npy")]
    np.testing.assert_array_equal(fits[0].readout_, fits[1].readout_)
    Q = np.tanh(rng.normal(size=(16, H)))
    acts = rng.integers(0, 3, size=16)
    for m in (1, 16):
        for key in ("abs", "positive", "negative"):
            for weight in ("psi", "alpha"):
                got, want = (ci._rank(Q[:m], acts[:m], 9, key, weight, "queries")
                             for ci in fits)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(g, w, err_msg=f"{m} {key} {weight}")
    batch = fits[0].top_cases(Q, acts, k=9)
    for j in (0, 7, 15):
        one = fits[0].top_cases(Q[j], int(acts[j]), k=9)
        np.testing.assert_array_equal(one.indices, batch.indices[j])
        np.testing.assert_array_equal(one.contributions, batch.contributions[j])
    # the coefficients and contributions (the same widened pieces, products only): those of
    # the float64 memmap to rounding (each entry y . phi_i + b, |phi_ih| <= 1: a sum of at
    # most H + 1 terms of magnitude <= |y_h|, |b|), every case written
    for m in (1, 16):
        a32, a64 = (ci.coefficients(Q[:m]) for ci in fits)
        Y, b = fits[1]._query_side(Q[:m])
        scale = np.abs(Y).sum(axis=0) + (0.0 if b is None else np.abs(b))  # per query
        assert_rounding_equal(a32, a64, ulps=2 * (H + 2), scale=scale[:, None])
        assert np.array_equal(a32, fits[0].coefficients(Q[:m]))  # the same call: bitwise
        assert_rounding_equal(fits[0].contributions(Q[:m], 1), fits[1].contributions(Q[:m], 1),
                              ulps=2 * (H + 3), scale=scale[:, None] * np.abs(R[:, 1]))


@pytest.mark.parametrize("rows_exp, query_exp", [(0, 0), (0, 90), (0, -90), (0, 120),
                                                   (40, 0), (-40, -60), (70, 0), (-70, 0)])
def test_float32_screen_is_exact_at_rounding_ties_and_extreme_scales(
        monkeypatch, tmp_path, rows_exp: int, query_exp: int) -> None:
    """The direct path screens a float32 memmap in float32 (:func:`cbdt._ranking.bound32`)
    where its rows' norms lie within 2^+-60 and the queries within 2^+-100, and multiplies in
    float64 elsewhere. Adversarial data: every case row a permutation of one float32 vector
    of widely spread magnitudes (its coefficients tie in exact arithmetic and differ in the
    last bits), the rows scaled by 2^rows_exp and the query by 2^query_exp, on both sides of
    both limits. Every key and weight, one query and 16, on two threads: the indices, keys
    and values are bit for bit those of a float64 memmap holding the same numbers, and the
    indices those of a stable sort of the exact keys (:func:`cbdt._ranking._psi`)."""
    from cbdt import _threads
    from cbdt._ranking import _psi

    monkeypatch.setattr(_threads, "blas_threads", lambda: 2)
    monkeypatch.setattr(_ranking, "widen_rows", lambda h: 500)
    rng = np.random.default_rng(abs(rows_exp) + 3 * abs(query_exp))
    n, H = 3_000, 12
    v = (rng.normal(size=H) * np.exp(2 * rng.normal(size=H))).astype(np.float32)
    Phi = np.ldexp(np.stack([rng.permutation(v) for _ in range(n)]), rows_exp)
    Phi = Phi.astype(np.float32)
    np.save(tmp_path / "f32.npy", Phi)
    np.save(tmp_path / "f64.npy", Phi.astype(np.float64))
    R = rng.normal(size=(n, 2)) * np.exp(rng.normal(size=(n, 1)))
    fits = [CaseInfluence(intercept=False, chunk_size=1_100).fit(
        np.load(tmp_path / name, mmap_mode="r"), R) for name in ("f32.npy", "f64.npy")]
    P = Phi.astype(np.float64)
    q = np.ldexp(P.T @ (P @ np.ones(H)), query_exp - 2 * rows_exp)  # solved side ~ 2^e 1
    Q = np.vstack([q, np.ldexp(rng.normal(size=(15, H)), query_exp) * np.abs(q).max()
                   / 2.0**query_exp])
    X = Phi.astype(np.float64)
    for key in ("abs", "positive", "negative"):
        for weight in ("psi", "alpha"):
            for m in (1, 16):
                acts = np.zeros(m, dtype=int)
                got, want = (ci._rank(Q[:m], acts, 10, key, weight, "queries") for ci in fits)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(g, w, err_msg=f"{key} {weight} {m}")
            y = fits[0]._query_side(q[None, :])[0].T
            a = _psi(np.repeat(y, n, axis=0), X, None,
                     R[:, 0] if weight == "psi" else None)
            keys = np.abs(a) if key == "abs" else (a if key == "positive" else -a)
            want_i = np.argsort(-keys, kind="stable")[:10]
            got_i, _, _ = fits[0]._rank(q[None, :], np.zeros(1, dtype=int), 10, key, weight,
                                        "queries")
            np.testing.assert_array_equal(got_i[0], want_i, err_msg=f"{key} {weight}")


def test_float32_screen_switched_off_gives_the_same_ranking(monkeypatch, tmp_path) -> None:
    """``_SCREEN_F32 = False`` (the float64 widening for every block): the same indices,
    keys and values as the float32 screen."""
    rng = np.random.default_rng(12)
    n, H = 30_000, 8
    Phi = np.tanh(rng.normal(size=(n, H))).astype(np.float32)
    np.save(tmp_path / "f32.npy", Phi)
    R = rng.normal(size=(n, 3))
    ci = CaseInfluence().fit(np.load(tmp_path / "f32.npy", mmap_mode="r"), R)
    Q = np.tanh(rng.normal(size=(16, H)))
    acts = rng.integers(0, 3, size=16)
    on = [ci._rank(Q[:m], acts[:m], 8, "abs", "psi", "q") for m in (1, 16)]
    monkeypatch.setattr(_ranking, "_SCREEN_F32", False)
    off = [ci._rank(Q[:m], acts[:m], 8, "abs", "psi", "q") for m in (1, 16)]
    for a, b in zip(on, off, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("storage", ["array", "memmap"])
def test_coefficient_ranking_bound_does_not_shrink_with_small_returns(tmp_path,
                                                                      storage: str) -> None:
    """``rank_by="coefficient"`` keys are |alpha_i|, not weighted by the returns, so their
    rounding bound must not be scaled by max |r| either. Regression: the direct path scaled
    it, and with returns of 1e-9 it dropped cases whose exact keys belonged to the top k.
    Every case row is a permutation of one vector and the query's solved side is ~(1, ..., 1):
    all alpha_i are equal in exact arithmetic and their computed values differ only in the
    last bits (the sums taken in different orders), the hardest case for the screen. The
    chosen cases must be those of a stable sort of the exact keys (the library's one float64
    evaluation, :func:`cbdt._ranking._psi`), alone and in a batch of 16."""
    from cbdt._ranking import _psi

    for seed in range(8):
        rng = np.random.default_rng(seed)
        n, H = 3_000, 16
        v = rng.normal(size=H) * np.exp(3 * rng.normal(size=H))
        Phi = np.stack([rng.permutation(v) for _ in range(n)])
        R = rng.normal(size=(n, 2)) * 1e-9
        if storage == "memmap":
            np.save(tmp_path / "phi.npy", Phi)
            Phi = np.load(tmp_path / "phi.npy", mmap_mode="r")
        ci = CaseInfluence(intercept=False).fit(Phi, R)
        q = np.asarray(Phi).T @ (np.asarray(Phi) @ np.ones(H))
        X = np.vstack([np.asarray(c) for _, c in ci._chunks()])
        y = ci._augment(q[None, :]) if ci._dual is not None else ci._query_side(q[None, :])[0].T
        keys = np.abs(_psi(np.repeat(y, n, axis=0), X))
        assert np.unique(keys).size > 1  # the ties are broken by rounding only
        want = np.argsort(-keys, kind="stable")[:10]
        one = ci.top_cases(q, 0, k=10, rank_by="coefficient")
        np.testing.assert_array_equal(one.indices, want, err_msg=f"seed {seed}")
        batch = ci.top_cases(np.tile(q, (16, 1)), 0, k=10, rank_by="coefficient")
        np.testing.assert_array_equal(batch.indices, np.tile(want, (16, 1)))


@pytest.mark.parametrize("m", [1, 3, 16])
def test_ties_across_blocks_go_to_the_lower_index(monkeypatch, m: int) -> None:
    """Duplicated case rows give exactly tied contributions; with blocks of a few hundred
    cases (so the ties sit in different blocks) the merge keeps the lower case index, as a
    stable sort does and as the scan does."""
    monkeypatch.setattr(_ranking, "_DIRECT_ENTRIES", 512)
    monkeypatch.setattr(_ranking, "_DIRECT_MIN_ROWS", 300)
    rng = np.random.default_rng(11)
    base = np.tanh(rng.normal(size=(400, 5)))
    Phi = np.vstack([base, base[::-1], base])  # every row three times, far apart
    R = np.tile(rng.normal(size=(400, 2)), (3, 1))
    R[400:800] = R[:400][::-1]
    ci = CaseInfluence().fit(Phi, R)
    Q = np.tanh(rng.normal(size=(m, 5)))
    acts = rng.integers(0, 2, size=m)
    for key in ("abs", "positive"):
        idx, _, _ = ci._rank(Q, acts, 9, key, "psi", "queries")
        want, _ = old_path(ci, Q, acts, 9, key, "psi")
        assert np.array_equal(idx, want)
        psi = np.stack([ci.contributions(q, a) for q, a in zip(Q, acts, strict=True)])
        keyv = np.abs(psi) if key == "abs" else psi
        stable = np.argsort(-keyv, axis=1, kind="stable")[:, :9]
        # the chosen cases have the stable sort's keys (ties may only reorder equal keys)
        assert_rounding_equal(np.take_along_axis(keyv, idx, axis=1),
                              np.take_along_axis(keyv, stable, axis=1), ulps=16)


def test_small_blocks_and_k_larger_than_a_block(monkeypatch) -> None:
    """Blocks smaller than k (the last one a few cases): every block lists what it has and
    the merge is still the old path's top-k."""
    monkeypatch.setattr(_ranking, "_DIRECT_ENTRIES", 64)
    monkeypatch.setattr(_ranking, "_DIRECT_MIN_ROWS", 7)
    ci, Q = fitted(1_003, 5, seed=2, intercept=True)
    acts = np.zeros(4, dtype=int)
    idx, _, _ = ci._rank(Q[:4], acts, 25, "abs", "psi", "queries")
    want, _ = old_path(ci, Q[:4], acts, 25, "abs", "psi")
    assert np.array_equal(idx, want)


def test_row_norm_bounds_come_from_the_fit_not_the_query(monkeypatch, tmp_path) -> None:
    """The bounds are computed once, by the fit (or the load), bound every case row's norm,
    and no query measures row norms again."""
    rng = np.random.default_rng(3)
    n, H = 9_000, 7
    Phi = rng.normal(size=(n, H)) * np.exp(rng.normal(size=(n, 1)))
    R = rng.normal(size=(n, 2))
    path = tmp_path / "phi.npy"
    np.save(path, Phi)
    fits = {
        "array": CaseInfluence(intercept=True).fit(Phi, R),
        "memmap": CaseInfluence(intercept=True).fit(np.load(path, mmap_mode="r"), R),
        "householder": CaseInfluence(factorization="householder_tsqr").fit(Phi, R),
    }
    save = tmp_path / "ci.npz"
    fits["array"].save(save)
    fits["loaded"] = CaseInfluence.load(save)

    def refuse(*a, **k):
        raise AssertionError("a query measured row norms")

    for name, ci in fits.items():
        nb = ci._norms
        assert isinstance(nb, RowNormBounds), name
        for s0, X in ci._chunks():
            norms = np.linalg.norm(np.asarray(X, dtype=np.float64), axis=1)
            blocks = (s0 + np.arange(X.shape[0])) // nb.rows
            assert np.all(norms <= nb.maxima[blocks] * (1 + 1e-12)), name
            # tight: each block's bound is its largest row norm, to rounding
            top = np.zeros(nb.maxima.size)
            np.maximum.at(top, blocks, norms)
            assert_rounding_equal(nb.maxima[np.unique(blocks)], top[np.unique(blocks)],
                                  ulps=4 * H)
    monkeypatch.setattr(_ranking, "max_row_norm", refuse)
    monkeypatch.setattr(_ranking, "block_max_row_norms", refuse)
    Q = rng.normal(size=(40, H))
    for ci in fits.values():
        ci.top_cases(Q[0], 0, k=5)
        ci.top_cases(Q[:16], 0, k=5)
        ci.top_cases(Q, 0, k=5)  # the scan, with the fit's bounds


def test_block_max_row_norms_out_of_range() -> None:
    """Rows whose squares overflow or underflow float64 are measured by the rescaled
    max_row_norm; ordinary blocks by their largest sum of squares."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    X[:100] *= 1e200
    X[100:200] *= 1e-200
    got = block_max_row_norms(X, 100, slab=300)
    want = np.array([np.linalg.norm(X[a : a + 100] / np.abs(X[a : a + 100]).max(), axis=1).max()
                     * np.abs(X[a : a + 100]).max() for a in range(0, 1000, 100)])
    assert_rounding_equal(got, want, ulps=8)
    nb = RowNormBounds(100, got)
    assert nb.over(150, 420) == got[1:5].max()
    assert nb.over(5, 5) == 0.0


@pytest.mark.parametrize("big", [False, True])
def test_dask_row_norm_bounds_come_from_the_fit(monkeypatch, big) -> None:
    """A dask fit keeps one set of row-norm bounds per row chunk (rows counted from the
    chunk's start, chunks not aligned with the blocks), measured by its second pass on the
    workers, of the rows a query reads (phi_i, also when the fit rescaled Phi by 2^-k):
    every row's norm is bounded, tightly, and no query measures row norms again; the
    queries' cases are those of the in-memory fit."""
    da = pytest.importorskip("dask.array")
    import dask

    rng = np.random.default_rng(4)
    n, H = 9_000, 6
    Phi = rng.normal(size=(n, H)) * np.exp(rng.normal(size=(n, 1)))
    if big:
        Phi *= 2.0**600  # squares out of float64's range: the fit rescales
    R = rng.normal(size=(n, 2))
    with dask.config.set(scheduler="synchronous"):
        X = da.from_array(Phi, chunks=(2_600, H))
        ci = CaseInfluence(intercept=True).fit(X, R)
        ref = CaseInfluence(intercept=True).fit(Phi, R)
        assert (ci._scale != 1.0) == big
        bounds = ci._chunk_norms
        assert len(bounds) == 4
        for j, nb in enumerate(bounds):
            rows = Phi[j * 2_600 : (j + 1) * 2_600]
            norms = np.linalg.norm(rows / 2.0**600 if big else rows, axis=1)
            if big:
                norms = norms * 2.0**600
            blocks = np.arange(rows.shape[0]) // nb.rows
            assert np.all(norms <= nb.maxima[blocks] * (1 + 1e-12))
            top = np.zeros(nb.maxima.size)
            np.maximum.at(top, blocks, norms)
            assert_rounding_equal(nb.maxima, top, ulps=4 * H)

        def refuse(*a, **k):
            raise AssertionError("a query measured row norms")

        monkeypatch.setattr(_ranking, "max_row_norm", refuse)
        monkeypatch.setattr(_ranking, "block_max_row_norms", refuse)
        Q = rng.normal(size=(40, H)) * (2.0**600 if big else 1.0)
        acts = rng.integers(0, 2, size=40)
        for m in (1, 16, 40):
            a = ci.top_cases(Q[:m], acts[:m], k=7)
            b = ref.top_cases(Q[:m], acts[:m], k=7)
            np.testing.assert_array_equal(a.indices, b.indices)


def test_nystrom_row_norm_bounds_measured_once(monkeypatch, tmp_path) -> None:
    """NystromCaseInfluence measures its dual matrix's row-norm bounds at fit and at load,
    not per query; they bound every row, and its ranking is the brute-force one."""
    from cbdt import NystromCaseInfluence

    rng = np.random.default_rng(5)
    n, H = 5_000, 8
    Phi = rng.normal(size=(n, H))
    R = rng.normal(size=(n, 2))
    est = NystromCaseInfluence(5, random_state=0).fit(Phi, R)
    est.save(tmp_path / "ny.npz")
    loaded = NystromCaseInfluence.load(tmp_path / "ny.npz")
    for e in (est, loaded):
        nb = e._norms
        norms = np.linalg.norm(e._dual, axis=1)
        assert np.all(norms <= nb.maxima[np.arange(n) // nb.rows] * (1 + 1e-12))

    def refuse(*a, **k):
        raise AssertionError("a query measured row norms")

    monkeypatch.setattr(_ranking, "max_row_norm", refuse)
    monkeypatch.setattr(_ranking, "block_max_row_norms", refuse)
    Q = rng.normal(size=(30, H))
    for e in (est, loaded):
        got = e.top_cases(Q, 1, k=6)
        psi = e.coefficients(Q) * R[:, 1]
        want = np.argsort(-np.abs(psi), axis=1, kind="stable")[:, :6]
        np.testing.assert_array_equal(got.indices, want)


def test_ridge_metric_decomposed_once_per_fit(monkeypatch) -> None:
    """The ridge metric is checked and decomposed once per fit (its rows are needed twice),
    and the fit is the one of the metric's rows sqrt(lam w) U^T."""
    from scipy import linalg

    rng = np.random.default_rng(6)
    Phi, R = rng.normal(size=(500, 5)), rng.normal(size=(500, 2))
    A = rng.normal(size=(5, 5))
    M = A @ A.T
    calls = []
    orig = linalg.eigh

    def counted(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(linalg, "eigh", counted)
    ci = CaseInfluence(ridge=0.7, ridge_metric=M, intercept=True).fit(Phi, R)
    assert len(calls) == 1
    X = np.hstack([Phi, np.ones((500, 1))])
    P = np.zeros((6, 6))
    P[:5, :5] = 0.7 * M
    V = np.linalg.solve(X.T @ X + P, X.T @ R)
    np.testing.assert_allclose(ci.readout_, V[:5], rtol=1e-9, atol=1e-12)


# --- the float32 keys of a float32 memmap (Widener.keys32, bound_keys32) -----------------
def _tied_rows(rng: np.random.Generator, n: int, H: int) -> np.ndarray:
    """Float32 case rows, each a permutation of one vector of widely spread magnitudes: with
    a query of equal entries their coefficients tie in exact arithmetic."""
    v = (rng.normal(size=H) * np.exp(2 * rng.normal(size=H))).astype(np.float32)
    return np.stack([rng.permutation(v) for _ in range(n)])


def _direct(X: np.ndarray, Yt: np.ndarray, bias, Rt, acts, k: int, key: str):
    """rank_direct over ``X`` in blocks of 700 cases, with its row-norm bounds."""
    rows = 250
    norms = RowNormBounds(rows, block_max_row_norms(X, rows))
    rq = None if Rt is None else np.abs(Rt).max(axis=1)
    rmax = 1.0 if Rt is None else float(np.abs(Rt).max())
    chunks = [(s, X[s : s + 700]) for s in range(0, X.shape[0], 700)]
    return _ranking.rank_direct(chunks, Yt.T.copy(), bias, Rt, acts, k, key, norms, rq, rmax)


@pytest.mark.parametrize("ret_exp, bias_exp, ret_ok, bias_ok", [
    (0, None, True, True), (-140, None, True, True), (-60, 0, True, True),
    (37, 0, True, True), (39, 0, False, True), (0, 60, True, True), (0, 70, True, False),
    (20, -30, True, True)])
@pytest.mark.parametrize("m", [1, 16])
def test_float32_keys_are_exact_at_ties_with_constant_terms_and_extreme_returns(
        monkeypatch, ret_exp: int, bias_exp: int | None, ret_ok: bool, bias_ok: bool,
        m: int) -> None:
    """The direct path keeps a float32 memmap's keys in float32 (the constant term and the
    returns rounded to float32, :func:`cbdt._ranking.bound_keys32`) where the returns are at
    most 2^40 and the scaled constant terms at most 2^64, and keys in float64 elsewhere.
    Adversarial data: tied coefficients (permuted rows, a query of equal entries and its
    neighbours), returns of 2^ret_exp (2^-140: subnormal in float32) with ties of |r|, and
    constant terms of 2^bias_exp, on both sides of both limits (the largest |r| is 4
    2^ret_exp); pieces of 64 rows on three threads (the blocks' maxima taken per piece).
    Every key and weight: the indices, keys and values are bit for bit those of the same
    rows in float64 (another path: one GEMM or GEMV and float64 keys), and the indices those
    of a stable sort of the exact keys (:func:`cbdt._ranking._psi`)."""
    from cbdt import _threads
    from cbdt._ranking import _psi

    monkeypatch.setattr(_threads, "blas_threads", lambda: 3)
    monkeypatch.setattr(_ranking, "widen_rows", lambda h: 64)
    used = []
    keys32 = _ranking.Widener.keys32

    def spy(self, *a, **kw):
        got = keys32(self, *a, **kw)
        used.append(got is not None)
        return got

    monkeypatch.setattr(_ranking.Widener, "keys32", spy)
    rng = np.random.default_rng(abs(ret_exp) + 7 * abs(bias_exp or 1) + m)
    n, H = 2_100, 12
    X32 = _tied_rows(rng, n, H)
    X64 = X32.astype(np.float64)
    Yt = np.vstack([np.ones(H), 1.0 + rng.integers(-2, 3, size=(15, H)) / 64])[:m]
    bias = None if bias_exp is None else np.ldexp(1.0 + rng.integers(0, 4, size=m), bias_exp)
    r = np.ldexp(rng.integers(1, 5, size=(2, n)) * rng.choice([-1.0, 1.0], size=(2, n)),
                 ret_exp)  # few distinct |r|: ties
    acts = np.array([0] * m) if m == 1 else rng.integers(0, 2, size=m)
    for key in ("abs", "positive", "negative"):
        for Rt in (r, None):
            used.clear()
            got = _direct(X32, Yt, bias, Rt, acts, 10, key)
            uses32 = bias_ok and (ret_ok or Rt is None)  # keys of alpha: no returns
            assert used and all(u == uses32 for u in used), (key, Rt is None, used)
            want = _direct(X64, Yt, bias, Rt, acts, 10, key)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"{key} {Rt is None}")
            for j in range(m):
                a = _psi(np.repeat(Yt[j : j + 1], n, axis=0), X64,
                         None if bias is None else np.full(n, bias[j]),
                         None if Rt is None else Rt[acts[j]])
                kv = np.abs(a) if key == "abs" else (a if key == "positive" else -a)
                np.testing.assert_array_equal(got[1][j], np.argsort(-kv, kind="stable")[:10],
                                              err_msg=f"{key} {Rt is None} {j}")


@settings(max_examples=60, deadline=None)
@given(rows_exp=st.integers(-60, 60), query_exp=st.integers(-100, 100),
       ret_exp=st.integers(-150, 40), bias_exp=st.none() | st.integers(-100, 100),
       key=st.sampled_from(["abs", "positive", "negative"]), seed=st.integers(0, 2**16))
def test_float32_keys_lie_within_their_bound(rows_exp: int, query_exp: int, ret_exp: int,
                                             bias_exp: int | None, key: str, seed: int) -> None:
    """Every float32 key (``Widener.keys32``), scaled back, lies within the bound the ranking
    uses (``2^e`` times :func:`cbdt._ranking._bound64` plus
    :func:`cbdt._ranking.bound_keys32`) of the exact key (:func:`cbdt._ranking._psi`), and
    the blocks' maxima it takes per piece are those of the keys; over rows, queries,
    returns and constant terms spread across the float32 path's ranges."""
    from cbdt._ranking import Widener, _block_cols, _bound64, _psi, _row_norms, bound_keys32

    rng = np.random.default_rng(seed)
    n, H, m = 600, 9, 5  # four pieces of 128 rows and one of 88
    X = np.ldexp(rng.normal(size=(n, H)) * np.exp(rng.normal(size=(n, 1))),
                 rows_exp).astype(np.float32)
    Yt = np.ldexp(rng.normal(size=(m, H)), query_exp)
    bias = None if bias_exp is None else np.ldexp(rng.normal(size=m), bias_exp)
    Rt = np.ldexp(rng.normal(size=(2, n)), ret_exp)
    acts = rng.integers(0, 2, size=m)
    X64 = X.astype(np.float64)
    xmax = float(np.linalg.norm(X64, axis=1).max())
    rq = np.abs(Rt).max(axis=1)
    with Widener(Yt, key, bias) as widen:
        widen._start()
        widen.rows, widen.threads = 128, 1
        got = widen.keys32(X, Rt, acts, xmax, rq, 3)
        if got is None:  # outside the float32 ranges (rows 2^+-60, constant term 2^64)
            assert not widen._keys32_ok(acts, rq) or not widen.screens(X, xmax)
            return
        K, scale, maxima = got
    assert K.dtype == np.float32 and K.shape == (m, n)
    yns = _row_norms(Yt)
    babs = 0.0 if bias is None else np.abs(bias)
    M = (scale * _bound64(H, yns, xmax, babs, rq[acts], float(np.abs(Yt).max()),
                          float(np.abs(Rt).max()))
         + bound_keys32(H, yns, xmax, babs, rq[acts], scale))
    for j in range(m):
        a = _psi(np.repeat(Yt[j : j + 1], n, axis=0), X64,
                 None if bias is None else np.full(n, bias[j]), Rt[acts[j]])
        kv = np.abs(a) if key == "abs" else (a if key == "positive" else -a)
        err = np.abs(K[j].astype(np.float64) - scale[j] * kv)
        assert np.all(err <= M[j]), (j, float(err.max()), float(M[j]))
    if maxima is not None:  # whole pieces of 128 rows (interleaved blocks), a short one
        b, bmax, piece = maxima
        assert piece == 128 and b <= 88 and 88 % b == 0
        cols = _block_cols(np.arange(bmax.shape[1]), b, piece, n)
        held = cols[cols < n]
        np.testing.assert_array_equal(np.sort(held), np.arange(n))  # each column once
        want = np.where(cols < n, K[:, np.minimum(cols, n - 1)], -np.inf).max(axis=2)
        np.testing.assert_array_equal(bmax, want)


def test_float32_keys_switched_off_give_the_same_ranking(monkeypatch, tmp_path) -> None:
    """``_KEYS_F32 = False`` (float64 keys after the float32 product, the path before the
    float32 keys): the same indices, keys and values, with a constant term."""
    rng = np.random.default_rng(13)
    n, H = 30_000, 8
    Phi = np.tanh(rng.normal(size=(n, H))).astype(np.float32)
    np.save(tmp_path / "f32.npy", Phi)
    R = rng.normal(size=(n, 3))
    ci = CaseInfluence(intercept=True).fit(np.load(tmp_path / "f32.npy", mmap_mode="r"), R)
    Q = np.tanh(rng.normal(size=(16, H)))
    acts = rng.integers(0, 3, size=16)
    on = [ci._rank(Q[:m], acts[:m], 8, key, w, "q") for m in (1, 16)
          for key in ("abs", "negative") for w in ("psi", "alpha")]
    monkeypatch.setattr(_ranking, "_KEYS_F32", False)
    off = [ci._rank(Q[:m], acts[:m], 8, key, w, "q") for m in (1, 16)
           for key in ("abs", "negative") for w in ("psi", "alpha")]
    for a, b in zip(on, off, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("m", [1, 2])
def test_float32_keys_bound_holds_where_float32_sums_lose_most(m: int) -> None:
    """Rows and queries of one entry 1 and 255 entries whose squares lie just under half an
    ulp of 1 in float32: a sum taken in order loses every small product (about 2^-16 in
    all, dozens of ``u |y| |x|``; a bound without the product's ``(h + 8) eps`` term,
    :func:`cbdt._ranking.bound32`, fails here on the benchmark machine with the native and
    the generic kernels). Every float32 key lies within the bound the ranking uses."""
    from cbdt._ranking import Widener, _bound64, _psi, _row_norms, bound_keys32

    n, H = 256, 256
    x = np.full(H, np.sqrt(0.99 * 2.0**-24), dtype=np.float32)
    x[0] = 1.0
    X = np.tile(x, (n, 1))
    Yt = np.tile(x.astype(np.float64), (m, 1))
    Rt, acts, rq = np.ones((1, n)), np.zeros(m, dtype=int), np.ones(1)
    xmax = float(np.linalg.norm(X.astype(np.float64), axis=1).max())
    with Widener(Yt, "abs", None) as widen:
        widen._start()
        widen.rows, widen.threads = 128, 1
        K, scale, _ = widen.keys32(X, Rt, acts, xmax, rq, 3)
    yns = _row_norms(Yt)
    M = (scale * _bound64(H, yns, xmax, 0.0, rq[acts], 1.0, 1.0)
         + bound_keys32(H, yns, xmax, 0.0, rq[acts], scale))
    a = _psi(np.repeat(Yt[:1], n, axis=0), X.astype(np.float64), None, Rt[0])
    for j in range(m):
        assert np.all(np.abs(K[j] - scale[j] * np.abs(a)) <= M[j])


@pytest.mark.parametrize("screen", [True, False])
@pytest.mark.parametrize("intercept", [False, True])
def test_scan_reads_a_float32_memmap_as_it_is(monkeypatch, tmp_path, screen: bool,
                                              intercept: bool) -> None:
    """More than 16 queries (the fused scan): a float32 memmap's chunks reach the scan as
    float32 (no float64 copy of each chunk), and its indices, keys and values are bit for
    bit those of a float64 memmap holding the same numbers, with the float32 screen and
    without it; a query ranks the same alone (the direct path) and in the batch."""
    monkeypatch.setattr(_ranking, "_SCREEN_F32", screen)
    rng = np.random.default_rng(21)
    n, H = 40_000, 7
    Phi = np.tanh(rng.normal(size=(n, H))).astype(np.float32)
    Phi[:50] *= 2.0**45  # rows outside 2^+-40: the screen scales their sub-chunk
    np.save(tmp_path / "f32.npy", Phi)
    np.save(tmp_path / "f64.npy", Phi.astype(np.float64))
    R = rng.normal(size=(n, 3))
    fits = [CaseInfluence(intercept=intercept, chunk_size=9_000).fit(
        np.load(tmp_path / name, mmap_mode="r"), R) for name in ("f32.npy", "f64.npy")]
    fed = []
    feed = _ranking._TopKScan.feed

    def spy(self, s0, X):
        fed.append(X.dtype)
        return feed(self, s0, X)

    monkeypatch.setattr(_ranking._TopKScan, "feed", spy)
    Q = np.tanh(rng.normal(size=(40, H)))
    acts = rng.integers(0, 3, size=40)
    for key in ("abs", "negative"):
        for weight in ("psi", "alpha"):
            fed.clear()
            got = fits[0]._rank(Q, acts, 9, key, weight, "queries")
            assert fed and set(fed) == {np.dtype(np.float32)}
            want = fits[1]._rank(Q, acts, 9, key, weight, "queries")
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"{key} {weight}")
            for j in (0, 17, 39):
                one = fits[0]._rank(Q[j : j + 1], acts[j : j + 1], 9, key, weight, "queries")
                for g, w in zip(one, got, strict=True):
                    np.testing.assert_array_equal(g[0], w[j])
