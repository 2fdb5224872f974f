"""The PJM bidding audit (Sec. 5.4-5.5, Fig. 3 and 5, App. C.2-C.3).

One *run* per seed: the bidding problem of :mod:`cbdt.datasets.pjm_bidding` (the seed draws
the price noise), the explicit CBDT decision maker over the training memory, a
:class:`cbdt.models.CaseNetwork` trained on the same returns (the seed also initialises the
network) and the OLS probe on its frozen representation. Runs are cached in the process
(:func:`pjm_run`), so every table and figure below reuses the same five runs.

Definitions (the paper leaves these open; these are the book's readings)
------------------------------------------------------------------------
CBDT decision maker (eq. 1-2)
    Memory = the ``n_train`` training hours, case ``i`` = (state :math:`x_i`, all three
    returns :math:`r_i(a)`), :math:`n(c, M) = 1`, :math:`u(r_i, a) = r_i(a)`; Gaussian
    similarity :math:`s(x, x_i) = \\exp(-\\lVert x - x_i\\rVert^2 / 2h^2)` on the state.
    :math:`U(a\\mid M, x) = \\sum_i s(x, x_i) r_i(a)` and :math:`a^*_{CBDT}(x) =
    \\arg\\max_a U`. The *normalised* support :math:`\\bar U(a\\mid M, x) = U(a\\mid M, x) /
    \\sum_i s(x, x_i)` (a similarity-weighted average return, same argmax) is what is
    compared with the network.
Bandwidth rule
    :math:`h` is chosen from the grid :math:`h_{med}\\cdot 2^{-k/2}`, :math:`k = 0..8`, where
    :math:`h_{med}` is the median heuristic (median Euclidean distance between the states of
    2,000 training hours drawn with ``default_rng(0)``), by a *chronological hold-out inside
    the training span*: memory = first 80 % of the training hours, validation = last 20 %,
    criterion = mean squared error of :math:`\\bar U(a \\mid M, x)` against the realised
    returns over validation hours and actions. The test hours are never used. (The plain
    median heuristic oversmooths here: see :func:`bandwidth_sensitivity`.)
Agreement
    Share of test hours where :math:`\\arg\\max_a Q_{nn}(x, a) = a^*_{CBDT}(x)`.
Decision margin
    CBDT margin: best minus second-best :math:`\\bar U(a\\mid M, x)` (return units, $10k).
Support alignment :math:`\\rho_{support}(a)`
    Pearson correlation over the test hours between the case-weighted support
    :math:`\\sum_i \\alpha_i(x) r_i(a)` of the OLS probe (which equals the probe score
    exactly, Proposition 1; with the intercept the weights sum to one, so it is a weighted
    *average* of returns) and the normalised CBDT support :math:`\\bar U(a \\mid M, x)`.
    ``rho_support_raw`` uses the unnormalised :math:`U(a\\mid M, x)` of eq. 1 instead.
Probe fidelity :math:`\\rho_{recon}(a)`
    Pearson correlation over the test hours between the probe score and the network score
    (:meth:`cbdt.models.CaseNetwork.probe_fidelity`, OLS with intercept on the frozen :math:`\\varphi`).
Standardised representation distance
    :math:`d(x, x_i) = \\lVert\\varphi(x) - \\varphi(x_i)\\rVert / m_\\varphi`, where
    :math:`m_\\varphi` is the median Euclidean distance between the representations of the
    same 2,000 training hours: 1 is the typical distance between two training cases. A pure
    rescaling, so distance *ratios* equal those of the raw :math:`\\varphi`-distance.
    ``dist_ratio_coordstd`` repeats the ratio after standardising every coordinate of
    :math:`\\varphi` with its training mean and standard deviation.
Signed-coefficient geometry (Sec. 5.5, C.2)
    50 test hours evenly spaced over the test span (:func:`geometry_queries`); for each, the
    5 training cases with the largest :math:`\\alpha_i(x)` ("positive") and the 5 with the
    most negative :math:`\\alpha_i(x)` ("negative"), :math:`\\alpha` of the OLS probe with
    intercept. Per seed: mean distance of each group over the 250 cases, their ratio
    (negative / positive), the share of cases whose case-optimal action
    :math:`a_i^* = \\arg\\max_a r_i(a)` equals the network's predicted action, and the
    magnitude ratio = mean :math:`|\\alpha|` of the positive group / that of the negative
    group.

Every statistic is reported as mean and 95 % Student-t interval over the five seeds
(:func:`cbdt.metrics.summarize_seeds`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.spatial.distance import cdist

from cbdt.datasets.pjm_bidding import ACTIONS, BiddingProblem, MarketModel, pjm_bidding_problem
from cbdt.decision import (
    GaussianSimilarity,
    Memory,
    decision_margin,
    median_distance,
    select_bandwidth,
    support,
)
from cbdt.exceptions import InputError
from cbdt.influence import CaseInfluence
from cbdt.metrics import format_mean_ci, mean_ci, pearson, summarize_seeds
from cbdt.models import CaseNetwork, NetworkConfig

__all__ = [
    "SEEDS",
    "PAPER",
    "PJMConfig",
    "BandwidthChoice",
    "PJMRun",
    "median_heuristic",
    "holdout_bandwidth",
    "cbdt_support",
    "pjm_run",
    "pjm_runs",
    "build_run",
    "clear_cache",
    "problem_summary",
    "decision_agreement",
    "disagreement_profile",
    "decision_crosstab",
    "disagreement_by_margin",
    "support_alignment",
    "bandwidth_sensitivity",
    "geometry_queries",
    "SignedGeometry",
    "signed_geometry",
    "geometry_summary",
    "summary_table",
    "representation_pca",
    "default_audit_index",
    "QueryAudit",
    "audit_query",
    "transition_loads",
]

#: The five seeds of every table.
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)

#: The paper's PJM numbers (Sec. 5.4-5.5, App. C.2); None where it gives no value.
PAPER: dict[str, Any] = {
    "agreement": 3221 / 3358,
    "n_agree": 3221,
    "n_test": 3358,
    "rho_recon": (0.9998, 0.9972, 0.9592),
    "rho_support": None,  # Fig. 3b: "strong" for conservative/moderate, "weaker" aggressive
    "pos_distance": (0.44, 0.04),
    "neg_distance": (3.30, 0.16),
    "dist_ratio": 7.5,
    "pos_match": 0.641,
    "magnitude_ratio": 3.7,
}

_SAMPLE = 2_000  # training hours behind h_med and m_phi
_CHUNK = 512  # test queries per chunk (a 512 x 14,000 float64 block is 57 MB)


@dataclass(frozen=True)
class PJMConfig:
    """Settings of one run (defaults: the book's choices, see the notebook for reasons).

    Network: :class:`cbdt.models.CaseNetwork` with two tanh layers of 64 units
    (:math:`H = 64`), full-batch Adam, learning rate 0.01, 600 epochs. The epoch count was
    chosen once, while writing the chapter, by a chronological hold-out *inside the training
    span* (network trained on the first 80 % of the training hours, mean squared error on the
    last 20 %, seeds 0 and 1, checkpoints every 50 epochs up to 1,000): the validation error
    falls until about 550-600 epochs and stays flat (0.069-0.070) up to 1,000, apart from
    single-epoch spikes typical of constant-step Adam. Neither the test hours nor the paper's
    numbers entered the choice.
    """

    n_train: int = 14_000
    n_test: int = 3_358
    window: int = 24
    market: MarketModel = MarketModel()
    hidden: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    epochs: int = 600
    lr: float = 1e-2
    batch_size: int | None = None
    holdout: float = 0.2
    bandwidth_factors: tuple[float, ...] = tuple(2.0 ** (-k / 2) for k in range(9))
    n_geometry: int = 50
    top: int = 5


@dataclass(frozen=True)
class BandwidthChoice:
    """Result of :func:`holdout_bandwidth`.

    Attributes
    ----------
    bandwidth : float
        The chosen :math:`h`.
    median_heuristic : float
        :math:`h_{med}`.
    table : pandas.DataFrame
        One row per grid value: ``factor`` (:math:`h / h_{med}`), ``bandwidth``,
        ``val_mse`` (the criterion) and ``val_return`` (mean realised return of the CBDT
        decisions on the validation hours, for information).
    """

    bandwidth: float
    median_heuristic: float
    table: pd.DataFrame


def median_heuristic(X: np.ndarray, n_sample: int = _SAMPLE, seed: int = 0) -> float:
    """Median Euclidean distance between ``n_sample`` rows of ``X`` drawn without replacement.

    :func:`cbdt.decision.median_distance` with this module's sample size.
    """
    return median_distance(X, n_sample=n_sample, seed=seed)


def holdout_bandwidth(
    X_train: np.ndarray,
    R_train: np.ndarray,
    *,
    factors: Iterable[float] = PJMConfig.bandwidth_factors,
    holdout: float = 0.2,
    chunk: int = _CHUNK,
) -> BandwidthChoice:
    """Bandwidth of the CBDT similarity by chronological hold-out (module docstring).

    The rows of ``X_train`` must be in time order: the last ``holdout`` share of them is the
    validation span, the rest the memory, and :func:`cbdt.decision.select_bandwidth`
    (``criterion="support_mse"``) keeps the factor of the median heuristic whose normalised
    supports forecast the validation returns best. Ties go to the larger bandwidth.
    """
    X = np.asarray(X_train, dtype=float)
    R = np.asarray(R_train, dtype=float)
    if not 0 < holdout < 1:
        raise InputError(f"holdout must lie in (0, 1), got {holdout}.")
    n_mem = int(round((1 - holdout) * X.shape[0]))
    if n_mem < 1 or n_mem >= X.shape[0]:
        raise InputError("the hold-out split leaves no memory or no validation hours.")
    h_med = median_heuristic(X)
    fac = np.asarray(sorted(set(float(f) for f in factors), reverse=True))
    sel = select_bandwidth(X[:n_mem], R[:n_mem], X[n_mem:], R[n_mem:], h_med * fac,
                           criterion="support_mse", chunk_size=chunk)
    t = sel.table
    table = pd.DataFrame({"factor": fac, "bandwidth": t["bandwidth"],
                          "val_mse": t["support_mse"], "val_return": t["mean_return"]})
    return BandwidthChoice(sel.bandwidth, h_med, table)


def cbdt_support(
    X_query: np.ndarray,
    X_memory: np.ndarray,
    R_memory: np.ndarray,
    bandwidth: float,
    chunk: int = _CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """CBDT support :math:`U(a\\mid M, x)` (eq. 1) and the similarity mass, in query chunks.

    Uses :func:`cbdt.decision.support` with the memory's outcome supports extended by a
    column of ones, whose support is :math:`\\sum_i s(x, x_i)`.

    Returns
    -------
    U : ndarray of shape (m, |A|)
    mass : ndarray of shape (m,)
        :math:`\\sum_i s(x, x_i)`; ``U / mass[:, None]`` is the normalised support.
    """
    R = np.asarray(R_memory, dtype=float)
    memory = Memory(X_memory, np.column_stack([R, np.ones(R.shape[0])]))
    sim = GaussianSimilarity(bandwidth)
    Xq = np.asarray(X_query, dtype=float)
    out = np.empty((Xq.shape[0], R.shape[1] + 1))
    for s in range(0, Xq.shape[0], chunk):
        out[s : s + chunk] = support(Xq[s : s + chunk], memory, sim)
    return out[:, :-1], out[:, -1]


@dataclass(frozen=True)
class PJMRun:
    """One seed of the PJM audit.

    Attributes
    ----------
    seed : int
    config : PJMConfig
    problem : BiddingProblem
    bandwidth : BandwidthChoice
    network : CaseNetwork
    probe : CaseInfluence
        OLS readout with intercept on the frozen representation (:meth:`CaseNetwork.probe_fidelity`).
    Phi_train, Phi_test : ndarray
        Frozen representations :math:`\\varphi(x)`, shapes (n_train, H), (n_test, H).
    network_scores, probe_scores : ndarray of shape (n_test, 3)
    cbdt_support : ndarray of shape (n_test, 3)
        :math:`U(a\\mid M, x)` (eq. 1).
    cbdt_mass : ndarray of shape (n_test,)
        :math:`\\sum_i s(x, x_i)`.
    rho_recon : ndarray of shape (3,)
    exactness : float
        :math:`\\max_{x, a} |\\sum_i \\alpha_i(x) r_i(a) - \\hat Q(x, a)|` over all test hours
        (coefficients computed in query chunks, only the maximum kept).
    phi_scale : float
        :math:`m_\\varphi`, the median train-to-train representation distance.
    fit_seconds : float
        Wall time of the network training.
    """

    seed: int
    config: PJMConfig
    problem: BiddingProblem
    bandwidth: BandwidthChoice
    network: CaseNetwork
    probe: CaseInfluence
    Phi_train: np.ndarray
    Phi_test: np.ndarray
    network_scores: np.ndarray
    probe_scores: np.ndarray
    cbdt_support: np.ndarray
    cbdt_mass: np.ndarray
    rho_recon: np.ndarray
    exactness: float
    phi_scale: float
    fit_seconds: float

    @property
    def cbdt_average(self) -> np.ndarray:
        """Normalised CBDT support :math:`\\bar U(a \\mid M, x)`, shape (n_test, 3)."""
        return self.cbdt_support / self.cbdt_mass[:, None]

    @property
    def nn_decision(self) -> np.ndarray:
        return np.argmax(self.network_scores, axis=1)

    @property
    def cbdt_decision(self) -> np.ndarray:
        return np.argmax(self.cbdt_support, axis=1)

    @property
    def probe_decision(self) -> np.ndarray:
        return np.argmax(self.probe_scores, axis=1)

    @property
    def final_loss(self) -> float:
        """Training loss (MSE over cases and actions) at the last epoch."""
        return float(self.network.loss_curve_[-1])


def clear_cache() -> None:
    """Forget the runs :func:`pjm_run` keeps (its networks are retrained on the next call)."""
    _pjm_run.cache_clear()


def fit_probe(net: CaseNetwork, X_train: np.ndarray, R_train: np.ndarray, X_query: np.ndarray):
    """:meth:`CaseNetwork.probe_fidelity`: OLS, minimum-norm (``lstsq``) if the representation is
    rank-deficient."""
    return net.probe_fidelity(X_train, R_train, X_query, solver="cholesky_or_lstsq")


def pjm_run(seed: int, config: PJMConfig | None = None) -> PJMRun:
    """Build the real-data problem of one seed, train and probe.

    Memoised in the process on ``(seed, config)`` (:func:`functools.cache`): the chapter's
    later cells and figures reuse the trained networks; :func:`clear_cache` forgets them.
    """
    return _pjm_run(int(seed), PJMConfig() if config is None else config)


@functools.cache
def _pjm_run(seed: int, config: PJMConfig) -> PJMRun:
    problem = pjm_bidding_problem(
        seed,
        n_train=config.n_train,
        n_test=config.n_test,
        window=config.window,
        market=config.market,
    )
    return build_run(problem, config, seed)


def build_run(problem: BiddingProblem, config: PJMConfig | None = None, seed: int = 0) -> PJMRun:
    """The CBDT decision maker, the network (seeded with ``seed``) and the probe on ``problem``.

    Used by :func:`pjm_run` on the real data; works on any :class:`BiddingProblem` (the
    tests use a synthetic load series). ``config``'s data fields are not used here.
    """
    config = PJMConfig() if config is None else config
    bw = holdout_bandwidth(
        problem.X_train,
        problem.R_train,
        factors=config.bandwidth_factors,
        holdout=config.holdout,
    )
    U, mass = cbdt_support(problem.X_test, problem.X_train, problem.R_train, bw.bandwidth)

    t0 = time.perf_counter()
    net = NetworkConfig.of(config).build(seed).fit(problem.X_train, problem.R_train)
    fit_seconds = time.perf_counter() - t0

    fid = fit_probe(net, problem.X_train, problem.R_train, problem.X_test)
    Phi_train = net.represent(problem.X_train)
    Phi_test = net.represent(problem.X_test)
    exact = 0.0
    for s in range(0, Phi_test.shape[0], _CHUNK):
        alpha = fid.probe.coefficients(Phi_test[s : s + _CHUNK])
        diff = alpha @ problem.R_train - fid.probe_scores[s : s + _CHUNK]
        exact = max(exact, float(np.abs(diff).max()))
    run = PJMRun(
        seed=int(seed),
        config=config,
        problem=problem,
        bandwidth=bw,
        network=net,
        probe=fid.probe,
        Phi_train=Phi_train,
        Phi_test=Phi_test,
        network_scores=fid.network_scores,
        probe_scores=fid.probe_scores,
        cbdt_support=U,
        cbdt_mass=mass,
        rho_recon=fid.rho_recon,
        exactness=exact,
        phi_scale=median_heuristic(Phi_train),
        fit_seconds=fit_seconds,
    )
    return run


def pjm_runs(seeds: Iterable[int] = SEEDS, config: PJMConfig | None = None) -> list[PJMRun]:
    """:func:`pjm_run` for every seed."""
    return [pjm_run(s, config) for s in seeds]


# ---------------------------------------------------------------------- the problem
def transition_loads(problem: BiddingProblem) -> np.ndarray:
    """Loads (MW) at which the *expected* price :math:`P_0 e^{\\zeta z}` crosses the offer prices
    :math:`\\mathrm{bid}_1` and :math:`\\mathrm{bid}_2`: where the best strategy changes if the
    load were known."""
    m = problem.market
    if m.load_slope == 0:
        return np.array([np.nan, np.nan])
    z = np.log(problem.offer_prices[1:] / m.base_price) / m.load_slope
    return problem.load_mean + problem.load_sd * z


def problem_summary(problem: BiddingProblem) -> pd.DataFrame:
    """Hours, dates, price range and ex-post optimal shares of each split."""
    rows = []
    h = problem.hours
    for split in ("train", "test"):
        g = h[h["split"] == split]
        shares = np.bincount(g["a_star"], minlength=len(ACTIONS)) / len(g)
        rows.append(
            {
                "split": split,
                "hours": len(g),
                "first hour": str(g.index[0]),
                "last hour": str(g.index[-1]),
                "mean load (MW)": g["load_mw"].mean(),
                "mean price ($/MWh)": g["price"].mean(),
                **{f"share a*={a}": s for a, s in zip(ACTIONS, shares, strict=True)},
            }
        )
    return pd.DataFrame(rows).set_index("split")


# ---------------------------------------------------------------------- Fig. 3a
def decision_agreement(runs: Iterable[PJMRun]) -> pd.DataFrame:
    """Per seed: NN-CBDT agreement and the decisions' realised test returns."""
    rows = []
    for r in runs:
        Rt = r.problem.R_test
        m = np.arange(Rt.shape[0])
        nn, cb, pr = r.nn_decision, r.cbdt_decision, r.probe_decision
        rows.append(
            {
                "seed": r.seed,
                "bandwidth": r.bandwidth.bandwidth,
                "final_loss": r.final_loss,
                "n_test": Rt.shape[0],
                "n_agree": int((nn == cb).sum()),
                "agreement": float((nn == cb).mean()),
                "probe_cbdt_agreement": float((pr == cb).mean()),
                "nn_probe_agreement": float((nn == pr).mean()),
                "return_nn": float(Rt[m, nn].mean()),
                "return_cbdt": float(Rt[m, cb].mean()),
                "return_oracle": float(Rt.max(axis=1).mean()),
                "return_best_constant": float(Rt.mean(axis=0).max()),
                "return_nn_on_disagreements": float(Rt[m, nn][nn != cb].mean())
                if (nn != cb).any()
                else float("nan"),
                "return_cbdt_on_disagreements": float(Rt[m, cb][nn != cb].mean())
                if (nn != cb).any()
                else float("nan"),
                "test_mse_nn": float(((r.network_scores - Rt) ** 2).mean()),
                "test_mse_cbdt": float(((r.cbdt_average - Rt) ** 2).mean()),
            }
        )
    return pd.DataFrame(rows)


def disagreement_profile(run: PJMRun) -> pd.DataFrame:
    """One row per test hour: loads, margins, both decisions and whether they agree."""
    Ubar = run.cbdt_average
    h = run.problem.hours.iloc[run.problem.n_train :]
    return pd.DataFrame(
        {
            "prev_load_mw": h["prev_load_mw"].to_numpy(),
            "load_mw": h["load_mw"].to_numpy(),
            "cbdt_margin": decision_margin(Ubar),
            "nn_margin": decision_margin(run.network_scores),
            "nn_action": run.nn_decision,
            "cbdt_action": run.cbdt_decision,
            "agree": run.nn_decision == run.cbdt_decision,
        },
        index=h.index,
    )


def decision_crosstab(runs: Iterable[PJMRun]) -> pd.DataFrame:
    """Test hours per (network action, CBDT action), summed over the runs."""
    total = np.zeros((len(ACTIONS), len(ACTIONS)), dtype=int)
    for r in runs:
        np.add.at(total, (r.nn_decision, r.cbdt_decision), 1)
    return pd.DataFrame(
        total,
        index=pd.Index([f"network: {a}" for a in ACTIONS]),
        columns=pd.Index([f"CBDT: {a}" for a in ACTIONS]),
    )


def disagreement_by_margin(runs: Iterable[PJMRun], n_bins: int = 5) -> pd.DataFrame:
    """Disagreement rate per CBDT-margin quantile bin (bins per seed), mean and CI over seeds."""
    rows = []
    for r in runs:
        prof = disagreement_profile(r)
        bins = pd.qcut(prof["cbdt_margin"], n_bins, labels=False)
        for b in range(n_bins):
            g = prof[bins == b]
            rows.append(
                {
                    "seed": r.seed,
                    "margin bin": b + 1,
                    "max margin": g["cbdt_margin"].max(),
                    "disagreement": 1.0 - g["agree"].mean(),
                    "share of all disagreements": (~g["agree"]).sum()
                    / max((~prof["agree"]).sum(), 1),
                }
            )
    df = pd.DataFrame(rows)
    out = summarize_seeds(
        df, "margin bin", ["max margin", "disagreement", "share of all disagreements"]
    )
    return out.drop(columns="n")


# ---------------------------------------------------------------------- Fig. 3b
def support_alignment(runs: Iterable[PJMRun]) -> pd.DataFrame:
    """Per seed and action: rho_support (normalised and raw U) and rho_recon."""
    rows = []
    for r in runs:
        Ubar = r.cbdt_average
        for a, name in enumerate(ACTIONS):
            rows.append(
                {
                    "seed": r.seed,
                    "action": name,
                    "rho_support": pearson(r.probe_scores[:, a], Ubar[:, a]),
                    "rho_support_raw": pearson(r.probe_scores[:, a], r.cbdt_support[:, a]),
                    "rho_recon": float(r.rho_recon[a]),
                }
            )
    return pd.DataFrame(rows)


def bandwidth_sensitivity(
    run: PJMRun, factors: Iterable[float] = (1.0, 0.5, 0.25, 0.125, 0.0625)
) -> pd.DataFrame:
    """NN-CBDT agreement and rho_support of one run for bandwidths :math:`\\omega = f\\,\\omega_{med}`.

    The network is unchanged; only the CBDT decision maker moves.
    """
    rows = []
    p = run.problem
    m = np.arange(p.n_test)
    for f in factors:
        h = float(f) * run.bandwidth.median_heuristic
        U, mass = cbdt_support(p.X_test, p.X_train, p.R_train, h)
        if (mass <= 0).any():
            raise InputError(f"bandwidth {h:.3g} underflows: a test hour has zero similarity mass.")
        Ubar = U / mass[:, None]
        cb = np.argmax(U, axis=1)
        rows.append(
            {
                "factor": float(f),
                "bandwidth": h,
                "chosen": bool(np.isclose(h, run.bandwidth.bandwidth)),
                "agreement": float((cb == run.nn_decision).mean()),
                **{
                    f"rho_support {a}": pearson(run.probe_scores[:, k], Ubar[:, k])
                    for k, a in enumerate(ACTIONS)
                },
                "return_cbdt": float(p.R_test[m, cb].mean()),
                **{f"share {a}": float((cb == k).mean()) for k, a in enumerate(ACTIONS)},
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- Sec. 5.5, C.2
def geometry_queries(n_test: int, n: int = 50) -> np.ndarray:
    """``n`` test positions evenly spaced over the test span (first and last included)."""
    if n < 1 or n > n_test:
        raise InputError(f"need 1 <= n <= n_test = {n_test}, got {n}.")
    return np.unique(np.round(np.linspace(0, n_test - 1, n)).astype(int))


@dataclass(frozen=True)
class SignedGeometry:
    """Result of :func:`signed_geometry` for one run.

    Attributes
    ----------
    queries : ndarray of int, shape (q,)
        Test positions.
    cases : pandas.DataFrame
        One row per (query, group, rank): ``query``, ``group`` ("positive"/"negative"),
        ``rank`` (1 = strongest), ``case``, ``alpha``, ``distance`` (standardised),
        ``a_star``, ``predicted`` (network action of the query), ``match``.
    alpha, distance : ndarray of shape (q, n_train)
        All coefficients and standardised distances of the queries (for Fig. C1).
    dist_ratio_coordstd : float
        Negative / positive mean distance with coordinate-standardised :math:`\\varphi`.
    """

    queries: np.ndarray
    cases: pd.DataFrame
    alpha: np.ndarray
    distance: np.ndarray
    dist_ratio_coordstd: float


def signed_geometry(run: PJMRun, n_queries: int | None = None, top: int | None = None):
    """Top-``top`` positive and negative coefficient cases of evenly spaced test hours."""
    n_queries = run.config.n_geometry if n_queries is None else n_queries
    top = run.config.top if top is None else top
    q = geometry_queries(run.problem.n_test, n_queries)
    phi_q = run.Phi_test[q]
    alpha = run.probe.coefficients(phi_q)
    dist = cdist(phi_q, run.Phi_train) / run.phi_scale
    mu = run.Phi_train.mean(axis=0)
    sd = run.Phi_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    dist_c = cdist((phi_q - mu) / sd, (run.Phi_train - mu) / sd)
    a_star = run.problem.a_star_train
    pred = run.nn_decision[q]
    order = np.argsort(alpha, axis=1, kind="stable")
    groups = {"positive": order[:, ::-1][:, :top], "negative": order[:, :top]}
    rows = []
    dc = {}
    for g, idx in groups.items():
        dc[g] = np.take_along_axis(dist_c, idx, axis=1).mean()
        for j in range(q.size):
            for rank, i in enumerate(idx[j], start=1):
                rows.append(
                    {
                        "query": int(q[j]),
                        "group": g,
                        "rank": rank,
                        "case": int(i),
                        "alpha": float(alpha[j, i]),
                        "distance": float(dist[j, i]),
                        "a_star": int(a_star[i]),
                        "predicted": int(pred[j]),
                        "match": bool(a_star[i] == pred[j]),
                    }
                )
    return SignedGeometry(
        q, pd.DataFrame(rows), alpha, dist, float(dc["negative"] / dc["positive"])
    )


def geometry_summary(geoms: Iterable[SignedGeometry], seeds: Iterable[int]) -> pd.DataFrame:
    """Per seed: group distances, their ratio, action matches and the magnitude ratio."""
    rows = []
    for seed, g in zip(seeds, geoms, strict=True):
        pos = g.cases[g.cases["group"] == "positive"]
        neg = g.cases[g.cases["group"] == "negative"]
        rows.append(
            {
                "seed": seed,
                "pos_distance": pos["distance"].mean(),
                "neg_distance": neg["distance"].mean(),
                "dist_ratio": neg["distance"].mean() / pos["distance"].mean(),
                "dist_ratio_coordstd": g.dist_ratio_coordstd,
                "pos_match": pos["match"].mean(),
                "neg_match": neg["match"].mean(),
                "pos_abs_alpha": pos["alpha"].abs().mean(),
                "neg_abs_alpha": neg["alpha"].abs().mean(),
                "magnitude_ratio": pos["alpha"].abs().mean() / neg["alpha"].abs().mean(),
                "negative_share": float((g.alpha < 0).mean()),
            }
        )
    return pd.DataFrame(rows)


def _fmt(values: Any, digits: int = 4) -> str:
    m, h = mean_ci(np.asarray(values, dtype=float))
    return format_mean_ci(m, h, digits)


def summary_table(
    agreement: pd.DataFrame, alignment: pd.DataFrame, geometry: pd.DataFrame
) -> pd.DataFrame:
    """Every headline number: book (mean ± 95 % CI over seeds) beside the paper."""
    rows = [
        (
            "NN-CBDT agreement",
            _fmt(agreement["agreement"]),
            f"{PAPER['agreement']:.4f} (3221/3358)",
        ),
        (
            "agreeing test hours (of n_test)",
            _fmt(agreement["n_agree"], 1),
            f"{PAPER['n_agree']} of {PAPER['n_test']}",
        ),
    ]
    for a in ACTIONS:
        g = alignment[alignment["action"] == a]
        rows.append(
            (
                f"rho_support {a}",
                _fmt(g["rho_support"]),
                "weaker (Fig. 3b)" if a == "aggressive" else "strong (Fig. 3b)",
            )
        )
    for k, a in enumerate(ACTIONS):
        g = alignment[alignment["action"] == a]
        rows.append((f"rho_recon {a}", _fmt(g["rho_recon"]), f"{PAPER['rho_recon'][k]:.4f}"))
    rows += [
        ("distance, top-5 positive alpha", _fmt(geometry["pos_distance"]), "0.44 ± 0.04"),
        ("distance, top-5 negative alpha", _fmt(geometry["neg_distance"]), "3.30 ± 0.16"),
        ("distance ratio (neg / pos)", _fmt(geometry["dist_ratio"]), "7.5"),
        ("top-5 positive: a* = predicted", _fmt(geometry["pos_match"]), "0.641"),
        ("top-5 negative: a* = predicted", _fmt(geometry["neg_match"]), "not reported"),
        ("magnitude ratio |alpha| pos / neg", _fmt(geometry["magnitude_ratio"]), "3.7"),
    ]
    n_seeds = int(agreement["seed"].nunique()) if "seed" in agreement else len(agreement)
    book = f"book: mean ± 95% CI ({n_seeds} seed{'s' if n_seeds != 1 else ''})"
    return pd.DataFrame(rows, columns=["quantity", book, "paper"])


# ---------------------------------------------------------------------- App. C.3
def representation_pca(Phi_train: np.ndarray, n_components: int = 2):
    """Mean and the first principal axes (rows) of the training representations."""
    mu = Phi_train.mean(axis=0)
    _, s, vt = np.linalg.svd(Phi_train - mu, full_matrices=False)
    # fix the sign of each axis (largest-magnitude loading positive): deterministic plots
    signs = np.sign(vt[np.arange(n_components), np.abs(vt[:n_components]).argmax(axis=1)])
    comps = vt[:n_components] * signs[:, None]
    explained = (s**2 / (s**2).sum())[:n_components]
    return mu, comps, explained


def default_audit_index(run: PJMRun) -> int:
    """The representative query of the single-decision audit (Sec. 5.5, C.3).

    Among test hours where the network selects the moderate action (action 1, as in the
    paper's example) and CBDT agrees, the one with the median CBDT margin (the lower median
    for an even count; if there is none, the median-margin hour among all test hours).
    """
    prof = disagreement_profile(run)
    cand = np.flatnonzero((prof["nn_action"] == 1).to_numpy() & prof["agree"].to_numpy())
    if cand.size == 0:
        cand = np.arange(len(prof))
    margins = prof["cbdt_margin"].to_numpy()[cand]
    order = np.argsort(margins, kind="stable")
    return int(cand[order[(cand.size - 1) // 2]])


@dataclass(frozen=True)
class QueryAudit:
    """Result of :func:`audit_query`: one test hour traced to its training cases.

    Attributes
    ----------
    index : int
        Test position.
    time : pandas.Timestamp
    network_scores, probe_scores, cbdt_average : ndarray of shape (3,)
    selected : int
        Network action.
    cbdt_selected : int
    cases : pandas.DataFrame
        Ranked cases: ``group``, ``rank``, ``case`` (training index), ``hour``, ``alpha``,
        ``a_star``, ``return`` (:math:`r_i(a)` of the selected action), ``distance``
        (standardised), ``contribution`` (:math:`\\psi_i = \\alpha_i r_i(a)`), ``match``.
    xy_train : ndarray of shape (k, 2)
        PCA coordinates of every training case.
    xy_query : ndarray of shape (2,)
    xy_cases : ndarray of shape (2 * top, 2)
        Coordinates of ``cases`` (same order).
    explained : ndarray of shape (2,)
        Explained variance ratios of the two axes.
    """

    index: int
    time: pd.Timestamp
    network_scores: np.ndarray
    probe_scores: np.ndarray
    cbdt_average: np.ndarray
    selected: int
    cbdt_selected: int
    cases: pd.DataFrame
    xy_train: np.ndarray
    xy_query: np.ndarray
    xy_cases: np.ndarray
    explained: np.ndarray

    def scores_table(self) -> pd.DataFrame:
        """Network score, probe score and normalised CBDT support of every action."""
        return pd.DataFrame(
            {
                "network score": self.network_scores,
                "probe score = sum alpha r": self.probe_scores,
                "CBDT avg. support": self.cbdt_average,
            },
            index=pd.Index(ACTIONS, name="action"),
        )


def audit_query(run: PJMRun, index: int, top: int | None = None) -> QueryAudit:
    """Network scores, selected action and the ranked positive/negative cases of one hour."""
    top = run.config.top if top is None else top
    p = run.problem
    if not 0 <= int(index) < p.n_test:
        raise InputError(f"index must lie in 0..{p.n_test - 1}, got {index}.")
    index = int(index)
    phi = run.Phi_test[index]
    alpha = run.probe.coefficients(phi)
    dist = np.linalg.norm(run.Phi_train - phi, axis=1) / run.phi_scale
    sel = int(run.nn_decision[index])
    order = np.argsort(alpha, kind="stable")
    rows = []
    for g, idx in (("positive", order[::-1][:top]), ("negative", order[:top])):
        for rank, i in enumerate(idx, start=1):
            rows.append(
                {
                    "group": g,
                    "rank": rank,
                    "case": int(i),
                    "hour": p.times_train[i].strftime("%Y-%m-%d %H:%M"),
                    "alpha": float(alpha[i]),
                    "a_star": ACTIONS[p.a_star_train[i]],
                    "return": float(p.R_train[i, sel]),
                    "distance": float(dist[i]),
                    "contribution": float(alpha[i] * p.R_train[i, sel]),
                    "match": bool(p.a_star_train[i] == sel),
                }
            )
    cases = pd.DataFrame(rows)
    mu, comps, explained = representation_pca(run.Phi_train)
    xy_train = (run.Phi_train - mu) @ comps.T
    return QueryAudit(
        index=index,
        time=p.times_test[index],
        network_scores=run.network_scores[index].copy(),
        probe_scores=run.probe_scores[index].copy(),
        cbdt_average=run.cbdt_average[index].copy(),
        selected=sel,
        cbdt_selected=int(run.cbdt_decision[index]),
        cases=cases,
        xy_train=xy_train,
        xy_query=(phi - mu) @ comps.T,
        xy_cases=xy_train[cases["case"].to_numpy()],
        explained=explained,
    )


# ---------------------------------------------------------------------- the paper beside the book
