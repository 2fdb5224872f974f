"""Gram-structured case influence of a fixed-representation OLS readout (Sec. 3, Prop. 1).

For a fixed representation :math:`\\varphi(x)\\in\\mathbb{R}^H`, training representations
:math:`\\Phi\\in\\mathbb{R}^{n\\times H}` (eq. 4) and action-conditional returns
:math:`R\\in\\mathbb{R}^{n\\times|A|}` (eq. 5), the OLS readout (eq. 6-8)

.. math:: V = G^{-1}\\Phi^\\top R, \\qquad G = \\Phi^\\top\\Phi,

gives every action score as an exact weighted sum of training-case returns (eq. 9)

.. math:: Q(x, a) = \\varphi(x)^\\top v_a = \\sum_{i=1}^n \\alpha_i(x)\\, r_{i,a},
          \\qquad \\alpha(x) = \\Phi G^{-1}\\varphi(x)   \\quad\\text{(eq. 10)}.

With Tikhonov regularisation the Gram matrix becomes :math:`G + \\lambda M` (eq. 11 has
:math:`M = I_H`; a general metric ``M`` keeps coordinate invariance, Appendix B.2).
"""

from __future__ import annotations

import json
import numbers
import warnings
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd
from scipy import linalg

from ._params import ParamsMixin
from ._ranking import _rank_dask, _row_blocks, _scan_top_k, _top_k_row, top_k_indices
from ._validation import (
    as_float_matrix,
    as_query,
    check_action,
    check_case_ids,
    check_finite,
    check_k,
    check_nonnegative_scalar,
)
from .exceptions import InputError, NotFittedError, RankDeficientError, ReturnsWarning

__all__ = ["CaseInfluence", "TopCases", "Explanation"]

_EPS = np.finfo(np.float64).eps


class _TopCasesFields(NamedTuple):
    indices: np.ndarray
    contributions: np.ndarray


class TopCases(_TopCasesFields):
    """Result of :meth:`CaseInfluence.top_cases`: unpacks as ``indices, contributions``.

    Attributes
    ----------
    indices : ndarray of int, shape (m, k) or (k,)
        Training-case positions (rows of ``Phi``), strongest first.
    contributions : ndarray of float, shape (m, k) or (k,)
        The signed contributions :math:`\\psi_i(a, x)` (eq. 15) of those cases.
    case_ids : ndarray, shape (m, k) or (k,)
        The same cases named by the labels given to ``fit`` (``case_ids=`` or the index of a
        ``Phi`` DataFrame); the positions when the cases were not labelled.
    """

    case_ids: np.ndarray

    def __new__(
        cls, indices: np.ndarray, contributions: np.ndarray, case_ids: np.ndarray | None = None
    ) -> TopCases:
        self = super().__new__(cls, indices, contributions)
        self.case_ids = indices if case_ids is None else case_ids
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (TopCases, (self.indices, self.contributions, self.case_ids))

    def to_frame(self) -> pd.DataFrame:
        """One row per (query, rank): ``query, rank, position, case_id, psi``.

        Returns
        -------
        pandas.DataFrame
            ``k`` rows for a 1-D query, ``m * k`` rows otherwise.
        """
        idx = np.atleast_2d(self.indices)
        m, k = idx.shape
        return pd.DataFrame(
            {
                "query": np.repeat(np.arange(m), k),
                "rank": np.tile(np.arange(1, k + 1), m),
                "position": idx.ravel(),
                "case_id": np.atleast_2d(self.case_ids).ravel(),
                "psi": np.atleast_2d(self.contributions).ravel(),
            }
        )


