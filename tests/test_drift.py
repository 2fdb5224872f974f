"""The drift grid of App. C.4 (cbdt.book.experiments.drift) and the audit options it relies on."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import cbdt
from cbdt import DegenerateAuditWarning, InputError
from cbdt.book import claims
from cbdt.book.experiments import drift
from cbdt.book.experiments import synthetic as syn
from cbdt.metrics import roc_auc

SMALL = syn.SyntheticConfig(n_train=150, n_test=40, hidden=(16, 16), epochs=120, n_checkpoints=2)
CFG = drift.DriftConfig(synthetic=SMALL, n_queries=300)


# ---------------------------------------------------------------- shifts
@pytest.fixture(scope="module")
def base():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(20_000, 2))
    return X, X.mean(axis=0), X.std(axis=0)


@pytest.mark.parametrize("shift", drift.SHIFTS + drift.ALTERNATIVE_SHIFTS)
def test_level_zero_leaves_inputs_unchanged(base, shift):
    X, mu, sd = base
    out = drift.shift_inputs(X, shift, 0.0, mu, sd)
    assert np.array_equal(out, X) and out is not X


@pytest.mark.parametrize("level", [0.5, 2.0, 4.0])
def test_shift_moments_follow_their_formulas(base, level):
    X, mu, sd = base
    m0, s0 = X.mean(axis=0), X.std(axis=0)
    # mean: every coordinate moves by L sd / sqrt(p), spread unchanged
    Y = drift.shift_inputs(X, "mean", level, mu, sd)
    assert np.allclose(Y.mean(axis=0) - m0, level * sd / np.sqrt(2), rtol=0, atol=1e-12)
    assert np.allclose(Y.std(axis=0), s0, rtol=1e-12)
    assert np.isclose(np.linalg.norm((Y.mean(axis=0) - m0) / sd), level)
    # variance: mean kept (training mean = sample mean here), sd grows by L sd
    Y = drift.shift_inputs(X, "variance", level, mu, sd)
    assert np.allclose(Y.mean(axis=0), m0, atol=1e-12)
    assert np.allclose(Y.std(axis=0) - s0, level * sd, rtol=1e-12)
    # covariate: only the first coordinate's spread grows
    Y = drift.shift_inputs(X, "covariate", level, mu, sd)
    assert np.isclose(Y[:, 0].std() - s0[0], level * sd[0], rtol=1e-12)
    assert np.array_equal(Y[:, 1], X[:, 1]) and np.isclose(Y[:, 0].mean(), m0[0])
    # alternatives
    Y = drift.shift_inputs(X, "mean_axis", level, mu, sd)
    assert np.isclose(Y[:, 0].mean() - m0[0], level * sd[0]) and np.array_equal(Y[:, 1], X[:, 1])
    Y = drift.shift_inputs(X, "covariate_shear", level, mu, sd)
    r = np.corrcoef(Y[:, 0], Y[:, 1])[0, 1]
    r0 = np.corrcoef(X[:, 0], X[:, 1])[0, 1]
    assert abs(r - level / np.sqrt(1 + level**2)) < 3 * abs(r0) + 0.02


def test_shift_errors(base):
    X, mu, sd = base
    with pytest.raises(InputError, match="unknown shift"):
        drift.shift_inputs(X, "rotation", 1.0, mu, sd)
    with pytest.raises(InputError, match="level must be"):
        drift.shift_inputs(X, "mean", -1.0, mu, sd)
    with pytest.raises(InputError, match="one entry per input column"):
        drift.shift_inputs(X, "mean", 1.0, mu[:1], sd)
    with pytest.raises(InputError, match="scale must be finite and > 0"):
        drift.shift_inputs(X, "mean", 1.0, mu, np.zeros(2))
    with pytest.raises(InputError, match="NaN or inf"):
        drift.shift_inputs(np.full((2, 2), np.nan), "mean", 1.0, mu, sd)


# ---------------------------------------------------------------- AUC
@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 60), st.booleans())
def test_roc_auc_equals_mann_whitney(seed, n, ties):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 5, size=n).astype(float) if ties else rng.normal(size=n)
    y = rng.integers(0, 2, size=n).astype(bool)
    y[0], y[1] = True, False
    u = stats.mannwhitneyu(s[y], s[~y], alternative="two-sided").statistic
    assert np.isclose(roc_auc(s, y), u / (y.sum() * (~y).sum()), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- audit options
def _fitted(seed=0, n=200, H=6, A=3):
    rng = np.random.default_rng(seed)
    Phi, R = rng.normal(size=(n, H)), rng.normal(size=(n, A))
    return cbdt.CaseInfluence().fit(Phi, R), rng.normal(size=(40, H))


def test_leverage_is_squared_coefficient_norm():
    ci, Q = _fitted()
    alpha = ci.coefficients(Q)
    assert np.allclose(ci.leverage(Q), (alpha**2).sum(axis=1), rtol=1e-10, atol=0)
    G = ci.gram_
    assert np.allclose(ci.leverage(Q), np.einsum("mh,mh->m", Q, np.linalg.solve(G, Q.T).T))
    rng = np.random.default_rng(1)
    Phi, R = rng.normal(size=(50, 4)), rng.normal(size=(50, 2))
    for ridge, intercept in [(0.5, False), (0.1, True)]:
        ci = cbdt.CaseInfluence(ridge=ridge, intercept=intercept).fit(Phi, R)
        q = rng.normal(size=(7, 4))
        assert np.allclose(ci.leverage(q), (ci.coefficients(q) ** 2).sum(axis=1), rtol=1e-10)
    assert isinstance(ci.leverage(q[0]), float)


def test_audit_signals_action_and_rank_by():
    ci, Q = _fitted()
    acts = np.arange(40) % 3
    df = cbdt.audit_signals(ci, Q, action=acts, k=7)
    assert np.array_equal(df["action"], acts)
    assert np.allclose(df["score"], ci.scores(Q)[np.arange(40), acts])
    a_star = cbdt.case_optimal_actions(ci.returns_)
    psi = ci.contributions(Q, acts)
    assert np.allclose(df["entropy"], cbdt.influence_entropy(psi, a_star, 3, k=7), atol=1e-14)
    # rank_by="coefficient": the same signals computed on alpha
    dc = cbdt.audit_signals(ci, Q, action=acts, k=7, rank_by="coefficient")
    alpha = ci.coefficients(Q)
    assert np.allclose(dc["entropy"], cbdt.influence_entropy(alpha, a_star, 3, k=7), atol=1e-14)
    assert np.allclose(dc["gini"], cbdt.gini_disagreement(alpha, a_star, 3, k=7))
    # the top set by |alpha| is argsort of |alpha| by hand (query 0)
    top = np.argsort(-np.abs(alpha[0]), kind="stable")[:7]
    q = np.bincount(a_star[top], minlength=3) / 7
    assert np.isclose(dc["gini"][0], 1 - (q**2).sum())
    with pytest.raises(InputError, match="rank_by must be"):
        cbdt.audit_signals(ci, Q, rank_by="abs")
    with pytest.raises(InputError, match="out of range"):
        cbdt.audit_signals(ci, Q, action=5)


def test_audit_signals_blocks_do_not_change_results():
    ci, Q = _fitted()
    a = cbdt.audit_signals(ci, Q)
    b = cbdt.audit_signals(ci, Q, batch_size=3)
    pd.testing.assert_frame_equal(a, b)
    ci.topk_block_entries = 450  # forces blocks of 2 queries for n = 200
    pd.testing.assert_frame_equal(a, cbdt.audit_signals(ci, Q))


def test_one_hot_returns_warn_and_make_entropy_and_gini_zero():
    rng = np.random.default_rng(3)
    n, A = 300, 4
    Phi = rng.normal(size=(n, 8))
    y = rng.integers(0, A, size=n)
    R = np.eye(A)[y]
    assert "one-hot" in cbdt.label_like_returns(R)
    ci = cbdt.CaseInfluence().fit(Phi, R)
    Q = rng.normal(size=(25, 8))
    with pytest.warns(DegenerateAuditWarning, match="one-hot labels"):
        df = cbdt.audit_signals(ci, Q, k=10)
    assert np.all(df["gini"] == 0.0) and np.all(np.abs(df["entropy"]) < 1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateAuditWarning)
        dc = cbdt.audit_signals(ci, Q, k=10, rank_by="coefficient")
    assert (dc["gini"] > 0).any() and (dc["entropy"] > 0.01).any()
    # classical CBDT cases (one positive result at the case's action) are label-like too
    assert "label-like" in cbdt.label_like_returns(R * rng.uniform(0.5, 1.5, size=(n, 1)))
    # a single action warns as well; ordinary returns do not
    ci1 = cbdt.CaseInfluence().fit(Phi, rng.normal(size=n))
    with pytest.warns(DegenerateAuditWarning, match="single action"):
        cbdt.audit_signals(ci1, Q)
    assert cbdt.label_like_returns(rng.normal(size=(n, 3))) is None


# ---------------------------------------------------------------- the grid
@pytest.fixture(scope="module")
def grid():
    return drift.drift_grid(seeds=(0, 1), levels=(0.0, 2.0), config=CFG)


def test_grid_shape_and_columns(grid):
    assert list(grid.columns[:8]) == [
        "shift", "level", "seed", "score", "auc", "error_rate", "n_wrong", "n_queries"
    ]
    assert len(grid) == 2 * 2 * 3 * len(drift.SCORES)
    assert set(grid["score"]) == set(drift.SCORES)
    assert (grid["n_queries"] == 300).all()
    assert np.allclose(grid["error_rate"], grid["n_wrong"] / grid["n_queries"])
    ok = grid["auc"].dropna()
    assert ((ok >= 0) & (ok <= 1)).all()
    # level 0 is the same draw for every shift family
    z = grid[grid["level"] == 0].pivot_table(index=["seed", "score"], columns="shift", values="auc")
    assert np.allclose(z["mean"], z["variance"], equal_nan=True)
    assert np.allclose(z["mean"], z["covariate"], equal_nan=True)


def test_grid_is_deterministic(grid):
    syn.clear_cache()  # retrain the networks from scratch
    again = drift.drift_grid(seeds=(0, 1), levels=(0.0, 2.0), config=CFG)
    pd.testing.assert_frame_equal(grid, again)


def test_grid_auc_matches_a_direct_computation():
    cfg = CFG
    df = drift.drift_grid(seeds=(0,), levels=(1.0,), shifts=("variance",), config=cfg)
    run = syn.synthetic_run(0, SMALL)
    d = run.data
    rng = np.random.default_rng([0, 2024])
    X0 = rng.uniform(d.low, d.high, size=(cfg.n_queries, 2))
    X = drift.shift_inputs(X0, "variance", 1.0, d.X_train.mean(0), d.X_train.std(0))
    S = run.network.predict(X)
    wrong = S.argmax(1) != d.decide(X)
    s = np.sort(S, 1)
    auc_margin = roc_auc(-(s[:, -1] - s[:, -2]), wrong)
    got = df.set_index("score")["auc"]
    assert np.isclose(got["margin"], auc_margin)
    Phi = run.network.represent(X)
    sig = cbdt.audit_signals(run.fidelity.probe, Phi, action=S.argmax(1), eps=cfg.eps)
    assert np.isclose(got["risk"], roc_auc(sig["risk"], wrong))
    assert np.isclose(got["leverage"], roc_auc(run.fidelity.probe.leverage(Phi), wrong))
    assert df["n_wrong"].iloc[0] == wrong.sum()


def test_summaries_and_claims(grid):
    sm = drift.summarize_grid(grid)
    assert len(sm) == 2 * 3 * len(drift.SCORES)
    pv = drift.paired_vs_margin(grid)
    assert set(pv["score"]) == set(drift.SCORES) - {"margin"}
    wide = grid.pivot_table(index=["shift", "level", "seed"], columns="score", values="auc")
    r = pv[(pv["shift"] == "covariate") & (pv["level"] == 2.0) & (pv["score"] == "risk")].iloc[0]
    w = wide.loc[("covariate", 2.0)]
    assert np.isclose(r["mean_diff"], (w["risk"] - w["margin"]).mean())
    cc = claims.ch09_drift.claim_check(pv)
    assert set(cc["claim"]) == {"covariate", "variance"}
    assert (cc["significant"] <= cc["favourable"]).all()
    sentences = claims.ch09_drift.claim_sentences(cc)
    assert len(sentences) == 2 and all("risk score" in s for s in sentences)


def test_claim_check_on_a_constructed_table():
    rows = []
    for level in (2.0, 2.5):
        rows.append(dict(shift="covariate", level=level, score="risk", mean_diff=0.1, ci=0.01,
                         t_pvalue=0.01, wilcoxon_pvalue=0.0625, wins=5, n_seeds=5))
        rows.append(dict(shift="variance", level=level, score="risk", mean_diff=0.1, ci=0.01,
                         t_pvalue=0.01, wilcoxon_pvalue=0.0625, wins=5, n_seeds=5))
    cc = claims.ch09_drift.claim_check(pd.DataFrame(rows)).set_index("claim")
    assert cc.loc["covariate", "holds"] and cc.loc["covariate", "seed_wins"] == 10
    assert not cc.loc["variance", "holds"] and cc.loc["variance", "favourable"] == 0


def test_config_errors():
    with pytest.raises(InputError, match="wrong must be"):
        drift.DriftConfig(wrong="label")
    with pytest.raises(InputError, match="unknown shift definition"):
        drift.DriftConfig(shift_names={"mean": "twist"})
    with pytest.raises(InputError, match="scores must name"):
        drift.drift_grid(seeds=(0,), scores=("auc",), config=CFG)
    with pytest.raises(InputError, match="levels must be"):
        drift.drift_grid(seeds=(0,), levels=(-1.0,), config=CFG)
