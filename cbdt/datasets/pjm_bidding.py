"""The PJM bidding problem of the book (Sec. 5.4, App. C.5): real load, synthetic prices.

The paper audits a three-action bidding policy whose states are rolling windows of real PJM
East load and whose returns come from synthetic prices, so that the return of *every* action
is observable in every hour (a requirement of eq. 5). The paper does not publish its market
model; this module is the book's own, documented and seeded. Nothing in it was chosen to
match a number of the paper.

Construction (hour-ending timestamps ``t`` on the regular hourly grid)
---------------------------------------------------------------------
Span
    The last ``n_train + n_test`` hours of the series, split *chronologically*: the first
    ``n_train = 14,000`` hours are the training memory, the last ``n_test = 3,358`` (the
    paper's number of test decisions) are the test hours. For PJME (which ends on
    2018-08-03 00:00) the training hours run from 2016-08-09 19:00 to 2018-03-16 02:00 and
    the test hours from 2018-03-16 03:00 to 2018-08-03 00:00. The ``window`` hours before
    the span only feed the first states.
Load standardisation
    :math:`z_t = (\\mathrm{load}_t - \\mu)/s`, with :math:`\\mu, s` the mean and standard deviation
    (``ddof=0``) of the load over the *training* hours only.
State (what is known when the bid for hour t is made)
    ``window`` standardised lagged loads :math:`z_{t-24}, \\dots, z_{t-1}` (columns
    ``load_lag_24 ... load_lag_1``), and three calendar features of the hour label ``t``:
    ``hour_sin`` :math:`=\\sin(2\\pi \\mathrm{hr}_t/24)`, ``hour_cos`` :math:`=\\cos(2\\pi \\mathrm{hr}_t/24)` and
    ``weekend`` (1 on Saturday and Sunday). The load of hour ``t`` itself is *not* in the
    state: the decision is taken before it is known (no look-ahead).
Market model (synthetic, seeded, convex in load)
    .. math:: \\mathrm{pr}_t = P_0 \\exp\\bigl(\\zeta z_t + \\sigma\\varepsilon_t - \\sigma^2/2\\bigr),
              \\qquad \\varepsilon_t \\overset{iid}{\\sim} N(0, 1),

    so :math:`E[\\mathrm{pr}_t \\mid \\mathrm{load}_t] = P_0 e^{\\zeta z_t}`, an exponential "merit-order" curve that
    is convex in the load. Defaults :math:`P_0 = 35` $/MWh, :math:`\\zeta = 0.45` per
    training standard deviation of load, :math:`\\sigma = 0.15`;
    ``numpy.random.default_rng(seed)`` draws :math:`\\varepsilon`.
Strategies (offers into a uniform-price market)
    Strategy ``a`` offers :math:`o_a` MWh at offer price :math:`\\mathrm{bid}_a`; it clears when
    :math:`\\mathrm{pr}_t \\ge \\mathrm{bid}_a` and then earns :math:`o_a(\\mathrm{pr}_t - \\mathrm{mc})` (marginal cost :math:`\\mathrm{mc}`); an
    offer that does not clear pays a standby cost :math:`\\xi o_a`. Returns are in units of
    $10,000:

    .. math:: r_t(a) = \\frac{1}{10^4}\\begin{cases} o_a (\\mathrm{pr}_t - \\mathrm{mc}) & \\mathrm{pr}_t \\ge \\mathrm{bid}_a \\\\
              -\\xi o_a & \\mathrm{pr}_t < \\mathrm{bid}_a \\end{cases}

    with :math:`o = (100, 200, 400)` MWh for conservative / moderate / aggressive,
    :math:`\\xi = 2` $/MWh, :math:`\\mathrm{mc}` = the 5 % quantile of the training prices,
    :math:`\\mathrm{bid}_0 = \\mathrm{mc}` (the conservative strategy offers at cost) and :math:`\\mathrm{bid}_1, \\mathrm{bid}_2` = the
    1/3 and 2/3 quantiles of the training prices. Because :math:`o_0 < o_1 < o_2`, the
    case-optimal action :math:`a_t^* = \\arg\\max_a r_t(a)` is conservative below
    :math:`\\mathrm{bid}_1`, moderate on :math:`[\\mathrm{bid}_1, \\mathrm{bid}_2)` and aggressive from :math:`\\mathrm{bid}_2` on: the
    offer prices are the break-even prices, and each action is ex-post optimal in one third
    of the training hours by construction (the test shares differ, since the test months
    differ from the training months).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..exceptions import InputError

__all__ = [
    "ACTIONS",
    "MarketModel",
    "BiddingProblem",
    "state_features",
    "market_prices",
    "offer_prices",
    "strategy_returns",
    "make_bidding_problem",
    "pjm_bidding_problem",
]

#: The three bidding strategies, in action order 0, 1, 2.
ACTIONS: tuple[str, ...] = ("conservative", "moderate", "aggressive")


@dataclass(frozen=True)
class MarketModel:
    """Parameters of the synthetic market and of the three strategies (module docstring).

    Attributes
    ----------
    base_price : float, default 35.0
        :math:`P_0`, $/MWh: the median price at the training-mean load.
    load_slope : float, default 0.45
        :math:`\\zeta`: log-price increase per training standard deviation of load.
    noise_sd : float, default 0.15
        :math:`\\sigma`: standard deviation of the log-price noise.
    quantities : tuple of float, default (100, 200, 400)
        Offered MWh :math:`o_a` of conservative, moderate, aggressive (increasing).
    cost_quantile : float, default 0.05
        Marginal cost :math:`\\mathrm{mc}` as a quantile of the training prices.
    breakeven_quantiles : tuple of float, default (1/3, 2/3)
        Offer prices :math:`\\mathrm{bid}_1, \\mathrm{bid}_2` of moderate and aggressive as quantiles of the training
        prices (the break-even prices between neighbouring strategies).
    standby_cost : float, default 2.0
        :math:`\\xi`, $/MWh offered, paid when an offer does not clear.
    return_unit : float, default 1e4
        Returns are reported in units of this many dollars.
    """

    base_price: float = 35.0
    load_slope: float = 0.45
    noise_sd: float = 0.15
    quantities: tuple[float, ...] = (100.0, 200.0, 400.0)
    cost_quantile: float = 0.05
    breakeven_quantiles: tuple[float, ...] = (1 / 3, 2 / 3)
    standby_cost: float = 2.0
    return_unit: float = 1e4

    def __post_init__(self) -> None:
        q = np.asarray(self.quantities, dtype=float)
        if q.shape != (3,) or (q <= 0).any() or (np.diff(q) <= 0).any():
            raise InputError(
                f"quantities must be three increasing positive offers, got {self.quantities}."
            )
        bq = np.asarray(self.breakeven_quantiles, dtype=float)
        if bq.shape != (2,) or not (self.cost_quantile < bq[0] < bq[1] < 1):
            raise InputError(
                "need 0 <= cost_quantile < breakeven_quantiles[0] < breakeven_quantiles[1] < 1, "
                f"got {self.cost_quantile} and {self.breakeven_quantiles}."
            )
        if self.cost_quantile < 0:
            raise InputError(f"cost_quantile must be >= 0, got {self.cost_quantile}.")
        for name in ("base_price", "return_unit"):
            if not getattr(self, name) > 0:
                raise InputError(f"{name} must be > 0, got {getattr(self, name)}.")
        for name in ("load_slope", "noise_sd", "standby_cost"):
            if not getattr(self, name) >= 0:
                raise InputError(f"{name} must be >= 0, got {getattr(self, name)}.")


@dataclass(frozen=True)
class BiddingProblem:
    """One draw of the bidding problem (see the module docstring for every definition).

    Attributes
    ----------
    X_train, X_test : ndarray of shape (n_train, d), (n_test, d)
        States (``d = window + 3``), columns :attr:`feature_names`.
    R_train, R_test : ndarray of shape (n_train, 3), (n_test, 3)
        Returns :math:`r_t(a)` of the three strategies, in $10,000.
    hours : pandas.DataFrame
        One row per decision hour (index ``Datetime``, training hours first): ``split``
        ("train"/"test"), ``load_mw`` (:math:`\\mathrm{load}_t`, unknown at decision time),
        ``prev_load_mw`` (:math:`\\mathrm{load}_{t-1}`, the newest load in the state), ``z`` (standardised
        :math:`\\mathrm{load}_t`), ``price`` (:math:`\\mathrm{pr}_t`), ``r_conservative``, ``r_moderate``,
        ``r_aggressive``, ``a_star`` (case-optimal action) and ``imputed`` (whether
        :math:`\\mathrm{load}_t` was interpolated by :func:`cbdt.datasets.load_pjm`).
    feature_names : tuple of str
    load_mean, load_sd : float
        Training mean and standard deviation of the load, MW.
    cost : float
        Marginal cost :math:`\\mathrm{mc}`, $/MWh.
    offer_prices : ndarray of shape (3,)
        :math:`(\\mathrm{bid}_0, \\mathrm{bid}_1, \\mathrm{bid}_2)`, $/MWh; :math:`\\mathrm{bid}_0 = \\mathrm{mc}`.
    market : MarketModel
    seed : int
        Seed of the price noise.
    window : int
    """

    X_train: np.ndarray
    X_test: np.ndarray
    R_train: np.ndarray
    R_test: np.ndarray
    hours: pd.DataFrame
    feature_names: tuple[str, ...]
    load_mean: float
    load_sd: float
    cost: float
    offer_prices: np.ndarray
    market: MarketModel
    seed: int
    window: int
    info: dict = field(default_factory=dict)

    @property
    def n_train(self) -> int:
        return self.X_train.shape[0]

    @property
    def n_test(self) -> int:
        return self.X_test.shape[0]

    @property
    def times_train(self) -> pd.DatetimeIndex:
        return self.hours.index[: self.n_train]

    @property
    def times_test(self) -> pd.DatetimeIndex:
        return self.hours.index[self.n_train :]

    @property
    def a_star_train(self) -> np.ndarray:
        """Case-optimal actions of the training cases."""
        return self.hours["a_star"].to_numpy()[: self.n_train]

    @property
    def a_star_test(self) -> np.ndarray:
        return self.hours["a_star"].to_numpy()[self.n_train :]

    def optimal_shares(self) -> pd.DataFrame:
        """Share of hours in which each strategy is ex-post optimal, per split."""
        rows = []
        for split, a in (("train", self.a_star_train), ("test", self.a_star_test)):
            counts = np.bincount(a, minlength=len(ACTIONS)) / a.size
            rows.append({"split": split, **dict(zip(ACTIONS, counts, strict=True))})
        return pd.DataFrame(rows).set_index("split")


def state_features(
    z: np.ndarray, times: pd.DatetimeIndex, start: int, stop: int, window: int = 24
) -> tuple[np.ndarray, tuple[str, ...]]:
    """States of the decision hours ``start <= t < stop`` of a standardised load series.

    Row ``t - start`` holds ``z[t - window], ..., z[t - 1]`` and the calendar features of
    ``times[t]`` (module docstring). ``z[t]`` and later values are never read.

    Returns
    -------
    X : ndarray of shape (stop - start, window + 3)
    names : tuple of str
    """
    z = np.asarray(z, dtype=float)
    if start < window:
        raise InputError(
            f"the first decision hour (position {start}) needs {window} earlier hours of load."
        )
    if stop > z.shape[0] or stop <= start:
        raise InputError(f"need start < stop <= len(z) = {z.shape[0]}, got {start}, {stop}.")
    idx = np.arange(start, stop)[:, None] + np.arange(-window, 0)[None, :]
    lags = z[idx]
    t = pd.DatetimeIndex(times[start:stop])
    hour = t.hour.to_numpy()
    cal = np.column_stack(
        [
            np.sin(2 * np.pi * hour / 24),
            np.cos(2 * np.pi * hour / 24),
            (t.day_of_week.to_numpy() >= 5).astype(float),
        ]
    )
    names = tuple(f"load_lag_{k}" for k in range(window, 0, -1)) + (
        "hour_sin",
        "hour_cos",
        "weekend",
    )
    return np.hstack([lags, cal]), names


def market_prices(z: np.ndarray, eps: np.ndarray, market: MarketModel) -> np.ndarray:
    """:math:`\\mathrm{pr}_t = P_0 \\exp(\\zeta z_t + \\sigma\\varepsilon_t - \\sigma^2/2)`, $/MWh."""
    z = np.asarray(z, dtype=float)
    eps = np.asarray(eps, dtype=float)
    s = market.noise_sd
    return market.base_price * np.exp(market.load_slope * z + s * eps - 0.5 * s * s)


def offer_prices(train_prices: np.ndarray, market: MarketModel) -> tuple[float, np.ndarray]:
    """Marginal cost :math:`\\mathrm{mc}` and offer prices :math:`(\\mathrm{bid}_0, \\mathrm{bid}_1,
    \\mathrm{bid}_2)` from training prices."""
    p = np.asarray(train_prices, dtype=float)
    c = float(np.quantile(p, market.cost_quantile))
    b1, b2 = np.quantile(p, market.breakeven_quantiles)
    return c, np.array([c, float(b1), float(b2)])


def strategy_returns(
    prices: np.ndarray, cost: float, offers: np.ndarray, market: MarketModel
) -> np.ndarray:
    """Returns :math:`r_t(a)` of the three strategies (module docstring), shape (n, 3)."""
    p = np.asarray(prices, dtype=float)[:, None]
    q = np.asarray(market.quantities, dtype=float)[None, :]
    b = np.asarray(offers, dtype=float)[None, :]
    cleared = q * (p - cost)
    standby = -market.standby_cost * q
    return np.where(p >= b, cleared, standby) / market.return_unit


def make_bidding_problem(
    load: pd.Series,
    *,
    n_train: int = 14_000,
    n_test: int = 3_358,
    window: int = 24,
    market: MarketModel | None = None,
    seed: int = 0,
    imputed: pd.Series | None = None,
) -> BiddingProblem:
    """Build the bidding problem from an hourly load series (module docstring).

    Parameters
    ----------
    load : pandas.Series
        Load in MW on a *regular* hourly ``DatetimeIndex`` without NaN (e.g.
        ``load_pjm("PJME", fill_gaps=True)["load_mw"]``); at least
        ``window + n_train + n_test`` values. The last ``n_train + n_test`` hours are used.
    n_train, n_test : int
        Chronological split of the decision hours.
    window : int, default 24
        Number of lagged hours in the state.
    market : MarketModel, optional
    seed : int, default 0
        Seed of the price noise (``numpy.random.default_rng(seed)``).
    imputed : pandas.Series of bool, optional
        Which load values were interpolated (copied into ``hours``).

    Returns
    -------
    BiddingProblem
    """
    market = MarketModel() if market is None else market
    if not isinstance(load, pd.Series) or not isinstance(load.index, pd.DatetimeIndex):
        raise InputError("load must be a pandas Series with a DatetimeIndex.")
    for name, v in (("n_train", n_train), ("n_test", n_test), ("window", window)):
        if int(v) != v or v < 1:
            raise InputError(f"{name} must be a positive integer, got {v!r}.")
    if int(seed) != seed or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}.")
    need = window + n_train + n_test
    if len(load) < need:
        raise InputError(
            f"load has {len(load)} hours but window + n_train + n_test = {need} are needed."
        )
    series = load.iloc[-need:]
    steps = np.diff(series.index.to_numpy())
    if not (steps == np.timedelta64(1, "h")).all():
        raise InputError(
            "load must be on a regular hourly grid (use load_pjm(..., fill_gaps=True))."
        )
    values = series.to_numpy(dtype=float)
    if not np.isfinite(values).all():
        raise InputError("load holds NaN or inf values; fill the gaps first.")

    start, stop = window, need
    train = slice(start, start + n_train)
    mu = float(values[train].mean())
    sd = float(values[train].std())
    if sd == 0:
        raise InputError("the training load is constant; it cannot be standardised.")
    z = (values - mu) / sd
    X, names = state_features(z, series.index, start, stop, window)

    rng = np.random.default_rng(int(seed))
    eps = rng.standard_normal(n_train + n_test)
    prices = market_prices(z[start:stop], eps, market)
    cost, offers = offer_prices(prices[:n_train], market)
    R = strategy_returns(prices, cost, offers, market)

    times = series.index[start:stop]
    hours = pd.DataFrame(
        {
            "split": np.repeat(["train", "test"], [n_train, n_test]),
            "load_mw": values[start:stop],
            "prev_load_mw": values[start - 1 : stop - 1],
            "z": z[start:stop],
            "price": prices,
            **{f"r_{a}": R[:, k] for k, a in enumerate(ACTIONS)},
            "a_star": np.argmax(R, axis=1),
            "imputed": (
                np.zeros(n_train + n_test, dtype=bool)
                if imputed is None
                else imputed.reindex(times).fillna(False).to_numpy(dtype=bool)
            ),
        },
        index=pd.DatetimeIndex(times, name="Datetime"),
    )
    info = {
        "first_state_hour": str(series.index[0]),
        "n_imputed_in_span": int(
            0 if imputed is None else imputed.reindex(series.index).fillna(False).sum()
        ),
    }
    return BiddingProblem(
        X_train=X[:n_train],
        X_test=X[n_train:],
        R_train=R[:n_train],
        R_test=R[n_train:],
        hours=hours,
        feature_names=names,
        load_mean=mu,
        load_sd=sd,
        cost=cost,
        offer_prices=offers,
        market=market,
        seed=int(seed),
        window=int(window),
        info=info,
    )


def pjm_bidding_problem(
    seed: int = 0,
    *,
    region: str = "PJME",
    n_train: int = 14_000,
    n_test: int = 3_358,
    window: int = 24,
    market: MarketModel | None = None,
) -> BiddingProblem:
    """The bidding problem on real PJM load (default PJME, the paper's region).

    Loads the series with ``load_pjm(region, fill_gaps=True)`` (missing hours, here the two
    spring-forward hours of 2017 and 2018, are time-interpolated and flagged in
    ``hours["imputed"]``) and calls :func:`make_bidding_problem` on it.
    """
    from .pjm import load_pjm

    df = load_pjm(region, fill_gaps=True)
    return make_bidding_problem(
        df["load_mw"],
        n_train=n_train,
        n_test=n_test,
        window=window,
        market=market,
        seed=seed,
        imputed=df["imputed"],
    )
