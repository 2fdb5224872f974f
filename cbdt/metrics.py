"""Evaluation measures used by the experiments (Sec. 5).

Definitions
-----------
mean with 95% CI
    Over seeds :math:`v_1..v_s`: :math:`\\bar v \\pm t_{0.975, s-1}\\, \\mathrm{sd}(v)/\\sqrt s`
    (Student t, sample standard deviation with ``ddof=1``), as "mean +/- 95% CI" in the paper.
Pearson
    Sample correlation :math:`r = \\mathrm{cov}(x, y) / (\\mathrm{sd}(x)\\mathrm{sd}(y))`.
Top-k action consistency
    For a query x with target action :math:`a^\\dagger(x)` and per-case attribution scores
    :math:`w_i(x)`: the share of the k cases with largest :math:`|w_i(x)|` whose case-optimal
    action :math:`a_i^*` equals :math:`a^\\dagger(x)`.
ROC AUC
    Probability that a random positive scores higher than a random negative, ties counting one
    half (the Mann-Whitney statistic divided by :math:`n_+ n_-`).
Recall at a review budget
    A reviewer checks the :math:`\\lceil b\\, n\\rceil` decisions with the highest score; the
    recall is the share of all wrong decisions among them (ties in the score broken by input
    order, or their exact expectation under a random order).
Paired test
    Across seeds, the differences :math:`d_j = a_j - b_j`: paired t-test and exact Wilcoxon
    signed-rank test, with the mean difference and its 95% CI.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from ._ranking import top_k_indices
from ._validation import as_float_matrix, check_k
from .exceptions import InputError

__all__ = [
    "mean_ci",
    "mean_ci_finite",
    "format_mean_ci",
    "summarize_seeds",
    "pearson",
    "topk_action_consistency",
    "roc_auc",
    "review_size",
    "errors_caught",
    "recall_at_budget",
    "PairedTest",
    "paired_test",
]


def mean_ci(values: Any, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the Student-t confidence interval over seeds.

    Parameters
    ----------
    values : array-like of shape (s,)
        One value per seed, ``s >= 2``.
    confidence : float, default=0.95

    Returns
    -------
    mean, half_width : float
        The interval is ``mean +/- half_width``.
    """
    v = as_float_matrix("values", values, ndim=1)
    if v.shape[0] < 2:
        raise InputError(
            f"a confidence interval over seeds needs at least 2 values, got {v.shape[0]}."
        )
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1), got {confidence}.")
    s = v.shape[0]
    half = stats.t.ppf(0.5 + confidence / 2, s - 1) * v.std(ddof=1) / np.sqrt(s)
    return float(v.mean()), float(half)


def mean_ci_finite(values: Any, confidence: float = 0.95) -> tuple[float, float, int]:
    """:func:`mean_ci` over the finite values only, for seeds where a measure is undefined.

    Returns
    -------
    mean, half_width : float
        NaN mean without a finite value; NaN half-width with fewer than two.
    n : int
        Number of finite values used.
    """
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan"), 0
    if v.size == 1:
        return float(v[0]), float("nan"), 1
    m, h = mean_ci(v, confidence)
    return m, h, int(v.size)


def format_mean_ci(mean: float, half_width: float, digits: int = 3) -> str:
    """``"0.941 ± 0.030"`` with ``digits`` decimals."""
    return f"{mean:.{digits}f} ± {half_width:.{digits}f}"


def summarize_seeds(
    df: pd.DataFrame, by: str | list[str], columns: list[str], confidence: float = 0.95
) -> pd.DataFrame:
    """Mean and CI half-width of ``columns`` over the rows of each group of ``by``.

    Returns a frame indexed by ``by`` with columns ``<col>_mean``, ``<col>_ci`` and ``n``.
    """
    rows = []
    for key, g in df.groupby(by, sort=False):
        row = dict(zip([by] if isinstance(by, str) else by, np.atleast_1d(key), strict=True))
        for c in columns:
            row[f"{c}_mean"], row[f"{c}_ci"] = mean_ci(g[c].to_numpy(), confidence)
        row["n"] = len(g)
        rows.append(row)
    return pd.DataFrame(rows).set_index(by)


