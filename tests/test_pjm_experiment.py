"""Tests of the PJM bidding problem and audit (cbdt.datasets.pjm_bidding, cbdt.book.experiments.pjm).

The construction and every statistic are tested on a small synthetic load series; the tests
marked ``real`` read PJME through ``CBDT_DATA_DIR`` and are skipped without it.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist, pdist

from cbdt.book.experiments import pjm
from cbdt.datasets import pjm_bidding as pb
from cbdt.exceptions import InputError
from cbdt.metrics import pearson

N_TRAIN, N_TEST, WINDOW = 400, 120, 24

needs_data = pytest.mark.skipif(
    not os.environ.get("CBDT_DATA_DIR"),
    reason="real PJME data: set CBDT_DATA_DIR to the folder holding PJME_hourly.csv "
    "(CI uses ../shared/data)",
)


def synthetic_load(n: int = WINDOW + N_TRAIN + N_TEST, seed: int = 7) -> pd.Series:
    """A daily cycle plus a slow trend plus noise, hourly, in MW."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    mw = (
        30_000
        + 6_000 * np.sin(2 * np.pi * (t - 6) / 24)
        + 3_000 * np.sin(2 * np.pi * t / (24 * 9))
        + 800 * rng.standard_normal(n)
    )
    idx = pd.date_range("2017-01-01 01:00", periods=n, freq="h", name="Datetime")
    return pd.Series(mw, index=idx, name="load_mw")


@pytest.fixture(scope="module")
def load() -> pd.Series:
    return synthetic_load()


@pytest.fixture(scope="module")
def problem(load: pd.Series) -> pb.BiddingProblem:
    return pb.make_bidding_problem(load, n_train=N_TRAIN, n_test=N_TEST, window=WINDOW, seed=3)


@pytest.fixture(scope="module")
def run(problem: pb.BiddingProblem) -> pjm.PJMRun:
    cfg = pjm.PJMConfig(hidden=(16, 16), epochs=60, n_geometry=10, top=3)
    return pjm.build_run(problem, cfg, seed=0)


# ---------------------------------------------------------------------- construction
def test_shapes_and_names(problem: pb.BiddingProblem) -> None:
    d = WINDOW + 3
    assert problem.X_train.shape == (N_TRAIN, d)
    assert problem.X_test.shape == (N_TEST, d)
    assert problem.R_train.shape == (N_TRAIN, 3)
    assert problem.R_test.shape == (N_TEST, 3)
    assert len(problem.hours) == N_TRAIN + N_TEST
    assert problem.feature_names[0] == "load_lag_24"
    assert problem.feature_names[WINDOW - 1] == "load_lag_1"
    assert problem.feature_names[WINDOW:] == ("hour_sin", "hour_cos", "weekend")
    assert pb.ACTIONS == ("conservative", "moderate", "aggressive")


def test_chronological_split(load: pd.Series, problem: pb.BiddingProblem) -> None:
    tr, te = problem.times_train, problem.times_test
    assert tr.max() < te.min()
    assert (problem.hours["split"].iloc[:N_TRAIN] == "train").all()
    assert (problem.hours["split"].iloc[N_TRAIN:] == "test").all()
    assert te[-1] == load.index[-1]  # the span ends at the last hour of the series
    assert tr[0] == load.index[WINDOW]  # the window hours before the span feed the first state
    steps = np.diff(problem.hours.index.to_numpy())
    assert (steps == np.timedelta64(1, "h")).all()


def test_states_by_hand(load: pd.Series, problem: pb.BiddingProblem) -> None:
    mu = load.iloc[WINDOW : WINDOW + N_TRAIN].mean()
    sd = load.iloc[WINDOW : WINDOW + N_TRAIN].std(ddof=0)
    assert problem.load_mean == pytest.approx(mu)
    assert problem.load_sd == pytest.approx(sd)
    X = np.vstack([problem.X_train, problem.X_test])
    for row in (0, 5, N_TRAIN - 1, N_TRAIN, N_TRAIN + N_TEST - 1):
        pos = WINDOW + row  # position of the decision hour in the series
        lags = (load.to_numpy()[pos - WINDOW : pos] - mu) / sd
        np.testing.assert_allclose(X[row, :WINDOW], lags, rtol=0, atol=1e-12)
        t = load.index[pos]
        assert X[row, WINDOW] == pytest.approx(np.sin(2 * np.pi * t.hour / 24))
        assert X[row, WINDOW + 1] == pytest.approx(np.cos(2 * np.pi * t.hour / 24))
        assert X[row, WINDOW + 2] == float(t.day_of_week >= 5)
        assert problem.hours["prev_load_mw"].iloc[row] == load.iloc[pos - 1]
        assert problem.hours["load_mw"].iloc[row] == load.iloc[pos]


