"""Tests of the synthetic CBDT generator and the synthetic experiments (Sec. 5.2-5.3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cbdt.baselines import METHODS
from cbdt.book.experiments import synthetic as ex
from cbdt.datasets.synthetic import SyntheticCBDT, default_bandwidth, make_synthetic_cbdt
from cbdt.decision import GaussianSimilarity, Memory, decide, support
from cbdt.exceptions import InputError
from cbdt.metrics import pearson, topk_action_consistency

# a small, fast configuration for the experiment functions (the book uses the defaults)
SMALL = ex.SyntheticConfig(n_train=150, n_test=40, hidden=(16, 16), epochs=120, n_checkpoints=4)
SEEDS2 = (0, 1)


# ---------------------------------------------------------------- generator
@pytest.fixture(scope="module")
def data():
    return make_synthetic_cbdt(0)


def test_shapes_and_types(data):
    assert isinstance(data, SyntheticCBDT)
    assert data.X_train.shape == (500, 2) and data.X_test.shape == (200, 2)
    assert data.R_train.shape == data.U_train.shape == (500, 3)
    assert data.U_test.shape == (200, 3)
    assert data.a_train.shape == (500,) and data.a_test.shape == (200,)
    assert isinstance(data.memory, Memory) and isinstance(data.similarity, GaussianSimilarity)
    assert data.memory.n_cases == 20 and data.memory.n_actions == 3 and data.memory.dim == 2
    assert data.n_actions == 3
    for X in (data.X_train, data.X_test, data.memory.problems):
        assert X.min() >= -1 and X.max() <= 1


def test_memory_is_classical_and_balanced(data):
    U = data.memory.supports
    assert np.all((U > 0).sum(1) == 1)  # each case supports only its own action
    assert sorted(np.bincount(U.argmax(1), minlength=3)) == [6, 7, 7]
    assert U.max() <= 1.5 and U[U > 0].min() >= 0.5
    assert data.similarity.bandwidth == pytest.approx(np.sqrt(4 / 20))
    assert default_bandwidth() == pytest.approx(np.sqrt(4 / 20))


def test_decide_on_supports_gives_stored_actions(data):
    for X, U, a in (
        (data.X_train, data.U_train, data.a_train),
        (data.X_test, data.U_test, data.a_test),
    ):
        np.testing.assert_allclose(support(X, data.memory, data.similarity), U)
        np.testing.assert_array_equal(decide(X, data.memory, data.similarity), a)
        np.testing.assert_array_equal(np.argmax(U, 1), a)
        np.testing.assert_array_equal(data.decide(X), a)
    np.testing.assert_allclose(data.support(data.X_test[:3]), data.U_test[:3])


def test_noise_level(data):
    eps = data.R_train - data.U_train
    assert data.noise_sd == pytest.approx(0.1 * data.U_train.std())
    assert eps.std() == pytest.approx(data.noise_sd, rel=0.1)
    assert abs(eps.mean()) < 3 * data.noise_sd / np.sqrt(eps.size)
    d0 = make_synthetic_cbdt(0, noise=0.0)
    np.testing.assert_array_equal(d0.R_train, d0.U_train)
    # all actions are optimal somewhere
    assert set(np.unique(data.a_test)) == {0, 1, 2}
    # noise flips a few case-optimal actions, near boundaries only
    flips = np.mean(data.case_actions != data.a_train)
    assert 0 < flips < 0.2


def test_seeded(data):
    again = make_synthetic_cbdt(0)
    for f in ("X_train", "R_train", "X_test", "U_test"):
        np.testing.assert_array_equal(getattr(data, f), getattr(again, f))
    other = make_synthetic_cbdt(1)
    assert not np.allclose(other.memory.problems, data.memory.problems)


def test_true_similarity(data):
    S = data.true_similarity(data.X_test[:4])
    assert S.shape == (4, 500)
    h = data.similarity.bandwidth
    d2 = ((data.X_test[1] - data.X_train[7]) ** 2).sum()
    assert S[1, 7] == pytest.approx(np.exp(-d2 / (2 * h * h)))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"seed": -1},
        {"seed": 1.5},
        {"n_train": 1},
        {"n_memory": 2},
        {"low": 1.0, "high": -1.0},
        {"noise": -0.1},
        {"bandwidth": 0.0},
    ],
)
def test_generator_bad_input(kwargs):
    with pytest.raises(InputError):
        make_synthetic_cbdt(**kwargs)


# ---------------------------------------------------------------- experiments
def test_rowwise_pearson_matches_metrics():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(2, 3, 4, 20))
    r = ex.rowwise_pearson(X, Y)
    assert r.shape == (3, 4)
    assert r[1, 2] == pytest.approx(pearson(X[1, 2], Y[1, 2]))
    X[0, 0] = 1.0
    assert np.isnan(ex.rowwise_pearson(X, Y)[0, 0])
    with pytest.raises(InputError):
        ex.rowwise_pearson(X, Y[:, :2])


def test_run_is_cached():
    a = ex.synthetic_run(0, SMALL)
    assert ex.synthetic_run(0, SMALL) is a
    assert a.ground_truth.shape == (3, 40, 150)
    S = a.data.true_similarity(a.data.X_test)
    np.testing.assert_allclose(a.ground_truth[2], S * a.data.R_train[:, 2])


def test_synthetic_recovery():
    df = ex.synthetic_recovery(SEEDS2, SMALL)
    assert list(df["seed"]) == list(SEEDS2)
    for c in ("agreement", "network_agreement", "rho_recon_a0", "support_corr_a2"):
        assert df[c].between(0, 1).all()
    assert (df["agreement"] > 0.7).all()
    assert (df["rho_recon_a1"] > 0.9).all()
    run = ex.synthetic_run(0, SMALL)
    expect = np.mean(np.argmax(run.fidelity.probe_scores, 1) == run.data.a_test)
    assert df.loc[0, "agreement"] == pytest.approx(expect)


def test_attribution_comparison_properties():
    df = ex.attribution_comparison(SEEDS2, config=SMALL)
    assert set(df["method"]) == {*METHODS, ex.GROUND_TRUTH}
    assert len(df) == 2 * 6
    assert df["top30"].between(0, 1).all() and df["pearson"].between(-1, 1).all()
    gt = df[df["method"] == ex.GROUND_TRUTH]
    np.testing.assert_allclose(gt["pearson"], 1.0)
    s = ex.summarize_comparison(df)
    for c in ("top30_mean", "top30_ci", "pearson_mean", "pearson_ci", "paper_top30"):
        assert c in s.columns
    assert s.loc["Ours (alpha)", "paper_top30"] == 0.941


def test_top30_definition_by_hand():
    """Top-30 of the exact coefficient = share of the 30 largest |alpha_i r_i(a*)| with a_i* = a*."""
    run = ex.synthetic_run(1, SMALL)
    df = ex.attribution_comparison([1], config=SMALL, methods=["Ours (alpha)"])
    psi = run.fidelity.probe.contributions(run.Phi_test, run.data.a_test)
    shares = []
    for j in range(psi.shape[0]):
        top = np.argsort(-np.abs(psi[j]), kind="stable")[:30]
        shares.append(np.mean(run.data.case_actions[top] == run.data.a_test[j]))
    assert df.loc[0, "top30"] == pytest.approx(np.mean(shares))
    assert df.loc[0, "top30"] == pytest.approx(
        np.mean(topk_action_consistency(psi, run.data.case_actions, run.data.a_test, 30))
    )


def test_if_with_return_residuals_equals_exact():
    """IF at a zero head is n * alpha_i r_i(a): same Top-30 and Pearson as the exact row."""
    df = ex.attribution_comparison(
        SEEDS2,
        config=SMALL,
        residuals="returns",
        methods=["Ours (alpha)", "Influence Functions"],
        include_ground_truth=False,
    )
    a = df[df["method"] == "Ours (alpha)"].reset_index(drop=True)
    b = df[df["method"] == "Influence Functions"].reset_index(drop=True)
    np.testing.assert_allclose(a["top30"], b["top30"])
    np.testing.assert_allclose(a["pearson"], b["pearson"], atol=1e-9)


def test_comparison_bad_input():
    with pytest.raises(InputError):
        ex.attribution_comparison(SEEDS2, config=SMALL, top_action="some")
    with pytest.raises(InputError):
        ex.attribution_comparison(SEEDS2, config=SMALL, pearson_kind="rank")
    with pytest.raises(InputError):
        ex.attribution_comparison(SEEDS2, config=SMALL, contribution="x")
    with pytest.raises(InputError):
        ex.attribution_comparison(SEEDS2, config=SMALL, k=10_000)
    with pytest.raises(InputError):
        ex.attribution_comparison([], config=SMALL)
    with pytest.raises(InputError):
        ex.attribution_comparison(SEEDS2, config=SMALL, methods=["LIME"])


def test_sensitivity_table():
    df = ex.attribution_sensitivity(SEEDS2, config=SMALL, ridge_multiples=(1e-2,))
    factors = set(df["factor"])
    assert factors == {
        "probe ridge",
        "Top-k action",
        "Pearson",
        "IF/Representer residuals",
        "baseline contribution",
        "representation",
    }
    for f in factors:
        sub = df[df["factor"] == f]
        assert sub["default"].any() and (~sub["default"]).any()
    # every default row equals the comparison's default numbers
    base = ex.summarize_comparison(
        ex.attribution_comparison(SEEDS2, config=SMALL), with_paper=False
    )
    d = df[(df["factor"] == "Pearson") & df["default"]].set_index("method")
    np.testing.assert_allclose(d["top30_mean"], base.loc[d.index, "top30_mean"])
    relu = df[(df["factor"] == "representation") & ~df["default"]]
    assert relu["variant"].iloc[0] == "relu"


def test_timing_table():
    df = ex.attribution_timing([0], n_queries=3, repeats=2, config=SMALL)
    assert set(df["method"]) == {*METHODS, "Ours (alpha), per-query solve"}
    five = df[df["method"].isin(METHODS)]
    assert five["relative_cost"].min() == pytest.approx(1.0)
    assert (df["scores_ms"] > 0).all() and (df["total_ms"] >= df["scores_ms"]).all()
    s = ex.summarize_timing(pd.concat([df, df.assign(seed=1)]))
    assert "paper_ms" in s.columns
    with pytest.raises(InputError):
        ex.attribution_timing([0], n_queries=0, config=SMALL)


def test_timing_runs_blas_on_one_thread(monkeypatch):
    # the live timing follows benchmarks/bench_attribution.py: every method with one BLAS thread
    from cbdt import _threads

    seen = []
    timed = ex.median_per_query

    def spy(fn, n_queries, repeats):
        seen.append(_threads.blas_threads())
        return timed(fn, n_queries, repeats)

    monkeypatch.setattr(ex, "median_per_query", spy)
    ex.attribution_timing([0], n_queries=2, repeats=1, config=SMALL)
    assert seen and set(seen) == {1}


def test_figure_helpers():
    reg = ex.decision_regions(0, resolution=15, config=SMALL)
    assert reg.cbdt.shape == reg.readout.shape == reg.network.shape == (15, 15)
    assert reg.support.shape == (15, 15, 3)
    np.testing.assert_array_equal(reg.cbdt, reg.support.argmax(-1))
    sr = ex.support_reconstruction(0, SMALL)
    assert len(sr) == 3 * 40
    assert {"true_support", "probe_score", "network_score"} <= set(sr.columns)
    q = ex.query_attributions(0, query=3, k=10, config=SMALL)
    assert len(q) == 150
    for name in (*METHODS, "ground_truth"):
        assert q[f"top_{name}"].sum() == 10
    assert q.attrs["action"] == q.attrs["cbdt_action"]
    with pytest.raises(InputError):
        ex.query_attributions(0, query=400, config=SMALL)
    with pytest.raises(InputError):
        ex.decision_regions(0, resolution=1, config=SMALL)
