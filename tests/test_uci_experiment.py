"""Tests of cbdt.book.experiments.uci: sub-memory definitions, chunked CBDT, plumbing (Sec. 5.4, C.5-C.6).

The definitions (Gram mismatch, A2 satisfaction) are checked for their stated properties and on
hand-computed examples; the experiment plumbing runs on small synthetic tables with tiny
networks. Tests that read the real UCI files need ``CBDT_DATA_DIR`` and are skipped otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from _tolerance import assert_rounding_equal
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import cbdt
from cbdt import geometry
from cbdt.book import plots
from cbdt.book.experiments import uci
from cbdt.datasets import ADULT_CATEGORIES, DEFAULT_CREDIT_COLUMNS
from cbdt.exceptions import InputError

matplotlib.use("Agg")

_ENV = os.environ.get("CBDT_DATA_DIR", "").strip()
_DIR = Path(_ENV) if _ENV else None


def needs(*names: str) -> pytest.MarkDecorator:
    if _DIR is None:
        return pytest.mark.skip(reason="CBDT_DATA_DIR is not set; real-data tests skipped")
    absent = [n for n in names if not (_DIR / n).is_file()]
    return pytest.mark.skipif(bool(absent), reason=f"CBDT_DATA_DIR={_DIR} lacks {absent}")


TINY = uci.UCIConfig(hidden=(8, 8), epochs=3, batch_size=64, n_median=200, n_validation=40,
                     chunk_size=37)


# ---------------------------------------------------------------------------
# Gram mismatch
# ---------------------------------------------------------------------------


def _pair(rng, n1=300, n2=200, H=4, shift=0.7):
    return rng.normal(size=(n1, H)), rng.normal(size=(n2, H)) * 1.5 + shift


@pytest.mark.parametrize("whiten", [True, False])
def test_gram_mismatch_identical_memories_is_zero(rng, whiten):
    P = rng.normal(size=(200, 5))
    assert geometry.gram_mismatch(P, P, whiten=whiten) == pytest.approx(0.0, abs=1e-12)
    # a permuted and duplicated copy has the same normalised Gram matrix
    Q = np.vstack([P, P])[rng.permutation(400)]
    assert geometry.gram_mismatch(P, Q, whiten=whiten) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("whiten", [True, False])
def test_gram_mismatch_symmetric_and_bounded(rng, whiten):
    P1, P2 = _pair(rng)
    d12 = geometry.gram_mismatch(P1, P2, whiten=whiten)
    assert d12 == pytest.approx(geometry.gram_mismatch(P2, P1, whiten=whiten), rel=1e-12)
    assert 0.0 < d12 <= 1.0


@pytest.mark.parametrize("c", [1e-3, 0.5, 7.0, 1e3])
def test_gram_mismatch_scale_invariance(rng, c):
    P1, P2 = _pair(rng)
    # whitened: invariant under scaling, also with the intercept coordinate
    assert geometry.gram_mismatch(c * P1, c * P2) == pytest.approx(geometry.gram_mismatch(P1, P2),
                                                              rel=1e-9)
    # raw ratio: invariant under scaling only without the intercept coordinate
    assert geometry.gram_mismatch(c * P1, c * P2, whiten=False, intercept=False) == pytest.approx(
        geometry.gram_mismatch(P1, P2, whiten=False, intercept=False), rel=1e-9)


def test_gram_mismatch_affine_invariance_only_when_whitened(rng):
    P1, P2 = _pair(rng)
    B, b = rng.normal(size=(4, 4)), rng.normal(size=4)
    before = geometry.gram_mismatch(P1, P2)
    after = geometry.gram_mismatch(P1 @ B.T + b, P2 @ B.T + b)
    assert after == pytest.approx(before, rel=1e-8)
    raw_before = geometry.gram_mismatch(P1, P2, whiten=False)
    raw_after = geometry.gram_mismatch(P1 @ B.T + b, P2 @ B.T + b, whiten=False)
    assert abs(raw_after - raw_before) > 1e-3


def test_gram_mismatch_duplicating_cases_changes_nothing(rng):
    P1, P2 = _pair(rng)
    d = geometry.gram_mismatch(P1, P2)
    assert geometry.gram_mismatch(np.vstack([P1, P1, P1]), P2) == pytest.approx(d, rel=1e-10)


def test_gram_mismatch_hand_example():
    # group 1 lives on axis 1, group 2 on axis 2: G1 = diag(1, 0), G2 = diag(0, 1)
    P1 = np.array([[1.0, 0.0], [-1.0, 0.0]])
    P2 = np.array([[0.0, 2.0], [0.0, -2.0]])
    # raw, no intercept: G2 = diag(0, 4); ||G1 - G2|| = sqrt(17), norms 1 + 4
    assert geometry.gram_mismatch(P1, P2, whiten=False, intercept=False) == pytest.approx(
        np.sqrt(17) / 5)
    # whitened by Gbar = diag(1/2, 2): C1 = diag(2, 0), C2 = diag(0, 2) -> sqrt(8) / 4
    assert geometry.gram_mismatch(P1, P2, intercept=False) == pytest.approx(np.sqrt(8) / 4)


def test_normalized_gram_with_intercept():
    P = np.array([[1.0, 2.0], [3.0, 4.0]])
    G = geometry.normalized_gram(P)
    np.testing.assert_allclose(G, np.array([[5, 7, 2], [7, 10, 3], [2, 3, 1]]))
    np.testing.assert_allclose(geometry.normalized_gram(P, intercept=False), G[:2, :2])


def test_gram_mismatch_rejects_singular_geometry():
    P = np.ones((10, 2))  # constant units: the average Gram matrix is singular
    with pytest.raises(InputError, match="singular"):
        geometry.gram_mismatch(P, 2 * P)
    assert geometry.gram_mismatch(P, P, whiten=False) == 0.0


def test_zero_mismatch_makes_the_union_probe_a_scalar_mixture(rng):
    """Exercise 08-2 (b): equal normalised Gram matrices -> Q = (n1 Q1 + n2 Q2) / n -> A2."""
    P1 = rng.normal(size=(150, 3))
    P2 = np.vstack([P1, P1])  # same normalised Gram matrix, twice the cases
    R1, R2 = rng.normal(size=(150, 2)), rng.normal(size=(300, 2)) + 1.0
    assert geometry.gram_mismatch(P1, P2) == pytest.approx(0.0, abs=1e-12)
    X = rng.normal(size=(50, 3))
    Q1 = cbdt.CaseInfluence(intercept=True).fit(P1, R1).scores(X)
    Q2 = cbdt.CaseInfluence(intercept=True).fit(P2, R2).scores(X)
    Q = cbdt.CaseInfluence(intercept=True).fit(np.vstack([P1, P2]), np.vstack([R1, R2])).scores(X)
    np.testing.assert_allclose(Q, (150 * Q1 + 300 * Q2) / 450, rtol=1e-9, atol=1e-12)
    assert uci.combination_axiom(Q1, Q2, Q).pairs == 1.0


# ---------------------------------------------------------------------------
# A2 satisfaction
# ---------------------------------------------------------------------------


def test_combination_axiom_hand_examples():
    U1 = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 2.0]])
    U2 = np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 3.0]])
    # query 0: both prefer a0 > a1 (jointly ranked); union keeps it. (a0, a2): 1 > .5, 2 > 0
    # query 1: both prefer a2 > a0 and a2 > a1; union below reverses a2 > a0
    U = np.array([[3.0, 1.0, 0.5], [5.0, 1.0, 4.0]])
    res = uci.combination_axiom(U1, U2, U)
    assert res.n_pairs == 4
    assert res.pairs == pytest.approx(3 / 4)
    assert res.n_top == 2  # both queries: the sub-memories choose the same action
    assert res.top == pytest.approx(1 / 2)


def test_combination_axiom_no_joint_pairs_gives_nan():
    U1 = np.array([[1.0, 0.0]])
    U2 = np.array([[0.0, 1.0]])
    res = uci.combination_axiom(U1, U2, U1 + U2)
    assert res.n_pairs == 0 and np.isnan(res.pairs)
    assert res.n_top == 0 and np.isnan(res.top)


def test_combination_axiom_shape_check():
    with pytest.raises(InputError, match="same shape"):
        uci.combination_axiom(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((3, 3)))


@given(arrays(np.float64, (6, 2, 3), elements=st.integers(-1000, 1000).map(float)))
def test_a2_holds_by_construction_for_additive_supports(U):
    """Eq. 1 is additive over disjoint memories: U = U1 + U2, so A2 cannot fail.

    Integer-valued supports keep the sums exact; with general floats rounding can turn two
    strict preferences into a tie in the union, which is a floating-point artefact.
    """
    U1, U2 = U[:, 0, :], U[:, 1, :]
    res = uci.combination_axiom(U1, U2, U1 + U2)
    if res.n_pairs:
        assert res.pairs == 1.0


def test_a2_for_cbdt_supports_of_split_memories(rng):
    X, R = rng.normal(size=(120, 3)), rng.normal(size=(120, 3))
    mask = X[:, 0] > 0.3
    Xq = rng.normal(size=(40, 3))
    cols = np.hstack([R, R * mask[:, None], R * ~mask[:, None]])
    U, _ = uci.kernel_supports(Xq, X, cols, [0.8], chunk_size=7)
    U, U1, U2 = U[0, :, :3], U[0, :, 3:6], U[0, :, 6:]
    np.testing.assert_allclose(U1 + U2, U, rtol=1e-12)
    assert uci.combination_axiom(U1, U2, U).pairs == 1.0


# ---------------------------------------------------------------------------
# the chunked CBDT decision maker
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_kernel_supports_equal_eq1(rng, chunk):
    X, R, Xq = rng.normal(size=(90, 4)), rng.normal(size=(90, 3)), rng.normal(size=(25, 4))
    bws = [0.3, 1.0, 4.0]
    U, d2 = uci.kernel_supports(Xq, X, R, bws, chunk_size=chunk)
    assert U.shape == (3, 25, 3)
    for j, bw in enumerate(bws):
        ref = cbdt.support(Xq, cbdt.Memory(X, R), cbdt.GaussianSimilarity(bw))
        got = U[j] * np.exp(-d2 / (2 * bw**2))[:, None]
        # another computation of sum_i s_i r_i (chunked, shifted exponents, distances by
        # |q|^2 + |x|^2 - 2 q.x): equal to rounding of the n terms and of their exponents,
        # whose absolute error grows with (|q|^2 + |x|^2) / 2h^2; signed returns cancel, so
        # the bound is relative to sum_i s_i |r_i|
        arg = (np.sum(Xq**2, 1).max() + np.sum(X**2, 1).max()) / (2 * bw**2)
        assert_rounding_equal(got, ref, ulps=len(X) + 4 * arg, scale=cbdt.support(
            Xq, cbdt.Memory(X, np.abs(R)), cbdt.GaussianSimilarity(bw)))
        np.testing.assert_array_equal(
            U[j].argmax(1), cbdt.decide(Xq, cbdt.Memory(X, R), cbdt.GaussianSimilarity(bw)))


def test_kernel_supports_small_bandwidth_does_not_underflow(rng):
    X, R = rng.normal(size=(50, 3)) * 30, rng.normal(size=(50, 3))
    Xq = rng.normal(size=(10, 3)) * 30
    U, _ = uci.kernel_supports(Xq, X, R, [1e-3])
    nearest = ((Xq[:, None, :] - X[None, :, :]) ** 2).sum(-1).argmin(1)
    # tiny h: CBDT becomes the nearest-neighbour rule, and the scaled supports stay finite
    assert np.isfinite(U).all()
    np.testing.assert_array_equal(U[0].argmax(1), R[nearest].argmax(1))


def test_kernel_supports_validation():
    with pytest.raises(InputError):
        uci.kernel_supports(np.zeros((2, 3)), np.zeros((4, 2)), np.zeros((4, 1)), [1.0])
    with pytest.raises(InputError):
        uci.kernel_supports(np.zeros((2, 2)), np.zeros((4, 2)), np.zeros((3, 1)), [1.0])
    with pytest.raises(InputError):
        uci.kernel_supports(np.zeros((2, 2)), np.zeros((4, 2)), np.zeros((4, 1)), [0.0])


def test_median_distance_hand_example():
    X = np.array([[0.0], [1.0], [3.0]])  # distances 1, 3, 2
    assert uci.median_distance(X) == 2.0
    with pytest.raises(InputError):
        uci.median_distance(np.zeros((5, 2)))


def test_select_multiple_prefers_local_kernels_on_local_structure(rng):
    X = rng.uniform(-3, 3, size=(600, 2))
    best = (np.floor(X[:, 0]) + np.floor(X[:, 1])).astype(int) % 3  # a checkerboard
    R = np.eye(3)[best] + 0.01 * rng.normal(size=(600, 3))
    mult, table = uci.select_multiple(X, R, (1 / 16, 1 / 4, 1.0), n_validation=200, seed=0)
    assert list(table.columns) == ["multiple", "bandwidth", "mean_return", "chosen"]
    assert table["chosen"].sum() == 1 and mult == table.loc[table["chosen"], "multiple"].item()
    assert mult < 1.0
    assert table["mean_return"].iloc[-1] < table["mean_return"].max()
    mult2, table2 = uci.select_multiple(X, R, (1 / 16, 1 / 4, 1.0), n_validation=200, seed=0)
    assert mult2 == mult and table2.equals(table)


def test_decision_margin_and_label_accuracy():
    S = np.array([[1.0, 3.0, 2.0], [0.0, -1.0, -3.0]])
    np.testing.assert_allclose(uci.decision_margin(S), [1.0, 1.0])
    np.testing.assert_allclose(uci.decision_margin(S, [0, 2]), [-2.0, -3.0])
    acts, y = np.array([0, 1, 2, 0]), np.array([0, 1, 0, 1])
    # approve (action != 0) iff y == 1: right, right, wrong, wrong
    assert uci.label_approval_accuracy(acts, y, good_label=1) == 0.5
    # Default-Credit convention: approving is right for y == 0
    assert uci.label_approval_accuracy(acts, y, good_label=0) == 0.5
    assert uci.label_approval_accuracy(np.array([1, 0]), np.array([0, 1]), good_label=0) == 1.0


def test_stratified_split():
    y = np.array([0] * 80 + [1] * 20)
    tr, te = uci.stratified_split(y, 0.2, seed=3)
    assert len(te) == 20 and len(tr) == 80
    assert y[te].sum() == 4  # 20% of each class
    assert np.array_equal(np.sort(np.concatenate([tr, te])), np.arange(100))
    tr2, te2 = uci.stratified_split(y, 0.2, seed=3)
    assert np.array_equal(te, te2)
    assert not np.array_equal(te, uci.stratified_split(y, 0.2, seed=4)[1])
    with pytest.raises(InputError):
        uci.stratified_split(y, 1.5, seed=0)


def test_optimal_action_counts():
    R = np.array([[0.5, 1.0, 2.0], [0.0, -1.0, -3.0], [0.9, 0.9, 0.1]])
    t = uci.optimal_action_counts(R, ["a", "b", "c"])
    assert t["argmax"].tolist() == [2, 0, 1]
    assert t["best_or_tied"].tolist() == [2, 1, 1]


# ---------------------------------------------------------------------------
# synthetic tables and the experiment plumbing
# ---------------------------------------------------------------------------


def _credit_frame(rng, n=400):
    cols = {c: rng.integers(0, 1000, n) for c in DEFAULT_CREDIT_COLUMNS}
    cols.update(
        ID=np.arange(1, n + 1),
        SEX=rng.integers(1, 3, n),
        EDUCATION=rng.integers(0, 7, n),
        MARRIAGE=rng.integers(0, 4, n),
        AGE=rng.integers(21, 70, n),
        PAY_0=rng.integers(-2, 5, n),
    )
    score = (cols["PAY_0"] >= 2) * 1.5 + rng.normal(size=n)
    cols["y"] = (score > 0.9).astype(np.int64)
    return pd.DataFrame(cols)[list(DEFAULT_CREDIT_COLUMNS)]


def _adult_frame(rng, n):
    df = pd.DataFrame({
        "age": rng.integers(17, 90, n),
        "fnlwgt": rng.integers(10_000, 500_000, n),
        "education_num": rng.integers(1, 17, n),
        "capital_gain": np.where(rng.random(n) < 0.1, rng.integers(1, 10_000, n), 0),
        "capital_loss": np.where(rng.random(n) < 0.05, rng.integers(1, 3_000, n), 0),
        "hours_per_week": rng.integers(1, 99, n),
    })
    for col, cats in ADULT_CATEGORIES.items():
        levels = [c for c in cats if c != "missing"]
        df[col] = rng.choice(levels, n)
    df["y"] = ((df["education_num"] >= 13) | (rng.random(n) < 0.15)).astype(np.int64)
    df["income"] = np.where(df["y"] == 1, ">50K", "<=50K")
    return df


def test_default_credit_submemories_boundaries():
    df = pd.DataFrame({"AGE": [34, 35, 60], "SEX": [1, 2, 1], "EDUCATION": [1, 2, 3],
                       "PAY_0": [1, 2, -1]})
    m = uci.default_credit_submemories(df)
    assert list(m) == ["AGE", "SEX", "EDUCATION", "delinquency"]
    assert m["AGE"].tolist() == [True, False, False]
    assert m["SEX"].tolist() == [True, False, True]
    assert m["EDUCATION"].tolist() == [True, True, False]
    assert m["delinquency"].tolist() == [False, True, False]
    edu = uci.default_credit_submemories(
        pd.DataFrame({"AGE": [30] * 7, "SEX": [1] * 7, "EDUCATION": range(7), "PAY_0": [0] * 7}))
    assert edu["EDUCATION"].tolist() == [False, True, True, False, False, False, False]
    with pytest.raises(InputError, match="PAY_0"):
        uci.default_credit_submemories(df.drop(columns="PAY_0"))


def test_default_credit_task_on_a_synthetic_table(rng):
    frame = _credit_frame(rng)
    t = uci.default_credit_task(1, frame=frame, test_size=0.25)
    assert t.X_train.shape == (300, 33) and t.X_test.shape == (100, 33)
    assert t.R_train.shape == (300, 3)
    np.testing.assert_array_equal(t.R_train[:, 0], 0.5 * (1 - t.y_train))
    assert set(t.submemories) == set(uci.DEFAULT_CREDIT_SPLITS)
    assert all(m.shape == (300,) for m in t.submemories.values())
    assert t.memory_key != uci.default_credit_task(2, frame=frame).memory_key


def test_adult_task_on_synthetic_tables(rng):
    tr, te = _adult_frame(rng, 300), _adult_frame(rng, 120)
    t = uci.adult_task(5, train=tr, test=te)
    assert t.X_train.shape[0] == 300 and t.X_test.shape[0] == 120
    assert t.X_train.flags.writeable and t.X_train.shape[1] == t.X_test.shape[1]
    # the returns are C.5's plus N(0, 0.05^2) noise; the noise-free test returns are exact
    exact = np.column_stack([1 - 0.5 * t.y_test, 0.5 + 0.4 * t.y_test,
                             -0.3 + 1.2 * t.y_test + 0.3 * (te["education_num"] >= 13)
                             + 0.2 * (te["capital_gain"] > 0)])
    np.testing.assert_allclose(t.R_test_exact, exact)
    assert 0.02 < np.std(t.R_test - exact) < 0.08
    t_again = uci.adult_task(5, train=tr, test=te)
    np.testing.assert_array_equal(t.R_train, t_again.R_train)
    assert not np.array_equal(t.R_train, uci.adult_task(6, train=tr, test=te).R_train)
    assert t.memory_key == t_again.memory_key


def test_run_tasks_plumbing_with_submemories(rng):
    t = uci.default_credit_task(0, frame=_credit_frame(rng), test_size=0.25)
    (run,) = uci.run_tasks([t], TINY)
    m = len(t.X_test)
    assert run.network_scores.shape == run.probe_scores.shape == (m, 3)
    assert run.cbdt_normalized.shape == (m, 3) and run.cbdt_action.shape == (m,)
    assert run.bandwidth_multiple in TINY.bandwidth_multiples
    assert run.bandwidth == pytest.approx(run.bandwidth_multiple * run.median_distance)
    assert len(run.sensitivity) == len(TINY.bandwidth_multiples)
    assert run.sensitivity["chosen"].sum() == 1
    chosen = run.sensitivity.loc[run.sensitivity["chosen"], "agreement"].item()
    assert chosen == pytest.approx((run.network_action == run.cbdt_action).mean())
    # the normalised supports are kernel-weighted mean returns: inside the returns' range
    assert (run.cbdt_normalized >= t.R_train.min(0) - 1e-9).all()
    assert (run.cbdt_normalized <= t.R_train.max(0) + 1e-9).all()
    sub = run.submemory
    assert list(sub["split"]) == list(uci.DEFAULT_CREDIT_SPLITS)
    assert (sub["a2_cbdt"] == 1.0).all()
    assert sub["gram_mismatch"].between(0, 1).all() and sub["a2_ols"].between(0, 1).all()
    assert (sub["n_1"] + sub["n_2"] == len(t.X_train)).all()
    # the CBDT decision agrees with cbdt.decide at the chosen bandwidth
    ref = cbdt.decide(t.X_test, cbdt.Memory(t.X_train, t.R_train),
                      cbdt.GaussianSimilarity(run.bandwidth))
    np.testing.assert_array_equal(run.cbdt_action, ref)


def test_run_tasks_shared_memory_pass_equals_separate_runs(rng):
    tr, te = _adult_frame(rng, 250), _adult_frame(rng, 60)
    tasks = [uci.adult_task(s, train=tr, test=te) for s in (0, 1)]
    together = uci.run_tasks(tasks, TINY)
    alone = uci.run_tasks([uci.adult_task(1, train=tr, test=te)], TINY)[0]
    np.testing.assert_array_equal(together[1].cbdt_action, alone.cbdt_action)
    np.testing.assert_allclose(together[1].cbdt_normalized, alone.cbdt_normalized, rtol=1e-12)
    np.testing.assert_array_equal(together[1].network_action, alone.network_action)
    assert together[1].submemory is None


def test_tables_and_plots_from_a_small_audit(rng, monkeypatch):
    frame = _credit_frame(rng, 300)
    monkeypatch.setattr(uci, "load_default_credit", lambda: frame)
    uci.clear_cache()
    audit = uci.uci_audit("default_credit", seeds=(0, 1), config=TINY)
    assert uci.uci_audit("default_credit", seeds=(0, 1), config=TINY) is audit  # cached
    uci.clear_cache()
    assert len(audit.per_seed) == 2 and len(audit.submemory) == 8
    cmp = uci.paper_comparison(audit)
    assert cmp.loc[cmp["quantity"] == "agreement", "paper_mean"].item() == 0.8746
    summ = uci.summarize(audit.submemory, ["gram_mismatch", "a2_ols"], by="split")
    assert list(summ["split"]) == list(uci.DEFAULT_CREDIT_SPLITS) and (summ["n"] == 2).all()
    conf = uci.confusion_table(audit.runs[0])
    assert conf.to_numpy().sum() == len(audit.runs[0].task.X_test)
    bins = uci.agreement_by_margin(audit, n_bins=4)
    assert len(bins) == 8
    for _, g in bins.groupby("seed"):
        assert g["n"].sum() == len(audit.runs[0].task.X_test)
        assert g["share_of_disagreements"].sum() == pytest.approx(1.0) or (
            g["agreement"] == 1).all()

    panel = uci.figure4_panel(audit.runs[0])
    assert (panel["cbdt_margin"] >= 0).all()
    np.testing.assert_array_equal(panel["network_margin"] > 0,
                                  audit.runs[0].network_action == audit.runs[0].cbdt_action)
    figs = [
        plots.plot_uci_figure4({"A": panel, "B": panel}),
        plots.plot_uci_vs_paper([("x", audit.per_seed["agreement"], 0.8746, 0.0047),
                                 ("y", audit.per_seed["rho_recon_0"], None, None)]),
        plots.plot_uci_bandwidth({"D": audit.sensitivity}, paper={"D": 0.8746}),
        plots.plot_uci_submemory(audit.submemory, paper_mismatch={"delinquency": 0.91}),
        plots.plot_uci_loss_curves({"D": [r.network.loss_curve_ for r in audit.runs]}),
    ]
    for f in figs:
        assert isinstance(f, matplotlib.figure.Figure)
        matplotlib.pyplot.close(f)


def test_uci_audit_rejects_unknown_dataset():
    with pytest.raises(InputError, match="dataset"):
        uci.uci_audit("iris")


# ---------------------------------------------------------------------------
# real data (CBDT_DATA_DIR)
# ---------------------------------------------------------------------------


@needs("default of credit card clients.xls")
def test_real_default_credit_task_and_known_facts():
    t = uci.default_credit_task(0)
    assert t.X_train.shape == (24_000, 33) and t.X_test.shape == (6_000, 33)
    assert t.y_train.sum() + t.y_test.sum() == 6_636
    assert abs(t.y_train.mean() - t.y_test.mean()) < 1e-3  # stratified
    R = np.vstack([t.R_train, t.R_test])
    assert np.bincount(R.argmax(1), minlength=3).tolist() == [6_636, 0, 23_364]
    n_del = t.submemories["delinquency"].sum()
    assert 2_000 < n_del < 3_000
    assert t.y_train[t.submemories["delinquency"]].mean() > 0.6


@needs("adult.data", "adult.test")
def test_real_adult_task_and_known_facts():
    t = uci.adult_task(0)
    assert t.X_train.shape == (32_561, 108) and t.X_test.shape == (16_281, 108)
    exact_best = t.R_test_exact.argmax(1)
    assert (exact_best[t.y_test == 0] == 0).all()  # a1 (reject) is optimal for every y = 0
    assert (exact_best[t.y_test == 1] != 0).all()
    # noise only breaks ties: away from ties the noisy optimum equals the noise-free one
    tied = np.isclose(t.R_test_exact[:, 1], t.R_test_exact[:, 2]) & (t.y_test == 1)
    assert (t.R_test.argmax(1)[~tied] == exact_best[~tied]).mean() > 0.99