def test_no_look_ahead(load: pd.Series, problem: pb.BiddingProblem) -> None:
    """Changing the load of test hour j changes no state of an hour <= j, no training quantity."""
    j = N_TRAIN + 50  # a test decision hour
    bumped = load.copy()
    bumped.iloc[WINDOW + j :] += 5_000.0  # the load of hour j and everything after it
    other = pb.make_bidding_problem(bumped, n_train=N_TRAIN, n_test=N_TEST, window=WINDOW, seed=3)
    X, Xo = np.vstack([problem.X_train, problem.X_test]), np.vstack([other.X_train, other.X_test])
    np.testing.assert_array_equal(X[: j + 1], Xo[: j + 1])
    assert not np.array_equal(X[j + 1], Xo[j + 1])  # the next hour sees it (lag 1)
    # training statistics, offer prices and the training memory use training hours only
    assert other.load_mean == problem.load_mean and other.load_sd == problem.load_sd
    np.testing.assert_array_equal(other.offer_prices, problem.offer_prices)
    np.testing.assert_array_equal(other.R_train, problem.R_train)
    np.testing.assert_array_equal(other.R_test[: j - N_TRAIN], problem.R_test[: j - N_TRAIN])


def test_returns_hand_computed() -> None:
    m = pb.MarketModel()  # q = (100, 200, 400) MWh, kappa = 2 $/MWh, unit $10,000
    cost, offers = 20.0, np.array([20.0, 30.0, 40.0])
    prices = np.array([10.0, 25.0, 35.0, 50.0, 30.0])
    R = pb.strategy_returns(prices, cost, offers, m)
    expected = np.array(
        [
            [-0.02, -0.04, -0.08],  # nothing clears: standby -2 * q / 1e4
            [0.05, -0.04, -0.08],  # 100 * (25 - 20) / 1e4
            [0.15, 0.30, -0.08],  # 100 * 15, 200 * 15
            [0.30, 0.60, 1.20],  # everything clears
            [0.10, 0.20, -0.08],  # p = b_1 clears the moderate offer
        ]
    )
    np.testing.assert_allclose(R, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.argmax(R, axis=1), [0, 0, 1, 2, 1])


def test_returns_of_problem_rows(problem: pb.BiddingProblem) -> None:
    m = problem.market
    h = problem.hours
    for row in (0, 17, N_TRAIN + 3):
        p = h["price"].iloc[row]
        want = []
        for a in range(3):
            q = m.quantities[a]
            if p >= problem.offer_prices[a]:
                want.append(q * (p - problem.cost) / 1e4)
            else:
                want.append(-2.0 * q / 1e4)
        got = h[["r_conservative", "r_moderate", "r_aggressive"]].iloc[row].to_numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert h["a_star"].iloc[row] == int(np.argmax(want))


def test_prices_formula_convex_and_seeded(problem: pb.BiddingProblem) -> None:
    m = problem.market
    rng = np.random.default_rng(problem.seed)
    eps = rng.standard_normal(N_TRAIN + N_TEST)
    z = problem.hours["z"].to_numpy()
    want = m.base_price * np.exp(m.load_slope * z + m.noise_sd * eps - m.noise_sd**2 / 2)
    np.testing.assert_allclose(problem.hours["price"], want, rtol=1e-12)
    zz = np.linspace(-3, 3, 61)
    expected = pb.market_prices(zz, np.zeros_like(zz), pb.MarketModel(noise_sd=0.0))
    assert (np.diff(expected, 2) > 0).all()  # convex in load
    # offer prices are training-price quantiles
    ptr = problem.hours["price"].to_numpy()[:N_TRAIN]
    assert problem.cost == pytest.approx(np.quantile(ptr, 0.05))
    np.testing.assert_allclose(problem.offer_prices[1:], np.quantile(ptr, [1 / 3, 2 / 3]))
    assert problem.offer_prices[0] == problem.cost


