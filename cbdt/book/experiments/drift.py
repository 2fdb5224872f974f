"""The case-influence risk score under distribution shift: the drift grid of App. C.4.

The paper evaluates the risk score :math:`O_\\alpha` (eq. 20) against the network margin on 27
drift configurations (mean, variance and covariate shift, nine levels from 0 to 4) with five
seeds (Fig. C2-C3) and claims that "from drift strength 2.0 onward" the case-influence scores
beat the margin under covariate shift, while "variance shifts are better handled by the
margin". The paper does not define the shifts, the test set or what counts as a wrong
decision; this module fixes every choice below, before looking at any result, and
:func:`drift_sensitivity` shows how the verdicts move with them.

Setting
-------
Per seed, the synthetic CBDT problem and network of chapter 05
(:func:`cbdt.book.experiments.synthetic.synthetic_run`: 500 training problems on
:math:`[-1, 1]^2`, a 64-64 tanh :class:`~cbdt.models.CaseNetwork`, the OLS probe with
intercept on its frozen representation) is trained once, on *unshifted* data. Only the test
inputs move: ``n_queries`` fresh problems :math:`x` are drawn uniformly on the training square
(``numpy.random.default_rng([seed, 2024])``) and shifted.

Shifts
------
Let :math:`\\mu_j, \\sigma_j` be the mean and standard deviation of coordinate :math:`j` over
the *training* problems, :math:`p` the input dimension and :math:`L \\ge 0` the level, in units
of the training spread:

``mean``
    :math:`x' = x + L\\,\\sigma \\odot \\mathbf 1/\\sqrt p`: every coordinate moves by
    :math:`L\\sigma_j/\\sqrt p`, so in standardised coordinates the inputs move a distance
    :math:`L` along the diagonal; variances are unchanged.
``variance``
    :math:`x' = \\mu + (1 + L)(x - \\mu)`: the mean stays, every standard deviation grows by
    :math:`L\\sigma_j`.
``covariate``
    :math:`x'_1 = \\mu_1 + (1 + L)(x_1 - \\mu_1)`, other coordinates unchanged: the paper's
    "covariate-axis scale shift" (Sec. 5.5), the spread of one covariate grows by
    :math:`L\\sigma_1`.

Two alternative readings enter the sensitivity table: ``mean_axis``
(:math:`x'_1 = x_1 + L\\sigma_1`, the whole shift on one axis) and ``covariate_shear``
(:math:`x'_2 = x_2 + L\\sigma_2 (x_1 - \\mu_1)/\\sigma_1`, which correlates the two covariates,
:math:`\\mathrm{corr}(x'_1, x'_2) = L/\\sqrt{1 + L^2}`).

Wrong decisions
---------------
The audited decision is the **network's** own, :math:`\\arg\\max_a Q_{nn}(x, a)` (what would be
deployed); its case account uses the probe's coefficients :math:`\\alpha(x)` and the
contributions :math:`\\psi_i(a_x, x)` of that action. A decision is *wrong* when it differs
from the generator's true CBDT-optimal action :math:`a^*(x)` (eq. 2) at the *shifted* input.
Alternatives in the sensitivity table: disagreement with the CBDT decision over the training
memory (training cases as CBDT memory, observed returns, the generator's similarity), and the
probe's decision audited instead of the network's.

Scores (higher = riskier)
-------------------------
``risk``      :math:`O_\\alpha = H_\\alpha + \\gamma D_{Gini}` (eq. 20, :math:`\\gamma = 1`)
``entropy``   :math:`H_\\alpha(x, a_x)` (eq. 17)
``gini``      :math:`D_{Gini}(x)` (eq. 19)
``margin``    minus the network's top-1 minus top-2 score (a small margin is risky)
``leverage``  :math:`\\lVert\\alpha(x)\\rVert^2 = \\tilde\\varphi(x)^\\top G^{-1}\\tilde\\varphi(x)`,
              the OLS prediction-variance factor: same geometry, no returns
``knn``       Euclidean distance in :math:`\\varphi`-space to the ``k``-th nearest training case

Each score's quality is the ROC AUC for "wrong" (:func:`cbdt.metrics.roc_auc`), per
(shift, level, seed); undefined (NaN) when a configuration has no wrong or no right decision.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from cbdt.audit import audit_signals
from cbdt.decision import decision_margin, kernel_supports
from cbdt.exceptions import InputError
from cbdt.influence import CaseInfluence
from cbdt.metrics import mean_ci_finite, paired_test, roc_auc

from .synthetic import SEEDS, SyntheticConfig, synthetic_run

__all__ = [
    "SHIFTS",
    "ALTERNATIVE_SHIFTS",
    "LEVELS",
    "SCORES",
    "CASE_SCORES",
    "DriftConfig",
    "shift_inputs",
    "drift_grid",
    "summarize_grid",
    "paired_vs_margin",
    "drift_sensitivity",
    "SENSITIVITY_VARIANTS",
]

#: The paper's three shift families.
SHIFTS: tuple[str, ...] = ("mean", "variance", "covariate")
#: Alternative readings used by the sensitivity table.
ALTERNATIVE_SHIFTS: tuple[str, ...] = ("mean_axis", "covariate_shear")
#: Nine levels from 0 to 4 in steps of 0.5 (App. C.4).
LEVELS: tuple[float, ...] = tuple(0.5 * i for i in range(9))
#: Every score compared, riskier = larger.
SCORES: tuple[str, ...] = ("risk", "entropy", "gini", "margin", "leverage", "knn")
#: The case-influence scores of the paper (eq. 17, 19, 20).
CASE_SCORES: tuple[str, ...] = ("risk", "entropy", "gini")


@dataclass(frozen=True)
class DriftConfig:
    """Choices of the drift grid (module docstring); defaults are the book's.

    Attributes
    ----------
    synthetic : SyntheticConfig
        Generator and network of chapter 05.
    n_queries : int, default 2000
        Test problems per (seed, shift, level); the same base draw is shifted at every level.
    k : int, default 10
        Top-k set of eq. 16-18 (eq. 18 fixes 10) and the ``k`` of the nearest-neighbour score.
    gamma : float, default 1.0
        Weight of the Gini term in eq. 20 (the paper's value).
    eps : float, default 0.0
        Smoothing of eq. 16; ``0`` is its limit :math:`\\varepsilon \\to 0`. The paper calls
        :math:`\\varepsilon` a numerical safeguard; with :math:`\\varepsilon > 0` a query
        whose top-k cases all favour one action gets an entropy floor of order
        :math:`(\\varepsilon/M)\\log(M/\\varepsilon)` instead of 0, which silently orders
        such queries (most of them) by their top-k mass :math:`M` and so changes an AUC. The
        grid uses the limit, where such queries tie; ``1e-12`` (the library default) and larger
        values are rows of the sensitivity table.
    rank_by : {"contribution", "coefficient"}
        Top-k by :math:`|\\psi_i|` (eq. 16) or by :math:`|\\alpha_i|`.
    ridge : float, default 0.0
        Ridge of the probe (0 is the OLS probe of Proposition 1).
    wrong : {"truth", "memory"}
        "Wrong" against the generator's CBDT-optimal action, or against the CBDT decision
        over the training memory.
    decision : {"network", "probe"}
        Whose decision is audited (and whose margin is the baseline).
    shift_names : mapping, optional
        Replaces a shift family by another definition, e.g. ``{"covariate":
        "covariate_shear"}`` (rows keep the family name).
    """

    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    n_queries: int = 2000
    k: int = 10
    gamma: float = 1.0
    eps: float = 0.0
    rank_by: Literal["contribution", "coefficient"] = "contribution"
    ridge: float = 0.0
    wrong: Literal["truth", "memory"] = "truth"
    decision: Literal["network", "probe"] = "network"
    shift_names: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.n_queries, numbers.Integral) or self.n_queries < 2:
            raise InputError(f"n_queries must be an integer >= 2, got {self.n_queries!r}.")
        if self.wrong not in ("truth", "memory"):
            raise InputError(f"wrong must be 'truth' or 'memory', got {self.wrong!r}.")
        if self.decision not in ("network", "probe"):
            raise InputError(f"decision must be 'network' or 'probe', got {self.decision!r}.")
        if self.rank_by not in ("contribution", "coefficient"):
            raise InputError(
                f"rank_by must be 'contribution' or 'coefficient', got {self.rank_by!r}."
            )
        if isinstance(self.shift_names, Mapping):
            object.__setattr__(self, "shift_names", tuple(sorted(self.shift_names.items())))
        for fam, name in self.shift_names:
            if name not in SHIFTS + ALTERNATIVE_SHIFTS:
                raise InputError(f"unknown shift definition {name!r} for family {fam!r}.")


def shift_inputs(
    X: Any, shift: str, level: float, center: Any, scale: Any
) -> np.ndarray:
    """Apply one shift of the drift grid to test inputs (module docstring for the formulas).

    Parameters
    ----------
    X : array-like of shape (m, p)
        Test inputs.
    shift : {"mean", "variance", "covariate", "mean_axis", "covariate_shear"}
    level : float
        :math:`L \\ge 0`, in units of the training standard deviation; 0 returns a copy of
        ``X``.
    center, scale : array-like of shape (p,)
        Training mean :math:`\\mu` and standard deviation :math:`\\sigma` per coordinate.

    Returns
    -------
    ndarray of shape (m, p)
    """
    X = np.array(X, dtype=np.float64)  # a copy
    if X.ndim != 2 or X.shape[0] == 0:
        raise InputError(f"X must be a non-empty 2-D array (m, p), got shape {X.shape}.")
    p = X.shape[1]
    mu = np.asarray(center, dtype=np.float64).reshape(-1)
    sd = np.asarray(scale, dtype=np.float64).reshape(-1)
    if mu.shape != (p,) or sd.shape != (p,):
        raise InputError(
            f"center and scale must have one entry per input column ({p}), got {mu.shape} "
            f"and {sd.shape}."
        )
    if not (np.all(np.isfinite(sd)) and np.all(sd > 0) and np.all(np.isfinite(mu))):
        raise InputError("scale must be finite and > 0 and center finite in every column.")
    if not isinstance(level, numbers.Real) or not np.isfinite(level) or level < 0:
        raise InputError(f"level must be a finite number >= 0, got {level!r}.")
    if not np.all(np.isfinite(X)):
        raise InputError("X holds NaN or inf values.")
    L = float(level)
    if shift == "mean":
        X += L * sd / np.sqrt(p)
    elif shift == "variance":  # = mu + (1 + L)(x - mu), written so that L = 0 is exact
        X += L * (X - mu)
    elif shift == "covariate":
        X[:, 0] += L * (X[:, 0] - mu[0])
    elif shift == "mean_axis":
        X[:, 0] += L * sd[0]
    elif shift == "covariate_shear":
        if p < 2:
            raise InputError("covariate_shear needs at least two input columns.")
        X[:, 1] += L * sd[1] * (X[:, 0] - mu[0]) / sd[0]
    else:
        raise InputError(
            f"unknown shift {shift!r}; choose one of {SHIFTS + ALTERNATIVE_SHIFTS}."
        )
    return X


def _levels(levels: Iterable[float]) -> list[float]:
    out = [float(v) for v in levels]
    if not out or any(not np.isfinite(v) or v < 0 for v in out):
        raise InputError(f"levels must be non-empty, finite and >= 0, got {out}.")
    return out


def _shifts(shifts: Iterable[str]) -> list[str]:
    out = list(shifts)
    bad = [s for s in out if s not in SHIFTS + ALTERNATIVE_SHIFTS]
    if not out or bad:
        raise InputError(f"shifts must name some of {SHIFTS + ALTERNATIVE_SHIFTS}, got {out}.")
    return out


def _kth_neighbour_distance(Phi_q: np.ndarray, Phi_train: np.ndarray, k: int) -> np.ndarray:
    """Distance to the k-th nearest training row, in query blocks."""
    sq_t = (Phi_train**2).sum(axis=1)
    out = np.empty(Phi_q.shape[0])
    step = max(1, 4_000_000 // Phi_train.shape[0])
    for s in range(0, Phi_q.shape[0], step):
        Q = Phi_q[s : s + step]
        D = (Q**2).sum(axis=1)[:, None] - 2.0 * (Q @ Phi_train.T) + sq_t[None, :]
        np.maximum(D, 0.0, out=D)
        out[s : s + step] = np.sqrt(np.partition(D, k - 1, axis=1)[:, k - 1])
    return out


def _seed_tables(
    seed: int, levels: list[float], shifts: list[str], cfg: DriftConfig, score_names: list[str]
):
    run = synthetic_run(seed, cfg.synthetic)
    data, net = run.data, run.network
    if cfg.ridge > 0:
        probe = CaseInfluence(ridge=cfg.ridge, intercept=True, solver=run.probe_solver)
        probe.fit(run.Phi_train, data.R_train)
    else:
        probe = run.fidelity.probe
    mu = data.X_train.mean(axis=0)
    sd = data.X_train.std(axis=0)
    rng = np.random.default_rng([seed, 2024])
    X0 = rng.uniform(data.low, data.high, size=(cfg.n_queries, data.X_train.shape[1]))
    a_mem = data.case_actions
    names = dict(cfg.shift_names)
    rows = []
    for shift in shifts:
        for level in levels:
            X = shift_inputs(X0, names.get(shift, shift), level, mu, sd)
            Phi = net.represent(X)
            if cfg.decision == "network":
                S = net.predict(X)
            else:
                S = probe.scores(Phi)
            decision = np.argmax(S, axis=1)
            margin = decision_margin(S)
            if cfg.wrong == "truth":
                target = data.decide(X)
            else:
                sums, _ = kernel_supports(X, data.X_train, data.R_train, [data.similarity.bandwidth])
                target = np.argmax(sums[0], axis=1)
            wrong = decision != target
            scores: dict[str, np.ndarray] = {"margin": -margin}
            if any(name in CASE_SCORES for name in score_names):
                sig = audit_signals(
                    probe,
                    Phi,
                    case_actions=a_mem,
                    action=decision,
                    k=cfg.k,
                    gamma=cfg.gamma,
                    eps=cfg.eps,
                    rank_by=cfg.rank_by,
                )
                for name in CASE_SCORES:
                    scores[name] = sig[name].to_numpy()
            if "leverage" in score_names:
                scores["leverage"] = probe.leverage(Phi)
            if "knn" in score_names:
                scores["knn"] = _kth_neighbour_distance(Phi, run.Phi_train, cfg.k)
            for name in score_names:
                rows.append(
                    {
                        "shift": shift,
                        "level": level,
                        "seed": seed,
                        "score": name,
                        "auc": roc_auc(scores[name], wrong, single_class="nan"),
                        "error_rate": float(wrong.mean()),
                        "n_wrong": int(wrong.sum()),
                        "n_queries": int(wrong.size),
                    }
                )
    return rows


def drift_grid(
    seeds: Iterable[int] = SEEDS,
    levels: Iterable[float] = LEVELS,
    shifts: Iterable[str] = SHIFTS,
    config: DriftConfig | None = None,
    scores: Iterable[str] = SCORES,
) -> pd.DataFrame:
    """Incorrect-decision ROC AUC of every score on the drift grid (App. C.4, Fig. C2).

    Parameters
    ----------
    seeds : iterable of int, default (0, 1, 2, 3, 4)
        One network per seed (cached, shared with chapters 05-06).
    levels : iterable of float, default 0, 0.5, ..., 4
        Shift levels in units of the training standard deviation.
    shifts : iterable of str, default ("mean", "variance", "covariate")
    config : DriftConfig, optional
    scores : iterable of str, default :data:`SCORES`
        Which scores to compute (``"margin"`` is always computed).

    Returns
    -------
    pandas.DataFrame
        One row per (shift, level, seed, score) with columns ``shift, level, seed, score,
        auc, error_rate, n_wrong, n_queries``. ``auc`` is NaN when the configuration has no
        wrong (or no right) decision.
    """
    cfg = DriftConfig() if config is None else config
    if not isinstance(cfg, DriftConfig):
        raise InputError(f"config must be a DriftConfig, got {type(cfg).__name__}.")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise InputError("seeds must name at least one seed.")
    lv, sh = _levels(levels), _shifts(shifts)
    names = list(dict.fromkeys(scores))
    bad = [s for s in names if s not in SCORES]
    if not names or bad:
        raise InputError(f"scores must name some of {SCORES}, got {names}.")
    rows: list[dict[str, Any]] = []
    # small (2000 x 500) products: one BLAS thread is fastest, and numpy's and scipy's
    # thread pools would otherwise compete for the cores
    with threadpool_limits(limits=1):
        for seed in seeds:
            rows.extend(_seed_tables(seed, lv, sh, cfg, names))
    return pd.DataFrame(rows)


def summarize_grid(df: pd.DataFrame) -> pd.DataFrame:
    """Mean AUC with its 95% CI over seeds per (shift, level, score), and the error rate.

    Returns
    -------
    pandas.DataFrame
        Columns ``shift, level, score, auc_mean, auc_ci, n_seeds`` (seeds with a defined
        AUC), ``error_rate`` (mean over seeds) and ``n_wrong`` (total over seeds).
    """
    rows = []
    for (shift, level, score), g in df.groupby(["shift", "level", "score"], sort=False):
        m, h, n = mean_ci_finite(g["auc"].to_numpy(dtype=float))
        rows.append(
            {
                "shift": shift,
                "level": level,
                "score": score,
                "auc_mean": m,
                "auc_ci": h,
                "n_seeds": n,
                "error_rate": float(g["error_rate"].mean()),
                "n_wrong": int(g["n_wrong"].sum()),
            }
        )
    return pd.DataFrame(rows)


def paired_vs_margin(
    df: pd.DataFrame, scores: Sequence[str] | None = None, baseline: str = "margin"
) -> pd.DataFrame:
    """Paired-seed tests of each score's AUC against the margin's (Fig. C3).

    For every (shift, level, score), over the seeds where both AUCs are defined:
    :func:`cbdt.metrics.paired_test` (mean difference score - margin with its 95% CI, paired
    t-test and exact two-sided Wilcoxon signed-rank p-values, seeds won).

    Notes
    -----
    With five seeds the smallest two-sided exact Wilcoxon p-value is :math:`2/2^5 = 0.0625`:
    the Wilcoxon test *cannot* reach 0.05 on this grid; significance marks use the t-test and
    the Wilcoxon p-value is reported beside it.

    Returns
    -------
    pandas.DataFrame
        Columns ``shift, level, score, mean_diff, ci, t_pvalue, wilcoxon_pvalue, wins,
        n_seeds``.
    """
    scores = [s for s in SCORES if s != baseline] if scores is None else list(scores)
    wide = df.pivot_table(
        index=["shift", "level", "seed"], columns="score", values="auc", dropna=False
    )
    rows = []
    for (shift, level), g in wide.groupby(level=["shift", "level"], sort=False):
        for score in scores:
            pair = g[[score, baseline]].dropna()
            row: dict[str, Any] = {"shift": shift, "level": level, "score": score}
            if len(pair) >= 2:
                t = paired_test(pair[score].to_numpy(), pair[baseline].to_numpy())
                row.update(
                    mean_diff=t.mean_diff,
                    ci=t.ci_half_width,
                    t_pvalue=t.t_pvalue,
                    wilcoxon_pvalue=t.wilcoxon_pvalue,
                    wins=t.wins,
                    n_seeds=t.n,
                )
            else:
                row.update(
                    mean_diff=float("nan"),
                    ci=float("nan"),
                    t_pvalue=float("nan"),
                    wilcoxon_pvalue=float("nan"),
                    wins=0,
                    n_seeds=len(pair),
                )
            rows.append(row)
    out = pd.DataFrame(rows)
    order = {s: i for i, s in enumerate(df["shift"].unique())}
    return out.sort_values(
        ["shift", "level", "score"], key=lambda c: c.map(order) if c.name == "shift" else c
    ).reset_index(drop=True)


#: The variants of the sensitivity table: (label, DriftConfig overrides).
SENSITIVITY_VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("book default (k=10, eps -> 0, |psi|, OLS, truth, network)", {}),
    ("k = 5", {"k": 5}),
    ("k = 30", {"k": 30}),
    ("eps = 1e-12 (library default)", {"eps": 1e-12}),
    ("eps = 1e-3", {"eps": 1e-3}),
    ("eps = 1e-1", {"eps": 1e-1}),
    ("top-k by |alpha| (rank_by='coefficient')", {"rank_by": "coefficient"}),
    ("probe ridge = 1e-3", {"ridge": 1e-3}),
    ("probe ridge = 1e-1", {"ridge": 1e-1}),
    ("wrong = vs CBDT over the training memory", {"wrong": "memory"}),
    ("probe's decision audited (probe margin)", {"decision": "probe"}),
    ("mean shift along one axis", {"shift_names": {"mean": "mean_axis"}}),
    ("covariate shift as a shear", {"shift_names": {"covariate": "covariate_shear"}}),
)


def drift_sensitivity(
    seeds: Iterable[int] = SEEDS,
    levels: Iterable[float] = (2.0, 3.0, 4.0),
    variants: Sequence[tuple[str, dict[str, Any]]] = SENSITIVITY_VARIANTS,
    config: DriftConfig | None = None,
    from_level: float = 2.0,
) -> pd.DataFrame:
    """How the risk-vs-margin verdicts move with the choices the paper leaves open.

    For every variant (``DriftConfig`` overrides of ``config``), the grid is recomputed for
    the risk score and the margin at ``levels`` (default 2, 3 and 4: the levels the paper's
    claims are about; the networks are cached, only the probe ridge refits a probe) and
    summarised per shift family by the mean AUC difference risk - margin over the levels
    :math:`\\ge` ``from_level`` and the seeds, and by the number of those levels where the
    mean difference is positive.

    Returns
    -------
    pandas.DataFrame
        One row per variant; columns ``<shift> dAUC`` and ``<shift> risk>margin`` (a string
        ``"j/n"``) for each shift family, and ``error rate`` at the largest level averaged
        over the families.
    """
    base = DriftConfig() if config is None else config
    lv = _levels(levels)
    rows = []
    for label, overrides in variants:
        cfg = dataclasses.replace(base, **overrides)
        df = drift_grid(seeds, lv, SHIFTS, cfg, scores=("risk", "margin"))
        paired = paired_vs_margin(df, scores=["risk"])
        row: dict[str, Any] = {"variant": label}
        for shift in SHIFTS:
            p = paired[(paired["shift"] == shift) & (paired["level"] >= from_level)]
            row[f"{shift} dAUC"] = float(p["mean_diff"].mean())
            row[f"{shift} risk>margin"] = f"{int((p['mean_diff'] > 0).sum())}/{len(p)}"
        top = df[(df["level"] == max(lv)) & (df["score"] == "risk")]
        row["error rate at max level"] = float(top["error_rate"].mean())
        rows.append(row)
    return pd.DataFrame(rows).set_index("variant")


# ---------------------------------------------------------------------------------------
# the paper beside the book (chapter 09)
# ---------------------------------------------------------------------------------------

#: How the AUC table names the scores.


