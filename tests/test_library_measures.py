"""The measures the chapters share, held once in the library: ROC AUC with undefined cases,
recall at a review budget, the decision margin, bandwidth selection on held-out cases and the
Gram mismatch of two sub-memories."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist

from cbdt.decision import decision_margin, select_bandwidth
from cbdt.exceptions import InputError
from cbdt.geometry import gram_distance, gram_mismatch, normalized_gram
from cbdt.metrics import errors_caught, recall_at_budget, review_size, roc_auc


# ---------------------------------------------------------------------- ROC AUC
def test_auc_single_class_raises_or_is_nan() -> None:
    s = np.array([0.2, 0.5, 0.9, 0.1])
    for y in (np.zeros(4, bool), np.ones(4, bool)):
        with pytest.raises(InputError, match="both classes"):
            roc_auc(s, y)
        assert math.isnan(roc_auc(s, y, single_class="nan"))
    assert math.isnan(roc_auc([], [], single_class="nan"))
    y = np.array([0, 1, 1, 0], dtype=bool)
    assert roc_auc(s, y, single_class="nan") == roc_auc(s, y) == 1.0
    with pytest.raises(InputError, match="single_class"):
        roc_auc(s, y, single_class="zero")


# ---------------------------------------------------------------------- review budget
def test_recall_equals_a_hand_count() -> None:
    scores = np.array([0.9, 0.1, 0.8, 0.3, 0.7, 0.2, 0.6, 0.5, 0.4, 0.0])
    wrong = np.array([1, 1, 0, 0, 1, 0, 0, 0, 1, 0], dtype=bool)
    # budget 0.3 of 10 -> the 3 highest scores 0.9, 0.8, 0.7 -> 2 of the 4 wrong ones
    assert errors_caught(scores, wrong, 0.3) == 2.0
    assert recall_at_budget(scores, wrong, 0.3) == 0.5
    # budget 0.25 -> ceil(2.5) = 3, the same three
    assert recall_at_budget(scores, wrong, 0.25) == 0.5
    assert recall_at_budget(scores, wrong, 1.0) == 1.0
    assert math.isnan(recall_at_budget(scores, np.zeros(10, bool), 0.3))


def test_review_size_is_not_inflated_by_rounding() -> None:
    # 0.1 * 30 is 3.0000000000000004 in floating point: still 3 reviewed
    assert review_size(0.1, 30) == 3
    s = np.arange(30, 0, -1, dtype=float)
    w = np.zeros(30, bool)
    w[3] = True  # the 4th highest score
    assert recall_at_budget(s, w, 0.1) == 0.0
    for bad in (0, 0.0, 1.5, -0.1, True, "0.1", float("nan")):
        with pytest.raises(InputError, match="budget"):
            review_size(bad, 10)


def test_recall_ties_stable_and_average() -> None:
    scores = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    wrong = np.array([0, 0, 0, 1, 1, 0], dtype=bool)
    # budget 0.5 -> 3 reviewed: the 1.0, then the two earliest zeros (positions 1, 2)
    assert recall_at_budget(scores, wrong, 0.5, ties="stable") == 0.0
    # average: 2 free places among 5 tied zeros, 2 wrong ones -> 2 * 2/5 / 2
    assert recall_at_budget(scores, wrong, 0.5, ties="average") == pytest.approx(0.4)
    with pytest.raises(InputError, match="ties"):
        recall_at_budget(scores, wrong, 0.5, ties="random")
    with pytest.raises(InputError, match="finite"):
        recall_at_budget(np.array([np.nan, 1.0]), np.array([True, False]), 0.5)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.floats(0.01, 1.0))
def test_average_ties_is_the_mean_over_tie_orders(seed: int, n: int, budget: float) -> None:
    # the closed form equals the mean of the stable count over random orders of the ties:
    # checked exactly by averaging over every position of the wrong ones inside each group
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 4, size=n).astype(float)
    w = rng.random(n) < 0.4
    r = review_size(budget, n)
    exp = 0.0
    for v in np.unique(s):
        g = s == v
        above = int((s > v).sum())
        take = min(max(r - above, 0), int(g.sum()))
        exp += w[g].sum() * take / g.sum()
    assert errors_caught(s, w, budget, ties="average") == pytest.approx(exp, abs=1e-12)
    if len(np.unique(s)) == n:  # no ties: both rules agree
        assert errors_caught(s, w, budget) == errors_caught(s, w, budget, ties="average")


# ---------------------------------------------------------------------- margin
def test_decision_margin_best_minus_second_and_of_a_given_action() -> None:
    S = np.array([[1.0, 3.0, 2.0], [0.0, 0.0, -1.0]])
    np.testing.assert_array_equal(decision_margin(S), [1.0, 0.0])
    np.testing.assert_array_equal(decision_margin(S, np.array([0, 2])), [-2.0, -1.0])
    np.testing.assert_array_equal(decision_margin(S, S.argmax(axis=1)), decision_margin(S))
    with pytest.raises(InputError, match="2"):
        decision_margin([[1.0], [2.0]])
    with pytest.raises(InputError, match="unknown action"):
        decision_margin(S, np.array([0, 3]))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.integers(2, 5))
def test_decision_margin_is_shift_invariant_and_scales(seed: int, m: int, k: int) -> None:
    S = np.random.default_rng(seed).normal(size=(m, k))
    base = decision_margin(S)
    assert (base >= 0).all()
    np.testing.assert_allclose(decision_margin(S + 7.0), base, atol=1e-12)
    np.testing.assert_allclose(decision_margin(3.0 * S), 3.0 * base, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------- bandwidth
@pytest.fixture(scope="module")
def local_problem():
    # returns that change sign across x = 0: a narrow kernel decides right, a wide one cannot
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(300, 1))
    R = np.column_stack([np.sign(X[:, 0]), -np.sign(X[:, 0])])
    return X[:240], R[:240], X[240:], R[240:]


@pytest.mark.parametrize("criterion", ["mean_return", "support_mse"])
def test_select_bandwidth_by_hand(local_problem, criterion) -> None:
    Xm, Rm, Xv, Rv = local_problem
    hs = [4.0, 1.0, 0.05]
    sel = select_bandwidth(Xm, Rm, Xv, Rv, hs, criterion=criterion, chunk_size=7)
    t = sel.table
    assert list(t["bandwidth"]) == hs and t["chosen"].sum() == 1
    for j, h in enumerate(hs):
        S = np.exp(-cdist(Xv, Xm, "sqeuclidean") / (2 * h * h))
        U = S @ Rm
        assert t["mean_return"][j] == pytest.approx(Rv[np.arange(len(Rv)), U.argmax(1)].mean())
        if criterion == "support_mse":
            Ubar = U / S.sum(axis=1, keepdims=True)
            assert t["support_mse"][j] == pytest.approx(((Ubar - Rv) ** 2).mean(), rel=1e-9)
    # the wide kernel decides wrong near 0; h = 1 and h = 0.05 both decide every validation
    # row right (a tie, won by the larger), while only the narrow one forecasts the returns
    assert sel.bandwidth == {"mean_return": 1.0, "support_mse": 0.05}[criterion]
    assert sel.criterion == criterion


def test_select_bandwidth_ties_go_to_the_larger_bandwidth(local_problem) -> None:
    Xm, Rm, Xv, Rv = local_problem
    R0 = np.zeros_like(Rm)  # every bandwidth returns 0: all tied
    sel = select_bandwidth(Xm, R0, Xv, np.zeros_like(Rv), [0.1, 2.0, 0.5])
    assert sel.bandwidth == 2.0
    with pytest.raises(InputError, match="criterion"):
        select_bandwidth(Xm, Rm, Xv, Rv, [1.0], criterion="auc")
    with pytest.raises(InputError, match="actions"):
        select_bandwidth(Xm, Rm, Xv, Rv[:, :1], [1.0])


# ---------------------------------------------------------------------- Gram mismatch
def test_gram_mismatch_zero_for_one_geometry_and_bounded(rng) -> None:
    P = rng.normal(size=(50, 4))
    for whiten in (True, False):
        assert gram_mismatch(P, P, whiten=whiten) == pytest.approx(0.0, abs=1e-12)
        d = gram_mismatch(P, 3 * P + 1, whiten=whiten)
        assert 0 <= d <= 1
    G1, G2 = normalized_gram(P), normalized_gram(P[:20])
    assert gram_distance(G1, G2) == gram_mismatch(P, P[:20])
    with pytest.raises(InputError, match="square"):
        gram_distance(G1, G2[:-1])


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---------------------------------------------------------------------- solver fallback
def test_cholesky_or_lstsq_is_cholesky_or_lstsq_exactly(rng) -> None:
    import cbdt

    Phi = rng.normal(size=(40, 5))
    R = rng.normal(size=(40, 3))
    x = rng.normal(size=(4, 5))
    full = cbdt.CaseInfluence(solver="cholesky_or_lstsq").fit(Phi, R)
    ref = cbdt.CaseInfluence(solver="cholesky").fit(Phi, R)
    assert full.solver_ == "cholesky"
    np.testing.assert_array_equal(full.coefficients(x), ref.coefficients(x))
    deficient = np.hstack([Phi, Phi[:, :1] + Phi[:, 1:2]])  # rank 5 of 6 columns
    xd = np.hstack([x, x[:, :1] + x[:, 1:2]])
    with pytest.raises(cbdt.RankDeficientError):
        cbdt.CaseInfluence().fit(deficient, R)
    fb = cbdt.CaseInfluence(solver="cholesky_or_lstsq").fit(deficient, R)
    mn = cbdt.CaseInfluence(solver="lstsq").fit(deficient, R)
    assert fb.solver_ == "lstsq" and fb.rank_ == mn.rank_ == 5
    np.testing.assert_array_equal(fb.coefficients(xd), mn.coefficients(xd))
    np.testing.assert_array_equal(fb.readout_, mn.readout_)
    with pytest.raises(InputError, match="cholesky_or_lstsq"):
        cbdt.CaseInfluence(solver="qr").fit(Phi, R)


# ---------------------------------------------------------------------- network settings
def test_network_config_of_and_build() -> None:
    pytest.importorskip("torch")
    from dataclasses import dataclass

    from cbdt.models import CaseNetwork, NetworkConfig

    @dataclass(frozen=True)
    class Experiment:
        n_train: int = 10
        hidden: tuple[int, ...] = (3,)
        epochs: int = 2
        lr: float = 0.05

    cfg = NetworkConfig.of(Experiment())
    assert cfg == NetworkConfig(hidden=(3,), epochs=2, lr=0.05)
    net = cfg.build(4, epochs=5)
    assert isinstance(net, CaseNetwork)
    assert (net.hidden, net.epochs, net.lr, net.seed, net.n_checkpoints) == ((3,), 5, 0.05, 4, 1)
    with pytest.raises(InputError, match="unknown network settings"):
        cfg.build(0, width=3)


# ---------------------------------------------------------------------- the dual matrix
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("solver", ["cholesky", "lstsq"])
def test_dual_gives_the_coefficients(rng, intercept, solver) -> None:
    import cbdt

    Phi = rng.normal(size=(60, 4)) * [1.0, 1e3, 1e-3, 5.0]  # scaled columns: s != 1
    x = rng.normal(size=(7, 4))
    if solver == "lstsq":  # the minimum-norm dual of a rank-deficient memory
        Phi[:, 3] = 2.0 * Phi[:, 0]
        x[:, 3] = 2.0 * x[:, 0]
    R = rng.normal(size=(60, 2))
    ci = cbdt.CaseInfluence(intercept=intercept, solver=solver).fit(Phi, R)
    D, off = ci.dual_, ci.dual_offset_
    assert D.shape == (60, 4) and off.shape == (60,)
    assert not D.flags.writeable and not off.flags.writeable
    A = ci.coefficients(x)
    np.testing.assert_allclose(x @ D.T + off, A, rtol=0, atol=1e-12 * np.abs(A).max())
    if not intercept:
        assert (off == 0).all()
    # Proposition 1 through the dual: Q = (D phi + offset) R
    np.testing.assert_allclose((x @ D.T + off) @ R, ci.scores(x), rtol=1e-10, atol=1e-12)


def test_dual_exists_only_where_the_fit_formed_it(rng, tmp_path) -> None:
    import cbdt

    Phi = rng.normal(size=(70_000, 64))  # n H' > 2^22 and n >= 64 H': queries solve
    ci = cbdt.CaseInfluence().fit(Phi, rng.normal(size=(70_000, 2)))
    assert not hasattr(ci, "dual_")
    with pytest.raises(AttributeError, match="iter_coefficients"):
        ci.dual_  # noqa: B018
    small = cbdt.CaseInfluence(intercept=True).fit(Phi[:500], rng.normal(size=(500, 2)))
    small.save(tmp_path / "s.npz")
    back = cbdt.CaseInfluence.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(back.dual_, small.dual_)
    np.testing.assert_array_equal(back.dual_offset_, small.dual_offset_)