def test_each_action_optimal_in_a_third_of_training_hours(problem: pb.BiddingProblem) -> None:
    shares = problem.optimal_shares()
    np.testing.assert_allclose(shares.loc["train"].to_numpy(), 1 / 3, atol=2 / N_TRAIN)
    assert (shares.loc["test"].to_numpy() > 0.1).all()


def test_determinism_and_seed(load: pd.Series, problem: pb.BiddingProblem) -> None:
    again = pb.make_bidding_problem(load, n_train=N_TRAIN, n_test=N_TEST, window=WINDOW, seed=3)
    np.testing.assert_array_equal(again.R_train, problem.R_train)
    np.testing.assert_array_equal(again.X_test, problem.X_test)
    pd.testing.assert_frame_equal(again.hours, problem.hours)
    other = pb.make_bidding_problem(load, n_train=N_TRAIN, n_test=N_TEST, window=WINDOW, seed=4)
    np.testing.assert_array_equal(other.X_train, problem.X_train)  # states are real data
    assert not np.array_equal(other.R_train, problem.R_train)  # prices are redrawn


def test_input_errors(load: pd.Series) -> None:
    with pytest.raises(InputError, match="hours"):
        pb.make_bidding_problem(load, n_train=10_000, n_test=10)
    gappy = load.drop(load.index[100])
    with pytest.raises(InputError, match="regular hourly grid"):
        pb.make_bidding_problem(gappy, n_train=N_TRAIN, n_test=N_TEST - 5)
    with pytest.raises(InputError, match="quantities"):
        pb.MarketModel(quantities=(200.0, 100.0, 400.0))
    with pytest.raises(InputError, match="cost_quantile"):
        pb.MarketModel(breakeven_quantiles=(0.7, 0.3))


# ---------------------------------------------------------------------- CBDT side
def test_cbdt_support_chunked_equals_eq1(problem: pb.BiddingProblem) -> None:
    h = 1.3
    U, mass = pjm.cbdt_support(problem.X_test, problem.X_train, problem.R_train, h, chunk=7)
    S = np.exp(-cdist(problem.X_test, problem.X_train, "sqeuclidean") / (2 * h * h))
    np.testing.assert_allclose(U, S @ problem.R_train, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mass, S.sum(axis=1), rtol=1e-10)


def test_median_heuristic_and_bandwidth_rule(problem: pb.BiddingProblem) -> None:
    X, R = problem.X_train, problem.R_train
    assert pjm.median_heuristic(X) == pytest.approx(np.median(pdist(X)))  # n < sample size
    choice = pjm.holdout_bandwidth(X, R, factors=(1.0, 0.5, 0.25), holdout=0.25, chunk=13)
    t = choice.table
    assert list(t["factor"]) == [1.0, 0.5, 0.25]
    assert choice.bandwidth == pytest.approx(t["bandwidth"][t["val_mse"].idxmin()])
    # the criterion by hand (float64) for one grid value
    n_mem = 300
    h = t["bandwidth"][1]
    S = np.exp(-cdist(X[n_mem:], X[:n_mem], "sqeuclidean") / (2 * h * h))
    Ubar = S @ R[:n_mem] / S.sum(axis=1, keepdims=True)
    assert t["val_mse"][1] == pytest.approx(((Ubar - R[n_mem:]) ** 2).mean(), rel=1e-4)
    with pytest.raises(InputError):
        pjm.holdout_bandwidth(X, R, holdout=1.5)


# ---------------------------------------------------------------------- statistics
def test_run_is_consistent(run: pjm.PJMRun) -> None:
    assert run.exactness < 1e-8  # sum_i alpha_i r_i(a) == probe score (Proposition 1)
    np.testing.assert_array_equal(
        run.nn_decision, np.argmax(run.network.predict(run.problem.X_test), axis=1)
    )
    np.testing.assert_array_equal(run.cbdt_decision, np.argmax(run.cbdt_average, axis=1))
    assert run.bandwidth.bandwidth in set(run.bandwidth.table["bandwidth"])


