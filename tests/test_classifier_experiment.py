"""Tests of cbdt.book.experiments.classifier: one-hot returns make contribution ranking degenerate.

A tiny network on a subset of scikit-learn's digits data (shipped with scikit-learn, no
download); scikit-learn is used here only, never by the library.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

import cbdt
from cbdt.audit import audit_signals, top_k_cases
from cbdt.book.experiments import classifier as clf
from cbdt.exceptions import DegenerateAuditWarning, InputError
from cbdt.models import CaseNetwork

matplotlib.use("Agg")

TINY = clf.ClassifierConfig(hidden=(16,), epochs=30, n_train=300, k=10)


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_digits(return_X_y=True)
    return X[:600], y[:600]


@pytest.fixture(scope="module")
def run(digits) -> clf.ClassifierRun:
    X, y = digits
    return clf.classifier_run(X, y, seed=0, config=TINY)


@pytest.fixture(scope="module")
def audit(digits) -> pd.DataFrame:
    X, y = digits
    return clf.classifier_audit(X, y, seeds=(0, 1), config=TINY)


# ---------------------------------------------------------------------------
# one_hot and the split
# ---------------------------------------------------------------------------


def test_one_hot_values():
    R = clf.one_hot(np.array([0, 2, 1, 2]))
    assert R.dtype == np.float64
    np.testing.assert_array_equal(R, np.eye(3)[[0, 2, 1, 2]])
    assert clf.one_hot([1, 0], n_classes=4).shape == (2, 4)
    np.testing.assert_array_equal(clf.one_hot(np.array([1.0, 0.0])), [[0, 1], [1, 0]])
    assert cbdt.label_like_returns(R) is not None


@pytest.mark.parametrize(
    ("y", "n_classes", "match"),
    [
        ([0, 1.5], None, "non-integer"),
        ([0, -1], None, "non-negative"),
        (["a", "b"], None, "integer class indices"),
        ([True, False], None, "integer class indices"),
        ([[0, 1]], None, "1-D"),
        ([], None, "1-D"),
        ([0, 3], 3, "n_classes = 3"),
        ([0, 1], 0, "positive integer"),
        ([0, np.nan], None, "non-integer"),
    ],
)
def test_one_hot_errors(y, n_classes, match):
    with pytest.raises(InputError, match=match):
        clf.one_hot(np.asarray(y) if not isinstance(y, list) or y else np.array([]), n_classes)


def test_split_indices_exact_stratified_and_seeded():
    y = np.repeat([0, 1, 2], [50, 30, 20])
    tr, te = clf.split_indices(y, 37, seed=3)
    assert tr.size == 37 and te.size == 63
    assert np.intersect1d(tr, te).size == 0
    np.testing.assert_array_equal(np.sort(np.r_[tr, te]), np.arange(100))
    counts = np.bincount(y[tr], minlength=3)
    assert np.all(np.abs(counts - 37 * np.array([50, 30, 20]) / 100) < 1)
    tr2, _ = clf.split_indices(y, 37, seed=3)
    np.testing.assert_array_equal(tr, tr2)
    assert not np.array_equal(tr, clf.split_indices(y, 37, seed=4)[0])
    assert clf.split_indices(y, 37, seed=3, stratify=False)[0].size == 37
    with pytest.raises(InputError, match="n_train"):
        clf.split_indices(y, 100, seed=0)


# ---------------------------------------------------------------------------
# the degenerate contribution ranking, the informative coefficient ranking
# ---------------------------------------------------------------------------


def test_contribution_ranking_is_degenerate(run):
    k = TINY.k
    assert np.bincount(run.y_train).min() >= k  # every class has >= k training cases
    phi, probe = run.Phi_test, run.fidelity.probe
    with pytest.warns(DegenerateAuditWarning, match="one-hot"):
        sig = audit_signals(probe, phi, action=run.decision, k=k, rank_by="contribution")
    # Gini: the top-k all carry the audited label, exactly
    assert np.all(sig["gini"].to_numpy() == 0.0)
    # entropy: only the eps = 1e-12 floor of eq. 16 for a pure top set of mass S
    psi = probe.contributions(phi, run.decision)
    idx = top_k_cases(psi, k)
    assert np.all(run.y_train[idx] == run.decision[:, None])
    S = np.take_along_axis(np.abs(psi), idx, axis=1).sum(axis=1)
    eps, A = 1e-12, run.R_train.shape[1]
    p_own = (S + eps / A) / (S + eps)
    p_other = (eps / A) / (S + eps)
    floor = -(p_own * np.log(p_own) + (A - 1) * p_other * np.log(p_other))
    np.testing.assert_allclose(sig["entropy"].to_numpy(), floor, rtol=1e-9, atol=1e-15)
    assert sig["entropy"].max() < TINY.constant_atol
    np.testing.assert_array_equal(run.scores["gini (contribution)"], 0.0)
    assert run.warned == {"contribution": True, "coefficient": False}


def test_coefficient_ranking_is_informative(run):
    assert (run.scores["gini (coefficient)"] > 0).any()
    assert (run.scores["entropy (coefficient)"] > 1e-3).any()
    assert np.ptp(run.scores["risk (coefficient)"]) > 0.1


def test_coefficient_top_set_by_hand(run):
    j, k = 7, TINY.k
    alpha = run.fidelity.probe.coefficients(run.Phi_test[j])
    top = np.argsort(-np.abs(alpha), kind="stable")[:k]
    np.testing.assert_array_equal(top_k_cases(alpha, k), top)
    mass = np.abs(alpha[top])
    labels = run.y_train[top]
    A, eps = run.R_train.shape[1], 1e-12
    pi = (np.bincount(labels, weights=mass, minlength=A) + eps / A) / (mass.sum() + eps)
    q = np.bincount(labels, minlength=A) / k
    H, D = -(pi * np.log(pi)).sum(), 1 - (q**2).sum()
    assert run.scores["entropy (coefficient)"][j] == pytest.approx(H, rel=1e-12, abs=1e-15)
    assert run.scores["gini (coefficient)"][j] == pytest.approx(D, rel=1e-12, abs=1e-15)
    assert run.scores["risk (coefficient)"][j] == pytest.approx(H + TINY.gamma * D, rel=1e-12)


def test_run_definitions(run):
    Q = run.network.predict(run.X_test)
    np.testing.assert_array_equal(run.decision, np.argmax(Q, axis=1))
    np.testing.assert_array_equal(run.wrong, run.decision != run.y_test)
    top2 = np.sort(Q, axis=1)[:, -2:]
    np.testing.assert_allclose(run.scores["margin"], -(top2[:, 1] - top2[:, 0]))
    np.testing.assert_allclose(
        run.scores["leverage"], (run.fidelity.probe.coefficients(run.Phi_test) ** 2).sum(1),
        rtol=1e-8,
    )
    np.testing.assert_allclose(run.X_train.mean(axis=0), 0.0, atol=1e-12)
    assert run.train_idx.size == TINY.n_train


# ---------------------------------------------------------------------------
# the table, its summary and the figure
# ---------------------------------------------------------------------------


def test_audit_table(audit):
    assert len(audit) == 2 * len(clf.SCORES)
    assert list(audit["score"][: len(clf.SCORES)]) == [s for s, _, _ in clf.SCORES]
    con = audit[audit["rank_by"] == "contribution"]
    assert con["auc"].isna().all() and con["warned"].all()
    assert (con["max_gini"] == 0).all() and (con["max_abs_entropy"] < 1e-9).all()
    assert (audit.loc[audit["score"] == "gini (contribution)", "auc_raw"] == 0.5).all()
    assert con["note"].str.contains("exactly 0.5").all()
    rest = audit[audit["rank_by"] != "contribution"]
    assert rest["auc"].between(0, 1).all() and not rest["warned"].any()
    assert (audit["n_wrong"] > 0).all()
    np.testing.assert_allclose(audit["error_rate"], audit["n_wrong"] / audit["n_test"])


def test_audit_is_deterministic(digits, audit):
    X, y = digits
    again = clf.classifier_audit(X, y, seeds=(0, 1), config=TINY)
    pd.testing.assert_frame_equal(audit, again)


def test_auc_undefined_cases():
    wrong = np.array([True, False, False, True])
    auc, raw, note = clf._auc(np.full(4, 0.3), wrong, 1e-9)
    assert np.isnan(auc) and raw == 0.5 and "constant" in note
    auc, raw, note = clf._auc(np.arange(4.0), np.zeros(4, bool), 1e-9)
    assert np.isnan(auc) and np.isnan(raw) and "no test decision" in note
    auc, raw, note = clf._auc(np.array([1.0, 0, 0, 1]), wrong, 1e-9)
    assert auc == raw == 1.0 and note == ""


def test_summary(audit):
    s = clf.summarize_classifier(audit)
    assert list(s.index) == [name for name, _, _ in clf.SCORES]
    assert s.loc["risk (contribution)", "n_defined"] == 0
    assert np.isnan(s.loc["risk (contribution)", "auc_mean"])
    assert s.loc["gini (contribution)", "auc_raw_mean"] == 0.5
    m = audit.loc[audit["score"] == "margin", "auc"].mean()
    assert s.loc["margin", "auc_mean"] == pytest.approx(m)
    assert np.isfinite(s.loc["margin", "auc_ci"])
    with pytest.raises(InputError):
        clf.summarize_classifier(pd.DataFrame({"x": [1]}))


def test_plot(audit):
    from cbdt.book.plots import plot_classifier_audit

    fig = plot_classifier_audit(clf.summarize_classifier(audit))
    ax = fig.axes[0]
    assert any(ln.get_linestyle() == "--" and set(ln.get_ydata()) == {0.5} for ln in ax.lines)
    assert len(ax.get_xticks()) == len(clf.SCORES)
    matplotlib.pyplot.close(fig)


# ---------------------------------------------------------------------------
# epoch selection on the training part
# ---------------------------------------------------------------------------


def test_checkpoint_equals_shorter_run(digits):
    X, y = digits
    R = clf.one_hot(y[:100])
    long = CaseNetwork(hidden=(8,), epochs=10, n_checkpoints=2, seed=1).fit(X[:100], R)
    short = CaseNetwork(hidden=(8,), epochs=5, seed=1).fit(X[:100], R)
    np.testing.assert_array_equal(long.predict(X[100:150], checkpoint=0),
                                  short.predict(X[100:150]))


def test_select_epochs(digits):
    X, y = digits
    sel = clf.select_epochs(X, y, seeds=(0, 1), config=TINY, step=5, max_epochs=15)
    assert list(sel["epochs"].unique()) == [5, 10, 15]
    assert sel[["val_mse", "val_error", "train_mse"]].notna().all().all()
    # each seed's argmin of val_mse (ties: fewer epochs), then the lower median over seeds
    per_seed = sorted(
        int(g.sort_values("epochs").epochs.iloc[int(np.argmin(g.sort_values("epochs").val_mse))])
        for _, g in sel.groupby("seed")
    )
    assert clf.best_epochs(sel) == per_seed[(len(per_seed) - 1) // 2]
    assert (sel["ulp_spread"] >= 0).all() and (sel["ulp_spread"] < 1).all()
    toy = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "epochs": [5, 10] * 3,
                        "val_mse": [1, 1, 2, 1, 0, 1]})
    assert clf.best_epochs(toy, max_spread=None) == 5  # choices 5 (tie -> fewer), 10, 5
    with pytest.raises(InputError, match="ulp_spread"):
        clf.best_epochs(toy)
    with pytest.raises(InputError, match="multiple"):
        clf.select_epochs(X, y, config=TINY, step=5, max_epochs=12)


def test_best_epochs_stops_at_the_reproducibility_horizon():
    # seed 1 would choose 30 epochs, but at 30 seed 0's twin networks part (spread 1e-3):
    # every candidate from the first one that parts on some seed is out, on every seed
    toy = pd.DataFrame({
        "seed": [0, 0, 0, 1, 1, 1, 2, 2, 2],
        "epochs": [10, 20, 30] * 3,
        "val_mse": [3, 2, 1, 3, 2, 1, 1, 2, 3],
        "ulp_spread": [1e-12, 1e-9, 1e-3, 1e-12, 1e-10, 1e-8, 1e-12, 1e-11, 1e-10],
    })
    assert clf.best_epochs(toy, max_spread=None) == 30  # choices 30, 30, 10
    assert clf.best_epochs(toy) == 20  # choices 20, 20, 10
    assert clf.best_epochs(toy, max_spread=1e-2) == 30
    # a spread that exceeds the bound and then falls back below it does not reopen the door
    back = toy.assign(ulp_spread=[1e-12, 1e-3, 1e-12] * 3)
    assert clf.best_epochs(back) == 10
    with pytest.raises(InputError, match="reproducible"):
        clf.best_epochs(toy.assign(ulp_spread=1.0))
