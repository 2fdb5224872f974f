"""The batched path of ``CaseInfluence.top_cases`` (the fused, threaded scan with a float32
screen, a group-maximum threshold on each query's first sub-chunk, running thresholds from
bounds on the float64 keys, and float64 recomputation of the survivors only): exact against a
stable sort of the float64 contributions, whatever the data."""

from __future__ import annotations

import numpy as np
import pytest

from cbdt import CaseInfluence
from cbdt import _ranking as influence_mod
from cbdt._ranking import scan_top_k

ORDERS = ("abs", "positive", "negative")


def keyed(psi: np.ndarray, order: str) -> np.ndarray:
    return {"abs": np.abs(psi), "positive": psi, "negative": -psi}[order]


def reference(ci: CaseInfluence, Q: np.ndarray, acts: np.ndarray, k: int, order: str):
    """Indices of a stable sort of the float64 contributions, and those contributions."""
    psi = np.stack([ci.contributions(q, a) for q, a in zip(Q, acts, strict=True)])
    idx = np.argsort(-keyed(psi, order), axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(psi, idx, axis=1)


def problem(seed: int, n: int, m: int, H: int = 12):
    rng = np.random.default_rng(seed)
    Phi = np.tanh(rng.normal(size=(n, H)))
    R = rng.normal(size=(n, 3))
    Q = np.tanh(rng.normal(size=(m, H)))
    acts = rng.integers(0, 3, size=m)
    return Phi, R, Q, acts


def batched(ci: CaseInfluence, m: int) -> bool:
    """True when a call with m queries takes the fused scan (not the one-block path)."""
    return m * ci.n_cases_ > ci._SCAN_ENTRIES


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("threads", [1, 2])
def test_batched_equals_a_stable_sort_for_k_small_to_n(order, threads, monkeypatch):
    # n = 2600: the first sub-chunk (2048 cases) gets the group-maximum threshold for
    # k <= 256 and the partition threshold above; k = n keeps every case
    Phi, R, Q, acts = problem(0, 2600, 220)
    ci = CaseInfluence().fit(Phi, R)
    assert batched(ci, 220)
    monkeypatch.setattr(CaseInfluence, "_threads", lambda self, m: threads)
    for k in (1, 10, 300, 2597):
        got = ci.top_cases(Q, acts, k=k, order=order)
        idx, val = reference(ci, Q, acts, k, order)
        np.testing.assert_array_equal(got.indices, idx)
        np.testing.assert_allclose(got.contributions, val, rtol=1e-12, atol=1e-15)


def test_thread_count_does_not_change_a_bit(monkeypatch):
    Phi, R, Q, acts = problem(1, 3000, 400)
    ci = CaseInfluence().fit(Phi, R)
    res = {}
    for t in (1, 2, 3):
        monkeypatch.setattr(CaseInfluence, "_threads", lambda self, m, t=t: t)
        res[t] = ci.top_cases(Q, acts, k=10)
    for t in (2, 3):
        assert np.array_equal(res[t].indices, res[1].indices)
        assert np.array_equal(res[t].contributions, res[1].contributions)


@pytest.mark.parametrize("order", ORDERS)
def test_exact_ties_go_to_the_lower_index(order):
    # 40 distinct cases repeated 70 times: every contribution is tied 70 ways, exactly
    rng = np.random.default_rng(2)
    base, rb = np.tanh(rng.normal(size=(40, 6))), rng.normal(size=(40, 2))
    Phi, R = np.tile(base, (70, 1)), np.tile(rb, (70, 1))
    Q = np.tanh(rng.normal(size=(250, 6)))
    acts = rng.integers(0, 2, size=250)
    ci = CaseInfluence(ridge=1e-3).fit(Phi, R)
    assert batched(ci, 250)
    psi = ci.contributions(Q[0], acts[0])
    assert np.array_equal(psi[:40], psi[40:80])  # the ties are exact
    for k in (1, 69, 70, 71, 150):
        got = ci.top_cases(Q, acts, k=k, order=order)
        idx, val = reference(ci, Q, acts, k, order)
        np.testing.assert_array_equal(got.indices, idx)
        np.testing.assert_allclose(got.contributions, val, rtol=1e-12, atol=1e-15)
        # the 70 copies of the strongest case come first, lowest copy first
        np.testing.assert_array_equal(got.indices[:, : min(k, 70)] // 40,
                                      np.tile(np.arange(min(k, 70)), (250, 1)))


@pytest.mark.parametrize("order", ORDERS)
def test_zero_and_negative_contributions(order):
    Phi, R, Q, acts = problem(3, 2500, 300)
    R[::2, 0] = 0.0  # half the cases contribute exactly 0 to action 0
    R[:, 1] = -np.abs(R[:, 1])  # every return of action 1 is negative
    R[:, 2] = 0.0  # action 2: every contribution is 0
    ci = CaseInfluence().fit(Phi, R)
    for k in (5, 1300, 2500):
        got = ci.top_cases(Q, acts, k=k, order=order)
        idx, val = reference(ci, Q, acts, k, order)
        np.testing.assert_array_equal(got.indices, idx)
        np.testing.assert_allclose(got.contributions, val, rtol=1e-12, atol=1e-15)
        # all ties at 0: the lowest indices, in order
        np.testing.assert_array_equal(got.indices[acts == 2], np.tile(np.arange(k), (
            int((acts == 2).sum()), 1)))


def test_float64_fallback_ranks_like_the_float32_screen(monkeypatch):
    # returns scaled by 2^80: the float32 screen scales them back into its range (exact
    # powers of two), so the ranking is unchanged and the contributions scale exactly; the
    # float64 path (screen off) gives the same cases and values
    Phi, R, Q, acts = problem(4, 2500, 300)
    a = CaseInfluence().fit(Phi, R).top_cases(Q, acts, k=12)
    b = CaseInfluence().fit(Phi, R * 2.0**80).top_cases(Q, acts, k=12)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(b.contributions, a.contributions * 2.0**80)
    monkeypatch.setattr(influence_mod, "_SCREEN_F32", False)
    c = CaseInfluence().fit(Phi, R).top_cases(Q, acts, k=12)
    np.testing.assert_array_equal(c.indices, a.indices)
    np.testing.assert_array_equal(c.contributions, a.contributions)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_memmap_chunks_equal_the_in_memory_fit(tmp_path, dtype):
    # chunks of 700 cases: sub-chunks narrower than 8 k, with columns left over after the
    # last group of 8, and queries' first sub-chunk narrower than k for k = 900
    Phi, R, Q, acts = problem(5, 3100, 260)
    Phi = Phi.astype(dtype)
    mm = np.memmap(tmp_path / "phi.dat", dtype=dtype, mode="w+", shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    mm = np.memmap(tmp_path / "phi.dat", dtype=dtype, mode="r", shape=Phi.shape)
    ci = CaseInfluence(chunk_size=700).fit(mm, R)
    ref = CaseInfluence().fit(Phi.astype(np.float64), R)
    for k in (10, 900):
        for order in ORDERS:
            a, b = ci.top_cases(Q, acts, k=k, order=order), ref.top_cases(Q, acts, k=k,
                                                                          order=order)
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_allclose(a.contributions, b.contributions, rtol=1e-9,
                                       atol=1e-12)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_compaction_of_candidates_keeps_the_top_k(monkeypatch, threads):
    # increasing keys: every sub-chunk replaces the whole top-k; compacting after every
    # block must keep exactly the cases still in it (and ties at the k-th key)
    n, m, k = 6000, 200, 15
    X = np.repeat(np.arange(n // 2, dtype=float), 2)[:, None]  # pairs of equal keys
    Y = np.linspace(1, 2, m)[None, :]
    acts = np.zeros(m, dtype=np.intp)
    expect = np.tile(np.argsort(-X[:, 0], kind="stable")[:k], (m, 1))
    for compact in (0, 8):
        monkeypatch.setattr(influence_mod, "_COMPACT", compact)
        keys, idx, vals = scan_top_k([(0, X)], Y, None, None, acts, k, "positive", 1 << 15,
                                      n, threads)
        np.testing.assert_array_equal(idx, expect)
        np.testing.assert_array_equal(vals, keys)


def test_query_order_does_not_change_a_bit():
    # mixed actions are scanned sorted by action (one GEMM per action and block); the answer
    # of every query must not depend on where it sits in the batch
    Phi, R, Q, acts = problem(5, 3000, 300)
    ci = CaseInfluence().fit(Phi, R)
    assert batched(ci, 300) and np.any(np.diff(acts) < 0)
    base = ci.top_cases(Q, acts, k=10)
    perm = np.random.default_rng(6).permutation(300)
    got = ci.top_cases(Q[perm], acts[perm], k=10)
    assert np.array_equal(got.indices, base.indices[perm])
    assert np.array_equal(got.contributions, base.contributions[perm])
    one = ci.top_cases(Q[acts == 1], np.ones(int((acts == 1).sum()), dtype=int), k=10)
    assert np.array_equal(one.indices, base.indices[acts == 1])


def test_float64_recomputes_only_the_survivors_and_memory_stays_bounded(monkeypatch):
    # the float32 candidates carry bounds; only those whose upper bound still reaches the
    # final threshold are recomputed in float64 (about k per query on continuous data), and
    # with every contribution tied at 0 (action 2) the pending lists are resolved whenever
    # they exceed _COMPACT * queries * k, so they never hold the whole block
    Phi, R, Q, acts = problem(7, 6000, 512)
    R[:, 2] = 0.0
    ci = CaseInfluence().fit(Phi, R)
    k = 10
    recomputed, pending = [], []
    exact, add = influence_mod._TopKScan._exact, influence_mod._TopKScan._add

    def count_exact(self, q0, rows, *a):
        recomputed.append(rows.size)
        return exact(self, q0, rows, *a)

    def count_add(self, blk, *a):
        add(self, blk, *a)
        pending.append((blk[5], blk[1] - blk[0], self.c))

    monkeypatch.setattr(influence_mod._TopKScan, "_exact", count_exact)
    monkeypatch.setattr(influence_mod._TopKScan, "_add", count_add)
    monkeypatch.setattr(CaseInfluence, "_threads", lambda self, m: 1)
    ones = np.ones(512, dtype=np.intp)
    got = ci.top_cases(Q, ones, k=k)
    idx, _ = reference(ci, Q, ones, k, "abs")
    np.testing.assert_array_equal(got.indices, idx)
    assert sum(recomputed) <= 1.5 * k * 512  # the old per-block recompute needed ~3.5 k
    recomputed.clear()
    twos = np.full(512, 2)
    got = ci.top_cases(Q, twos, k=k)
    np.testing.assert_array_equal(got.indices, np.tile(np.arange(k), (512, 1)))
    assert max(p for p, _, _ in pending) <= max(
        influence_mod._COMPACT * nq * k + nq * c for _, nq, c in pending)