class Explanation(NamedTuple):
    """Result of :meth:`CaseInfluence.explain`.

    Attributes
    ----------
    cases : pandas.DataFrame
        One row per (query, rank): ``query, rank, case_id, alpha, psi, return, case_action,
        effect``.
    signals : pandas.DataFrame
        One row per query (index ``query``): ``action, score, margin, entropy, gini, risk``.
    """

    cases: pd.DataFrame
    signals: pd.DataFrame

    def plot(self, query: int = 0, **kwargs: Any) -> Any:
        """Draw one query's top cases (:func:`cbdt.plots.plot_top_cases`).

        Parameters
        ----------
        query : int, default=0
        **kwargs
            Passed on (``action_names``, ``ax``, ``max_label``).

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .plots import plot_top_cases

        return plot_top_cases(self, query, **kwargs)


class CaseInfluence(ParamsMixin):
    """Exact case-influence decomposition of an OLS (or ridge) readout (Proposition 1).

    Parameters
    ----------
    ridge : float, default=0.0
        Tikhonov strength :math:`\\lambda \\ge 0` (eq. 11). ``0`` is plain OLS (eq. 8, 10).
    intercept : bool, default=False
        Absorb a constant coordinate into :math:`\\varphi` (Sec. 2.2). The intercept is not
        penalised by ``ridge``.
    solver : {"auto", "cholesky", "lstsq"}, default="auto"
        ``"cholesky"`` solves with the triangular factor :math:`R_\\lambda` of a QR of
        :math:`[\\Phi;\\ \\sqrt\\lambda M^{1/2}]` (:math:`R_\\lambda^\\top R_\\lambda = G +
        \\lambda M`, the Cholesky factor, computed without forming :math:`G`) and raises
        :class:`~cbdt.exceptions.RankDeficientError` when :math:`\\Phi` is rank-deficient or
        the condition number of :math:`G + \\lambda M` exceeds :attr:`max_condition`.
        ``"lstsq"`` uses the singular value decomposition of that factor and gives the
        *minimum-norm* readout and coefficients when :math:`\\Phi` is rank-deficient
        (:math:`\\alpha = \\Phi G^{+}\\varphi(x)`, the minimum-norm solution of
        :math:`\\Phi^\\top\\beta = \\varphi(x)`). ``"auto"`` resolves to ``"cholesky"``:
        Proposition 1 assumes full column rank, so a rank-deficient memory is reported rather
        than silently answered by another estimator. The resolved solver is in ``solver_``.
    ridge_metric : array-like of shape (H, H), optional
        Symmetric positive semi-definite metric :math:`M` of the penalty
        :math:`\\lambda v^\\top M v`; default :math:`I_H`. After a reparameterisation
        :math:`\\varphi \\mapsto B\\varphi`, ``ridge_metric = B M B^T`` keeps the regularised
        coefficients invariant (Appendix B.2, :func:`cbdt.geometry.cotransformed_metric`).
    max_condition : float, default=1e12
        Largest condition number of :math:`G + \\lambda M` (the square of that of
        :math:`\\Phi` for OLS) the Cholesky solver accepts. The coefficients' relative error
        grows like :math:`\\sqrt{\\text{condition number}}\\,\\epsilon_{\\text{mach}}`.
    chunk_size : int, default=65536
        Rows of ``Phi`` folded into the triangular factor at once, and read at once from a
        memmap ``Phi`` at query time (a float32 memmap is converted one chunk at a time).
    batch_size : int, default=1024
        Queries answered at once by the query methods; a memmap or dask ``Phi`` is read once
        per batch of queries.
    topk_block_entries : int, default=16_000_000
        Entries (queries x cases) of one block of :meth:`iter_coefficients`, about 128 MB of
        float64. :meth:`top_cases`, :meth:`explain` and :func:`cbdt.audit.audit_signals`
        never hold more than cache-sized blocks of the (m, n) contributions.

    All parameters are keyword arguments of the constructor; :meth:`get_params` and
    :meth:`set_params` follow scikit-learn, so ``sklearn.base.clone`` works.

    Attributes
    ----------
    readout_ : ndarray of shape (H, |A|)
        Readout weights :math:`V = (G + \\lambda M)^{-1}\\Phi^\\top R` (eq. 8; ridge eq. 11).
    intercept_ : ndarray of shape (|A|,)
        Intercept of each action (only when ``intercept=True``).
    gram_ : ndarray of shape (H', H')
        Float64 Gram matrix :math:`\\Phi^\\top\\Phi` (``H' = H + 1`` with an intercept).
    n_cases_ : int
        Number of training cases ``n``.
    n_features_ : int
        Representation width ``H``.
    n_actions_ : int
        Number of actions ``|A|``.
    returns_ : ndarray of shape (n, |A|)
        The training returns ``R`` (float64).
    rank_ : int
        Numerical rank of the (augmented) feature matrix.
    condition_number_ : float
        Condition number of the factored matrix :math:`G + \\lambda M`.
    solver_ : str
        ``"cholesky"`` or ``"lstsq"``.
    case_ids_ : ndarray of shape (n,) or None
        The training cases' labels given to ``fit`` (``case_ids=`` or a ``Phi`` DataFrame's
        index); ``None`` when the cases are named by their positions ``0..n-1``.

    Notes
    -----
    ``fit`` reduces ``[Phi, 1, R]`` to one triangular factor in float64 over row chunks of
    ``chunk_size`` rows (a tall-skinny QR), so ``Phi`` may be a :class:`numpy.memmap` larger
    than memory or a ``dask.array`` on a cluster. The normal equations are never formed, so
    the error of :math:`\\alpha` grows with :math:`\\mathrm{cond}(\\Phi)`, not its square.
    For an in-memory ``Phi`` the fit caches the read-only dual matrix
    :math:`D = \\Phi(G+\\lambda M)^{-1}` (n x H', in place of a copy of ``Phi``), so a
    query is one GEMM, :math:`\\alpha(x) = D\\varphi(x)`; ``R`` is cached as a read-only
    float64 copy. Editing the caller's arrays after ``fit`` therefore cannot break
    Proposition 1. A memmap or dask ``Phi`` is kept by reference and read at every query
    (:math:`\\alpha = \\Phi\\,(R_\\lambda^{-1}R_\\lambda^{-\\top}\\varphi)`), so its data
    must not change. The coefficients do not depend on a global scale of ``Phi``: entries so
    large (or small) that the factor would overflow (or underflow) are rescaled by an exact
    power of two. No inverse is ever formed.

    Ranking: :meth:`top_cases`, :meth:`explain` and :func:`cbdt.audit.audit_signals` form
    the contributions in cache-sized blocks, screen each block in float32 (a bound on the
    float32 error keeps every case that could enter the top k) and recompute the survivors in
    float64, so the ranking is the float64 one at about the cost of a float32 GEMM.

    Threads: queries on an in-memory fit use only numpy's BLAS; the ranking scan and the
    fit's QR folds pin BLAS to one thread and run on as many Python threads as numpy's BLAS
    has (small GEMMs and QRs gain nothing from a BLAS pool, and two pools would fight for
    the cores).

    Examples
    --------
    >>> import numpy as np, cbdt
    >>> rng = np.random.default_rng(0)
    >>> Phi, R = rng.normal(size=(100, 5)), rng.normal(size=(100, 3))
    >>> ci = cbdt.CaseInfluence().fit(Phi, R)
    >>> phi = rng.normal(size=5)
    >>> np.allclose(ci.coefficients(phi) @ R, ci.scores(phi))
    True
    """

    def __init__(
        self,
        ridge: float = 0.0,
        intercept: bool = False,
        solver: Literal["auto", "cholesky", "lstsq"] = "auto",
        ridge_metric: Any = None,
        *,
        max_condition: float = 1e12,
        chunk_size: int = 65_536,
        batch_size: int = 1_024,
        topk_block_entries: int = 16_000_000,
        progress: bool = False,
    ) -> None:
        self.ridge = ridge
        self.intercept = intercept
        self.solver = solver
        self.ridge_metric = ridge_metric
        self.max_condition = max_condition
        self.chunk_size = chunk_size
        self.batch_size = batch_size
        self.topk_block_entries = topk_block_entries
        self.progress = progress

    _PARAMS: tuple[str, ...] = (
        "ridge",
        "intercept",
        "solver",
        "ridge_metric",
        "max_condition",
        "chunk_size",
        "batch_size",
        "topk_block_entries",
        "progress",
    )
    _DEFAULTS: dict[str, Any] = {
        "max_condition": 1e12,
        "chunk_size": 65_536,
        "batch_size": 1_024,
        "topk_block_entries": 16_000_000,
        "progress": False,
    }

    def __repr__(self) -> str:
        metric = "None" if self.ridge_metric is None else "<matrix>"
        extra = "".join(
            f", {k}={getattr(self, k)!r}"
            for k, v in self._DEFAULTS.items()
            if getattr(self, k) != v
        )
        return (
            f"CaseInfluence(ridge={self.ridge!r}, intercept={self.intercept!r}, "
            f"solver={self.solver!r}, ridge_metric={metric}{extra})"
        )

    def _blocks(self, m: int, step: int, what: str) -> Any:
        """Block starts ``0, step, ...``; a tqdm bar when ``progress`` and several blocks."""
        starts = range(0, m, step)
        if self.progress and len(starts) > 1:
            from tqdm.auto import tqdm

            return tqdm(starts, desc=what, unit="block", leave=False)
        return starts

    def _check_tunables(self) -> None:
        mc = self.max_condition
        if not isinstance(mc, numbers.Real) or isinstance(mc, bool) or not mc >= 1:
            raise InputError(f"max_condition must be a number >= 1, got {mc!r}.")
        for name in ("chunk_size", "batch_size", "topk_block_entries"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise InputError(f"{name} must be a positive integer, got {v!r}.")

    # ------------------------------------------------------------------ fitting
    def fit(self, Phi: Any, R: Any, *, case_ids: Any = None) -> CaseInfluence:
        """Factor the case memory once (a tall-skinny QR of ``Phi``) and solve for the readout.

        Parameters
        ----------
        Phi : array-like, pandas.DataFrame, numpy.memmap or dask.array.Array of shape (n, H)
            Training representations :math:`\\varphi(x_i)` as rows (eq. 4). A memmap is
            read in row chunks; a dask array is factored chunk by chunk on its workers.
        R : array-like of shape (n, |A|) or (n,)
            Action-conditional returns :math:`r_i(a)` (eq. 5); 1-D means one action.
        case_ids : array-like of shape (n,) or pandas.Index, optional
            Labels of the training cases (row ids of the caller's data). Default: the index
            of a ``Phi`` DataFrame when it is not the plain ``0..n-1``, else none. Kept as
            :attr:`case_ids_`; every result that names cases (:meth:`top_cases`,
            :meth:`explain`) carries them.

        Returns
        -------
        self : CaseInfluence

        Notes
        -----
        The rows ``[phi_i, 1, r_i]`` (the constant only with ``intercept=True``) are reduced
        chunk by chunk to one triangular factor (a tall-skinny QR): ``R_0`` with
        :math:`R_0^\\top R_0 = G` and :math:`c = Q^\\top R`. Ridge rows
        :math:`\\sqrt\\lambda M^{1/2}` are appended to the same reduction, giving
        :math:`R_\\lambda^\\top R_\\lambda = G + \\lambda M`, the readout
        :math:`V = R_\\lambda^{-1} c_\\lambda` (eq. 8/11) and, for an in-memory ``Phi``, the
        dual matrix :math:`D = \\Phi R_\\lambda^{-1} R_\\lambda^{-\\top} = \\Phi (G+\\lambda
        M)^{-1}` by two triangular solves, so :math:`\\alpha(x) = D\\varphi(x)` is one GEMM.
        The normal equations are never formed: the error of :math:`\\alpha` grows with
        :math:`\\mathrm{cond}(\\Phi)`, not its square (the seminormal form of a minimum-norm
        problem is as accurate as the QR form, Paige 1973).
        """
        ridge = check_nonnegative_scalar("ridge", self.ridge)
        self._check_tunables()
        if self.solver not in ("auto", "cholesky", "lstsq"):
            raise InputError(
                f"solver must be 'auto', 'cholesky' or 'lstsq', got {self.solver!r}."
            )
        if not isinstance(self.intercept, bool | np.bool_):
            raise InputError(f"intercept must be True or False, got {self.intercept!r}.")
        Phi_frame = Phi
        Phi, kind = self._check_phi(Phi)
        n, H = Phi.shape
        ids = check_case_ids(case_ids, n, Phi_frame)
        R_in = R
        R = as_float_matrix("R", R, allow_1d=True, finite=False)
        if R.ndim == 1:
            labels = np.unique(R[np.isfinite(R)])
            if labels.size >= 3 and np.all(labels == np.round(labels)):
                warnings.warn(
                    f"R is one column of {labels.size} distinct integer values: it is fitted as "
                    "the returns of ONE action, not as class labels. For a classifier pass "
                    "cbdt.returns_from_labels(y), one action per class.",
                    ReturnsWarning,
                    stacklevel=2,
                )
            R = R[:, None]
        if isinstance(R_in, np.ndarray) and np.shares_memory(R, R_in):
            R = R.copy()  # cached: editing the caller's R later must not break Prop. 1
        R.setflags(write=False)
        check_finite("R", R, hint="returns r_i(a) must be finite for every case and action")
        if R.shape[0] != n:
            raise InputError(
                f"Phi has {n} rows (training cases) but R has {R.shape[0]}; row i of both must "
                "belong to training case i."
            )
        metric = self._check_metric(H)
        Hp = H + int(self.intercept)

        # One triangular factor of [Phi, 1, R] (float64), reduced over row chunks.
        T, max_abs = self._tsqr(Phi, R, 1.0, kind)
        # alpha does not depend on a global scale of Phi. Entries so large (or small) that the
        # factor or the Gram matrix would overflow (or underflow) are handled by an exact
        # power-of-two rescaling (scale = 1, and bit-identical results, for every other Phi).
        scale = 1.0
        if max_abs > 0 and (not np.all(np.isfinite(T)) or not 2.0**-400 < max_abs < 2.0**400):
            scale = float(2.0 ** -np.round(np.log2(max_abs)))
            T, _ = self._tsqr(Phi, R, scale, kind)
        self._scale = scale
        R0 = np.ascontiguousarray(T[:Hp, :Hp])
        Tf = T[:Hp]
        L = None
        if ridge > 0:  # lambda |v|^2 = lambda c^2 |v_c|^2 for the rescaled weights v_c = v / c
            L = np.zeros((H, T.shape[1]))
            if self.ridge_metric is None:  # M = I: the rows sqrt(lam) I
                L[:, :H] = np.eye(H) * (np.sqrt(ridge) * scale)
            else:  # M = U diag(w) U^T: the rows sqrt(lam w) U^T
                w, U = linalg.eigh(metric)
                L[:, :H] = (np.sqrt(np.clip(w, 0.0, None) * ridge) * scale)[:, None] * U.T
            Tf = _qr_r(np.vstack([Tf, L]))[:Hp]
        Rf, Cf = np.ascontiguousarray(Tf[:, :Hp]), np.ascontiguousarray(Tf[:, Hp:])

        solver = "cholesky" if self.solver == "auto" else self.solver
        if solver == "cholesky":
            sv = linalg.svdvals(Rf, check_finite=False)
        else:
            Uf, sv, Wt = linalg.svd(Rf, check_finite=False)
        # singular values of [Phi; sqrt(lam) M^1/2] give rank and condition number
        tol = float(sv[0]) * max(n, Hp) * _EPS
        rank = int(np.sum(sv > tol))
        cond = float((sv[0] / sv[-1]) ** 2) if sv[-1] > 0 else float("inf")  # of G + lam M
        if solver == "cholesky":
            if rank < Hp or cond > self.max_condition:
                raise RankDeficientError(
                    self._rank_message(n, H, rank, Hp, cond, ridge),
                    rank=rank,
                    dim=Hp,
                    condition_number=cond,
                )
            self._factor, self._eig = Rf, None
            V = linalg.solve_triangular(Rf, Cf, check_finite=False)
        else:
            if rank == 0:
                raise RankDeficientError(
                    "Phi is numerically zero (rank 0): every coefficient would be 0. Check the "
                    "representation.",
                    rank=0,
                    dim=Hp,
                    condition_number=cond,
                )
            keep = sv > tol
            W = np.ascontiguousarray(Wt[keep].T)
            self._factor, self._eig = None, (W, sv[keep] ** 2)
            V = W @ ((Uf[:, keep].T @ Cf) / sv[keep][:, None])  # minimum-norm LS solution
        self._kind = kind
        if kind == "array":  # cache the dual matrix Phi (G + lam M)^-1; Phi itself is not kept
            ridge_rows = None if L is None else L[:, :Hp]
            self._dual, V_dual = self._make_dual(Phi, scale, ridge_rows, rank, R)
            self._Phi = None
            if V_dual is not None:  # from the same factorisation as D: Prop. 1 to rounding
                V = V_dual
        else:  # memmap or dask array: kept by reference, read at every query
            self._dual, self._Phi = None, Phi
        self._set_fitted(R0, R, V, n, H, rank, cond, solver)
        self.case_ids_ = ids
        return self

    def _set_fitted(
        self,
        R0: np.ndarray,
        R: np.ndarray,
        V: np.ndarray,
        n: int,
        H: int,
        rank: int,
        cond: float,
        solver: str,
    ) -> None:
        """Fitted attributes shared by :meth:`fit` and :meth:`load`."""
        self._R0 = R0
        scale = self._scale
        Hp = H + int(self.intercept)
        G = R0.T @ R0
        if scale == 1.0:
            self.gram_ = G
        else:  # the Gram matrix of Phi itself (inf where it exceeds float64)
            D = np.full(Hp, 1.0 / scale)
            if self.intercept:
                D[H] = 1.0
            with np.errstate(over="ignore"):
                self.gram_ = G * D[:, None] * D[None, :]
        self.gram_.setflags(write=False)
        self.returns_ = R
        self._returns_t = np.ascontiguousarray(R.T)
        self._returns_absmax = float(np.abs(R).max())
        for arr in (R, self._returns_t, V, R0):
            arr.setflags(write=False)
        self.n_cases_ = n
        self.n_features_ = H
        self.n_actions_ = R.shape[1]
        self.rank_ = rank
        self.condition_number_ = cond
        self.solver_ = solver
        self._V = V  # weights of the rescaled features scale * phi
        self.readout_ = V[:H] * scale if scale != 1.0 else V[:H].copy()
        if self.intercept:
            self.intercept_ = V[H].copy()

    def _tsqr(
        self, Phi: Any, R: np.ndarray, scale: float, kind: str
    ) -> tuple[np.ndarray, float]:
        """Triangular factor of ``[scale * Phi, 1, R]`` over row chunks, and max |Phi|."""
        if kind == "dask":
            return _tsqr_dask(Phi, R, scale, self.intercept)
        from ._threads import blas_threads, single_threaded_blas

        n = Phi.shape[0]
        # each thread folds its share of every chunk into a factor of its own (numpy and
        # LAPACK release the GIL); BLAS is pinned to one thread for these small QRs, and the
        # factors are stacked and reduced by one more QR (a reduction tree of depth two).
        p = Phi.shape[1] + int(self.intercept) + R.shape[1]
        small = p <= 256  # small folds: pinned BLAS, one fold per Python thread
        threads = max(1, min(blas_threads(), n // (4 * _TSQR_ROWS))) if small else 1
        Ts: list[np.ndarray | None] = [None] * threads
        mx = [0.0] * threads

        def fold(j: int, a: int, b: int) -> None:
            if b > a:
                Ts[j], m_ = _chunk_r(Phi[a:b], R[a:b], scale, self.intercept, Ts[j], a)
                mx[j] = max(mx[j], m_)

        from contextlib import nullcontext

        # large folds (wide H) are level-3 work that BLAS's own threads share better
        with single_threaded_blas() if small else nullcontext():
            if threads == 1:
                for start in range(0, n, self.chunk_size):
                    fold(0, start, min(n, start + self.chunk_size))
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(threads) as pool:
                    for start in range(0, n, self.chunk_size):
                        stop = min(n, start + self.chunk_size)
                        cut = np.linspace(start, stop, threads + 1).round().astype(int)
                        list(pool.map(fold, range(threads), cut[:-1], cut[1:]))
            done = [t for t in Ts if t is not None]
            T = done[0] if len(done) == 1 else _qr_r(np.vstack(done))
        return T, max(mx)

    def _make_dual(
        self,
        Phi: np.ndarray,
        scale: float,
        ridge_rows: np.ndarray | None,
        rank: int,
        R: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """D = [scale Phi, 1] (G + lam M)^-1 (or its pseudo-inverse), (n, H'), C order,
        read-only; for the minimum-norm solver also the readout D^T R of the same factors."""
        n, H = Phi.shape
        Hp = H + int(self.intercept)
        D = np.empty((n, Hp))
        if scale != 1.0:
            np.multiply(Phi, scale, out=D[:, :H])
        else:
            np.copyto(D[:, :H], Phi)
        if self.intercept:
            D[:, H] = 1.0
        if self._factor is not None:  # D^T = R^-1 R^-T [Phi, 1]^T, in place (D.T is F order)
            trsm = linalg.blas.dtrsm
            Dt = trsm(1.0, self._factor, D.T, side=0, lower=0, trans_a=1, overwrite_b=1)
            Dt = trsm(1.0, self._factor, Dt, side=0, lower=0, trans_a=0, overwrite_b=1)
            if not np.shares_memory(Dt, D):  # pragma: no cover - f2py copied: keep its result
                D = np.ascontiguousarray(Dt.T)
        else:
            # minimum norm, rank-deficient: the seminormal form would divide by s^2 of the
            # tiny singular values, so use the thin Q of [Phi; sqrt(lam) M^1/2] = Q R_q with
            # R_q = U S W^T: alpha = Q U_k S_k^-1 W_k^T phi (no pseudo-inverse formed)
            X = D if ridge_rows is None else np.vstack([D, ridge_rows])
            Q, Rq = linalg.qr(X, mode="economic", overwrite_a=True, check_finite=False)
            U, sv, Wt = linalg.svd(Rq, check_finite=False)
            QU = Q[:n] @ U[:, :rank]
            D = (QU / sv[:rank]) @ Wt[:rank]
            D.setflags(write=False)
            return D, Wt[:rank].T @ ((QU.T @ R) / sv[:rank, None])
        D.setflags(write=False)
        return D, None

    # ------------------------------------------------------------------ persistence
    _FORMAT = 2

    def save(self, path: Any, *, include_phi: bool = True) -> None:
        """Write the fitted decomposition to an ``.npz`` file (no pickle).

        The file holds the constructor parameters, the triangular factors of :math:`G` and
        :math:`G + \\lambda M`, the readout, the returns and, unless ``include_phi=False``, what
        the coefficients need of :math:`\\Phi`: the dual matrix :math:`\\Phi (G+\\lambda M)^{-1}`
        of an in-memory fit, or :math:`\\Phi` itself for a memmap or dask fit (written out in
        full). Without it the loaded object still answers :meth:`scores` and
        :meth:`leverage`, but not the coefficients (eq. 10).

        Parameters
        ----------
        path : str or path-like
            Target file; numpy appends ``.npz`` when missing.
        include_phi : bool, default=True
        """
        self._check_fitted()
        params = {k: getattr(self, k) for k in self._PARAMS if k != "ridge_metric"}
        arrays: dict[str, np.ndarray] = {
            "format": np.array(self._FORMAT),
            "params": np.array(json.dumps(params)),
            "gram_factor": self._R0,
            "returns": self.returns_,
            "V": self._V,
            "fitted": np.array(
                [self._scale, self.rank_, self.condition_number_, self.n_cases_,
                 self.n_features_, self.n_actions_]
            ),
            "solver_": np.array(self.solver_),
        }
        if self.ridge_metric is not None:
            arrays["ridge_metric"] = np.asarray(self.ridge_metric, dtype=np.float64)
        if self.case_ids_ is not None:
            arrays["case_ids"] = _storable_ids(self.case_ids_)
        if self._factor is not None:
            arrays["factor"] = self._factor
        else:
            arrays["eig_W"], arrays["eig_w"] = self._eig
        if include_phi:
            if self._dual is not None:
                arrays["dual"] = self._dual
            elif self._Phi is not None:
                arrays["Phi"] = np.asarray(self._Phi, dtype=np.float64)
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: Any) -> CaseInfluence:
        """Read a decomposition written by :meth:`save`.

        Returns
        -------
        CaseInfluence
            Fitted; ``coefficients`` and the methods built on them raise
            :class:`~cbdt.exceptions.InputError` when the file was saved without ``Phi``.
        """
        with np.load(path, allow_pickle=False) as f:
            if "format" not in f or int(f["format"]) != cls._FORMAT:
                raise InputError(
                    f"{path!s} is not a CaseInfluence file of format {cls._FORMAT} (written by "
                    "CaseInfluence.save of this version); refit and save it again."
                )
            params = json.loads(str(f["params"]))
            metric = f["ridge_metric"] if "ridge_metric" in f else None
            ci = cls(ridge_metric=metric, **params)
            scale, rank, cond, n, H, A = f["fitted"].tolist()
            ci._scale = float(scale)
            if "factor" in f:
                ci._factor, ci._eig = f["factor"], None
            else:
                ci._factor, ci._eig = None, (f["eig_W"], f["eig_w"])
            ci._dual = f["dual"] if "dual" in f else None
            ci._Phi = f["Phi"] if "Phi" in f else None
            ci._kind = "array" if ci._Phi is None else "loaded"
            for arr in (ci._dual, ci._Phi):
                if arr is not None:
                    arr.setflags(write=False)
            ci._set_fitted(
                f["gram_factor"], f["returns"], f["V"], int(n), int(H), int(rank),
                float(cond), str(f["solver_"]),
            )
            ci.case_ids_ = f["case_ids"] if "case_ids" in f else None
            if ci.case_ids_ is not None:
                ci.case_ids_.setflags(write=False)
        return ci

    # ------------------------------------------------------------------ queries
    def coefficients(self, phi: Any, *, out: np.ndarray | None = None) -> np.ndarray:
        """Case-influence coefficients :math:`\\alpha(x) = \\Phi (G + \\lambda M)^{-1}\\varphi(x)`.

        Eq. 10 (OLS) and eq. 11 (ridge). Written straight into the result (one GEMM per
        batch of queries for an in-memory fit, no temporary); for more queries than fit in
        memory use :meth:`iter_coefficients`.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations :math:`\\varphi(x)`.
        out : ndarray of float64, shape (m, n) or (n,), C-contiguous, optional
            Preallocated result to fill (reused across calls, it saves the page faults of a
            fresh (m, n) array).

        Returns
        -------
        alpha : ndarray of shape (m, n), or (n,) for a 1-D query (``out`` when given)
        """
        Q, single = self._check_query(phi)
        shape = (self.n_cases_,) if single else (Q.shape[0], self.n_cases_)
        if out is None:
            out = np.empty(shape)
        elif not (
            isinstance(out, np.ndarray)
            and out.shape == shape
            and out.dtype == np.float64
            and out.flags.c_contiguous
            and out.flags.writeable
        ):
            raise InputError(
                f"out must be a writeable C-contiguous float64 array of shape {shape}, got "
                f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', type(out).__name__)}."
            )
        result = out
        out = out.reshape(Q.shape[0], self.n_cases_)
        for s in self._blocks(Q.shape[0], self.batch_size, "coefficients"):
            self._alpha(Q[s : s + self.batch_size], out=out[s : s + self.batch_size])
        return result

    def iter_coefficients(
        self, phi: Any, block_size: int | None = None
    ) -> Iterator[tuple[slice, np.ndarray]]:
        """Coefficients of many queries, one block at a time (eq. 10/11).

        For more queries than fit in memory as one ``(m, n)`` array: each step yields the
        slice of queries it covers and their coefficients, written into one buffer that is
        reused, so memory stays ``O(block_size * n)``. Copy a block to keep it.

        Parameters
        ----------
        phi : array-like of shape (m, H)
        block_size : int, optional
            Queries per block; default ``topk_block_entries // n`` (about 128 MB), at most
            ``batch_size``.

        Yields
        ------
        (slice, ndarray of shape (b, n))
        """
        Q, _ = self._check_query(phi)
        if block_size is None:
            step = max(1, min(self.batch_size, self.topk_block_entries // self.n_cases_))
        elif isinstance(block_size, numbers.Integral) and block_size >= 1:
            step = int(block_size)
        else:
            raise InputError(f"block_size must be a positive integer, got {block_size!r}.")
        buf = np.empty((min(step, Q.shape[0]), self.n_cases_))
        for s in range(0, Q.shape[0], step):
            sl = slice(s, min(s + step, Q.shape[0]))
            block = buf[: sl.stop - sl.start]
            self._alpha(Q[sl], out=block)
            yield sl, block

    def scores(self, phi: Any) -> np.ndarray:
        """Action scores :math:`Q(x, a) = \\varphi(x)^\\top v_a` (eq. 3), equal to eq. 9.

        Computed from the readout, not by summing :math:`\\alpha R`; the two agree to
        rounding error (Proposition 1).

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations :math:`\\varphi(x)`.

        Returns
        -------
        ndarray of shape (m, |A|), or (|A|,) for a 1-D query
        """
        Q, single = self._check_query(phi)
        S = self._augment(Q) @ self._V
        return S[0] if single else S

    def leverage(self, phi: Any) -> np.ndarray:
        """Leverage :math:`\\lVert\\alpha(x)\\rVert^2` of each query (no returns involved).

        For OLS, :math:`\\lVert\\alpha(x)\\rVert^2 = \\varphi(x)^\\top G^{-1}\\varphi(x)`
        (eq. 10): the factor by which the noise variance of the returns scales the variance
        of the readout score, :math:`\\mathrm{Var}\\,\\hat Q(x, a) = \\sigma^2
        \\varphi(x)^\\top G^{-1}\\varphi(x)`, large far from the training representations.
        Computed in :math:`O(H^2)` per query as :math:`z^\\top G z` with
        :math:`z = (G + \\lambda M)^{-1}\\varphi(x)`, which equals
        :math:`\\lVert\\Phi z\\rVert^2 = \\lVert R_0 z\\rVert^2 = \\lVert\\alpha(x)\\rVert^2`
        (:math:`R_0` the triangular factor of :math:`\\Phi`) for every solver and ridge.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)

        Returns
        -------
        ndarray of shape (m,), or a float for a 1-D query
        """
        Q, single = self._check_query(phi)
        Y = self._R0 @ self._solve(self._augment(Q).T)  # R_0 z, (H', m)
        lev = np.einsum("hm,hm->m", Y, Y)
        return float(lev[0]) if single else lev

    def contributions(self, phi: Any, action: Any) -> np.ndarray:
        """Case audit contributions :math:`\\psi_i(a, x) = \\alpha_i(x) r_{i,a}` (eq. 15).

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
        action : int or array of int of shape (m,)
            One action for all queries, or one per query.

        Returns
        -------
        psi : ndarray of shape (m, n), or (n,) for a 1-D query
        """
        Q, single = self._check_query(phi)
        acts = check_action(action, self.n_actions_, Q.shape[0])
        out = np.empty((Q.shape[0], self.n_cases_))
        for s in self._blocks(Q.shape[0], self.batch_size, "contributions"):
            sl = slice(s, s + self.batch_size)
            self._alpha(Q[sl], out=out[sl])
            out[sl] *= self._returns_t[acts[sl]]  # rows of R^T: contiguous, in place
        return out[0] if single else out

    def explain(
        self,
        phi: Any,
        k: int = 10,
        *,
        case_ids: Any = None,
        action: Any = None,
        gamma: float = 1.0,
        eps: float = 1e-12,
        rank_by: Literal["contribution", "coefficient"] = "contribution",
    ) -> Explanation:
        """One-call case account of many decisions: top cases and audit signals (Sec. 4).

        Computes :math:`\\alpha(x)` once per query block and returns, for every query, its
        ``k`` strongest cases (eq. 15) and its signals (eq. 16-20), with the caller's case
        ids.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations.
        k : int, default=10
            Cases listed per query, and the top-k of eq. 16-18.
        case_ids : array-like of shape (n,) or pandas.Index, optional
            Labels of the training cases (e.g. the index of the training DataFrame); default
            :attr:`case_ids_` from ``fit``, else the positions ``0..n-1``.
        action : int or array-like of int of shape (m,), optional
            Audited action per query; default the readout's choice :math:`\\arg\\max_a Q`.
        gamma, eps : float
            As in :func:`cbdt.audit.risk_score`.
        rank_by : {"contribution", "coefficient"}, default="contribution"
            Rank cases (and form eq. 16-18) by :math:`|\\psi_i|` or by :math:`|\\alpha_i|`
            (:func:`cbdt.audit.audit_signals`).

        Returns
        -------
        Explanation
            ``cases``: one row per (query, rank) with ``query, rank, case_id, alpha, psi,
            return, case_action, effect`` (``"raises"`` or ``"lowers"`` the audited score);
            ``signals``: one row per query with ``action, score, margin, entropy, gini,
            risk``.
        """
        from .audit import _check_eps, _signal_table, _top_signals

        if rank_by not in ("contribution", "coefficient"):
            raise InputError(
                f"rank_by must be 'contribution' or 'coefficient', got {rank_by!r}."
            )
        Q, _ = self._check_query(phi)
        n, A = self.n_cases_, self.n_actions_
        k = check_k(k, n)
        eps = _check_eps(eps)
        gamma = check_nonnegative_scalar("gamma", gamma)
        ids = self._case_ids(case_ids)
        m = Q.shape[0]
        S = self._augment(Q) @ self._V
        acts = np.argmax(S, axis=1) if action is None else check_action(action, A, m)
        a_star = np.argmax(self.returns_, axis=1)
        weight = "psi" if rank_by == "contribution" else "alpha"
        idx, mass, signed = self._rank(Q, acts, k, "abs", weight, "explain")
        ent, gini = _top_signals(mass, a_star[idx], A, k, eps)
        alpha_k = signed if weight == "alpha" else self._alpha_at(Q, idx)
        ret = self.returns_[idx, acts[:, None]]
        psi_k = alpha_k * ret
        cases = pd.DataFrame(
            {
                "query": np.repeat(np.arange(m), k),
                "rank": np.tile(np.arange(1, k + 1), m),
                "case_id": np.asarray(ids)[idx.ravel()],
                "alpha": alpha_k.ravel(),
                "psi": psi_k.ravel(),
                "return": ret.ravel(),
                "case_action": a_star[idx.ravel()],
                "effect": np.where(psi_k.ravel() >= 0, "raises", "lowers"),
            }
        )
        signals = _signal_table(S, acts, ent, gini, gamma)
        signals.index.name = "query"
        return Explanation(cases, signals)

    def _case_ids(self, case_ids: Any = None) -> np.ndarray:
        """The labels results name cases by: ``case_ids``, else those given to ``fit``."""
        ids = check_case_ids(case_ids, self.n_cases_)
        if ids is None:
            ids = getattr(self, "case_ids_", None)
        return np.arange(self.n_cases_) if ids is None else ids

    def top_cases(
        self,
        phi: Any,
        action: Any,
        k: int = 10,
        order: Literal["abs", "positive", "negative"] = "abs",
    ) -> TopCases:
        """The ``k`` training cases with the strongest contributions to ``Q(x, action)``.

        Sec. 4 (i): ``order="abs"`` ranks by :math:`|\\psi_i|` (the most influential cases),
        ``"positive"`` by :math:`\\psi_i` descending (strongest support), ``"negative"`` by
        :math:`\\psi_i` ascending (strongest offsets). Ties go to the lower case index.
        The contributions are formed and ranked in cache-sized blocks (one pass over the case
        memory for all queries), so only the ``(m, k)`` result is kept, never the ``(m, n)``
        contributions; memory stays bounded for any ``m`` and ``n``.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations.
        action : int or array-like of int of shape (m,)
            The action whose score is explained, one for all queries or one per query.
        k : int, default=10
            Cases per query, ``1 <= k <= n``.
        order : {"abs", "positive", "negative"}, default="abs"

        Returns
        -------
        TopCases
            ``(indices, contributions)``, each of shape (m, k), or (k,) for a 1-D query, and
            ``case_ids`` (the same cases by the labels given to ``fit``).

        Notes
        -----
        A batch of queries (more than one cache-sized block of contributions) is answered by
        one fused scan over the case memory, for ``batch_size`` queries at a time:

        * Threads: the queries are split into as many contiguous groups as numpy's BLAS has
          threads (:mod:`cbdt._threads`); each group is scanned by its own Python thread with
          every BLAS pinned to one thread, so the GEMMs *and* the elementwise screening run on
          all cores (with fewer than 64 queries per thread, each thread takes a share of the
          cases instead and the per-thread lists are merged by key, then case index). The
          output does not depend on the thread count or on scheduling.
        * Blocks: for a block of up to 256 queries and a sub-chunk of cases (about half a
          million contributions, e.g. 256 x 2,048), the contributions are formed by a float32
          GEMM (against case rows already scaled by the returns of the queries' action, when
          the block is large), keyed (``|psi|``, ``psi`` or ``-psi``) and reduced to maxima
          of groups of 8 cases. Only groups whose maximum exceeds the query's running
          threshold (less a rigorous bound ``M`` on the float32 error) are read again, and
          their entries above it are kept as candidates with the bounds ``key32 -/+ M`` on
          their float64 key. The threshold, the k-th largest lower bound so far, rises after
          every sub-chunk; on a query's first sub-chunk it comes from the k-th largest
          group maximum.
        * Exactness: every case that can rank in the float64 top k survives the screen. At
          the end of each chunk of the case memory (for an in-memory fit, the whole memory),
          only the candidates whose upper bound still reaches the threshold, about ``k``
          per query, are recomputed in float64 (one dot product each) and merged by a sort
          of their float64 keys (ties to the lower case index). The indices and float64
          contributions are therefore those of a stable sort of the float64 contributions,
          at about the cost of a float32 GEMM; the pending candidates are resolved early
          whenever a block holds more than ``8 k`` per query (e.g. massive ties), so
          memory stays bounded. Blocks too large or too small for float32 fall back to
          float64 throughout.
        """
        if order not in ("abs", "positive", "negative"):
            raise InputError(f"order must be 'abs', 'positive' or 'negative', got {order!r}.")
        self._check_fitted()
        k = check_k(k, self.n_cases_)
        Q, single = self._check_query(phi)
        acts = check_action(action, self.n_actions_, Q.shape[0])
        idx, _, vals = self._rank(Q, acts, k, order, "psi", "top_cases")
        labels = getattr(self, "case_ids_", None)
        ids = idx if labels is None else labels[idx]
        if single:
            return TopCases(idx[0], vals[0], ids[0])
        return TopCases(idx, vals, ids)


    # ------------------------------------------------------------------ internals
    # entries (queries x cases) of one cache-sized block of the fused top-k scan
    _SCAN_ENTRIES = 1 << 19

    def _check_phi(self, Phi: Any) -> tuple[Any, str]:
        if _is_dask(Phi):
            if Phi.ndim != 2 or Phi.dtype.kind not in "iuf":
                raise InputError(
                    f"Phi must be a real 2-D dask array (n, H), got shape {Phi.shape} and "
                    f"dtype {Phi.dtype}."
                )
            if any(np.isnan(c) for c in Phi.shape):
                raise InputError(
                    "Phi is a dask array of unknown row count; call Phi.compute_chunk_sizes() "
                    "first."
                )
            arr, kind = Phi.rechunk({1: -1}), "dask"  # row chunks of full width
        elif isinstance(Phi, np.memmap):
            if Phi.ndim != 2 or Phi.dtype.kind not in "iuf":
                raise InputError(
                    f"Phi must be a real 2-D array (n, H), got memmap of shape {Phi.shape} and "
                    f"dtype {Phi.dtype}."
                )
            arr, kind = Phi, "memmap"  # finiteness is checked chunk by chunk in the factor
        else:
            # not kept: the fit caches the dual matrix, a new array, so later edits of the
            # caller's Phi cannot break Proposition 1
            arr, kind = as_float_matrix("Phi", Phi, finite=False), "array"
        n, H = arr.shape
        if n == 0 or H == 0:
            raise InputError(f"Phi must have at least one row and column, got {arr.shape}.")
        return arr, kind

    def _check_metric(self, H: int) -> np.ndarray:
        if self.ridge_metric is None:
            return np.eye(H)
        M = as_float_matrix("ridge_metric", self.ridge_metric)
        if M.shape != (H, H):
            raise InputError(
                f"ridge_metric must have shape (H, H) = ({H}, {H}), got {M.shape}."
            )
        scale = max(float(np.abs(M).max()), 1.0)
        if not np.allclose(M, M.T, atol=1e-10 * scale, rtol=0):
            raise InputError("ridge_metric must be symmetric; pass 0.5 * (M + M.T).")
        w = linalg.eigvalsh(M)
        if w[0] < -1e-10 * max(abs(w[-1]), 1.0):
            raise InputError(
                f"ridge_metric must be positive semi-definite; its smallest eigenvalue is "
                f"{w[0]:.3g}. For a reparameterisation phi -> B phi use B @ M @ B.T."
            )
        return 0.5 * (M + M.T)

    def _rank_message(
        self, n: int, H: int, rank: int, Hp: int, cond: float, ridge: float
    ) -> str:
        what = "Phi (with the intercept column)" if self.intercept else "Phi"
        reg = f"G + {ridge:g} M" if ridge > 0 else "G = Phi^T Phi"
        if n < Hp:
            head = (
                f"{what} has n = {n} rows but {Hp} columns: with n < H the Gram matrix cannot "
                f"be invertible (rank {rank} < {Hp})."
            )
        elif rank < Hp:
            head = f"{what} is rank-deficient: numerical rank {rank} of {Hp} columns."
        else:
            head = (
                f"{reg} is too ill-conditioned for an exact solve (condition number "
                f"{cond:.3e} > max_condition = {self.max_condition:.0e}; rank {rank} of {Hp})."
            )
        cond_txt = f"{cond:.3e}" if rank == Hp else "infinite (singular to working precision)"
        return (
            f"{head} Condition number of {reg}: {cond_txt}. Proposition 1 needs full column "
            "rank. Either regularise with CaseInfluence(ridge=lam) for some lam > 0 (eq. 11), "
            "or use CaseInfluence(solver='lstsq') for the minimum-norm coefficients, or remove "
            "constant/duplicated representation units."
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "_V"):
            raise NotFittedError(
                "This CaseInfluence is not fitted yet. Call .fit(Phi, R) before querying it."
            )

    def _check_query(self, phi: Any) -> tuple[np.ndarray, bool]:
        self._check_fitted()
        return as_query("phi", phi, self.n_features_)

    def _augment(self, Q: np.ndarray) -> np.ndarray:
        """Queries in the fitted coordinates: rescaled, with the constant coordinate."""
        if self._scale != 1.0:
            Q = Q * self._scale
        if self.intercept:
            return np.hstack([Q, np.ones((Q.shape[0], 1))])
        return Q

    def _solve(self, rhs: np.ndarray) -> np.ndarray:
        """(G + lam M)^{-1} rhs by two triangular solves, or the pseudo-inverse (lstsq)."""
        if self._factor is not None:
            Rf = self._factor
            z = linalg.solve_triangular(Rf, rhs, trans="T", check_finite=False)
            return linalg.solve_triangular(Rf, z, check_finite=False)
        W, w = self._eig
        return W @ ((W.T @ rhs) / w[:, None])

    def _need_memory(self) -> None:
        if self._dual is None and self._Phi is None:
            raise InputError(
                "this CaseInfluence was loaded from a file saved with include_phi=False: the "
                "coefficients alpha(x) = Phi G^-1 phi(x) need the training representations. "
                "Save with include_phi=True, or use scores() and leverage(), which do not."
            )

    def _query_side(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(Y, bias) with alpha = X Y + bias for the case-side chunks X of :meth:`_chunks`."""
        Qa = self._augment(Q)
        if self._dual is not None:  # X = dual rows: alpha = D [c phi; 1]
            return np.ascontiguousarray(Qa.T), None
        Z = self._solve(Qa.T)  # X = Phi rows: alpha = Phi (c z_H) + z_const
        H = self.n_features_
        Y = Z[:H] * self._scale if self._scale != 1.0 else np.ascontiguousarray(Z[:H])
        return Y, (Z[H].copy() if self.intercept else None)

    def _chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """Case-side row chunks in float64: (start, X). A float32 memmap is converted into
        one reused buffer, never as a whole."""
        if self._dual is not None:
            yield 0, self._dual
            return
        Phi = self._Phi
        if not isinstance(Phi, np.memmap):
            yield 0, np.asarray(Phi, dtype=np.float64)
            return
        n, cs = self.n_cases_, self.chunk_size
        buf = None if Phi.dtype == np.float64 else np.empty((min(cs, n), Phi.shape[1]))
        starts = self._blocks(n, cs, "cases")
        for s in starts:
            block = Phi[s : s + cs]
            if buf is None:
                yield s, np.asarray(block)
            else:
                X = buf[: block.shape[0]]
                np.copyto(X, block)
                yield s, X

    def _alpha(self, Q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """alpha for a batch of validated queries, shape (b, n), written into ``out``."""
        self._need_memory()
        if out is None:
            out = np.empty((Q.shape[0], self.n_cases_))
        if self._dual is not None:  # one GEMM straight into the output: no temporary
            if Q.shape[0] == 1:  # a matrix-vector product (GEMV), faster than a 1-row GEMM
                np.matmul(self._dual, self._augment(Q)[0], out=out[0])
            else:
                np.matmul(self._augment(Q), self._dual.T, out=out)
            return out
        Y, bias = self._query_side(Q)
        if self._kind == "dask":
            out[:] = (self._Phi @ Y).compute().T
        else:
            for s, X in self._chunks():
                np.matmul(Y.T, X.T, out=out[:, s : s + X.shape[0]])
        if bias is not None:
            out += bias[:, None]
        return out

    def _alpha_at(self, Q: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """alpha_i(x_q) at the case indices ``idx`` (m, k) only."""
        self._need_memory()
        if self._dual is not None:
            return np.einsum("mkh,mh->mk", self._dual[idx], self._augment(Q))
        uniq, inv = np.unique(idx, return_inverse=True)
        if self._kind == "dask":
            rows = np.asarray(self._Phi[uniq].compute(), dtype=np.float64)
        else:
            rows = np.asarray(self._Phi[uniq], dtype=np.float64)
        Y, bias = self._query_side(Q)
        out = np.einsum("mkh,hm->mk", rows[inv.reshape(idx.shape)], Y)
        return out if bias is None else out + bias[:, None]

    def _threads(self, m: int) -> int:
        """Python threads for a scan of ``m`` queries: numpy's BLAS threads when the scan is
        large enough to gain from them, else 1 (no pinning, no pool)."""
        if m * self.n_cases_ < (1 << 20):
            return 1
        from ._threads import blas_threads

        return blas_threads()

    def _rank(
        self, Q: np.ndarray, acts: np.ndarray, k: int, key: str, weight: str, what: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k cases of every query by ``key`` of psi (``weight="psi"``) or alpha.

        One fused pass over the case memory for all queries: cache-sized blocks of
        coefficients are formed by GEMM, weighted, keyed and merged into running top-k lists
        (:func:`_scan_top_k`), for ``batch_size`` queries at a time. Returns ``(indices, keys,
        signed values)``, each (m, k).
        """
        self._need_memory()
        m = Q.shape[0]
        Rt = self._returns_t if weight == "psi" else None
        if self._dual is not None and m == 1:  # one query: a GEMV and a partition
            a = self._alpha(Q)[0]
            if Rt is not None:
                a *= Rt[acts[0]]
            K1 = np.abs(a) if key == "abs" else (a if key == "positive" else -a)
            i1 = _top_k_row(K1, k)
            return i1[None, :], K1[i1][None, :], a[i1][None, :]
        if self._dual is not None and m <= self.batch_size and m * self.n_cases_ <= self._SCAN_ENTRIES:
            # one small block: form it and rank it directly
            B = self._alpha(Q)
            if Rt is not None:
                B *= Rt[acts[0]] if m == 1 else Rt[acts]
            K = np.abs(B) if key == "abs" else (B if key == "positive" else -B)
            idx = top_k_indices(K, k)
            rows = np.arange(m)[:, None]
            return idx, K[rows, idx], B[rows, idx]
        idx = np.empty((m, k), dtype=np.intp)
        keys = np.empty((m, k))
        vals = np.empty((m, k))
        for s in self._blocks(m, self.batch_size, what):  # one pass over the memory per block
            sl = slice(s, min(m, s + self.batch_size))
            perm = np.argsort(acts[sl], kind="stable")  # equal actions share a row of returns
            ap = acts[sl][perm]
            Y, bias = self._query_side(Q[sl][perm])
            if self._kind == "dask":
                best = _rank_dask(self._Phi, Y, bias, Rt, ap, k, key, self._SCAN_ENTRIES)
            else:
                best = _scan_top_k(
                    self._chunks(), Y, bias, Rt, ap, k, key, self._SCAN_ENTRIES, self.n_cases_,
                    self._threads(sl.stop - sl.start), self._returns_absmax,
                )
            rows = np.arange(sl.start, sl.stop)[perm]
            keys[rows], idx[rows], vals[rows] = best
        return idx, keys, vals


# ---------------------------------------------------------------------- module helpers
_TSQR_ROWS = 2048  # rows folded into the triangular factor at once (cache-sized QR)
def _storable_ids(ids: np.ndarray) -> np.ndarray:
    """Case ids as an array ``np.savez`` writes without pickle (numbers, strings, dates)."""
    if ids.dtype != object:
        return ids
    if all(isinstance(v, str) for v in ids):
        return ids.astype(str)
    kinds = sorted({type(v).__name__ for v in ids})
    raise InputError(
        f"case_ids_ hold Python objects of types {kinds}, which an .npz file cannot store "
        "without pickle; refit with case_ids converted to strings or integers "
        "(e.g. case_ids=frame.index.astype(str))."
    )


def _is_dask(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "chunks")


def _qr_r(X: np.ndarray) -> np.ndarray:
    """Upper-triangular factor R of a QR of ``X`` (p x q, p >= q), shape (q, q)."""
    geqrf = linalg.lapack.dgeqrf
    # a workspace of 64 columns per row of the factor: LAPACK's blocked (level-3) QR; the
    # wrapper's minimal default would run the unblocked level-2 code, ~30x slower
    qr, _, _, info = geqrf(
        np.asfortranarray(X, dtype=np.float64), lwork=64 * max(1, X.shape[1]), overwrite_a=1
    )
    if info != 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"LAPACK dgeqrf failed with info = {info}")
    return np.triu(qr[: X.shape[1]])


def _chunk_r(
    block: Any,
    Rb: np.ndarray,
    scale: float,
    intercept: bool,
    T: np.ndarray | None,
    start: int,
) -> tuple[np.ndarray, float]:
    """Fold the rows ``[scale * block, 1, Rb]`` into the triangular factor ``T``.

    Returns the new factor (p x p, p = H + intercept + |A|) and max |block|. Rows are folded
    ``_TSQR_ROWS`` at a time: a QR of ``[T; rows]`` small enough to stay in cache runs about
    3x faster than one of the whole chunk. The first fold stacks the rows on p zero rows, so
    the factor is square even with fewer rows than columns.
    """
    b, H = block.shape
    Hp = H + int(intercept)
    p = Hp + Rb.shape[1]
    if T is None:
        T = np.zeros((p, p))
    max_abs = 0.0
    step = max(_TSQR_ROWS, 2 * p)  # at large H, more rows per fold: the factor's p rows are overhead
    buf = np.empty((p + min(step, b), p), order="F")
    for s in range(0, b, step):
        e = min(b, s + step)
        X = buf if e - s == step or b < step else np.empty((p + e - s, p), order="F")
        X[:p] = T
        Xb = X[p:]
        np.copyto(Xb[:, :H], block[s:e])  # float32/int memmap rows are converted here
        if not np.isfinite(Xb[:, :H]).all():
            check_finite(
                "Phi" if start == 0 else f"Phi (rows from {start})",
                np.asarray(block, dtype=np.float64),
                hint="training representations must be finite",
            )
        max_abs = max(max_abs, float(np.abs(Xb[:, :H]).max()))
        if scale != 1.0:
            Xb[:, :H] *= scale
        if intercept:
            Xb[:, H] = 1.0
        Xb[:, Hp:] = Rb[s:e]
        T = _qr_r(X)
    return T, max_abs




def _tsqr_dask(Phi: Any, R: np.ndarray, scale: float, intercept: bool) -> tuple[np.ndarray, float]:
    """TSQR of a dask Phi: one factor per row chunk on the workers, then one QR of the
    stacked factors (a reduction tree of depth two)."""
    import dask

    parts = [
        dask.delayed(_chunk_r)(blk, R[o0:o1], scale, intercept, None, o0)
        for blk, o0, o1 in _row_blocks(Phi)
    ]
    done = dask.compute(*parts)
    T = _qr_r(np.vstack([t for t, _ in done]))
    return T, max(mx for _, mx in done)