def pearson(x: Any, y: Any) -> float:
    """Pearson correlation of two equally long vectors.

    Raises
    ------
    InputError
        When the lengths differ, fewer than 2 values are given or one vector is constant
        (the correlation is undefined).
    """
    x = as_float_matrix("x", x, ndim=1)
    y = as_float_matrix("y", y, ndim=1)
    if x.shape != y.shape:
        raise InputError(f"x and y must have the same length, got {x.shape[0]} and {y.shape[0]}.")
    if x.shape[0] < 2:
        raise InputError("Pearson correlation needs at least 2 pairs.")
    xc, yc = x - x.mean(), y - y.mean()
    den = np.sqrt((xc**2).sum() * (yc**2).sum())
    if den == 0:
        raise InputError("Pearson correlation is undefined: one of the vectors is constant.")
    return float((xc * yc).sum() / den)


def topk_action_consistency(
    attributions: Any, case_actions: Any, target_actions: Any, k: int = 30
) -> np.ndarray:
    """Top-k action consistency per query (see the module docstring).

    Parameters
    ----------
    attributions : array-like of shape (m, n) or (n,)
        Per-case attribution or contribution of each query; ranked by absolute value.
    case_actions : array-like of int of shape (n,)
        Case-optimal actions :math:`a_i^*`.
    target_actions : int or array-like of int of shape (m,)
        The action each query's top cases should support (e.g. the CBDT-optimal action).
    k : int, default=30

    Returns
    -------
    ndarray of shape (m,), or a float for a 1-D input
        Shares in [0, 1].
    """
    W = as_float_matrix("attributions", attributions, allow_1d=True)
    single = W.ndim == 1
    if single:
        W = W[None, :]
    a = np.asarray(case_actions)
    if a.ndim != 1 or a.shape[0] != W.shape[1] or a.dtype.kind not in "iu":
        raise InputError(
            f"case_actions must be an integer array of length n = {W.shape[1]}, got shape "
            f"{a.shape} and dtype {a.dtype}."
        )
    t = np.broadcast_to(np.asarray(target_actions), (W.shape[0],))
    if t.dtype.kind not in "iu":
        raise InputError("target_actions must be integer action indices.")
    k = check_k(k, W.shape[1])
    idx = top_k_indices(np.abs(W), k)
    share = (a[idx] == t[:, None]).mean(axis=1)
    return float(share[0]) if single else share


