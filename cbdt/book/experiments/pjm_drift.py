"""A rolling, chronological drift audit on real PJM East load (chapter 09, "real drift").

The PJM audit of chapter 07 trains on 14,000 hours and tests on the next 3,358. Here the
same bidding problem (:mod:`cbdt.datasets.pjm_bidding`) is stretched over the whole PJME
series: the network and its OLS probe are fitted once, on the earliest full years, and the
frozen policy is then audited year by year until the data end, 14 1/2 years later. Nothing is
refitted, so every test year is further from the training period than the one before.

Construction (choices made on principle; the one revised after a run is marked)
-------------------------------------------------------------------------------
Series
    ``load_pjm("PJME", fill_gaps=True)``: hour-ending labels, 2002-01-01 01:00 to
    2018-08-03 00:00, the 30 missing hours time-interpolated.
Calendar year of an hour
    With hour-ending labels the hour labelled ``t`` runs from ``t - 1h`` to ``t``; its year is
    the year of ``t - 1h`` (:func:`hour_years`). The label 2004-01-01 00:00 therefore closes
    2003, and the first hour of 2004 is labelled 2004-01-01 01:00.
Split (:func:`drift_split`)
    Training = every decision hour of the years ``train_years`` (default 2002 and 2003, the
    earliest full years of PJME); the first ``window`` hours of the first training year only
    feed the first states (they are not decisions). Test = every later hour to the end of the
    series. :func:`~cbdt.datasets.pjm_bidding.make_bidding_problem` uses the *last*
    ``window + n_train + n_test`` hours, so the series is cut to start ``window`` hours before
    the first training decision and ``n_test`` is the number of hours after the last
    training hour: on PJME the last training hour is 2004-01-01 00:00 (n_train = 17,496) and
    the first test hour 2004-01-01 01:00 (n_test = 127,872). The load standardisation
    :math:`z_t = (\\mathrm{load}_t - \\mu)/s`, the marginal cost and the offer prices use the training
    hours only (as in ``make_bidding_problem``).
Seeds
    One seed draws the price noise (``make_bidding_problem(seed=...)``) and initialises the
    network (``CaseNetwork(seed=...)``), as in chapter 07.
Network and probe
    :class:`~cbdt.models.CaseNetwork` with chapter 07's settings (two tanh layers of 64,
    full-batch Adam, learning rate 0.01, 600 epochs; one torch thread, see
    :func:`cbdt.models.set_determinism`), trained on all training hours. The OLS probe with
    intercept (:meth:`cbdt.models.CaseNetwork.probe_fidelity`, minimum-norm ``lstsq`` fallback when the
    representation is rank-deficient) on the frozen training representation is the
    :class:`~cbdt.influence.CaseInfluence` whose signals are audited.
Audited decisions
    Every ``stride``-th hour of each split, counted from the split's first hour (default 5:
    5 is coprime with 24 and 7 * 24, so every hour of the day and of the week is sampled;
    ``stride=1`` audits every hour). The audited action is the *network's* decision
    :math:`\\hat a(x) = \\arg\\max_a Q_{nn}(x, a)`.
Wrong decision
    ``wrong``: :math:`\\hat a(x_t) \\ne \\arg\\max_a E[r_t(a) \\mid \\mathrm{load}_t]`, the action with the
    highest *expected* return given the load that actually happened (closed form of the
    lognormal price, :func:`expected_returns`); the price noise is averaged out, so the label
    measures the decision, not the luck of the hour. ``wrong_expost``: :math:`\\hat a(x_t)
    \\ne a^*_t = \\arg\\max_a r_t(a)`, the realised ex-post optimum (price noise included).
    Both compare a decision taken *before* :math:`\\mathrm{load}_t` is known with an oracle that knows it,
    so both contain an irreducible part that no policy of the state can avoid.
Scores (high = review first)
    ``risk``: :math:`O_\\alpha = H_\\alpha + \\gamma D_{Gini}` of the network's decision
    (:func:`cbdt.audit.audit_signals` with ``action=`` the network decision, ``k``,
    ``gamma``; contribution-ranked top-k, the paper's eq. 16/18), with the smoothing of eq. 16
    in its limit :math:`\\varepsilon \\to 0` (``eps=0``): a decision whose top-k cases all
    vote for one action has risk exactly 0, so such decisions tie. (With
    :math:`\\varepsilon = 10^{-12}` their entropy would be a floor of about
    :math:`(2\\varepsilon/3M)\\ln(3M/\\varepsilon)`, :math:`M` the top-k mass, that ranks them
    by :math:`1/M`, not by any disagreement.) ``risk_alpha``: the same with the top-k set and
    masses ranked by :math:`|\\alpha_i(x)|` (``rank_by="coefficient"``), the book's variant
    for returns whose heavy tail dominates :math:`|\\psi_i| = |\\alpha_i||r_i(a)|`.
    ``risk_nonzero`` reports the share of audited
    decisions whose top-k cases disagree. ``margin``: minus the network's own top-1
    minus top-2 score gap (a small gap is a risky decision). ``leverage``: the probe's
    :math:`\\lVert\\alpha(x)\\rVert^2` (:meth:`cbdt.influence.CaseInfluence.leverage`), large
    far from the training representations.
Per (seed, split, year, score)
    ``auc``: ROC AUC of the score for ``wrong`` (ties count one half; NaN when the year has
    no wrong or no right audited decision); ``auc_expost`` the same for ``wrong_expost``.
    ``caught``: recall at the review budget, i.e. the share of the year's wrong decisions
    among the ``n_review = ceil(budget * n_queries)`` highest-scoring audited decisions of
    the year (descending score, ties broken by time order, earlier first; NaN without a
    wrong decision); random review catches ``n_review / n_queries`` (about ``budget``) in
    expectation. ``caught_ties``: the same recall with tied scores ordered uniformly at
    random, computed exactly (:func:`cbdt.metrics.recall_at_budget` with ``ties="average"``, the analogue
    of the AUC's ties-count-one-half). The two differ only for a score with ties across the
    review cut: for the risk score, when most decisions sit at 0, time order would review
    the earliest (January) hours of the year, a seasonal artefact, so ``caught_ties`` is
    the fair reading there. ``caught_expost`` (time-order ties) is ``caught`` for
    ``wrong_expost``. ``z_mean``, ``z_sd``: mean and standard deviation (``ddof=0``) of the
    standardised load of *all* hours of the year (not only the audited ones): how far the
    year sits from the training distribution.
    ``probe_agree``: share of audited decisions where the probe's argmax equals the
    network's (how faithful the audited readout stays under drift).
Training period
    The training years get the same rows with ``split="train"``: the *in-sample* error rate
    and scores of the frozen policy on the hours it was fitted to (the probe's memory holds
    these very hours, so their leverage and risk are in-sample values too). They are the
    reference for the drift, not a test.

Summaries (:func:`summarize_pjm_drift`) give, per (split, year, score), the mean and 95 %
Student-t interval over seeds (:func:`cbdt.metrics.mean_ci`) of the finite values; the
interval is NaN with fewer than two finite values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.special import ndtr

from cbdt.audit import audit_signals
from cbdt.datasets.pjm_bidding import BiddingProblem, MarketModel, make_bidding_problem
from cbdt.decision import decision_margin
from cbdt.exceptions import InputError
from cbdt.metrics import mean_ci_finite, recall_at_budget, review_size, roc_auc
from cbdt.models import NetworkConfig, ProbeFidelity

from .pjm import PJMConfig, fit_probe

__all__ = [
    "SCORES",
    "PJMDriftConfig",
    "expected_returns",
    "hour_years",
    "drift_split",
    "drift_problem",
    "drift_audit",
    "pjm_drift",
    "summarize_pjm_drift",
]

#: The audited scores, in the order of every table and figure.
SCORES: tuple[str, ...] = ("risk", "risk_alpha", "margin", "leverage")

_ONE_HOUR = pd.Timedelta(hours=1)


@dataclass(frozen=True)
class PJMDriftConfig:
    """Settings of the drift audit (module docstring).

    Attributes
    ----------
    train_years : tuple of int, default (2002, 2003)
        Consecutive calendar years of the training hours (the earliest full years of PJME).
    stride : int, default 5
        Audit every ``stride``-th hour of each split (1 audits all).
    budget : float, default 0.10
        Share of the audited decisions of a year a human reviews (``caught``).
    k : int, default 10
        Top-k set of the risk score.
    gamma : float, default 1.0
        Weight of the Gini term of the risk score.
    eps : float, default 0.0
        Smoothing of eq. 16; ``0`` is the limit :math:`\\varepsilon \\to 0`, as in
        :class:`cbdt.book.experiments.drift.DriftConfig` (why: see there).
    window : int, default 24
        Lagged hours in the state.
    market : MarketModel
    hidden, activation, epochs, lr, batch_size
        Network settings, as :class:`cbdt.book.experiments.pjm.PJMConfig`.
    """

    train_years: tuple[int, ...] = (2002, 2003)
    stride: int = 5
    budget: float = 0.10
    k: int = 10
    gamma: float = 1.0
    eps: float = 0.0
    window: int = 24
    market: MarketModel = MarketModel()
    hidden: tuple[int, ...] = PJMConfig.hidden
    activation: Literal["tanh", "relu"] = PJMConfig.activation
    epochs: int = PJMConfig.epochs
    lr: float = PJMConfig.lr
    batch_size: int | None = PJMConfig.batch_size

    def __post_init__(self) -> None:
        years = sorted(int(y) for y in self.train_years)
        if not years or years != list(range(years[0], years[-1] + 1)):
            raise InputError(
                f"train_years must be consecutive calendar years, got {self.train_years!r}."
            )
        if int(self.stride) != self.stride or self.stride < 1:
            raise InputError(f"stride must be a positive integer, got {self.stride!r}.")
        if not 0 < self.budget <= 1:
            raise InputError(f"budget must lie in (0, 1], got {self.budget!r}.")


# ---------------------------------------------------------------------- the oracle
def expected_returns(
    z: Any, cost: float, offers: Any, market: MarketModel
) -> np.ndarray:
    """Expected returns :math:`E[r_t(a) \\mid \\mathrm{load}_t]` of the three strategies, shape (n, 3).

    With :math:`\\mathrm{pr} = P_0 e^{\\zeta z + \\sigma\\varepsilon - \\sigma^2/2}` and
    :math:`\\bar p = P_0 e^{\\zeta z}` (the conditional mean price; :math:`F` is the standard normal
    distribution function), for an offer price
    :math:`\\mathrm{bid}`,

    .. math:: P(\\mathrm{pr} \\ge \\mathrm{bid})
              = F\\Bigl(\\frac{\\ln(\\bar p/\\mathrm{bid}) - \\sigma^2/2}{\\sigma}\\Bigr),
              \\qquad E[\\mathrm{pr}\\,\\mathbf 1\\{\\mathrm{pr} \\ge \\mathrm{bid}\\}] =
              \\bar p\\,F\\Bigl(\\frac{\\ln(\\bar p/\\mathrm{bid}) + \\sigma^2/2}{\\sigma}\\Bigr),

    and :math:`E[r(a)] = \\bigl(o_a(E[\\mathrm{pr}\\,\\mathbf 1\\{\\mathrm{pr} \\ge \\mathrm{bid}_a\\}]
    - \\mathrm{mc}\\,P(\\mathrm{pr} \\ge \\mathrm{bid}_a)) - \\xi o_a (1 - P(\\mathrm{pr} \\ge \\mathrm{bid}_a))\\bigr)
    / \\text{unit}`. With :math:`\\sigma = 0` the
    price is :math:`\\bar p` and the indicator is deterministic.

    Parameters
    ----------
    z : array-like of shape (n,)
        Standardised loads :math:`z_t`.
    cost : float
        Marginal cost :math:`c`.
    offers : array-like of shape (3,)
        Offer prices :math:`(\\mathrm{bid}_0, \\mathrm{bid}_1, \\mathrm{bid}_2)`, all > 0.
    market : MarketModel

    Returns
    -------
    ndarray of shape (n, 3)
    """
    z = np.atleast_1d(np.asarray(z, dtype=np.float64))
    b = np.asarray(offers, dtype=np.float64)
    if z.ndim != 1:
        raise InputError(f"z must be one-dimensional, got shape {z.shape}.")
    if b.shape != (3,) or not (b > 0).all():
        raise InputError(f"offers must be three positive prices, got {offers!r}.")
    q = np.asarray(market.quantities, dtype=np.float64)[None, :]
    s = float(market.noise_sd)
    m = market.base_price * np.exp(market.load_slope * z)[:, None]  # (n, 1)
    if s > 0:
        lr = np.log(m / b[None, :])
        p_clear = ndtr((lr - 0.5 * s * s) / s)
        p_mass = m * ndtr((lr + 0.5 * s * s) / s)
    else:
        p_clear = (m >= b[None, :]).astype(np.float64)
        p_mass = m * p_clear
    e = q * (p_mass - float(cost) * p_clear) - market.standby_cost * q * (1.0 - p_clear)
    return e / market.return_unit


# ---------------------------------------------------------------------- the split
def hour_years(times: pd.DatetimeIndex) -> np.ndarray:
    """Calendar year of each hour-ending label: the year of ``t - 1h`` (module docstring)."""
    return np.asarray((pd.DatetimeIndex(times) - _ONE_HOUR).year, dtype=np.int64)


def drift_split(
    index: pd.DatetimeIndex, train_years: Iterable[int], window: int = 24
) -> tuple[int, int, int]:
    """Where the training and test decision hours of a regular hourly series lie.

    Parameters
    ----------
    index : pandas.DatetimeIndex
        Hour-ending labels of the series, increasing.
    train_years : iterable of int
        Consecutive training years.
    window : int, default 24

    Returns
    -------
    offset : int
        Position of the first hour passed to ``make_bidding_problem`` (``window`` hours
        before the first training decision).
    n_train : int
        Decision hours from the first training decision to the last hour of the last
        training year.
    n_test : int
        Every hour after the last training hour.
    """
    years = sorted(int(y) for y in train_years)
    yr = hour_years(index)
    in_train = np.flatnonzero((yr >= years[0]) & (yr <= years[-1]))
    if in_train.size == 0:
        raise InputError(f"the series holds no hour of the training years {years}.")
    first = max(int(in_train[0]), int(window))
    last = int(in_train[-1])
    n_train = last - first + 1
    n_test = len(index) - last - 1
    if n_train < 2 or n_test < 1:
        raise InputError(
            f"the split leaves {n_train} training and {n_test} test hours; need >= 2 and >= 1."
        )
    return first - int(window), n_train, n_test


def drift_problem(
    load: pd.Series,
    config: PJMDriftConfig | None = None,
    seed: int = 0,
    imputed: pd.Series | None = None,
) -> BiddingProblem:
    """The bidding problem split at the end of ``config.train_years`` (module docstring).

    Parameters
    ----------
    load : pandas.Series
        Load in MW on a regular hourly ``DatetimeIndex`` (hour-ending labels), without NaN.
    config : PJMDriftConfig, optional
    seed : int, default 0
        Seed of the price noise.
    imputed : pandas.Series of bool, optional
        Passed to :func:`~cbdt.datasets.pjm_bidding.make_bidding_problem`.

    Returns
    -------
    BiddingProblem
    """
    config = PJMDriftConfig() if config is None else config
    if not isinstance(load, pd.Series) or not isinstance(load.index, pd.DatetimeIndex):
        raise InputError("load must be a pandas Series with a DatetimeIndex.")
    offset, n_train, n_test = drift_split(load.index, config.train_years, config.window)
    return make_bidding_problem(
        load.iloc[offset:],
        n_train=n_train,
        n_test=n_test,
        window=config.window,
        market=config.market,
        seed=seed,
        imputed=imputed,
    )


# ---------------------------------------------------------------------- one seed
def _year_rows(
    seed: int,
    split: str,
    years: np.ndarray,
    z_all: np.ndarray,
    years_all: np.ndarray,
    scores: dict[str, np.ndarray],
    wrong: np.ndarray,
    wrong_expost: np.ndarray,
    probe_agree: np.ndarray,
    budget: float,
) -> list[dict[str, Any]]:
    rows = []
    for y in np.unique(years):
        sel = years == y
        zy = z_all[years_all == y]
        w, we = wrong[sel], wrong_expost[sel]
        n = int(sel.sum())
        base = {
            "seed": int(seed),
            "split": split,
            "year": int(y),
            "n_queries": n,
            "n_review": review_size(budget, n),
            "n_wrong": int(w.sum()),
            "error_rate": float(w.mean()),
            "n_wrong_expost": int(we.sum()),
            "error_rate_expost": float(we.mean()),
            "probe_agree": float(probe_agree[sel].mean()),
            "risk_nonzero": float((scores["risk"][sel] > 0).mean()),
            "z_mean": float(zy.mean()),
            "z_sd": float(zy.std()),
        }
        for name in SCORES:
            s = scores[name][sel]
            rows.append(
                {
                    **base,
                    "score": name,
                    "auc": roc_auc(s, w, single_class="nan"),
                    "caught": recall_at_budget(s, w, budget),
                    "caught_ties": recall_at_budget(s, w, budget, ties="average"),
                    "auc_expost": roc_auc(s, we, single_class="nan"),
                    "caught_expost": recall_at_budget(s, we, budget),
                }
            )
    return rows


_COLUMNS = [
    "seed",
    "split",
    "year",
    "score",
    "auc",
    "caught",
    "caught_ties",
    "error_rate",
    "n_wrong",
    "n_queries",
    "n_review",
    "auc_expost",
    "caught_expost",
    "error_rate_expost",
    "n_wrong_expost",
    "probe_agree",
    "risk_nonzero",
    "z_mean",
    "z_sd",
]


def drift_audit(
    problem: BiddingProblem, config: PJMDriftConfig | None = None, seed: int = 0
) -> pd.DataFrame:
    """Train, probe and audit one seed on a drift problem (module docstring).

    Works on any :class:`~cbdt.datasets.pjm_bidding.BiddingProblem` whose hours are
    hour-ending labels (the tests use a synthetic load); :func:`pjm_drift` calls it on PJME.

    Parameters
    ----------
    problem : BiddingProblem
        E.g. from :func:`drift_problem`; its ``seed`` drew the prices.
    config : PJMDriftConfig, optional
        Network and audit settings (the data fields are not used here).
    seed : int, default 0
        Seed of the network.

    Returns
    -------
    pandas.DataFrame
        One row per (split, year, score), columns as :func:`pjm_drift`.
    """
    config = PJMDriftConfig() if config is None else config
    stride = int(config.stride)
    i_tr = np.arange(0, problem.n_train, stride)
    i_te = np.arange(0, problem.n_test, stride)
    X_q = np.vstack([problem.X_train[i_tr], problem.X_test[i_te]])
    pos = np.concatenate([i_tr, problem.n_train + i_te])  # positions in problem.hours

    net = NetworkConfig.of(config).build(seed).fit(problem.X_train, problem.R_train)
    fid: ProbeFidelity = fit_probe(net, problem.X_train, problem.R_train, X_q)
    Phi_q = net.represent(X_q)

    nn = fid.network_scores
    decision = np.argmax(nn, axis=1)
    nn_margin = decision_margin(nn)
    audit = {
        rank_by: audit_signals(
            fid.probe,
            Phi_q,
            action=decision,
            k=config.k,
            gamma=config.gamma,
            eps=config.eps,
            rank_by=rank_by,
        )["risk"].to_numpy()
        for rank_by in ("contribution", "coefficient")
    }
    scores = {
        "risk": audit["contribution"],
        "risk_alpha": audit["coefficient"],
        "margin": -nn_margin,
        "leverage": np.asarray(fid.probe.leverage(Phi_q), dtype=np.float64),
    }

    h = problem.hours
    z_all = h["z"].to_numpy(dtype=np.float64)
    years_all = hour_years(h.index)
    er = expected_returns(z_all[pos], problem.cost, problem.offer_prices, problem.market)
    wrong = decision != np.argmax(er, axis=1)
    wrong_expost = decision != h["a_star"].to_numpy()[pos]
    probe_agree = np.argmax(fid.probe_scores, axis=1) == decision
    years_q = years_all[pos]

    rows = []
    for split, part in (("train", slice(0, i_tr.size)), ("test", slice(i_tr.size, None))):
        in_split = (h["split"] == split).to_numpy()
        rows += _year_rows(
            seed,
            split,
            years_q[part],
            z_all[in_split],
            years_all[in_split],
            {k: v[part] for k, v in scores.items()},
            wrong[part],
            wrong_expost[part],
            probe_agree[part],
            config.budget,
        )
    return pd.DataFrame(rows)[_COLUMNS]


def pjm_drift(
    seeds: Iterable[int] = (0, 1, 2), config: PJMDriftConfig | None = None
) -> pd.DataFrame:
    """The drift audit on real PJME load, one :func:`drift_audit` per seed.

    Parameters
    ----------
    seeds : iterable of int, default (0, 1, 2)
        Each seed draws the price noise and initialises the network.
    config : PJMDriftConfig, optional

    Returns
    -------
    pandas.DataFrame
        One row per (seed, split, year, score): ``seed``, ``split`` ("train" for the
        in-sample training years, "test" after), ``year``, ``score`` (one of
        :data:`SCORES`), ``auc``, ``caught``, ``caught_ties``, ``error_rate``, ``n_wrong``,
        ``n_queries``, ``n_review``, ``auc_expost``, ``caught_expost``,
        ``error_rate_expost``, ``n_wrong_expost``, ``probe_agree``, ``risk_nonzero``,
        ``z_mean``, ``z_sd`` (module docstring). The per-year columns that do not depend on
        the score (error rates, counts, ``probe_agree``, ``risk_nonzero``, ``z_*``) repeat
        on the three score rows.
        ``attrs`` records ``budget``, ``stride``, ``train_years``, ``n_train`` and
        ``n_test``.
    """
    from cbdt.datasets.pjm import load_pjm

    config = PJMDriftConfig() if config is None else config
    df = load_pjm("PJME", fill_gaps=True)
    frames = []
    problem = None
    for s in seeds:
        problem = drift_problem(df["load_mw"], config, seed=int(s), imputed=df["imputed"])
        frames.append(drift_audit(problem, config, seed=int(s)))
    if not frames:
        raise InputError("seeds is empty.")
    out = pd.concat(frames, ignore_index=True)
    out.attrs.update(
        budget=float(config.budget),
        stride=int(config.stride),
        train_years=tuple(int(y) for y in config.train_years),
        n_train=problem.n_train,
        n_test=problem.n_test,
    )
    return out


# ---------------------------------------------------------------------- summary
_SUMMARY_COLUMNS = (
    "auc",
    "caught",
    "caught_ties",
    "error_rate",
    "auc_expost",
    "caught_expost",
    "risk_nonzero",
)


def summarize_pjm_drift(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and 95 % CI over seeds per (split, year, score).

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`pjm_drift` or concatenated :func:`drift_audit` frames.

    Returns
    -------
    pandas.DataFrame
        Indexed by (``year``, ``score``), scores in :data:`SCORES` order; columns ``split``,
        ``<c>_mean`` and ``<c>_ci`` (Student-t half-width, :func:`cbdt.metrics.mean_ci`) for
        ``c`` in auc, caught, caught_ties, error_rate, auc_expost, caught_expost,
        risk_nonzero, computed over the seeds where the value is finite (NaN CI with fewer
        than two), ``n_seeds``, and ``z_mean`` (the same for every seed). ``attrs`` are copied from ``df``.
    """
    missing = {"seed", "split", "year", "score", "z_mean", *_SUMMARY_COLUMNS} - set(df.columns)
    if missing:
        raise InputError(f"df lacks the columns {sorted(missing)}.")
    rows = []
    order = {s: i for i, s in enumerate(SCORES)}
    for (year, score), g in df.groupby(["year", "score"], sort=False):
        row: dict[str, Any] = {
            "year": int(year),
            "score": score,
            "split": g["split"].iloc[0],
            "n_seeds": int(g["seed"].nunique()),
            "z_mean": float(g["z_mean"].mean()),
        }
        for c in _SUMMARY_COLUMNS:
            row[f"{c}_mean"], row[f"{c}_ci"], _ = mean_ci_finite(g[c].to_numpy(dtype=float))
        rows.append(row)
    out = pd.DataFrame(rows)
    out["_o"] = out["score"].map(lambda s: order.get(s, len(order)))
    out = out.sort_values(["year", "_o"], kind="stable").drop(columns="_o")
    out = out.set_index(["year", "score"])
    out.attrs.update(df.attrs)
    return out


