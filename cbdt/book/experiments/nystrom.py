"""Nyström scaling of the case-influence coefficients to wider representations (App. C.7).

Table C2 of the paper compares the exact regularised coefficients (eq. 11) with their
Nyström approximation at rank :math:`H/2` for representation widths
:math:`H\\in\\{32, 128, 512\\}` over five seeds: per-query time and agreement of the two
coefficient vectors. :func:`nystrom_table` reproduces it on a stated problem and
:func:`summarize_nystrom` gives mean and 95% CI per width beside the paper's numbers.

Problem
-------
The synthetic CBDT task of Sec. 5.2 (chapters 05/06,
:func:`cbdt.book.experiments.synthetic.synthetic_run`: 500 training and 200 test problems, three
actions, the book's :class:`~cbdt.models.CaseNetwork`) with the representation width set to
``H``: the *last* hidden layer (the representation :math:`\\varphi`, whose width is ``H`` in
the paper's notation) has ``H`` units, earlier layers keep the configuration's widths (64),
and every other setting (1000 full-batch Adam epochs, tanh, learning rate) is unchanged.
``widen_all=True`` sets *every* hidden layer to ``H`` instead; at ``H = 512`` that network
takes about 20-23 s per seed to train on 2 CPU cores (about 2 minutes for five seeds, against
about 5 s per seed with the first layer at 64), which is why it is not the default. The
choice matters: the wider first layer gives a representation of higher numerical rank and a
visibly worse rank-``H/2`` approximation. A default call (3 widths x 5 seeds, 15 networks)
took 67-77 s on 2 shared cores, almost all of it training; the runs are cached in-process
(:func:`~cbdt.book.experiments.synthetic.synthetic_run`), so a second call, e.g. with
``method="cases"``, takes seconds. With
``n = 500`` training cases, ``H = 512`` has more units than cases: :math:`G` is singular and
only the regularised coefficient (eq. 11) exists.

Measures (per width ``H`` and seed)
-----------------------------------
Ridge
    One :math:`\\lambda = 10^{-3}\\,\\mathrm{tr}(G)/H` (``ridge_multiple``) per run, the
    *same* for the exact ``CaseInfluence(ridge=lam)`` and for
    :class:`~cbdt.nystrom.NystromCaseInfluence` (``ridge=lam``), so the table measures the
    Nyström error only, not a change of regulariser. No intercept (eq. 11 as stated).
``rank``
    ``m = round(rank_fraction * H)`` sampled Gram columns (``method="features"``, the
    paper's reading) or landmark cases (``method="cases"``); the sample is seeded by the run's
    seed.
``exact_fit_ms``, ``nystrom_fit_ms``
    Median over ``repeats`` of the wall-clock time of ``fit`` (``time.perf_counter``).
    The exact fit is a CholeskyQR2 factorisation of :math:`\\Phi` (a Householder QR where it
    cannot be trusted, :attr:`cbdt.CaseInfluence.factorization_`), one small QR with the
    ridge rows :math:`\\sqrt\\lambda I`, the singular values of the :math:`H\\times H` factor
    (rank and condition diagnostics) and a copy of :math:`\\Phi`.
``exact_ms``, ``nystrom_ms``
    Per-query time of ``coefficients`` (all ``n`` coefficients of one test query, queries
    answered one at a time after ``fit``): median over ``repeats`` passes of the mean time
    per query (:func:`cbdt.book.experiments.synthetic.median_per_query`), both estimators timed
    in the same run. Both multiply the query by a cached :math:`n\\times H` matrix
    (:math:`O(nH)`): the exact one by :math:`\\Phi` after two :math:`H\\times H` triangular
    solves (:math:`z = (G+\\lambda I)^{-1}\\varphi`), the Nyström one by
    :math:`\\Phi(\\tilde G+\\lambda I)^{-1}`, so their per-query times differ by little
    more than noise; what the approximation can save is fit time.
``top30``
    Mean over test queries of :math:`|T_{30}(\\alpha)\\cap T_{30}(\\tilde\\alpha)|/30`, where
    :math:`T_{30}` is the set of the 30 cases with the largest :math:`|\\alpha_i(x)|` (ties to
    the lower index); ``top{k}`` for other ``k``.
``pearson``
    Mean over test queries of the Pearson correlation over the ``n`` cases between
    :math:`\\alpha(x)` and :math:`\\tilde\\alpha(x)`.

The timings are wall-clock times of this process and move with the machine's load; the
paper's absolute milliseconds come from another implementation and machine. BLAS is pinned to
``blas_threads=1`` thread while timing (``threadpoolctl``): on a busy 2-core machine a
multi-threaded BLAS made the exact fit at ``H = 32`` over 100 times slower (about 170 ms
against 1 ms) and its times erratic; ``blas_threads=None`` leaves the threads alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import time
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from cbdt._ranking import top_k_indices
from cbdt._validation import check_positive_int
from cbdt.exceptions import InputError
from cbdt.influence import CaseInfluence
from cbdt.metrics import mean_ci_finite
from cbdt.nystrom import DEFAULT_RIDGE_MULTIPLE, NystromCaseInfluence

from .synthetic import (
    SEEDS,
    SyntheticConfig,
    median_per_query,
    rowwise_pearson,
    synthetic_run,
)

__all__ = [
    "PAPER_TABLE_C2",
    "WIDTHS",
    "nystrom_config",
    "nystrom_table",
    "summarize_nystrom",
    "topk_overlap",
]

#: Representation widths of Table C2.
WIDTHS: tuple[int, ...] = (32, 128, 512)

#: Table C2 of the paper (App. C.7), per width ``H``: rank, exact ms (mean, CI), Nyström ms
#: (mean, CI), top-30 overlap (mean, CI), Pearson r (mean, CI).
PAPER_TABLE_C2: dict[int, dict[str, float]] = {
    32: {
        "rank": 16, "exact_ms": 13.7, "exact_ms_ci": 14.3, "nystrom_ms": 24.6,
        "nystrom_ms_ci": 31.8, "top30": 0.440, "top30_ci": 0.082, "pearson": 0.698,
        "pearson_ci": 0.054,
    },
    128: {
        "rank": 64, "exact_ms": 21.8, "exact_ms_ci": 24.1, "nystrom_ms": 11.1,
        "nystrom_ms_ci": 0.7, "top30": 0.648, "top30_ci": 0.029, "pearson": 0.731,
        "pearson_ci": 0.021,
    },
    512: {
        "rank": 256, "exact_ms": 85.7, "exact_ms_ci": 79.4, "nystrom_ms": 68.3,
        "nystrom_ms_ci": 0.9, "top30": 0.793, "top30_ci": 0.024, "pearson": 0.710,
        "pearson_ci": 0.021,
    },
}

_TIME_COLS = ("exact_fit_ms", "nystrom_fit_ms", "exact_ms", "nystrom_ms")


def nystrom_config(
    H: int, config: SyntheticConfig | None = None, *, widen_all: bool = False
) -> SyntheticConfig:
    """The synthetic configuration with representation width ``H``.

    Parameters
    ----------
    H : int
        Width of the last hidden layer, the representation :math:`\\varphi`.
    config : SyntheticConfig, optional
        Base configuration (default: the book's :class:`SyntheticConfig`).
    widen_all : bool, default=False
        Set every hidden layer to ``H`` instead of the last one only.

    Returns
    -------
    SyntheticConfig
    """
    H = check_positive_int("H", H)
    cfg = SyntheticConfig() if config is None else config
    if not isinstance(cfg, SyntheticConfig):
        raise InputError(f"config must be a SyntheticConfig, got {type(cfg).__name__}.")
    hidden = tuple(cfg.hidden)
    new = (H,) * len(hidden) if widen_all else hidden[:-1] + (H,)
    return dataclasses.replace(cfg, hidden=new)


def topk_overlap(A: np.ndarray, B: np.ndarray, k: int) -> np.ndarray:
    """Per row, ``|top_k(|A|) ∩ top_k(|B|)| / k`` (ties to the lower column index).

    Parameters
    ----------
    A, B : ndarray of shape (m, n)
    k : int
        ``1 <= k <= n``.

    Returns
    -------
    ndarray of shape (m,)
        Values in ``[0, 1]``.
    """
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    if A.ndim != 2 or A.shape != B.shape:
        raise InputError(f"A and B must be 2-D of the same shape, got {A.shape} and {B.shape}.")
    m, n = A.shape
    if not isinstance(k, numbers.Integral) or not 1 <= k <= n:
        raise InputError(f"k must be an integer in 1..n = {n}, got {k!r}.")
    rows = np.arange(m)[:, None]
    in_a = np.zeros((m, n), dtype=bool)
    in_a[rows, top_k_indices(np.abs(A), int(k))] = True
    hits = in_a[rows, top_k_indices(np.abs(B), int(k))]
    return hits.sum(axis=1) / k


def _median_fit_ms(make: Any, Phi: np.ndarray, R: np.ndarray, repeats: int) -> tuple[Any, float]:
    """Fit ``make()`` ``repeats`` times; return the last fitted estimator and the median ms."""
    times = []
    est = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        est = make().fit(Phi, R)
        times.append(time.perf_counter() - t0)
    return est, float(np.median(times)) * 1e3


def _compare(
    Phi: np.ndarray,
    R: np.ndarray,
    Xq: np.ndarray,
    m: int,
    method: Literal["features", "cases"],
    lam: float,
    seed: int,
    k: int,
    repeats: int,
    blas_threads: int | None,
) -> dict[str, Any]:
    """Timings and agreement of the exact and the Nyström coefficients on one run."""
    nq = Xq.shape[0]
    limit = (
        contextlib.nullcontext()
        if blas_threads is None
        else threadpool_limits(limits=blas_threads)
    )
    with limit:
        exact, exact_fit = _median_fit_ms(lambda: CaseInfluence(ridge=lam), Phi, R, repeats)
        ny, ny_fit = _median_fit_ms(
            lambda: NystromCaseInfluence(m, method=method, ridge=lam, random_state=seed),
            Phi,
            R,
            repeats,
        )
        exact_q = median_per_query(lambda j: exact.coefficients(Xq[j]), nq, repeats)
        ny_q = median_per_query(lambda j: ny.coefficients(Xq[j]), nq, repeats)
    a_ex = exact.coefficients(Xq)
    a_ny = ny.coefficients(Xq)
    r = rowwise_pearson(a_ex, a_ny)
    return {
        "nystrom_rank": ny.nystrom_rank_,
        "exact_fit_ms": exact_fit,
        "nystrom_fit_ms": ny_fit,
        "exact_ms": exact_q * 1e3,
        "nystrom_ms": ny_q * 1e3,
        f"top{k}": float(topk_overlap(a_ex, a_ny, k).mean()),
        "pearson": float(np.nanmean(r)) if np.isfinite(r).any() else float("nan"),
    }


def nystrom_table(
    widths: Sequence[int] = WIDTHS,
    seeds: Iterable[int] = SEEDS,
    n_queries: int = 200,
    k: int = 30,
    method: Literal["features", "cases"] = "features",
    rank_fraction: float = 0.5,
    config: SyntheticConfig | None = None,
    *,
    ridge_multiple: float = DEFAULT_RIDGE_MULTIPLE,
    repeats: int = 5,
    widen_all: bool = False,
    blas_threads: int | None = 1,
) -> pd.DataFrame:
    """Exact versus Nyström case-influence coefficients per width and seed (Table C2).

    See the module docstring for the problem and the measures.

    Parameters
    ----------
    widths : sequence of int, default=(32, 128, 512)
        Representation widths ``H``.
    seeds : iterable of int, default=(0, 1, 2, 3, 4)
        Seeds of the data, the network and the Nyström sample.
    n_queries : int, default=200
        Test problems used (the first ``n_queries``; at most ``n_test``).
    k : int, default=30
        Size of the top-k sets compared.
    method : {"features", "cases"}, default="features"
        :class:`~cbdt.nystrom.NystromCaseInfluence` method: Gram columns (App. C.7) or
        landmark cases.
    rank_fraction : float, default=0.5
        ``rank = round(rank_fraction * H)`` (at least 1).
    config : SyntheticConfig, optional
        Base configuration; its last hidden width is replaced by ``H``
        (:func:`nystrom_config`).
    ridge_multiple : float, default=1e-3
        :math:`\\lambda = c\\,\\mathrm{tr}(G)/H`, shared by both estimators.
    repeats : int, default=5
        Repeats of every timing (the median is reported).
    widen_all : bool, default=False
        Set every hidden layer to ``H`` (see the module docstring for its cost).
    blas_threads : int or None, default=1
        BLAS threads while fitting and timing the two estimators; ``None`` leaves them as
        they are.

    Returns
    -------
    DataFrame
        One row per (H, seed): ``method, H, rank, seed, ridge, nystrom_rank, exact_fit_ms,
        nystrom_fit_ms, exact_ms, nystrom_ms, top{k}, pearson``. ``nystrom_rank`` is the rank
        of the Nyström Gram matrix after the eigenvalue cutoff (at most ``rank``).
    """
    if method not in ("features", "cases"):
        raise InputError(f"method must be 'features' or 'cases', got {method!r}.")
    if isinstance(rank_fraction, bool) or not isinstance(rank_fraction, numbers.Real) or not (
        0 < rank_fraction <= 1
    ):
        raise InputError(f"rank_fraction must lie in (0, 1], got {rank_fraction!r}.")
    if isinstance(ridge_multiple, bool) or not isinstance(ridge_multiple, numbers.Real) or not (
        np.isfinite(ridge_multiple) and ridge_multiple > 0
    ):
        raise InputError(f"ridge_multiple must be finite and > 0, got {ridge_multiple!r}.")
    n_queries = check_positive_int("n_queries", n_queries)
    repeats = check_positive_int("repeats", repeats)
    if blas_threads is not None:
        blas_threads = check_positive_int("blas_threads", blas_threads)
    k = check_positive_int("k", k)
    widths = [check_positive_int("width", H) for H in widths]
    seeds = [int(s) for s in seeds]
    if not widths or not seeds:
        raise InputError("widths and seeds must each name at least one value.")
    rows = []
    for H in widths:
        cfg = nystrom_config(H, config, widen_all=widen_all)
        m = max(1, int(round(rank_fraction * H)))
        for seed in seeds:
            run = synthetic_run(seed, cfg)
            Phi, R = run.Phi_train, run.data.R_train
            n = Phi.shape[0]
            if k > n:
                raise InputError(f"k = {k} exceeds the number of training cases n = {n}.")
            nq = min(n_queries, run.Phi_test.shape[0])
            lam = float(ridge_multiple) * float(np.einsum("ij,ij->", Phi, Phi)) / H
            row = _compare(Phi, R, run.Phi_test[:nq], m, method, lam, seed, k, repeats,
                           blas_threads)
            rows.append({"method": method, "H": H, "rank": m, "seed": seed, "ridge": lam, **row})
    return pd.DataFrame(rows)


def summarize_nystrom(df: pd.DataFrame, with_paper: bool = True) -> pd.DataFrame:
    """Mean and 95% Student-t CI over seeds per (method, H), beside Table C2.

    Parameters
    ----------
    df : DataFrame
        Output of :func:`nystrom_table` (several methods may be concatenated).
    with_paper : bool, default=True
        Add the paper's values ``paper_<col>`` and ``paper_<col>_ci`` for the exact and
        Nyström times, the top-30 overlap and Pearson r (NaN for widths the paper lacks).

    Returns
    -------
    DataFrame
        Indexed by ``(method, H)``: ``rank``, ``<col>_mean``, ``<col>_ci`` for the timing
        and agreement columns (:func:`cbdt.metrics.mean_ci_finite`; NaN CI with one seed),
        and ``n`` (seeds).
    """
    need = {"method", "H", "rank", "seed", "pearson"}
    missing = need - set(df.columns)
    topcols = [c for c in df.columns if c.startswith("top")]
    if missing or not topcols:
        raise InputError(
            f"df must be the output of nystrom_table; missing columns {sorted(missing)}"
            + ("" if topcols else " and a top{k} column")
            + "."
        )
    cols = [c for c in _TIME_COLS if c in df.columns] + topcols + ["pearson"]
    rows = []
    for (meth, H), g in df.groupby(["method", "H"], sort=False):
        row: dict[str, Any] = {"method": meth, "H": int(H), "rank": int(g["rank"].iloc[0])}
        for c in cols:
            row[f"{c}_mean"], row[f"{c}_ci"], _ = mean_ci_finite(g[c].to_numpy())
        row["n"] = len(g)
        if with_paper:
            paper = PAPER_TABLE_C2.get(int(H), {})
            for c in ("exact_ms", "nystrom_ms", "top30", "pearson"):
                row[f"paper_{c}"] = paper.get(c, np.nan)
                row[f"paper_{c}_ci"] = paper.get(f"{c}_ci", np.nan)
        rows.append(row)
    return pd.DataFrame(rows).set_index(["method", "H"])


# ---------------------------------------------------------------------------------------
# the paper beside the book (chapter 10)
# ---------------------------------------------------------------------------------------