def test_agreement_and_alignment_definitions(run: pjm.PJMRun) -> None:
    ag = pjm.decision_agreement([run]).iloc[0]
    assert ag["n_agree"] == int((run.nn_decision == run.cbdt_decision).sum())
    assert ag["agreement"] == pytest.approx(ag["n_agree"] / N_TEST)
    xt = pjm.decision_crosstab([run]).to_numpy()
    assert xt.sum() == N_TEST and np.trace(xt) == ag["n_agree"]
    al = pjm.support_alignment([run])
    for a, name in enumerate(pb.ACTIONS):
        row = al[al["action"] == name].iloc[0]
        ubar = run.cbdt_support[:, a] / run.cbdt_mass
        assert row["rho_support"] == pytest.approx(pearson(run.probe_scores[:, a], ubar))
        assert row["rho_support_raw"] == pytest.approx(
            pearson(run.probe_scores[:, a], run.cbdt_support[:, a])
        )
        assert row["rho_recon"] == pytest.approx(
            pearson(run.probe_scores[:, a], run.network_scores[:, a])
        )


def test_disagreement_profile_and_bins(run: pjm.PJMRun) -> None:
    prof = pjm.disagreement_profile(run)
    srt = np.sort(run.cbdt_average, axis=1)
    np.testing.assert_allclose(prof["cbdt_margin"], srt[:, -1] - srt[:, -2])
    assert (prof["cbdt_margin"] >= 0).all()
    run2 = pjm.build_run(run.problem, run.config, seed=1)
    bins = pjm.disagreement_by_margin([run, run2], n_bins=4)
    assert len(bins) == 4
    assert bins["share of all disagreements_mean"].sum() == pytest.approx(1.0)


def test_transition_loads(problem: pb.BiddingProblem) -> None:
    L = pjm.transition_loads(problem)
    z = (L - problem.load_mean) / problem.load_sd
    m = problem.market
    np.testing.assert_allclose(m.base_price * np.exp(m.load_slope * z), problem.offer_prices[1:])


def test_geometry_definitions(run: pjm.PJMRun) -> None:
    q = pjm.geometry_queries(N_TEST, 10)
    assert q[0] == 0 and q[-1] == N_TEST - 1 and len(q) == 10
    g = pjm.signed_geometry(run)
    np.testing.assert_array_equal(g.queries, q)
    alpha = run.probe.coefficients(run.Phi_test[q])
    np.testing.assert_allclose(g.alpha, alpha)
    np.testing.assert_allclose(g.distance, cdist(run.Phi_test[q], run.Phi_train) / run.phi_scale)
    assert run.phi_scale == pytest.approx(np.median(pdist(run.Phi_train)))
    for j, qq in enumerate(q):
        c = g.cases[g.cases["query"] == qq]
        pos = c[c["group"] == "positive"].sort_values("rank")
        neg = c[c["group"] == "negative"].sort_values("rank")
        np.testing.assert_allclose(pos["alpha"], np.sort(alpha[j])[::-1][:3])
        np.testing.assert_allclose(neg["alpha"], np.sort(alpha[j])[:3])
        assert (c["predicted"] == run.nn_decision[qq]).all()
        np.testing.assert_array_equal(
            c["match"], run.problem.a_star_train[c["case"]] == run.nn_decision[qq]
        )
    s = pjm.geometry_summary([g], [0]).iloc[0]
    pos = g.cases[g.cases["group"] == "positive"]
    neg = g.cases[g.cases["group"] == "negative"]
    assert s["dist_ratio"] == pytest.approx(neg["distance"].mean() / pos["distance"].mean())
    assert s["magnitude_ratio"] == pytest.approx(
        pos["alpha"].abs().mean() / neg["alpha"].abs().mean()
    )
    assert s["pos_match"] == pytest.approx(pos["match"].mean())


def test_audit_query(run: pjm.PJMRun) -> None:
    i = pjm.default_audit_index(run)
    prof = pjm.disagreement_profile(run)
    if ((prof["nn_action"] == 1) & prof["agree"]).any():
        assert prof["nn_action"].iloc[i] == 1 and prof["agree"].iloc[i]
    a = pjm.audit_query(run, i)
    sel = a.selected
    assert sel == run.nn_decision[i]
    alpha = run.probe.coefficients(run.Phi_test[i])
    # the exact decomposition behind the table: sum over all cases = probe score
    assert alpha @ run.problem.R_train[:, sel] == pytest.approx(a.probe_scores[sel], abs=1e-9)
    c = a.cases
    np.testing.assert_allclose(c["contribution"], c["alpha"] * c["return"])
    np.testing.assert_allclose(c["return"], run.problem.R_train[c["case"], sel])
    assert list(c["group"]) == ["positive"] * 3 + ["negative"] * 3
    assert (np.diff(c["alpha"].to_numpy()[:3]) <= 0).all()
    assert (np.diff(c["alpha"].to_numpy()[3:]) >= 0).all()
    mu, comps, _ = pjm.representation_pca(run.Phi_train)
    np.testing.assert_allclose(a.xy_query, (run.Phi_test[i] - mu) @ comps.T)
    assert a.scores_table().shape == (3, 3)
    with pytest.raises(InputError):
        pjm.audit_query(run, N_TEST)