def roc_auc(scores: Any, labels: Any, *, single_class: Literal["raise", "nan"] = "raise"
            ) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (ties count one half).

    Parameters
    ----------
    scores : array-like of shape (n,)
    labels : array-like of shape (n,)
        Binary, 0/1 or bool; 1 (True) is the positive class.
    single_class : {"raise", "nan"}, default="raise"
        What to do when only one class is present (or ``n = 0``), where the AUC is undefined:
        raise, or return NaN (a seed or test year without a wrong decision, averaged over the
        finite values with :func:`mean_ci_finite`).

    Returns
    -------
    float

    Raises
    ------
    InputError
        When labels are not binary, or only one class is present and
        ``single_class="raise"``.
    """
    if single_class not in ("raise", "nan"):
        raise InputError(f"single_class must be 'raise' or 'nan', got {single_class!r}.")
    s = as_float_matrix("scores", scores, ndim=1) if np.size(scores) else np.zeros(0)
    y = np.asarray(labels)
    if y.shape != s.shape:
        raise InputError(f"scores and labels must have the same shape, got {s.shape}, {y.shape}.")
    y = y.astype(bool) if y.dtype.kind == "b" else y
    uniq = np.unique(y)
    if not np.isin(uniq, [0, 1]).all():
        raise InputError(f"labels must be binary (0/1 or bool), got values {uniq[:5]}.")
    n_pos = int((y == 1).sum())
    n_neg = int((y == 0).sum())
    if n_pos == 0 or n_neg == 0:
        if single_class == "nan":
            return float("nan")
        raise InputError("ROC AUC needs both classes; all labels are equal.")
    ranks = stats.rankdata(s)  # average ranks for ties
    u = ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def review_size(budget: float, n: int) -> int:
    """Decisions a reviewer checks at a budget: :math:`\\lceil b\\, n\\rceil`.

    ``budget * n`` is rounded to 9 decimals first, so a budget of 0.1 of 30 decisions reviews
    3 (in floating point ``0.1 * 30`` is ``3.0000000000000004``).

    Parameters
    ----------
    budget : float
        Share of the decisions reviewed, in (0, 1].
    n : int
        Number of decisions.

    Returns
    -------
    int
    """
    if isinstance(budget, bool) or not (isinstance(budget, numbers.Real) and 0 < budget <= 1):
        raise InputError(f"budget must lie in (0, 1], got {budget!r}.")
    return int(math.ceil(round(budget * n, 9)))


def errors_caught(scores: Any, wrong: Any, budget: float,
                  ties: Literal["stable", "average"] = "stable") -> float:
    """Wrong decisions among the :func:`review_size` highest scores (a count).

    Decisions are reviewed in descending score.

    Parameters
    ----------
    scores : array-like of shape (n,)
        Higher = review first (a risk score, or minus a margin).
    wrong : array-like of bool of shape (n,)
    budget : float
        Share of the decisions reviewed, in (0, 1].
    ties : {"stable", "average"}, default="stable"
        ``"stable"``: tied scores keep the input order, earlier first. ``"average"``: the
        exact expectation when tied scores are reviewed in uniformly random order: of the tie
        group that straddles the cut, each member is reviewed with probability (free places)
        / (group size). No random numbers are drawn.

    Returns
    -------
    float
        An integer for ``ties="stable"``; an expectation for ``"average"``.
    """
    s = np.asarray(scores, dtype=np.float64)
    w = np.asarray(wrong, dtype=bool)
    if s.shape != w.shape or s.ndim != 1 or s.size == 0:
        raise InputError(
            f"scores and wrong must be 1-D of one non-zero length, got {s.shape}, {w.shape}."
        )
    if not np.isfinite(s).all():
        raise InputError("scores must be finite (no NaN or inf).")
    if ties not in ("stable", "average"):
        raise InputError(f"ties must be 'stable' or 'average', got {ties!r}.")
    n_rev = review_size(budget, s.size)
    order = np.argsort(-s, kind="stable")
    if ties == "stable":
        return float(w[order[:n_rev]].sum())
    cut = s[order[n_rev - 1]]
    above = s > cut
    group = s == cut
    free = n_rev - int(above.sum())
    return float(w[above].sum() + w[group].sum() * free / group.sum())


def recall_at_budget(scores: Any, wrong: Any, budget: float,
                     ties: Literal["stable", "average"] = "stable") -> float:
    """Share of the wrong decisions among the :func:`review_size` highest scores.

    :func:`errors_caught` divided by the number of wrong decisions; NaN when there is none.
    A review in random order catches ``review_size(budget, n) / n`` of them in expectation.

    Parameters
    ----------
    scores, wrong, budget, ties
        As in :func:`errors_caught`.

    Returns
    -------
    float
    """
    caught = errors_caught(scores, wrong, budget, ties)
    n_wrong = int(np.asarray(wrong, dtype=bool).sum())
    return float(caught / n_wrong) if n_wrong else float("nan")


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test` (``a - b`` across seeds)."""

    mean_diff: float
    ci_half_width: float
    t_statistic: float
    t_pvalue: float
    wilcoxon_pvalue: float
    n: int
    wins: int


def paired_test(a: Any, b: Any, confidence: float = 0.95) -> PairedTest:
    """Paired comparison of two methods measured on the same seeds.

    Returns the mean difference ``a - b`` with its Student-t CI, the two-sided paired t-test
    and the two-sided exact Wilcoxon signed-rank p-value (1.0 when all differences are 0),
    and how many seeds ``a > b``.
    """
    a = as_float_matrix("a", a, ndim=1)
    b = as_float_matrix("b", b, ndim=1)
    if a.shape != b.shape:
        raise InputError(f"a and b must be paired (same length), got {a.shape} and {b.shape}.")
    d = a - b
    mean, half = mean_ci(d, confidence)
    if np.all(d == d[0]):
        t_stat, t_p = (0.0, 1.0) if d[0] == 0 else (np.sign(d[0]) * np.inf, 0.0)
    else:
        res = stats.ttest_rel(a, b)
        t_stat, t_p = float(res.statistic), float(res.pvalue)
    if np.all(d == 0):
        w_p = 1.0
    else:
        w_p = float(stats.wilcoxon(a, b, zero_method="wilcox", alternative="two-sided").pvalue)
    return PairedTest(mean, half, float(t_stat), float(t_p), w_p, int(d.size), int((d > 0).sum()))
