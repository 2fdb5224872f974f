"""Synthetic CBDT recovery and the attribution comparison (Sec. 5.2-5.3, Fig. 1-2, Table 1, App. D).

Every function here works on *runs*: one draw of :func:`cbdt.datasets.synthetic.make_synthetic_cbdt`
plus one :class:`cbdt.models.CaseNetwork` trained on it, per seed. Runs are cached in the
process (:func:`synthetic_run`), so the recovery table, the comparison, the sensitivity table
and the timing all reuse the same five networks.

Measures (defined once, used everywhere)
----------------------------------------
Let :math:`x` be a test problem, :math:`a^*(x)` its CBDT-optimal action (eq. 2),
:math:`s` the generator's Gaussian similarity and :math:`a_i^* = \\arg\\max_a r_i(a)` the
case-optimal action of training case ``i`` (observed returns, as in eq. 16).

Ground-truth contribution
    :math:`g_i(x, a) = s(x, x_i)\\, r_i(a)`: the CBDT aggregation (eq. 1) with the true
    similarity applied to the *training* cases.
Method contribution
    :math:`c_i(x, a)`, the method's per-case additive share of :math:`Q(x, a)`
    (:mod:`cbdt.baselines`): :math:`w_i(x) r_i(a)` for the weight methods (exact coefficient
    :math:`w = \\alpha`, inner product), the method's own score for Influence Functions,
    Representer Point and TracIn, whose scores are already contributions to the score
    (multiplying them by :math:`r_i(a)` again is a sensitivity row).
Pearson
    For each test query and each action, the Pearson correlation over the ``n`` training
    cases between :math:`c_i(x, a)` and :math:`g_i(x, a)`; averaged over the test queries and
    the actions. One number per seed.
Top-30 action consistency
    For each test query, the share of the 30 training cases with the largest
    :math:`|c_i(x, a^*(x))|` whose case-optimal action :math:`a_i^*` equals
    :math:`a^*(x)` (:func:`cbdt.metrics.topk_action_consistency`); averaged over the test
    queries. One number per seed.

Reported as mean and 95% Student-t interval over the five seeds
(:func:`cbdt.metrics.summarize_seeds`).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from cbdt._threads import single_threaded_blas
from cbdt.baselines import (
    METHODS,
    ExactCoefficient,
    InfluenceFunction,
    InnerProduct,
    RepresenterPoint,
    TracIn,
    fit_methods,
)
from cbdt.datasets.synthetic import SyntheticCBDT, make_synthetic_cbdt
from cbdt.exceptions import InputError
from cbdt.metrics import pearson, summarize_seeds, topk_action_consistency
from cbdt.models import CaseNetwork, NetworkConfig, ProbeFidelity

__all__ = [
    "SEEDS",
    "GROUND_TRUTH",
    "PAPER_TABLE1",
    "PAPER_TIMING",
    "SyntheticConfig",
    "SyntheticRun",
    "DecisionRegions",
    "synthetic_run",
    "clear_cache",
    "synthetic_recovery",
    "attribution_comparison",
    "summarize_comparison",
    "attribution_sensitivity",
    "attribution_timing",
    "summarize_timing",
    "decision_regions",
    "support_reconstruction",
    "query_attributions",
    "rowwise_pearson",
]

#: The five seeds of every table.
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: Name of the reference row: the ground-truth contribution itself.
GROUND_TRUTH = "Ground truth s(x, x_i) r_i(a)"
#: Table 1 of the paper: (Top-30 mean, CI, Pearson mean, CI).
PAPER_TABLE1: dict[str, tuple[float, float, float, float]] = {
    "Ours (alpha)": (0.941, 0.030, 0.368, 0.172),
    "Representer Point": (0.667, 0.128, 0.090, 0.080),
    "TracIn": (0.671, 0.129, 0.089, 0.156),
    "Influence Functions": (0.909, 0.043, 0.295, 0.123),
    "Inner product": (0.697, 0.092, 0.277, 0.086),
}
#: Table C3 of the paper: (ms per query, CI, relative cost).
PAPER_TIMING: dict[str, tuple[float, float, float]] = {
    "Ours (alpha)": (58.560, 130.335, 170.2),
    "Representer Point": (0.344, 0.110, 1.0),
    "TracIn": (0.494, 0.088, 1.4),
    "Influence Functions": (0.503, 0.073, 1.5),
}


@dataclass(frozen=True)
class SyntheticConfig:
    """Generator and network settings of one run (defaults: the book's choices).

    See :mod:`cbdt.datasets.synthetic` for the generator defaults and
    :class:`cbdt.models.CaseNetwork` for the network defaults and their reasons.
    """

    n_train: int = 500
    n_test: int = 200
    noise: float = 0.1
    bandwidth: float | None = None
    hidden: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    epochs: int = 1000
    lr: float = 1e-2
    n_checkpoints: int = 10


@dataclass(frozen=True)
class SyntheticRun:
    """One seed: data, trained network and the OLS probe on its frozen representation.

    Attributes
    ----------
    seed : int
    config : SyntheticConfig
    data : SyntheticCBDT
    network : CaseNetwork
    Phi_train, Phi_test : ndarray of shape (n, H), (m, H)
        Frozen representations.
    fidelity : ProbeFidelity
        OLS probe (``CaseInfluence(intercept=True)``) and :math:`\\rho_{recon}`.
    probe_solver : str
        ``"cholesky"``, or ``"lstsq"`` (minimum norm) when :math:`\\tilde\\Phi` is
        rank-deficient (dead ReLU units).
    ground_truth : ndarray of shape (|A|, m, n)
        :math:`g_i(x, a) = s(x, x_i) r_i(a)` for every test query.
    """

    seed: int
    config: SyntheticConfig
    data: SyntheticCBDT
    network: CaseNetwork
    Phi_train: np.ndarray
    Phi_test: np.ndarray
    fidelity: ProbeFidelity
    probe_solver: str
    ground_truth: np.ndarray


def clear_cache() -> None:
    """Forget the runs :func:`synthetic_run` keeps (networks are retrained on the next call)."""
    _synthetic_run.cache_clear()
    _CONTRIB.clear()


def _config(config: SyntheticConfig | None, **overrides: Any) -> SyntheticConfig:
    cfg = SyntheticConfig() if config is None else config
    if not isinstance(cfg, SyntheticConfig):
        raise InputError(f"config must be a SyntheticConfig, got {type(cfg).__name__}.")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if not isinstance(cfg.hidden, tuple):  # keep the config hashable (it keys the cache)
        overrides["hidden"] = tuple(cfg.hidden)
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def synthetic_run(seed: int, config: SyntheticConfig | None = None) -> SyntheticRun:
    """Data, trained network and OLS probe for one seed.

    The same seed seeds the generator and the network. When the representation (with its
    constant coordinate) is rank-deficient, which happens for ReLU through dead units, the
    probe falls back to the minimum-norm solver (``probe_solver="lstsq"``). Memoised in the
    process on ``(seed, config)`` (:func:`functools.cache`): chapters 05, 06, 09 and 10 reuse
    the trained networks; :func:`clear_cache` forgets them.
    """
    return _synthetic_run(int(seed), _config(config))


@functools.cache
def _synthetic_run(seed: int, cfg: SyntheticConfig) -> SyntheticRun:
    data = make_synthetic_cbdt(
        seed, n_train=cfg.n_train, n_test=cfg.n_test, noise=cfg.noise, bandwidth=cfg.bandwidth
    )
    net = NetworkConfig.of(cfg).build(seed).fit(data.X_train, data.R_train)
    fid = net.probe_fidelity(data.X_train, data.R_train, data.X_test, solver="cholesky_or_lstsq")
    solver = fid.probe.solver_
    S = data.true_similarity(data.X_test)  # (m, n)
    gt = S[None, :, :] * data.R_train.T[:, None, :]
    run = SyntheticRun(
        seed=int(seed),
        config=cfg,
        data=data,
        network=net,
        Phi_train=net.represent(data.X_train),
        Phi_test=net.represent(data.X_test),
        fidelity=fid,
        probe_solver=solver,
        ground_truth=gt,
    )
    return run


def _seeds(seeds: Iterable[int]) -> list[int]:
    out = [int(s) for s in seeds]
    if not out:
        raise InputError("seeds must name at least one seed.")
    return out


# ---------------------------------------------------------------------- recovery (Fig. 1)
def synthetic_recovery(
    seeds: Iterable[int] = SEEDS, config: SyntheticConfig | None = None
) -> pd.DataFrame:
    """Recovery of the known CBDT mechanism by the OLS readout (Sec. 5.2, Fig. 1).

    Per seed, on the 200 test problems:

    * ``agreement``: share of test problems where the OLS probe's action
      :math:`\\arg\\max_a \\hat Q(x, a)` equals the CBDT-optimal :math:`a^*(x)` (paper: 96.0%);
    * ``network_agreement``: the same for the network's own scores;
    * ``support_corr_a{k}``: Pearson correlation of probe scores and true supports
      :math:`U(a_k \\mid M, x)` (Fig. 1c);
    * ``rho_recon_a{k}``: probe fidelity, Pearson of probe and network scores;
    * ``probe_solver``, ``condition_number``: of the probe's Gram matrix.

    Returns
    -------
    DataFrame
        One row per seed.
    """
    rows = []
    for seed in _seeds(seeds):
        run = synthetic_run(seed, config)
        d, fid = run.data, run.fidelity
        row: dict[str, Any] = {
            "seed": seed,
            "agreement": float(np.mean(np.argmax(fid.probe_scores, 1) == d.a_test)),
            "network_agreement": float(np.mean(np.argmax(fid.network_scores, 1) == d.a_test)),
        }
        for a in range(d.n_actions):
            row[f"support_corr_a{a}"] = pearson(fid.probe_scores[:, a], d.U_test[:, a])
        for a in range(d.n_actions):
            row[f"rho_recon_a{a}"] = float(fid.rho_recon[a])
        row["probe_solver"] = run.probe_solver
        row["condition_number"] = float(fid.probe.condition_number_)
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class DecisionRegions:
    """Decision regions on a grid of the problem space (Fig. 1a-b).

    Attributes
    ----------
    xs, ys : ndarray of shape (r,)
        Grid coordinates.
    cbdt, readout, network : ndarray of int of shape (r, r)
        :math:`a^*(x)`, the OLS probe's action and the network's action; ``[iy, ix]``.
    support : ndarray of shape (r, r, |A|)
        True supports on the grid.
    run : SyntheticRun
    """

    xs: np.ndarray
    ys: np.ndarray
    cbdt: np.ndarray
    readout: np.ndarray
    network: np.ndarray
    support: np.ndarray
    run: SyntheticRun


def decision_regions(
    seed: int = 0, resolution: int = 121, config: SyntheticConfig | None = None
) -> DecisionRegions:
    """CBDT, OLS-readout and network decisions on a ``resolution``² grid (Fig. 1a-b)."""
    if not isinstance(resolution, numbers.Integral) or resolution < 2:
        raise InputError(f"resolution must be an integer >= 2, got {resolution!r}.")
    run = synthetic_run(seed, config)
    d = run.data
    xs = np.linspace(d.low, d.high, resolution)
    gx, gy = np.meshgrid(xs, xs)
    P = np.column_stack([gx.ravel(), gy.ravel()])
    U = d.support(P)
    probe = run.fidelity.probe.scores(run.network.represent(P))
    shape = (resolution, resolution)
    return DecisionRegions(
        xs=xs,
        ys=xs.copy(),
        cbdt=np.argmax(U, 1).reshape(shape),
        readout=np.argmax(probe, 1).reshape(shape),
        network=run.network.decide(P).reshape(shape),
        support=U.reshape(*shape, -1),
        run=run,
    )


def support_reconstruction(seed: int = 0, config: SyntheticConfig | None = None) -> pd.DataFrame:
    """Test-set true supports beside probe and network scores, long format (Fig. 1c)."""
    run = synthetic_run(seed, config)
    d, fid = run.data, run.fidelity
    m = d.X_test.shape[0]
    frames = [
        pd.DataFrame(
            {
                "query": np.arange(m),
                "action": a,
                "true_support": d.U_test[:, a],
                "probe_score": fid.probe_scores[:, a],
                "network_score": fid.network_scores[:, a],
            }
        )
        for a in range(d.n_actions)
    ]
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------- attribution (Table 1)
def rowwise_pearson(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Pearson correlation of matching rows of ``X`` and ``Y`` (..., n) -> (...).

    Rows where either side is constant give NaN (the correlation is undefined).
    """
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if X.shape != Y.shape:
        raise InputError(f"X and Y must have the same shape, got {X.shape} and {Y.shape}.")
    Xc = X - X.mean(axis=-1, keepdims=True)
    Yc = Y - Y.mean(axis=-1, keepdims=True)
    den = np.sqrt((Xc**2).sum(-1) * (Yc**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (Xc * Yc).sum(-1) / den, np.nan)


_TopAction = Literal["optimal", "all"]
_PearsonKind = Literal["signed", "absolute"]
_Contribution = Literal["own", "times_return"]
_SCORE_METHODS = ("Representer Point", "TracIn", "Influence Functions")

_CONTRIB: dict[tuple, np.ndarray] = {}


def _all_actions(method: Any, phi: np.ndarray, n_actions: int) -> np.ndarray:
    return np.stack([method.contributions(phi, a) for a in range(n_actions)])


def _contributions(
    run: SyntheticRun,
    *,
    probe_ridge: float = 0.0,
    residuals: Literal["trained", "returns"] = "trained",
    methods: Sequence[str] = METHODS,
) -> dict[str, np.ndarray]:
    """Contributions (|A|, m, n) of each requested method on the test queries (cached)."""
    d = run.data
    A = d.n_actions
    G = run.Phi_train.T @ run.Phi_train
    ridge = float(probe_ridge) * np.trace(G) / G.shape[0]
    out: dict[str, np.ndarray] = {}
    for name in methods:
        key = (run.seed, run.config, name)
        if name == ExactCoefficient.name:
            key += (float(probe_ridge),)
        if name in (InfluenceFunction.name, RepresenterPoint.name):
            key += (residuals,)
        if key in _CONTRIB:
            out[name] = _CONTRIB[key]
            continue
        if name == ExactCoefficient.name:
            meth = ExactCoefficient(ridge=ridge, solver=run.probe_solver).fit(
                run.Phi_train, d.R_train
            )
            C = _all_actions(meth, run.Phi_test, A)
        elif name == RepresenterPoint.name:
            meth = RepresenterPoint(residuals=residuals).fit(run.Phi_train, d.R_train)
            C = _all_actions(meth, run.Phi_test, A)
        elif name == InfluenceFunction.name:
            meth = InfluenceFunction(residuals=residuals).fit(
                run.Phi_train,
                d.R_train,
                weight=run.network.head_weight_,
                bias=run.network.head_bias_,
            )
            C = _all_actions(meth, run.Phi_test, A)
        elif name == TracIn.name:
            meth = TracIn.from_network(run.network, d.X_train, d.R_train)
            C = _all_actions(meth, run.network.represent_checkpoints(d.X_test), A)
        elif name == InnerProduct.name:
            meth = InnerProduct().fit(run.Phi_train, d.R_train)
            C = _all_actions(meth, run.Phi_test, A)
        else:
            raise InputError(f"unknown method {name!r}; choose from {METHODS}.")
        _CONTRIB[key] = C
        out[name] = C
    return out


def _evaluate(
    C: np.ndarray,
    run: SyntheticRun,
    *,
    k: int,
    top_action: _TopAction,
    pearson_kind: _PearsonKind,
) -> tuple[float, float]:
    """(Top-k action consistency, Pearson) of contributions C (|A|, m, n) on one run."""
    d = run.data
    a_star = d.a_test
    case_actions = d.case_actions
    m = a_star.shape[0]
    if top_action == "optimal":
        W = C[a_star, np.arange(m)]
        top = float(np.mean(topk_action_consistency(W, case_actions, a_star, k)))
    elif top_action == "all":
        top = float(
            np.mean(
                [
                    np.mean(topk_action_consistency(C[a], case_actions, a_star, k))
                    for a in range(C.shape[0])
                ]
            )
        )
    else:
        raise InputError(f"top_action must be 'optimal' or 'all', got {top_action!r}.")
    if pearson_kind == "signed":
        r = rowwise_pearson(C, run.ground_truth)
    elif pearson_kind == "absolute":
        r = rowwise_pearson(np.abs(C), np.abs(run.ground_truth))
    else:
        raise InputError(f"pearson_kind must be 'signed' or 'absolute', got {pearson_kind!r}.")
    n_undefined = int(np.isnan(r).sum())
    if n_undefined:
        warnings.warn(
            f"{n_undefined} of {r.size} (action, query) Pearson values are undefined (a "
            "constant contribution vector) and are left out of the mean.",
            RuntimeWarning,
            stacklevel=2,
        )
    return top, float(np.nanmean(r))


def _with_returns(C: np.ndarray, run: SyntheticRun) -> np.ndarray:
    return C * run.data.R_train.T[:, None, :]


def attribution_comparison(
    seeds: Iterable[int] = SEEDS,
    *,
    k: int = 30,
    config: SyntheticConfig | None = None,
    probe_ridge: float = 0.0,
    residuals: Literal["trained", "returns"] = "trained",
    top_action: _TopAction = "optimal",
    pearson_kind: _PearsonKind = "signed",
    contribution: _Contribution = "own",
    methods: Sequence[str] = METHODS,
    include_ground_truth: bool = True,
) -> pd.DataFrame:
    """Top-k action consistency and Pearson of every method, per seed (Table 1, Fig. 2).

    Definitions in the module docstring. The defaults are the book's reading of the paper:

    * ``probe_ridge=0``: the OLS probe of Proposition 1 (a multiple of
      :math:`\\mathrm{tr}(G)/H` otherwise);
    * ``residuals="trained"``: IF and Representer use the loss gradients at their trained
      heads, i.e. the methods as their papers define them;
    * ``top_action="optimal"``: rank cases by their contribution to the score of the action
      the metric asks about, :math:`a^*(x)`; ``"all"`` averages the Top-k share over the
      rankings of every action's score;
    * ``pearson_kind="signed"``: contributions keep their sign (a case that lowers a score
      should be told apart from one that raises it); ``"absolute"`` correlates magnitudes;
    * ``contribution="own"``: score-type methods (IF, Representer, TracIn) are compared
      through their own scores; ``"times_return"`` multiplies them by :math:`r_i(a)`.

    Parameters
    ----------
    seeds : iterable of int, default=SEEDS
    k : int, default=30
    config : SyntheticConfig, optional
    probe_ridge : float, default=0.0
        Ridge of the exact coefficient as a multiple of :math:`\\mathrm{tr}(G)/H`.
    residuals, top_action, pearson_kind, contribution
        See above.
    methods : sequence of str, default=METHODS
    include_ground_truth : bool, default=True
        Add the reference row :data:`GROUND_TRUTH` (the ceiling each metric allows; its
        Pearson is 1 by construction).

    Returns
    -------
    DataFrame
        Columns ``seed, method, top30, pearson`` (``top{k}`` for other ``k``).
    """
    if contribution not in ("own", "times_return"):
        raise InputError(f"contribution must be 'own' or 'times_return', got {contribution!r}.")
    col = f"top{k}"
    rows = []
    for seed in _seeds(seeds):
        run = synthetic_run(seed, config)
        if not 1 <= k <= run.data.X_train.shape[0]:
            raise InputError(f"k = {k} must lie in 1..n = {run.data.X_train.shape[0]}.")
        contribs = _contributions(
            run, probe_ridge=probe_ridge, residuals=residuals, methods=methods
        )
        for name, C in contribs.items():
            if contribution == "times_return" and name in _SCORE_METHODS:
                C = _with_returns(C, run)
            top, r = _evaluate(C, run, k=k, top_action=top_action, pearson_kind=pearson_kind)
            rows.append({"seed": seed, "method": name, col: top, "pearson": r})
        if include_ground_truth:
            top, r = _evaluate(
                run.ground_truth, run, k=k, top_action=top_action, pearson_kind=pearson_kind
            )
            rows.append({"seed": seed, "method": GROUND_TRUTH, col: top, "pearson": r})
    return pd.DataFrame(rows)


def summarize_comparison(df: pd.DataFrame, with_paper: bool = True) -> pd.DataFrame:
    """Mean and 95% CI over seeds per method; optionally beside the paper's Table 1."""
    cols = [c for c in df.columns if c not in ("seed", "method")]
    out = summarize_seeds(df, "method", cols)
    if with_paper:
        topcol = next(c for c in cols if c.startswith("top"))
        out[f"paper_{topcol}"] = [PAPER_TABLE1.get(m, (np.nan,) * 4)[0] for m in out.index]
        out["paper_pearson"] = [PAPER_TABLE1.get(m, (np.nan,) * 4)[2] for m in out.index]
    return out


# ---------------------------------------------------------------------- sensitivity
def attribution_sensitivity(
    seeds: Iterable[int] = SEEDS,
    *,
    k: int = 30,
    ridge_multiples: Sequence[float] = (1e-4, 1e-2, 1.0),
    config: SyntheticConfig | None = None,
) -> pd.DataFrame:
    """How the choices the paper leaves open move Table 1 (5-seed means with 95% CIs).

    The default row of every factor is the one :func:`attribution_comparison` uses, chosen
    *before* looking at numbers, for these reasons:

    * **probe ridge 0** - Proposition 1 is a statement about the OLS readout; a ridge makes
      the coefficient eq. 11 instead (rows: ``c * tr(G)/H`` for ``c`` in
      ``ridge_multiples``). Only the exact coefficient changes.
    * **Top-k over the CBDT-optimal action** - the metric asks whether the cases that carry
      the score of :math:`a^*(x)` favour :math:`a^*(x)`; ranking the cases of every action's
      score and averaging (``all actions``) mixes in the evidence for actions not chosen.
    * **signed Pearson** - the exact coefficient is signed (Sec. 3.3); a case that lowers a
      score is different evidence from one that raises it. ``absolute`` only asks for
      magnitudes.
    * **IF/Representer with trained residuals** - the methods as defined (gradients at the
      trained head). ``returns`` evaluates the loss gradient at a zero head, where IF becomes
      :math:`n\\alpha_i r_i(a)` and Representer the inner product (see
      :mod:`cbdt.baselines`).
    * **score-type baselines compared by their own score** - IF, Representer and TracIn
      already return contributions to :math:`Q(x, a)`; ``x r_i(a)`` reads them as weights.
    * **tanh representation** - smooth, no dead units, so :math:`\\tilde\\Phi` has full column
      rank as Proposition 1 assumes. ReLU networks lose units; the probe then uses the
      minimum-norm solver.

    Returns
    -------
    DataFrame
        Columns ``factor, variant, default, method, top{k}_mean, top{k}_ci, pearson_mean,
        pearson_ci, n``. Each factor lists the methods it affects, plus the ground-truth
        reference row where the variant changes the metric itself.
    """
    seeds = _seeds(seeds)
    base_cfg = _config(config)
    other_act = "relu" if base_cfg.activation == "tanh" else "tanh"
    all_m = list(METHODS)
    specs: list[tuple[str, str, bool, dict[str, Any], list[str], bool]] = [
        ("probe ridge", "0 (OLS, Prop. 1)", True, {}, [METHODS[0]], False),
    ]
    for c in ridge_multiples:
        specs.append(
            ("probe ridge", f"{c:g} tr(G)/H", False, {"probe_ridge": c}, [METHODS[0]], False)
        )
    specs += [
        ("Top-k action", "CBDT-optimal a*(x)", True, {}, all_m, True),
        ("Top-k action", "all actions (mean)", False, {"top_action": "all"}, all_m, True),
        ("Pearson", "signed", True, {}, all_m, True),
        ("Pearson", "absolute", False, {"pearson_kind": "absolute"}, all_m, True),
        (
            "IF/Representer residuals",
            "trained head",
            True,
            {},
            ["Representer Point", "Influence Functions"],
            False,
        ),
        (
            "IF/Representer residuals",
            "returns (zero head)",
            False,
            {"residuals": "returns"},
            ["Representer Point", "Influence Functions"],
            False,
        ),
        ("baseline contribution", "own score", True, {}, list(_SCORE_METHODS), False),
        (
            "baseline contribution",
            "score x r_i(a)",
            False,
            {"contribution": "times_return"},
            list(_SCORE_METHODS),
            False,
        ),
        ("representation", base_cfg.activation, True, {}, all_m, False),
        (
            "representation",
            other_act,
            False,
            {"config": dataclasses.replace(base_cfg, activation=other_act)},
            all_m,
            False,
        ),
    ]
    frames = []
    topcol = f"top{k}"
    for factor, variant, default, kwargs, meths, gt in specs:
        kw = {"config": base_cfg, **kwargs}
        df = attribution_comparison(seeds, k=k, methods=meths, include_ground_truth=gt, **kw)
        s = summarize_seeds(df, "method", [topcol, "pearson"]).reset_index()
        s.insert(0, "default", default)
        s.insert(0, "variant", variant)
        s.insert(0, "factor", factor)
        frames.append(s)
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------- timing (App. D)
def median_per_query(fn: Callable[[int], Any], n_queries: int, repeats: int) -> float:
    """Median over ``repeats`` passes of the mean seconds per call of ``fn(j)``, j < n_queries.

    A few warm-up calls run first, so caches and lazy initialisation are not timed.
    """
    for j in range(min(3, n_queries)):
        fn(j)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for j in range(n_queries):
            fn(j)
        times.append((time.perf_counter() - t0) / n_queries)
    return float(np.median(times))


def _time_method(
    meth: Any,
    net: CaseNetwork,
    Xq: np.ndarray,
    phi: np.ndarray,
    phi_t: np.ndarray,
    acts: np.ndarray,
    checkpoints: bool,
    repeats: int,
) -> tuple[float, float]:
    """(scores, featurize) median per-query milliseconds of one method."""
    nq = Xq.shape[0]
    if checkpoints:
        s = median_per_query(lambda j: meth.contributions(phi_t[:, j], acts[j]), nq, repeats)
        f = median_per_query(lambda j: net.represent_checkpoints(Xq[j : j + 1]), nq, repeats)
    else:
        s = median_per_query(lambda j: meth.contributions(phi[j], acts[j]), nq, repeats)
        f = median_per_query(lambda j: net.represent(Xq[j : j + 1]), nq, repeats)
    return s * 1e3, f * 1e3


def attribution_timing(
    seeds: Iterable[int] = SEEDS,
    *,
    n_queries: int = 100,
    repeats: int = 7,
    config: SyntheticConfig | None = None,
) -> pd.DataFrame:
    """Per-query audit time after caching, every method in the same run (App. D, Table C3).

    For each seed, all methods are fitted first (their ``fit`` caches everything that does not
    depend on the query: the dual matrix :math:`\\tilde\\Phi\\tilde G^{-1}`, the IF's
    :math:`\\tilde\\Phi\\mathbf H^{-1}`, representer values, TracIn's checkpoint features).
    Then each of ``n_queries`` test queries is audited *one at a time* - all ``n``
    per-case contributions to the score of the network's chosen action - and the mean time
    per query is taken; the median over ``repeats`` such passes is reported.

    ``scores_ms`` times the attribution from the query's representation(s); ``featurize_ms``
    the forward pass(es) that produce them (one for all methods, one per checkpoint for
    TracIn). An extra row ``"Ours (alpha), per-query solve"`` times the exact coefficient
    without any cached dual matrix, ``ExactCoefficient(precompute=False)``: per query two
    triangular solves with the probe's factor and one matrix-vector product with
    :math:`\\tilde\\Phi`.
    ``relative_cost`` divides ``scores_ms`` by the fastest of the five methods of that seed.

    BLAS runs on one thread while timing, as in ``benchmarks/bench_attribution.py``: a query
    is one small matrix-vector product, which threads do not speed up but which a thread
    pool's wake-up and a busy machine slow down, unevenly between methods. The numbers are
    still wall-clock times of this process and move with the machine's load; at n = 500
    per-call overhead dominates them.

    Returns
    -------
    DataFrame
        Columns ``seed, method, scores_ms, featurize_ms, total_ms, relative_cost``.
    """
    if not isinstance(n_queries, int) or n_queries < 1:
        raise InputError(f"n_queries must be a positive integer, got {n_queries!r}.")
    if not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"repeats must be a positive integer, got {repeats!r}.")
    rows = []
    for seed in _seeds(seeds):
        run = synthetic_run(seed, config)
        d, net = run.data, run.network
        nq = min(n_queries, d.X_test.shape[0])
        Xq = d.X_test[:nq]
        acts = net.decide(Xq)
        methods = fit_methods(net, d.X_train, d.R_train, probe_solver=run.probe_solver)
        nocache = ExactCoefficient(solver=run.probe_solver, precompute=False).fit(
            run.Phi_train, d.R_train
        )
        phi = net.represent(Xq)
        phi_t = net.represent_checkpoints(Xq)
        entries: list[tuple[str, Any, bool]] = [
            (name, m, isinstance(m, TracIn)) for name, m in methods.items()
        ]
        entries.append(("Ours (alpha), per-query solve", nocache, False))
        with single_threaded_blas():
            # one discarded round over every method first: whichever method was timed first
            # came out about twice as slow (caches, allocator and BLAS set-up warming)
            for _name, meth, ck in entries:
                _time_method(meth, net, Xq, phi, phi_t, acts, ck, 1)
            res = {
                name: _time_method(meth, net, Xq, phi, phi_t, acts, ck, repeats)
                for name, meth, ck in entries
            }
        fastest = min(res[n][0] for n in methods)
        for name, (s, f) in res.items():
            rows.append(
                {
                    "seed": seed,
                    "method": name,
                    "scores_ms": s,
                    "featurize_ms": f,
                    "total_ms": s + f,
                    "relative_cost": s / fastest,
                }
            )
    return pd.DataFrame(rows)


def summarize_timing(df: pd.DataFrame, with_paper: bool = True) -> pd.DataFrame:
    """Mean and 95% CI over seeds of the timing columns; optionally the paper's Table C3."""
    out = summarize_seeds(df, "method", ["scores_ms", "total_ms", "relative_cost"])
    if with_paper:
        out["paper_ms"] = [PAPER_TIMING.get(m, (np.nan,) * 3)[0] for m in out.index]
        out["paper_relative_cost"] = [PAPER_TIMING.get(m, (np.nan,) * 3)[2] for m in out.index]
    return out


# ---------------------------------------------------------------------- explorer
def query_attributions(
    seed: int = 0,
    query: int = 0,
    action: int | None = None,
    *,
    k: int = 30,
    config: SyntheticConfig | None = None,
) -> pd.DataFrame:
    """Every training case's contribution to one test query under every method (explorer).

    Parameters
    ----------
    seed : int
    query : int
        Index of the test problem.
    action : int, optional
        Action whose score is explained; default the CBDT-optimal :math:`a^*(x)`.
    k : int, default=30
        Marks each method's top-k cases (by absolute contribution) in ``top_<method>``.

    Returns
    -------
    DataFrame
        One row per training case: ``x1, x2, case_action, ground_truth``, one column per
        method with its contribution, and boolean ``top_<method>`` columns.
    """
    run = synthetic_run(seed, config)
    d = run.data
    m = d.X_test.shape[0]
    if not isinstance(query, numbers.Integral) or not 0 <= query < m:
        raise InputError(f"query must be a test index in 0..{m - 1}, got {query!r}.")
    a = int(d.a_test[query]) if action is None else action
    query = int(query)
    if not isinstance(a, numbers.Integral) or not 0 <= a < d.n_actions:
        raise InputError(f"action must lie in 0..{d.n_actions - 1}, got {action!r}.")
    a = int(a)
    contribs = _contributions(run)
    df = pd.DataFrame(
        {
            "x1": d.X_train[:, 0],
            "x2": d.X_train[:, 1],
            "case_action": d.case_actions,
            "ground_truth": run.ground_truth[a, query],
        }
    )
    n = d.X_train.shape[0]
    if not 1 <= k <= n:
        raise InputError(f"k = {k} must lie in 1..n = {n}.")
    for name, C in contribs.items():
        df[name] = C[a, query]
    for name in [*contribs, "ground_truth"]:
        v = np.abs(df[name].to_numpy())
        top = np.zeros(n, dtype=bool)
        top[np.argsort(-v, kind="stable")[:k]] = True
        df[f"top_{name}"] = top
    df.attrs.update(
        query=query,
        action=a,
        x=d.X_test[query].tolist(),
        cbdt_action=int(d.a_test[query]),
        seed=seed,
    )
    return df


# ---------------------------------------------------------------------- the paper beside the book