def test_summary_table_has_paper_values(run: pjm.PJMRun) -> None:
    run2 = pjm.build_run(run.problem, run.config, seed=1)
    runs = [run, run2]
    geo = pjm.geometry_summary([pjm.signed_geometry(r) for r in runs], [0, 1])
    table = pjm.summary_table(pjm.decision_agreement(runs), pjm.support_alignment(runs), geo)
    assert "0.9592 (3221/3358)" in set(table["paper"])
    assert {"0.9998", "0.9972", "0.9592", "7.5", "0.641", "3.7"} <= set(table["paper"])


def test_bandwidth_sensitivity(run: pjm.PJMRun) -> None:
    f = run.bandwidth.bandwidth / run.bandwidth.median_heuristic
    t = pjm.bandwidth_sensitivity(run, factors=(1.0, f))
    assert t["chosen"].tolist() == [f == 1.0, True]
    assert t["agreement"].iloc[1] == pytest.approx((run.cbdt_decision == run.nn_decision).mean())


# ---------------------------------------------------------------------- plots and widget
def test_plots_and_widget_smoke(run: pjm.PJMRun) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cbdt.book import plots

    g = pjm.signed_geometry(run)
    audit = pjm.audit_query(run, 0)
    figs = [
        plots.plot_pjm_problem(run.problem),
        plots.plot_pjm_agreement(pjm.disagreement_profile(run), pjm.transition_loads(run.problem)),
        plots.plot_pjm_support_alignment(run.probe_scores, run.cbdt_average, [0.9, 0.8, 0.7]),
        plots.plot_signed_geometry(g.cases),
        plots.plot_alpha_distance(g.alpha, g.distance, g.cases),
        plots.plot_case_audit(audit),
    ]
    for f in figs:
        assert isinstance(f, matplotlib.figure.Figure)
        plt.close(f)
    pytest.importorskip("ipywidgets")
    from cbdt.book import widgets

    w = widgets.pjm_audit_explorer(run, index=5)
    assert w.children[0].value == 5
    plt.close("all")


# ---------------------------------------------------------------------- real data
@needs_data
def test_real_problem_span_and_shares() -> None:
    p = pb.pjm_bidding_problem(0)
    assert p.n_train == 14_000 and p.n_test == 3_358
    assert str(p.times_train[0]) == "2016-08-09 19:00:00"
    assert str(p.times_test[0]) == "2018-03-16 03:00:00"
    assert str(p.times_test[-1]) == "2018-08-03 00:00:00"
    assert p.info["n_imputed_in_span"] == 2  # spring-forward hours 2017 and 2018
    shares = p.optimal_shares()
    np.testing.assert_allclose(shares.loc["train"].to_numpy(), 1 / 3, atol=1e-3)
    assert (shares.loc["test"].to_numpy() > 0.25).all()
    again = pb.pjm_bidding_problem(0)
    np.testing.assert_array_equal(again.R_test, p.R_test)


def test_summary_table_header_counts_the_seeds_it_was_given():
    """The header said "(5 seeds)" whatever the number of seeds."""
    import pandas as pd

    from cbdt.book.experiments.pjm import summary_table

    agreement = pd.DataFrame({"seed": [0, 1], "agreement": [0.9, 0.92], "n_agree": [30, 31]})
    alignment = pd.DataFrame(
        [{"seed": s, "action": a, "rho_support": 0.9, "rho_recon": 0.99}
         for s in (0, 1) for a in ("conservative", "moderate", "aggressive")]
    )
    keys = ["pos_distance", "neg_distance", "dist_ratio", "pos_match", "neg_match",
            "magnitude_ratio"]
    geometry = pd.DataFrame([{"seed": s, **dict.fromkeys(keys, 1.0)} for s in (0, 1)])
    table = summary_table(agreement, alignment, geometry)
    assert table.columns[1] == "book: mean ± 95% CI (2 seeds)"
