"""The two factorisations behind ``CaseInfluence.fit`` (cbdt._tsqr): CholeskyQR2 and its
guarded Householder TSQR fallback.

What is checked: the recorded path follows the fallback rule near its threshold and both
paths meet the accuracy bound ``10 eps cond(Phi)`` against a 50-digit reference; the paths
(and the memmap, float32 memmap and dask sources) agree; the fit does not depend on the
number of threads; one query gives the same answers alone and inside a batch; save/load
keeps the path; bad input is still reported.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _tolerance import assert_rounding_equal
from hypothesis import event, given, settings
from hypothesis import strategies as st

import cbdt.influence
from cbdt import CaseInfluence, InputError, RankDeficientError
from cbdt._tsqr import OMEGA_MAX, block_rows
from cbdt.book.experiments.scaling import _alpha_mp, with_condition

EPS = np.finfo(np.float64).eps
PATHS = ("cholesky_qr2", "cholesky_qr3", "householder_tsqr")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| relative to max |b|."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    return float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-300))


def _paths_bound(Phi: np.ndarray, intercept: bool) -> float:
    """``20 eps cond`` of the factored matrix (``[Phi, 1]`` with an intercept): two paths
    each within ``10 eps cond`` of the exact coefficients differ by at most this."""
    X = np.hstack([Phi, np.ones((Phi.shape[0], 1))]) if intercept else Phi
    return 20 * EPS * float(np.linalg.cond(X))


def _follows_rule(ci: CaseInfluence) -> bool:
    """``cholesky_qr2`` exactly when the first pass's measured loss is <= OMEGA_MAX; a
    third pass (``cholesky_qr3``) only after a finite loss above it; nan (the first
    Cholesky failed): the Householder fallback."""
    w, path = ci.orthogonality_loss_, ci.factorization_
    if path == "cholesky_qr2":
        return bool(w <= OMEGA_MAX)
    if path == "cholesky_qr3":
        return bool(w > OMEGA_MAX) and math.isfinite(w)
    return not w <= OMEGA_MAX


# ------------------------------------------------------------ 1. the fallback threshold
@settings(max_examples=25, deadline=None)
@given(
    log_cond=st.floats(6.0, 9.5, allow_nan=False),
    n=st.integers(60, 300),
    H=st.integers(2, 10),
    seed=st.integers(0, 2**31 - 1),
)
def test_path_follows_the_rule_and_both_paths_meet_the_accuracy_bound(log_cond, n, H, seed):
    Phi = with_condition(seed, n, H, 10.0**log_cond)
    cond = float(np.linalg.cond(Phi))
    phi = np.random.default_rng(seed + 1).normal(size=H)
    ref = _alpha_mp(Phi, phi, 50)
    bound = 10 * EPS * cond
    ones = np.ones(n)

    auto = CaseInfluence(max_condition=1e300).fit(Phi, ones)
    assert auto.factorization_ in PATHS
    event(auto.factorization_)  # --hypothesis-show-statistics: both paths are drawn
    # (a) the recorded path is the one the rule picks from the recorded loss
    assert _follows_rule(auto), (auto.factorization_, auto.orthogonality_loss_)
    if auto.factorization_ == "householder_tsqr":
        assert auto._fallback_reason  # the fallback says why it was taken
    else:
        assert auto._fallback_reason == ""
    # (b) the path taken is accurate to eps cond(Phi), not eps cond(Phi)^2
    err = np.linalg.norm(auto.coefficients(phi) - ref) / np.linalg.norm(ref)
    assert err <= bound, (auto.factorization_, err / (EPS * cond))

    # (c) the Householder TSQR asked for: always that path, the first pass's loss not measured
    hh = CaseInfluence(max_condition=1e300, factorization="householder_tsqr").fit(Phi, ones)
    assert hh.factorization_ == "householder_tsqr"
    assert math.isnan(hh.orthogonality_loss_)
    err = np.linalg.norm(hh.coefficients(phi) - ref) / np.linalg.norm(ref)
    assert err <= bound, err / (EPS * cond)


# ------------------------------------------------------------ 2. the decision varies
def test_the_path_changes_with_the_condition_number():
    n, H = 200, 8
    # cond 1e3: the first pass's loss is about eps cond^2 ~ 1e-10, far below OMEGA_MAX = 1/2,
    # so CholeskyQR2's second pass is trusted
    well = CaseInfluence(max_condition=1e300).fit(with_condition(0, n, H, 1e3), np.ones(n))
    assert well.factorization_ == "cholesky_qr2"
    assert 0.0 <= well.orthogonality_loss_ < 1e-6
    # cond 1e10: eps cond^2 ~ 2e4 >> 1: the first pass's loss is far above 1/2 (or its
    # Cholesky fails), so CholeskyQR2 is not trusted: a third pass or the fallback
    for seed in range(3):
        ill = CaseInfluence(max_condition=1e300).fit(with_condition(seed, n, H, 1e10),
                                                       np.ones(n))
        assert ill.factorization_ in ("cholesky_qr3", "householder_tsqr")
        assert not ill.orthogonality_loss_ <= OMEGA_MAX
    # a zero column: the Gram matrix has a zero pivot, the first Cholesky fails (nan loss)
    # and the Householder TSQR is used (minimum norm), saying why
    Z = with_condition(0, n, H, 1e3)
    Z[:, 3] = 0.0
    worst = CaseInfluence(solver="lstsq").fit(Z, np.ones(n))
    assert worst.factorization_ == "householder_tsqr"
    assert math.isnan(worst.orthogonality_loss_) and worst._fallback_reason
    # over cond 1e6 .. 1e13 every path occurs (a float64 Gram matrix of cond 1e18 and more is
    # sometimes still positive definite: then a third pass repairs it, or the loss says not)
    seen = {
        CaseInfluence(max_condition=1e300).fit(with_condition(0, n, H, 10.0**lc),
                                               np.ones(n)).factorization_
        for lc in np.arange(6.0, 13.25, 0.5)
    }
    assert seen == set(PATHS)


# ------------------------------------------------------------ 3. the paths agree
def _well_conditioned(n: int = 300, H: int = 6, A: int = 3, seed: int = 11):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(n, H)) * rng.uniform(0.5, 2.0, size=H) + 0.25
    R = rng.normal(size=(n, A))
    Q = rng.normal(size=(9, H))
    return Phi, R, Q


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_cholesky_qr2_and_householder_tsqr_agree(intercept, ridge):
    Phi, R, Q = _well_conditioned()
    fast = CaseInfluence(ridge=ridge, intercept=intercept).fit(Phi, R)
    slow = CaseInfluence(ridge=ridge, intercept=intercept,
                         factorization="householder_tsqr").fit(Phi, R)
    assert fast.factorization_ == "cholesky_qr2"
    assert 0.0 <= fast.orthogonality_loss_ <= 1e-10
    assert slow.factorization_ == "householder_tsqr"
    assert _rel(fast.coefficients(Q), slow.coefficients(Q)) <= 1e-10
    assert _rel(fast.scores(Q), slow.scores(Q)) <= 1e-10
    assert _rel(fast.readout_, slow.readout_) <= 1e-10
    assert _rel(fast.gram_, slow.gram_) <= 1e-10
    assert _rel(fast.leverage(Q), slow.leverage(Q)) <= 1e-10
    if intercept:
        assert _rel(fast.intercept_, slow.intercept_) <= 1e-10
    else:
        assert not hasattr(fast, "intercept_") and not hasattr(slow, "intercept_")
    # both are the fit of the same problem: the readout is the (ridge) least-squares one
    X = np.hstack([Phi, np.ones((Phi.shape[0], 1))]) if intercept else Phi
    P = np.eye(X.shape[1]) * ridge
    if intercept:
        P[-1, -1] = 0.0  # the intercept is not penalised
    V = np.linalg.solve(X.T @ X + P, X.T @ R)
    assert _rel(fast.readout_, V[: Phi.shape[1]]) <= 1e-9


def _memmap(path, values: np.ndarray, dtype) -> np.memmap:
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=values.shape)
    mm[:] = values
    mm.flush()
    del mm
    return np.memmap(path, dtype=dtype, mode="r", shape=values.shape)


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_memmap_float32_memmap_and_dask_match_the_in_memory_fit(tmp_path, intercept, ridge):
    da = pytest.importorskip("dask.array")
    import dask

    Phi, R, Q = _well_conditioned()
    kw = dict(ridge=ridge, intercept=intercept)
    ref = CaseInfluence(**kw).fit(Phi, R)
    a_ref = ref.coefficients(Q)
    assert ref.factorization_ == "cholesky_qr2"

    mm = CaseInfluence(**kw).fit(_memmap(tmp_path / "phi64.bin", Phi, np.float64), R)
    assert mm._kind == "memmap" and mm.factorization_ == "cholesky_qr2"
    assert _rel(mm.coefficients(Q), a_ref) <= 1e-10

    # float32: compared with the in-memory fit of the same (rounded) values in float64
    Phi32 = Phi.astype(np.float32)
    ref32 = CaseInfluence(**kw).fit(Phi32.astype(np.float64), R)
    mm32 = CaseInfluence(**kw).fit(_memmap(tmp_path / "phi32.bin", Phi32, np.float32), R)
    assert mm32._kind == "memmap" and mm32.factorization_ == "cholesky_qr2"
    assert ref32.factorization_ == "cholesky_qr2"
    assert _rel(mm32.coefficients(Q), ref32.coefficients(Q)) <= 1e-10

    darr = da.from_array(Phi, chunks=((90, 130, 80), (Phi.shape[1],)))
    assert darr.numblocks == (3, 1)
    with dask.config.set(scheduler="synchronous"):
        dk = CaseInfluence(**kw).fit(darr, R)
        assert dk._kind == "dask" and dk.factorization_ == "cholesky_qr2"
        assert _rel(dk.coefficients(Q), a_ref) <= 1e-10


@pytest.mark.parametrize("log_cond", [2, 5, 7, 9])
@pytest.mark.parametrize("intercept", [False, True])
def test_memmap_and_dask_agree_with_the_in_memory_fit_within_eps_cond(tmp_path, log_cond,
                                                                      intercept):
    """The agreement the README states (issue 31, 4): each path is within 10 eps cond of the
    exact coefficients, so two paths differ by at most 20 eps cond (cond of the factored
    matrix, [Phi, 1] with an intercept), whatever digits that leaves; not bitwise."""
    n, H = 2000, 12
    Phi = with_condition(0, n, H, 10.0**log_cond)
    rng = np.random.default_rng(1)
    R, Q = rng.normal(size=(n, 2)), rng.normal(size=(6, H))
    bound = _paths_bound(Phi, intercept)
    kw = dict(intercept=intercept, max_condition=1e300)
    a_ref = CaseInfluence(**kw).fit(Phi, R).coefficients(Q)
    mm = CaseInfluence(**kw).fit(_memmap(tmp_path / "phi.bin", Phi, np.float64), R)
    assert mm._kind == "memmap"
    assert _rel(mm.coefficients(Q), a_ref) <= bound
    da = pytest.importorskip("dask.array")
    import dask

    with dask.config.set(scheduler="synchronous"):
        dk = CaseInfluence(**kw).fit(da.from_array(Phi, chunks=(700, H)), R)
        assert dk._kind == "dask"
        assert _rel(dk.coefficients(Q), a_ref) <= bound


# ------------------------------------------------------------ 4. threads
def test_in_memory_fit_does_not_depend_on_the_number_of_threads(monkeypatch):
    rng = np.random.default_rng(4)
    n, H = 40_000, 8
    Phi = rng.normal(size=(n, H)) * rng.uniform(0.5, 2.0, size=H) + 0.1
    R = rng.normal(size=(n, 3))
    Q = rng.normal(size=(5, H))
    assert n > 4 * block_rows(H + 1)  # several blocks, so two threads really share them
    asked = []

    def fit_with(threads: int, **kw) -> CaseInfluence:
        def fixed(self, n_, Hp, kind):
            asked.append(threads)
            return threads

        monkeypatch.setattr(cbdt.influence.CaseInfluence, "_fit_threads", fixed)
        return CaseInfluence(**kw).fit(Phi, R)

    for kw in (dict(intercept=True), dict(ridge=0.5)):
        one, two = fit_with(1, **kw), fit_with(2, **kw)
        assert one.factorization_ == two.factorization_ == "cholesky_qr2"
        assert np.array_equal(one._R0, two._R0)
        assert np.array_equal(one._factor, two._factor)
        assert np.array_equal(one.readout_, two.readout_)
        assert np.array_equal(one.coefficients(Q), two.coefficients(Q))
    assert asked == [1, 2, 1, 2]  # the patched thread counts were the ones used


# ------------------------------------------------------------ 5. batch invariance
def _batch_fit(ridge: float) -> tuple[CaseInfluence, np.ndarray]:
    rng = np.random.default_rng(5)
    n, H = 400, 7
    Phi = rng.normal(size=(n, H)) * rng.uniform(0.5, 2.0, size=H) + 0.3
    R = rng.normal(size=(n, 4))
    Q = rng.normal(size=(37, H))
    return CaseInfluence(intercept=True, ridge=ridge).fit(Phi, R), Q


@pytest.mark.parametrize("ridge", [0.0, 0.4])
@pytest.mark.parametrize("action", [None, 0, 3])
def test_top_cases_of_one_query_alone_equal_those_in_a_batch(ridge, action):
    ci, Q = _batch_fit(ridge)
    batch = ci.top_cases(Q, action, k=5)
    for j in range(37):
        alone = ci.top_cases(Q[j], action, k=5)
        assert np.array_equal(alone.indices, batch.indices[j])
        assert np.array_equal(alone.contributions, batch.contributions[j])
        assert alone.action == batch.action[j]


@pytest.mark.parametrize("ridge", [0.0, 0.4])
def test_coefficients_of_one_query_alone_equal_those_in_a_batch_to_rounding(ridge):
    ci, Q = _batch_fit(ridge)
    batch = ci.coefficients(Q)
    # alpha_i = d_i . phi + c_i (H + 1 terms) by a GEMV alone and a GEMM in the batch: they
    # may differ in the last bits (documented), by at most (H + 1) eps (|d_i| . |phi| + |c_i|)
    D, c = np.abs(ci.dual_), np.abs(ci.dual_offset_)
    for j in range(37):
        assert_rounding_equal(ci.coefficients(Q[j]), batch[j], ulps=Q.shape[1] + 1,
                              scale=D @ np.abs(Q[j]) + c)
        # Prop. 1 holds for each: the scores are alpha @ R
        assert _rel(batch[j] @ ci.returns_, ci.scores(Q[j])) <= 1e-12


# ------------------------------------------------------------ 6. save / load
def _same_loss(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("cond, factorization", [
    (1e2, "auto"),  # CholeskyQR2: a finite loss
    (1e10, "auto"),  # a third pass or the fallback
    (1e2, "householder_tsqr"),  # asked for: a nan loss
])
def test_save_load_keeps_the_path_and_the_coefficients(tmp_path, cond, factorization):
    n, H = 150, 6
    Phi = with_condition(3, n, H, cond)
    R = np.random.default_rng(3).normal(size=(n, 2))
    Q = np.random.default_rng(4).normal(size=(4, H))
    ci = CaseInfluence(max_condition=1e300, intercept=True,
                       factorization=factorization).fit(Phi, R)
    path = tmp_path / "ci.npz"
    ci.save(path)
    back = CaseInfluence.load(path)
    assert back.factorization_ == ci.factorization_
    assert _same_loss(back.orthogonality_loss_, ci.orthogonality_loss_)
    assert back.factorization == factorization
    assert np.array_equal(back.coefficients(Q), ci.coefficients(Q))
    assert np.array_equal(back.scores(Q), ci.scores(Q))
    if factorization == "householder_tsqr":
        assert back.factorization_ == "householder_tsqr"
    elif cond > 1e8:
        assert back.factorization_ in ("cholesky_qr3", "householder_tsqr")
    else:
        assert back.factorization_ == "cholesky_qr2" and back.orthogonality_loss_ <= OMEGA_MAX



def test_small_memories_keep_the_dual_matrix_large_ones_the_copy(monkeypatch):
    Phi, R, Q = _well_conditioned(n=300, H=6)
    for intercept, ridge in ((False, 0.0), (True, 0.3)):
        small = CaseInfluence(intercept=intercept, ridge=ridge).fit(Phi, R)
        assert small._dual is not None and small._Phi is None  # 300 x 7 entries, n < 64 H'
        monkeypatch.setattr(CaseInfluence, "_DUAL_ENTRIES", 0)
        monkeypatch.setattr(CaseInfluence, "_DUAL_ASPECT", 0)
        large = CaseInfluence(intercept=intercept, ridge=ridge).fit(Phi, R)
        monkeypatch.undo()
        assert large._dual is None and large._Phi.shape == (300, 6 + intercept)
        assert _rel(small.coefficients(Q), large.coefficients(Q)) <= 1e-12
        assert np.array_equal(small.scores(Q), large.scores(Q))  # the same readout
        a, b = small.top_cases(Q, 1, k=5), large.top_cases(Q, 1, k=5)
        assert np.array_equal(a.indices, b.indices)


def test_file_formats_one_is_refused_two_and_three_are_read(tmp_path, monkeypatch, rewrite_npz):
    Phi, R, Q = _well_conditioned(n=120, H=5)
    monkeypatch.setattr(CaseInfluence, "_DUAL_ENTRIES", 0)  # the copy of Phi, not the dual
    monkeypatch.setattr(CaseInfluence, "_DUAL_ASPECT", 0)
    ci = CaseInfluence().fit(Phi, R)
    path = tmp_path / "ci.npz"
    ci.save(path)
    with np.load(path, allow_pickle=False) as f:
        assert int(f["format"]) == 3 and "memory" in f

    rewrite_npz(path, format=np.array(1))
    with pytest.raises(InputError, match="format") as err:
        CaseInfluence.load(path)
    assert "format 3" in str(err.value) and str(path) in str(err.value)

    rewrite_npz(path, format=np.array(2))
    assert np.array_equal(CaseInfluence.load(path).coefficients(Q), ci.coefficients(Q))

    # a format-2 file as version 2 wrote it: a dual matrix D (alpha = D phi) instead of the
    # memory, no path recorded; its columns are the coefficients of the unit queries
    D = np.ascontiguousarray(ci.coefficients(np.eye(5)).T)
    rewrite_npz(path, memory=None, dual=D, factorization_=None, orthogonality_loss_=None)
    old = CaseInfluence.load(path)
    assert old.factorization_ == "unknown" and math.isnan(old.orthogonality_loss_)
    assert _rel(old.coefficients(Q), ci.coefficients(Q)) <= 1e-12
    assert np.array_equal(old.scores(Q), ci.scores(Q))


# ------------------------------------------------------------ 7. bad input
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_non_finite_phi_names_its_row_and_column(tmp_path, bad, dtype):
    rng = np.random.default_rng(7)
    n, H = 5000, 4
    Phi = rng.normal(size=(n, H))
    R = rng.normal(size=(n, 2))
    Phi[4321, 3] = bad  # past the first block of the passes and the first chunk
    Phi[4500, 1] = bad  # a later one: the first is named
    for source in ("array", "memmap"):
        X = Phi.astype(dtype) if source == "array" else _memmap(tmp_path / "p.bin", Phi, dtype)
        for factorization in ("auto", "householder_tsqr"):
            with pytest.raises(InputError, match=r"row 4321\b") as err:
                CaseInfluence(chunk_size=1000, factorization=factorization).fit(X, R)
            msg = str(err.value)
            assert "column 3" in msg and "(4321, 3)" in msg and "2 non-finite" in msg


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("factorization", ["auto", "householder_tsqr"])
def test_an_all_zero_phi_is_rank_deficient(intercept, factorization):
    Phi = np.zeros((50, 3))
    R = np.random.default_rng(8).normal(size=(50, 2))
    with pytest.raises(RankDeficientError, match="rank") as err:
        CaseInfluence(solver="cholesky", intercept=intercept,
                      factorization=factorization).fit(Phi, R)
    assert err.value.rank == int(intercept)  # only the constant column, if any, has rank
    assert err.value.dim == 3 + int(intercept)


def test_fit_values_do_not_depend_on_how_its_copy_is_mapped_or_cut(monkeypatch) -> None:
    """The fit's copy of ``Phi`` mapped in one call (:func:`cbdt._pages.populate`) or on
    first write, and copied into pass 2's buffers in pieces of any size, by ``domatcopy`` or
    by numpy: the same bits (only the time differs), on a narrow and a wide memory (one
    ``dtrsm`` and the recursive solve)."""
    import cbdt._tsqr as ts

    rng = np.random.default_rng(3)
    for n, H in ((9000, 20), (2500, 140)):
        Phi = rng.normal(size=(n, H))
        R = rng.normal(size=(n, 2))
        want = CaseInfluence().fit(Phi, R)
        with monkeypatch.context() as mp:
            mp.setattr(ts, "populate", lambda a, threads=1: False)
            mp.setattr(ts, "copy_rows", lambda Hp: 7)
            mp.setattr(ts, "piece_rows", lambda Hp: 13)
            mp.setattr(ts, "transpose_into", lambda *a, **k: False)  # numpy's pieces
            got = CaseInfluence().fit(Phi, R)
        assert np.array_equal(got._factor, want._factor)
        q = Phi[:3] + 0.5
        assert np.array_equal(got.coefficients(q), want.coefficients(q))


# ------------------------------------------------------------ 6. copy=False
@pytest.mark.parametrize("log_cond", [2, 7])
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_copy_false_agrees_with_the_copied_fit_within_eps_cond(log_cond, intercept, ridge):
    """``copy=False`` reads the caller's ``Phi`` (no copy of it, no dual matrix) and gives
    the copied fit's coefficients, scores, readout and top contributions within the paths'
    bound ``20 eps cond``."""
    n, H = 3000, 12
    Phi = with_condition(3, n, H, 10.0**log_cond)
    rng = np.random.default_rng(5)
    R, Q = rng.normal(size=(n, 3)), rng.normal(size=(5, H))
    bound = _paths_bound(Phi, intercept)
    kw = dict(intercept=intercept, ridge=ridge, max_condition=1e300)
    ref = CaseInfluence(**kw).fit(Phi, R)
    ci = CaseInfluence(copy=False, **kw).fit(Phi, R)
    assert ci._kind == "reference" and ci._Phi is Phi and ci._dual is None
    assert ci.factorization_ == ref.factorization_
    a = ci.coefficients(Q)
    assert _rel(a, ref.coefficients(Q)) <= bound
    assert _rel(ci.readout_, ref.readout_) <= bound
    assert _rel(ci.scores(Q), ref.scores(Q)) <= bound
    top, top_ref = ci.top_cases(Q, 0, k=5), ref.top_cases(Q, 0, k=5)
    assert _rel(top.contributions, top_ref.contributions) <= bound


def test_copy_false_keeps_phi_by_reference_copy_true_does_not():
    """The contract of ``copy``: with ``copy=False`` an edit of the caller's float64 array
    after ``fit`` reaches the answers (it is read at query time), with ``copy=True`` it does
    not; another dtype is converted once and the conversion is kept, so editing the
    caller's float32 array changes nothing."""
    rng = np.random.default_rng(11)
    Phi = rng.normal(size=(400, 5))
    R = rng.normal(size=(400, 2))
    q = rng.normal(size=5)
    kept = CaseInfluence(copy=False).fit(Phi, R)
    copied = CaseInfluence().fit(Phi, R)
    before_kept, before_copied = kept.coefficients(q), copied.coefficients(q)
    Phi[7] *= 3.0
    assert np.array_equal(copied.coefficients(q), before_copied)
    after = kept.coefficients(q)
    assert after[7] != before_kept[7]
    assert np.array_equal(np.delete(after, 7), np.delete(before_kept, 7))

    P32 = rng.normal(size=(400, 5)).astype(np.float32)
    conv = CaseInfluence(copy=False).fit(P32, R)
    assert conv._Phi.dtype == np.float64 and not np.shares_memory(conv._Phi, P32)
    before = conv.coefficients(q)
    P32[:] = 0.0
    assert np.array_equal(conv.coefficients(q), before)
    F = np.asfortranarray(rng.normal(size=(400, 5)))  # another order: converted, kept
    assert CaseInfluence(copy=False).fit(F, R)._Phi.flags.c_contiguous


