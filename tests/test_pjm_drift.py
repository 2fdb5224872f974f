"""Tests of the rolling PJM drift audit (cbdt.book.experiments.pjm_drift).

Everything runs on a small synthetic hour-ending load series and a tiny network; the one test
marked ``real`` builds the PJME split through ``CBDT_DATA_DIR`` and is skipped without it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from cbdt.book.experiments import pjm_drift as pdr
from cbdt.datasets import pjm_bidding as pb
from cbdt.exceptions import InputError

matplotlib.use("Agg")

_DATA = Path(os.environ.get("CBDT_DATA_DIR", "").strip() or "/nonexistent")
needs_pjme = pytest.mark.skipif(
    not (_DATA / "PJME_hourly.csv").is_file(),
    reason="real PJME data: set CBDT_DATA_DIR to the folder holding PJME_hourly.csv",
)

TINY = pdr.PJMDriftConfig(train_years=(2002,), stride=5, hidden=(8,), epochs=25)


def synthetic_load(start: str = "2002-10-01 01:00", end: str = "2004-02-15 00:00") -> pd.Series:
    """Daily cycle + slow trend + noise on hour-ending labels (like PJME's), in MW."""
    idx = pd.date_range(start, end, freq="h", name="Datetime")
    t = np.arange(idx.size)
    rng = np.random.default_rng(11)
    mw = (
        30_000
        + 6_000 * np.sin(2 * np.pi * (t - 6) / 24)
        + 3_000 * np.sin(2 * np.pi * t / (24 * 9))
        + 0.05 * t  # a slow upward drift
        + 800 * rng.standard_normal(t.size)
    )
    return pd.Series(mw, index=idx, name="load_mw")


@pytest.fixture(scope="module")
def load() -> pd.Series:
    return synthetic_load()


@pytest.fixture(scope="module")
def problem(load: pd.Series) -> pb.BiddingProblem:
    return pdr.drift_problem(load, TINY, seed=1)


@pytest.fixture(scope="module")
def audit(problem: pb.BiddingProblem) -> pd.DataFrame:
    return pdr.drift_audit(problem, TINY, seed=1)


# ---------------------------------------------------------------------- the oracle
@pytest.mark.parametrize("noise_sd", [0.15, 0.4])
def test_expected_returns_match_monte_carlo(noise_sd: float) -> None:
    market = pb.MarketModel(noise_sd=noise_sd)
    cost, offers = 17.0, np.array([17.0, 28.0, 40.0])
    z = np.array([-2.0, -0.5, 0.0, 0.7, 1.5, 3.0])
    eps = np.random.default_rng(0).standard_normal(400_000)
    exact = pdr.expected_returns(z, cost, offers, market)
    assert exact.shape == (z.size, 3)
    for j, zj in enumerate(z):
        prices = pb.market_prices(np.full(eps.size, zj), eps, market)
        r = pb.strategy_returns(prices, cost, offers, market)
        se = r.std(axis=0) / np.sqrt(eps.size)
        assert np.all(np.abs(r.mean(axis=0) - exact[j]) <= 4 * se + 1e-9)  # 1e-9: rare clears


def test_expected_returns_without_noise_equal_the_returns() -> None:
    market = pb.MarketModel(noise_sd=0.0)
    cost, offers = 17.0, np.array([17.0, 28.0, 40.0])
    z = np.linspace(-3, 3, 41)
    prices = pb.market_prices(z, np.zeros_like(z), market)
    np.testing.assert_allclose(
        pdr.expected_returns(z, cost, offers, market),
        pb.strategy_returns(prices, cost, offers, market),
    )


def test_expected_returns_rejects_bad_offers() -> None:
    with pytest.raises(InputError):
        pdr.expected_returns([0.0], 1.0, [1.0, -2.0, 3.0], pb.MarketModel())


# ---------------------------------------------------------------------- the split
def test_hour_years_use_hour_ending_labels() -> None:
    t = pd.DatetimeIndex(["2003-12-31 23:00", "2004-01-01 00:00", "2004-01-01 01:00"])
    assert pdr.hour_years(t).tolist() == [2003, 2003, 2004]


def test_split_falls_at_the_first_test_year(load: pd.Series, problem: pb.BiddingProblem) -> None:
    assert problem.times_train[0] == load.index[TINY.window]  # first hours only feed states
    assert problem.times_train[-1] == pd.Timestamp("2003-01-01 00:00")  # closes 2002
    assert problem.times_test[0] == pd.Timestamp("2003-01-01 01:00")
    assert problem.times_test[-1] == load.index[-1]
    assert (pdr.hour_years(problem.times_train) == 2002).all()
    assert (pdr.hour_years(problem.times_test) >= 2003).all()
    # standardisation from the training hours only
    z_train = problem.hours["z"].to_numpy()[: problem.n_train]
    assert abs(z_train.mean()) < 1e-9 and abs(z_train.std() - 1) < 1e-9


def test_split_drops_hours_before_the_training_years() -> None:
    load = synthetic_load(start="2001-12-20 01:00", end="2003-03-01 00:00")
    offset, n_train, n_test = pdr.drift_split(load.index, (2002,), window=24)
    first = load.index[offset + 24]
    assert first == pd.Timestamp("2002-01-01 01:00")  # the window comes from 2001
    p = pdr.drift_problem(load, TINY, seed=0)
    assert p.times_train[0] == first and p.n_train == n_train == 8760 and p.n_test == n_test
    assert p.times_test[0] == pd.Timestamp("2003-01-01 01:00")


def test_config_validation() -> None:
    with pytest.raises(InputError):
        pdr.PJMDriftConfig(train_years=(2002, 2004))
    with pytest.raises(InputError):
        pdr.PJMDriftConfig(stride=0)
    with pytest.raises(InputError):
        pdr.PJMDriftConfig(budget=0.0)


def test_risk_is_zero_exactly_when_the_top_k_agree(audit: pd.DataFrame) -> None:
    # eps -> 0 (the default): a unanimous top-k has risk exactly 0, so risk_nonzero is the
    # share of decisions with any disagreement, which can only lift the risk above 0.4
    assert pdr.PJMDriftConfig().eps == 0.0
    r = audit[audit["score"] == "risk"]
    assert ((r["risk_nonzero"] >= 0) & (r["risk_nonzero"] <= 1)).all()


# ---------------------------------------------------------------------- the audit
def test_audit_frame(problem: pb.BiddingProblem, audit: pd.DataFrame) -> None:
    assert set(audit["split"]) == {"train", "test"}
    assert audit.loc[audit["split"] == "train", "year"].unique().tolist() == [2002]
    assert audit.loc[audit["split"] == "test", "year"].unique().tolist() == [2003, 2004]
    assert (audit.groupby(["split", "year"])["score"].apply(tuple) == pdr.SCORES).all()
    one = audit[audit["score"] == "risk"]
    n_tr = math.ceil(problem.n_train / TINY.stride)
    n_te = math.ceil(problem.n_test / TINY.stride)
    assert one.loc[one["split"] == "train", "n_queries"].sum() == n_tr
    assert one.loc[one["split"] == "test", "n_queries"].sum() == n_te
    assert (one["n_review"] == np.ceil(np.round(0.1 * one["n_queries"], 9))).all()
    np.testing.assert_allclose(one["error_rate"], one["n_wrong"] / one["n_queries"])
    for c in ("auc", "auc_expost", "caught", "caught_ties", "caught_expost"):
        v = audit[c].dropna()
        assert ((v >= 0) & (v <= 1)).all()
    assert ((audit["risk_nonzero"] >= 0) & (audit["risk_nonzero"] <= 1)).all()
    # the training year's load is standardised to mean 0 (up to the window hours)
    assert abs(one.loc[one["split"] == "train", "z_mean"].iloc[0]) < 1e-9


def test_audit_is_deterministic(problem: pb.BiddingProblem, audit: pd.DataFrame) -> None:
    again = pdr.drift_audit(problem, TINY, seed=1)
    pd.testing.assert_frame_equal(audit, again)


def test_summary_and_plot(load: pd.Series, audit: pd.DataFrame) -> None:
    from matplotlib.figure import Figure

    from cbdt.book.plots import plot_pjm_drift

    one = pdr.summarize_pjm_drift(audit)
    assert one.index.names == ["year", "score"]
    assert one["auc_ci"].isna().all() and (one["n_seeds"] == 1).all()
    np.testing.assert_allclose(
        one.xs("risk", level="score")["auc_mean"],
        audit[audit["score"] == "risk"].set_index("year")["auc"],
    )
    other = pdr.drift_audit(pdr.drift_problem(load, TINY, seed=2), TINY, seed=2)
    two = pdr.summarize_pjm_drift(pd.concat([audit, other], ignore_index=True))
    assert np.isfinite(two["error_rate_ci"]).all() and (two["n_seeds"] == 2).all()
    assert list(two.index.get_level_values("score")[: len(pdr.SCORES)]) == list(pdr.SCORES)
    fig = plot_pjm_drift(two, budget=0.1)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # two panels and the error-rate twin axis
    w, h = fig.get_size_inches()
    assert (w, h) == (8, 8)
    import matplotlib.pyplot as plt

    plt.close(fig)


@needs_pjme
def test_real_pjme_split(monkeypatch: pytest.MonkeyPatch) -> None:
    from cbdt.datasets.pjm import load_pjm

    monkeypatch.setenv("CBDT_OFFLINE", "1")
    df = load_pjm("PJME", fill_gaps=True)
    p = pdr.drift_problem(df["load_mw"], pdr.PJMDriftConfig(), seed=0, imputed=df["imputed"])
    assert p.times_train[0] == pd.Timestamp("2002-01-02 01:00")
    assert p.times_train[-1] == pd.Timestamp("2004-01-01 00:00")
    assert p.times_test[0] == pd.Timestamp("2004-01-01 01:00")
    assert p.times_test[-1] == pd.Timestamp("2018-08-03 00:00")
    assert (p.n_train, p.n_test) == (17_496, 127_872)
