"""Audit signals (eq. 15-20) and evaluation metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import cbdt
from cbdt import InputError
from cbdt.audit import influence_distribution, top_action_distribution, top_k_cases
from cbdt.metrics import mean_ci, paired_test, pearson, roc_auc, topk_action_consistency


@given(st.integers(0, 10_000), st.integers(1, 5), st.integers(1, 30))
def test_entropy_and_gini_bounds(seed, A, k):
    rng = np.random.default_rng(seed)
    n = 30
    psi = rng.normal(size=(8, n)) * rng.integers(0, 2, size=(8, n))  # many exact zeros too
    acts = rng.integers(0, A, size=n)
    pi = influence_distribution(psi, acts, A, k=k)
    assert np.allclose(pi.sum(1), 1.0) and (pi > 0).all()
    H = cbdt.influence_entropy(psi, acts, A, k=k)
    assert (H >= -1e-12).all() and (H <= np.log(A) + 1e-12).all()
    D = cbdt.gini_disagreement(psi, acts, A, k=k)
    assert (D >= -1e-12).all() and (D <= 1 - 1 / A + 1e-12).all()
    risk = cbdt.risk_score(psi, acts, A, gamma=0.5, k=k)
    assert np.allclose(risk, H + 0.5 * D)


def test_hand_computed_signals():
    psi = np.array([0.5, -0.3, 0.1, 0.0, -0.05])
    acts = np.array([0, 1, 0, 2, 2])
    # top-3 by |psi|: cases 0, 1, 2 with masses 0.5, 0.3, 0.1
    assert list(top_k_cases(psi, 3)) == [0, 1, 2]
    eps = 1e-12
    pi = influence_distribution(psi, acts, 3, k=3, eps=eps)
    expect = (np.array([0.6, 0.3, 0.0]) + eps / 3) / (0.9 + eps)
    assert np.allclose(pi, expect, rtol=0, atol=1e-15)
    H = cbdt.influence_entropy(psi, acts, 3, k=3, eps=eps)
    assert np.isclose(H, -(expect * np.log(expect)).sum())
    q = top_action_distribution(psi, acts, 3, k=3)
    assert np.allclose(q, [2 / 3, 1 / 3, 0])
    D = cbdt.gini_disagreement(psi, acts, 3, k=3)
    assert np.isclose(D, 1 - (4 / 9 + 1 / 9))
    assert np.isclose(cbdt.risk_score(psi, acts, 3, k=3), H + D)


def test_zero_mass_gives_uniform_distribution():
    pi = influence_distribution(np.zeros(6), np.array([0, 1, 2, 0, 1, 2]), 3, k=4)
    assert np.allclose(pi, 1 / 3)
    assert np.isclose(cbdt.influence_entropy(np.zeros(6), np.arange(6) % 3, 3, k=4), np.log(3))


def test_gini_reaches_its_maximum_when_k_is_a_multiple_of_A():
    psi = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.5])
    acts = np.array([0, 1, 2, 0, 1, 2, 0])
    assert np.isclose(cbdt.gini_disagreement(psi, acts, 3, k=6), 1 - 1 / 3)
    assert np.isclose(cbdt.gini_disagreement(psi, np.zeros(7, int), 3, k=6), 0.0)


def test_case_optimal_actions_and_audit_signals():
    rng = np.random.default_rng(4)
    Phi, R = rng.normal(size=(100, 5)), rng.normal(size=(100, 3))
    ci = cbdt.CaseInfluence().fit(Phi, R)
    Q = rng.normal(size=(13, 5))
    a_star = cbdt.case_optimal_actions(R)
    assert np.array_equal(a_star, R.argmax(1))
    df = cbdt.audit_signals(ci, Q, batch_size=4)
    sel = ci.scores(Q).argmax(1)
    assert np.array_equal(df["action"], sel)
    psi = ci.contributions(Q, sel)
    assert np.allclose(df["entropy"], cbdt.influence_entropy(psi, a_star, 3))
    assert np.allclose(df["gini"], cbdt.gini_disagreement(psi, a_star, 3))
    assert np.allclose(df["risk"], df["entropy"] + df["gini"])
    s = np.sort(ci.scores(Q), 1)
    assert np.allclose(df["margin"], s[:, -1] - s[:, -2])


def test_audit_errors():
    with pytest.raises(InputError, match="length n = 3"):
        cbdt.influence_entropy(np.ones(3), np.array([0, 1]), 2)
    with pytest.raises(InputError, match="must lie in 0..1"):
        cbdt.gini_disagreement(np.ones(3), np.array([0, 1, 2]), 2)
    with pytest.raises(InputError, match="k = 4 exceeds"):
        cbdt.influence_entropy(np.ones(3), np.array([0, 1, 0]), 2, k=4)
    with pytest.raises(InputError, match="eps must be finite and >= 0"):
        cbdt.influence_entropy(np.ones(3), np.array([0, 1, 0]), 2, k=2, eps=-1.0)


@given(st.integers(0, 10_000), st.integers(2, 5))
def test_eps_zero_is_the_limit_of_eq16(seed, A):
    rng = np.random.default_rng(seed)
    psi = rng.normal(size=(6, 40)) * rng.integers(0, 2, size=(6, 40))
    psi[0] = 0.0  # zero top-k mass: the limit is the uniform distribution
    acts = rng.integers(0, A, size=40)
    lim = influence_distribution(psi, acts, A, k=10, eps=0.0)
    near = influence_distribution(psi, acts, A, k=10, eps=1e-13)
    assert np.allclose(lim, near, atol=1e-9) and np.allclose(lim.sum(1), 1.0)
    assert np.allclose(lim[0], 1.0 / A)
    H = cbdt.influence_entropy(psi, acts, A, k=10, eps=0.0)
    assert np.allclose(H, cbdt.influence_entropy(psi, acts, A, k=10, eps=1e-13), atol=1e-8)
    # all top-k cases favour one action: exactly 0 in the limit, a positive floor with eps > 0
    same = np.zeros(40, dtype=int)
    assert cbdt.influence_entropy(psi[1], same, A, k=10, eps=0.0) == 0.0
    assert cbdt.influence_entropy(psi[1], same, A, k=10, eps=1e-12) > 0.0


# ---------------------------------------------------------------- metrics
def test_mean_ci_matches_scipy():
    v = np.array([0.9, 0.95, 0.92, 0.97, 0.91])
    m, h = mean_ci(v)
    lo, hi = stats.t.interval(0.95, 4, loc=v.mean(), scale=stats.sem(v))
    assert np.isclose(m, v.mean()) and np.isclose(h, (hi - lo) / 2)
    with pytest.raises(InputError, match="at least 2"):
        mean_ci([1.0])


@given(st.integers(0, 1000))
def test_pearson_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=20), rng.normal(size=20)
    assert np.isclose(pearson(x, y), np.corrcoef(x, y)[0, 1])
    assert np.isclose(pearson(x, 3 * x + 1), 1.0)


def test_pearson_errors():
    with pytest.raises(InputError, match="constant"):
        pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match="same length"):
        pearson([1.0, 2.0], [1.0, 2.0, 3.0])


def test_topk_consistency_known_counts():
    w = np.array([[5.0, -4.0, 3.0, 0.1, 0.2], [0.0, 0.0, 0.0, 2.0, -3.0]])
    acts = np.array([0, 1, 0, 2, 2])
    share = topk_action_consistency(w, acts, np.array([0, 2]), k=3)
    assert np.allclose(share, [2 / 3, 2 / 3])
    assert topk_action_consistency(w[0], acts, 0, k=5) == pytest.approx(2 / 5)


@given(st.integers(0, 1000))
def test_roc_auc_equals_pairwise_probability(seed):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 5, size=25).astype(float)  # many ties
    y = np.r_[0, 1, rng.integers(0, 2, size=23)]
    pos, neg = s[y == 1], s[y == 0]
    brute = ((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (
        len(pos) * len(neg)
    )
    assert np.isclose(roc_auc(s, y), brute)
    with pytest.raises(InputError, match="both classes"):
        roc_auc([0.1, 0.2], [1, 1])


def test_paired_test():
    a = np.array([0.8, 0.82, 0.85, 0.81, 0.9])
    b = a - np.array([0.05, 0.04, 0.06, 0.05, 0.07])
    res = paired_test(a, b)
    assert res.wins == 5 and res.n == 5
    assert np.isclose(res.mean_diff, 0.054)
    assert np.isclose(res.t_pvalue, stats.ttest_rel(a, b).pvalue)
    assert np.isclose(res.wilcoxon_pvalue, 0.0625)  # exact, n = 5, all positive
    assert paired_test(a, a).wilcoxon_pvalue == 1.0