def test_copy_false_saves_loads_and_refuses_a_bad_value(tmp_path):
    rng = np.random.default_rng(12)
    Phi, R = rng.normal(size=(300, 4)), rng.normal(size=(300, 2))
    Q = rng.normal(size=(3, 4))
    ci = CaseInfluence(copy=False, intercept=True).fit(Phi, R)
    ci.save(tmp_path / "kept.npz")
    back = CaseInfluence.load(tmp_path / "kept.npz")
    assert back.copy is False
    assert np.array_equal(back.coefficients(Q), ci.coefficients(Q))
    assert "copy=False" in repr(ci) and "copy" not in repr(CaseInfluence())
    with pytest.raises(InputError, match="copy"):
        CaseInfluence(copy="no").fit(Phi, R)


def test_reading_phi_in_pieces_does_not_change_the_fit(monkeypatch, tmp_path) -> None:
    """Without a copy (``copy=False``, a float64 or float32 memmap) pass 2 transposes ``Phi``
    into its buffers by ``domatcopy`` or by numpy (a float32 memmap, or a BLAS without
    ``domatcopy``): the same bits whatever the piece size and the routine, narrow and
    wide."""
    import cbdt._tsqr as ts

    rng = np.random.default_rng(13)
    for n, H in ((9000, 20), (2500, 140)):
        Phi = rng.normal(size=(n, H))
        R = rng.normal(size=(n, 2))
        sources = {"reference": Phi,
                   "float32 memmap": _memmap(tmp_path / f"p{H}.bin", Phi, np.float32)}
        for name, source in sources.items():
            kw = dict(copy=False) if name == "reference" else {}
            want = CaseInfluence(**kw).fit(source, R)
            for patch in ("pieces", "numpy"):
                with monkeypatch.context() as mp:
                    mp.setattr(ts, "copy_rows", lambda Hp: 5)
                    mp.setattr(ts, "piece_rows", lambda Hp: 11)
                    if patch == "numpy":  # no domatcopy (another BLAS): numpy copies
                        mp.setattr(ts, "transpose_into", lambda *a, **k: False)
                    got = CaseInfluence(**kw).fit(source, R)
                assert np.array_equal(got._factor, want._factor), (name, patch)
                q = Phi[:3] + 0.5
                assert np.array_equal(got.coefficients(q), want.coefficients(q)), (name, patch)
