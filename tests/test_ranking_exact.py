"""Exactness of the ranking at any scale and on every path.

C2: the float32 screen of the fused scan holds only values float32 can represent. With
Phi ~ 1e-60 (not rescaled by the fit) the dual rows (~1e57) overflowed float32 and every
query got wrong cases; float32-subnormal queries broke the screen's error bound silently.
The scan now scales queries, case rows and returns by exact powers of two into float32's
range (or falls back to float64): the batched result equals a stable argsort of the float64
contributions at every scale.

C10: psi was computed three ways (GEMV alone, GEMM in a small block, einsum in the scan), so
equal or nearly equal contributions were ordered differently alone and in a batch. Every path
now screens with a rounding bound and takes its keys and values from one evaluation
(``cbdt._ranking._psi``): a query's cases and values do not depend on the other queries.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbdt import CaseInfluence, _ranking
from cbdt._ranking import _psi, scan_top_k

ORDERS = ("magnitude", "positive", "negative")
KEY = {"magnitude": np.abs, "positive": lambda v: v, "negative": lambda v: -v}
# 3e-43 and 1e-30/3e-43 are float32 subnormals (float32's smallest normal is 1.2e-38)
PHI_SCALES = (1e60, 1e-60, 1e150, 1e-150, 3e-43, 1e-30)
Q_SCALES = (1.0, 1e60, 1e-60, 1e150, 1e-150, 3e-43)


def stable_top(v: np.ndarray, k: int) -> np.ndarray:
    """A stable sort of the keys, descending: ties to the lower index."""
    return np.argsort(-v, axis=1, kind="stable")[:, :k]


def base_problem(seed: int = 0, n: int = 2600, m: int = 220, H: int = 6):
    rng = np.random.default_rng(seed)
    Phi = np.tanh(rng.normal(size=(n, H)))
    R = rng.normal(size=(n, 3))
    Q = np.tanh(rng.normal(size=(m, H)))
    acts = rng.integers(0, 3, size=m)
    return Phi, R, Q, acts


@pytest.fixture(scope="module", params=PHI_SCALES, ids=lambda s: f"phi{s:g}")
def fitted(request):
    Phi, R, Q, acts = base_problem()
    ci = CaseInfluence().fit(Phi * request.param, R)
    return ci, Q, acts


@pytest.mark.parametrize("qs", Q_SCALES, ids=lambda s: f"q{s:g}")
def test_batched_top_cases_equal_a_stable_sort_at_any_scale(fitted, qs):
    ci, Q0, acts = fitted
    Q = Q0 * qs
    assert Q.shape[0] * ci.n_cases_ > ci._SCAN_ENTRIES  # the fused scan, not one block
    psi = ci.contributions(Q, acts)
    alpha = ci.coefficients(Q)
    assert np.all(np.isfinite(psi)) and np.abs(psi).max() > 0
    for order in ORDERS:
        for k in (1, 7) if order == "magnitude" else (7,):
            got = ci.top_cases(Q, acts, k=k, order=order)
            idx = stable_top(KEY[order](psi), k)
            np.testing.assert_array_equal(got.indices, idx)
            ref = np.take_along_axis(psi, idx, axis=1)
            np.testing.assert_allclose(got.contributions, ref, rtol=1e-12, atol=0)
            # without the returns' weighting: ranked by the coefficients alpha
            by_a = ci.top_cases(Q, acts, k=k, order=order, rank_by="coefficient")
            np.testing.assert_array_equal(by_a.indices, stable_top(KEY[order](alpha), k))
            # one query alone is answered exactly as in the batch
            for t in (0, 1, 2):
                one = ci.top_cases(Q[t], acts[t], k=k, order=order)
                assert np.array_equal(one.indices, got.indices[t])
                assert np.array_equal(one.contributions, got.contributions[t])


@pytest.mark.parametrize("rs", (1e-150, 1e-60, 1e60, 1e150, 3e-43))
def test_returns_at_any_scale(rs):
    Phi, R, Q, acts = base_problem(1)
    ci = CaseInfluence().fit(Phi, R * rs)
    psi = ci.contributions(Q, acts)
    for order in ORDERS:
        got = ci.top_cases(Q, acts, k=5, order=order)
        idx = stable_top(KEY[order](psi), 5)
        np.testing.assert_array_equal(got.indices, idx)
        np.testing.assert_allclose(got.contributions, np.take_along_axis(psi, idx, axis=1),
                                   rtol=1e-12, atol=0)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 1000),
    ex=st.integers(-1000, 1000),
    ey=st.integers(-1000, 1000),
    er=st.integers(-1000, 1000),
    key=st.sampled_from(["abs", "positive", "negative"]),
    weighted=st.booleans(),
    with_bias=st.booleans(),
    threads=st.sampled_from([1, 2]),
)
def test_scan_commutes_with_powers_of_two(seed, ex, ey, er, key, weighted, with_bias, threads):
    # scaling the case rows, queries and returns by powers of two scales every float64
    # contribution exactly (no rounding), so the scan must return the same cases and the
    # values scaled exactly, whichever of its float32 and float64 paths the scales select
    sa = ey + ex  # the scale of alpha
    sp = sa + (er if weighted else 0)  # of psi
    for s in (sa, sp, ex + (er if weighted else 0)):  # products and folded rows stay normal
        if abs(s) > 940:
            return
    rng = np.random.default_rng(seed)
    n, m, h, k = 3000, 200, 5, 6
    X = rng.normal(size=(n, h))
    Y = rng.normal(size=(h, m))
    Rt = rng.normal(size=(2, n)) if weighted else None
    bias = rng.normal(size=m) if with_bias else None
    acts = np.sort(rng.integers(0, 2, size=m))
    base = scan_top_k([(0, X)], Y, bias, Rt, acts, k, key, 1 << 14, n, threads)
    scaled = scan_top_k(
        [(0, np.ldexp(X, ex))], np.ldexp(Y, ey), None if bias is None else np.ldexp(bias, sa),
        None if Rt is None else np.ldexp(Rt, er), acts, k, key, 1 << 14, n, threads,
    )
    np.testing.assert_array_equal(scaled[1], base[1])
    np.testing.assert_array_equal(scaled[2], np.ldexp(base[2], sp))
    np.testing.assert_array_equal(scaled[0], np.ldexp(base[0], sp))
    # and the base is a stable sort of the float64 contributions
    a = Y.T @ X.T + (0.0 if bias is None else bias[:, None])
    psi = a * Rt[acts] if weighted else a
    full = {"abs": np.abs(psi), "positive": psi, "negative": -psi}[key]
    np.testing.assert_array_equal(base[1], stable_top(full, k))


def test_float64_fallback_when_float32_cannot_hold_the_block(monkeypatch):
    # a constant term (non-dual path) 2^100 times the products: out of the float32 screen's
    # range, the sub-chunks run in float64 with the same result
    rng = np.random.default_rng(5)
    n, m, h, k = 3000, 150, 4, 5
    X, Y = rng.normal(size=(n, h)), rng.normal(size=(h, m))
    bias = rng.normal(size=m) * 2.0**100
    Rt = rng.normal(size=(1, n))
    acts = np.zeros(m, dtype=np.intp)
    got = scan_top_k([(0, X)], Y, bias, Rt, acts, k, "abs", 1 << 14, n, 1)
    monkeypatch.setattr(_ranking, "_SCREEN_F32", False)
    f64 = scan_top_k([(0, X)], Y, bias, Rt, acts, k, "abs", 1 << 14, n, 1)
    for a, b in zip(got, f64, strict=True):
        np.testing.assert_array_equal(a, b)
    psi = (Y.T @ X.T + bias[:, None]) * Rt[0]
    np.testing.assert_array_equal(got[1], stable_top(np.abs(psi), k))


# ------------------------------------------------------------------ C10: one psi, any batch
def near_tie_queries(ci: CaseInfluence, H: int, count: int = 150):
    """Queries whose two strongest cases i, j have equal coefficients in exact arithmetic
    (the query is orthogonal to d_i - d_j, d the dual rows): only rounding orders them."""
    D = ci.coefficients(np.eye(H)).T  # alpha(e_h): the dual rows, exactly
    nrm = np.sqrt(np.einsum("nh,nh->n", D, D))
    U = D / nrm[:, None]
    out = []
    for i in np.argsort(-nrm)[:count]:
        s = U @ U[i]
        s[i] = -2.0
        j = int(np.argmax(s))
        w = D[i] - D[j]
        y = (D[i] + D[j]) - ((D[i] + D[j]) @ w) / (w @ w) * w
        if set(np.argsort(-np.abs(D @ y))[:2]) == {i, j}:
            out.append(y)
    return np.array(out)


@pytest.fixture(scope="module")
def near_ties():
    rng = np.random.default_rng(0)
    n, H = 3000, 12
    Phi = np.tanh(rng.normal(size=(n, H)))
    R = rng.normal(size=(n, 2))
    R[:, 0] = 1.0  # action 0: psi = alpha
    ci = CaseInfluence().fit(Phi, R)
    Qt = near_tie_queries(ci, H)
    assert len(Qt) >= 40
    Q = np.vstack([Qt, np.tanh(rng.normal(size=(300, H)))])
    acts = np.concatenate([np.zeros(len(Qt), dtype=int), rng.integers(0, 2, size=300)])
    return ci, Q, acts, len(Qt)


@pytest.mark.parametrize("rank_by", ["contribution", "coefficient"])
def test_a_query_ranks_the_same_alone_in_a_small_block_and_in_a_batch(near_ties, rank_by,
                                                                       monkeypatch):
    ci, Q, acts, m0 = near_ties
    k = 3
    batch = ci.top_cases(Q, acts, k=k, rank_by=rank_by)
    assert Q.shape[0] * ci.n_cases_ > ci._SCAN_ENTRIES  # the fused scan
    # equal contributions (exact ties of the one evaluation) go to the lower index
    tie = batch.contributions[:, 0] == batch.contributions[:, 1]
    assert tie[:m0].sum() >= 10
    assert np.all(batch.indices[tie, 0] < batch.indices[tie, 1])
    small = ci.top_cases(Q[:30], acts[:30], k=k, rank_by=rank_by)  # one GEMM block
    assert 30 * ci.n_cases_ <= ci._SCAN_ENTRIES
    assert np.array_equal(small.indices, batch.indices[:30])
    assert np.array_equal(small.contributions, batch.contributions[:30])
    for t in range(m0):  # alone: one GEMV
        one = ci.top_cases(Q[t], acts[t], k=k, rank_by=rank_by)
        assert np.array_equal(one.indices, batch.indices[t]), t
        assert np.array_equal(one.contributions, batch.contributions[t]), t
    # another batch around it, other threads, another order of the queries
    perm = np.random.default_rng(1).permutation(Q.shape[0])
    for threads in (1, 2):
        monkeypatch.setattr(CaseInfluence, "_threads", lambda self, m, t=threads: t)
        other = ci.top_cases(Q[perm], acts[perm], k=k, rank_by=rank_by)
        assert np.array_equal(other.indices, batch.indices[perm])
        assert np.array_equal(other.contributions, batch.contributions[perm])


def test_signals_do_not_step_with_the_other_queries(near_ties):
    ci, Q, acts, m0 = near_ties
    full = ci.explain(Q, action=acts, k=4).signals
    for t in range(0, m0, 7):
        one = ci.explain(Q[t], action=acts[t], k=4).signals
        for col in ("entropy", "gini"):
            assert one[col].iloc[0] == full[col].iloc[t], (t, col)


@pytest.mark.parametrize("order", ORDERS)
def test_exact_ties_of_duplicated_cases_go_to_the_lower_index_on_every_path(order):
    # 40 cases, each repeated 75 times (rows 0..39, 40..79, ...): 75-way exact ties
    rng = np.random.default_rng(2)
    base, rb = np.tanh(rng.normal(size=(40, 6))), rng.normal(size=(40, 2))
    Phi, R = np.tile(base, (75, 1)), np.tile(rb, (75, 1))
    ci = CaseInfluence(ridge=1e-3).fit(Phi, R)
    D = ci.coefficients(np.eye(6)).T
    assert np.array_equal(D[:40], D[40:80])  # the duplicated dual rows are equal
    Q = np.tanh(rng.normal(size=(250, 6)))
    acts = rng.integers(0, 2, size=250)
    k = 80
    batch = ci.top_cases(Q, acts, k=k, order=order)
    small = ci.top_cases(Q[:5], acts[:5], k=k, order=order)
    assert np.array_equal(small.indices, batch.indices[:5])
    for t in range(5):
        one = ci.top_cases(Q[t], acts[t], k=k, order=order)
        assert np.array_equal(one.indices, batch.indices[t])
        assert np.array_equal(one.contributions, batch.contributions[t])
    # the 75 copies of the strongest case first, lowest copy first, then the next case's
    np.testing.assert_array_equal(batch.indices[:, :75] // 40, np.tile(np.arange(75), (250, 1)))
    same = batch.contributions[:, 1:] == batch.contributions[:, :-1]
    assert np.all(batch.indices[:, 1:][same] > batch.indices[:, :-1][same])


def test_memmap_fit_ranks_a_query_the_same_alone_and_in_a_batch(tmp_path):
    # without the dual matrix each query's coefficients come from a triangular solve; a
    # batch's solve differs per column in the last bits, so each query is solved alone
    rng = np.random.default_rng(4)
    n, H, m = 3000, 9, 200
    Phi = rng.normal(size=(n, H))
    mm = np.lib.format.open_memmap(tmp_path / "p.npy", mode="w+", dtype=np.float64,
                                   shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    mm = np.load(tmp_path / "p.npy", mmap_mode="r")
    for intercept in (False, True):
        ci = CaseInfluence(intercept=intercept, chunk_size=700).fit(mm, rng.normal(size=(n, 2)))
        assert ci._dual is None
        Q = rng.normal(size=(m, H))
        acts = rng.integers(0, 2, size=m)
        batch = ci.top_cases(Q, acts, k=4)
        for t in range(0, m, 25):
            one = ci.top_cases(Q[t], acts[t], k=4)
            assert np.array_equal(one.indices, batch.indices[t])
            assert np.array_equal(one.contributions, batch.contributions[t])


def test_psi_is_one_evaluation_per_pair():
    # the value of a (query, case) pair does not depend on the rows around it
    rng = np.random.default_rng(7)
    for h in (1, 5, 8, 13, 64, 67):
        Y, X = rng.normal(size=(40, h)), rng.normal(size=(300, h))
        b, r = rng.normal(size=40), rng.normal(size=300)
        q, c = rng.integers(0, 40, 500), rng.integers(0, 300, 500)
        many = _psi(Y[q], X[c], b[q], r[c])
        for t in range(0, 500, 37):
            one = _psi(Y[q[t] : q[t] + 1], X[c[t] : c[t] + 1], b[q[t] : q[t] + 1],
                       r[c[t] : c[t] + 1])
            assert one[0] == many[t]
