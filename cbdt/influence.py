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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from scipy import linalg

from ._base import (
    Boolean,
    CaseEstimator,
    Checked,
    Constraint,
    FitData,
    Options,
    PositiveInteger,
    Real,
)
from ._params import read_saved_params
from ._query import CaseQueryMixin
from ._ranking import (
    RowNormBounds,
    Widener,
    block_max_row_norms,
    product_into,
    rank_dask,
    rank_direct,
    scan_top_k,
)
from ._results import Explanation, TopCases
from ._savefile import open_npz
from ._tsqr import block_rows, factor_memory, min_norm_svd, qr_r
from ._validation import (
    as_float_matrix,
    check_action_names,
    check_nonnegative_scalar,
    storable_ids,
)
from .exceptions import InputError, NotFittedError, RankDeficientError

__all__ = ["CaseInfluence", "CaseQueryMixin", "TopCases", "Explanation"]

_EPS = np.finfo(np.float64).eps


@dataclass(frozen=True)
class _Solution:
    """What :meth:`CaseInfluence._solve_readout` hands to the later steps of ``fit``."""

    R0: np.ndarray  # the factor of [s Phi, t 1] without ridge rows
    V: np.ndarray  # readout in the rescaled coordinates
    L: np.ndarray | None  # ridge rows
    rank: int  # rank of the factored matrix (with ridge rows)
    rank_phi: int  # rank of [Phi, 1]
    cond: float
    tol: float
    solver: str


class CaseInfluence(CaseQueryMixin, CaseEstimator):
    """Exact case-influence decomposition of an OLS (or ridge) readout (Proposition 1).

    All parameters are keyword arguments of the constructor; :meth:`get_params` and
    :meth:`set_params` follow scikit-learn, so ``sklearn.base.clone`` works.

    Parameters
    ----------
    ridge : float, default=0.0
        Tikhonov strength :math:`\\lambda \\ge 0` (eq. 11). ``0`` is plain OLS (eq. 8, 10).
    intercept : bool, default=False
        Absorb a constant coordinate into :math:`\\varphi` (Sec. 2.2). The intercept is not
        penalised by ``ridge``.
    solver : {"auto", "cholesky", "lstsq", "cholesky_or_lstsq"}, default="auto"
        ``"cholesky"`` solves with the triangular factor :math:`R_\\lambda` of a QR of
        :math:`[\\Phi;\\ \\sqrt\\lambda M^{1/2}]` (:math:`R_\\lambda^\\top R_\\lambda = G +
        \\lambda M`, the Cholesky factor, computed without forming :math:`G`) and raises
        :class:`~cbdt.exceptions.RankDeficientError` when :math:`\\Phi` is rank-deficient or
        the condition number of :math:`G + \\lambda M` exceeds :attr:`max_condition`.
        ``"lstsq"`` uses the singular value decomposition of that factor and gives the
        *minimum-norm* readout and coefficients when :math:`\\Phi` is rank-deficient
        (:math:`\\alpha = \\Phi G^{+}\\varphi(x)`, the minimum-norm solution of
        :math:`\\Phi^\\top\\beta = \\varphi(x)`; with an intercept, of
        :math:`[\\Phi, 1]^\\top\\beta = [\\varphi(x); 1]` in these coordinates, whatever
        scaling the fit uses inside). ``"auto"`` resolves to ``"cholesky"``:
        Proposition 1 assumes full column rank, so a rank-deficient memory is reported rather
        than silently answered by another estimator. ``"cholesky_or_lstsq"`` asks for that
        answer: ``"cholesky"`` where it applies, else ``"lstsq"`` (no error, no warning; the
        choice of a study that records which solver each fit used). The resolved solver is in
        ``solver_``.
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
        memmap ``Phi`` at query time. A float32 memmap is read as it lies in the file: the
        top cases screen it in float32 (in cache-sized pieces of a chunk for up to 16
        queries, in the fused scan's sub-chunks for more) before their exact float64
        evaluation, which widens only the candidates' rows; the coefficients widen each
        cache-sized piece to float64.
    batch_size : int, default=1024
        Queries answered at once by the query methods; a memmap or dask ``Phi`` is read once
        per batch of queries.
    topk_block_entries : int, default=16_000_000
        Entries (queries x cases) of one block of :meth:`iter_coefficients`, about 128 MB of
        float64. :meth:`top_cases`, :meth:`explain` and :func:`cbdt.audit.audit_signals`
        never hold more than cache-sized blocks of the (m, n) contributions.
    progress : bool, default=False
        Show a tqdm progress bar over the blocks of long query calls.
    factorization : {"auto", "householder_tsqr"}, default="auto"
        How ``fit`` factors :math:`\\Phi`. ``"auto"``: CholeskyQR2 (a preconditioner from
        the Gram matrix of a sample of row blocks, or of all rows for small memories, then a
        checked pass of level-3 BLAS; a third pass when the check asks for it), falling back
        to the Householder TSQR when a Cholesky factorisation fails or two passes do not
        reach the orthogonality :data:`cbdt._tsqr.OMEGA_MAX` (in practice beyond
        :math:`\\mathrm{cond}(\\Phi) \\approx 10^8`; see :mod:`cbdt._tsqr`).
        ``"householder_tsqr"``: always the Householder TSQR (slower, the reference path).
    copy : bool, default=True
        Whether ``fit`` keeps its own read-only float64 copy of an in-memory ``Phi``
        (scikit-learn's ``copy_X``). ``True``: the queries read the copy :math:`[\\Phi, 1]`,
        so editing the caller's array after ``fit`` cannot change an answer; the copy costs
        one more :math:`n \\times H'` float64 array, and writing it (the operating system
        maps and zeroes its pages first) is memory traffic of the order of the whole Gram
        product at small :math:`H`. ``False``: a float64 C-ordered ``Phi`` is kept by
        reference, as a memmap is, so its data must not change while the estimator is in
        use (any other dtype or order is converted once, and the conversion is kept); the
        fit then reads ``Phi`` without writing a copy, forms no dual matrix (each query
        solves, as for a memmap), and with an intercept a query adds the constant's term
        after its product with ``Phi``. A memmap or dask ``Phi`` is always kept by
        reference.

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
    n_features_in_ : int
        Representation width ``H`` (scikit-learn's name).
    feature_names_in_ : ndarray of str objects, shape (H,)
        The column names of a ``Phi`` DataFrame whose names are all strings (scikit-learn's
        rule); absent otherwise. A query DataFrame must then have these columns in this
        order (other, missing or reordered columns raise
        :class:`~cbdt.exceptions.InputError`: select them with ``q[est.feature_names_in_]``);
        a query array is read by position. Kept by :meth:`save`.
    n_actions_ : int
        Number of actions ``|A|``.
    returns_ : ndarray of shape (n, |A|)
        The training returns ``R`` (float64).
    rank_ : int
        Numerical rank of :math:`\\Phi` (with the constant column when ``intercept=True``),
        also with ``ridge > 0``: the ridge makes the factored matrix full rank, not
        :math:`\\Phi`. Judged in the precision ``Phi`` was computed in: singular values
        below :math:`\\sigma_{\\max}\\max(\\max(n, H')\\,\\epsilon_{64}, H'\\epsilon)`, with
        :math:`\\epsilon` the machine epsilon of ``Phi``'s dtype (float32's for a float32
        array, memmap or torch layer), count as zero.
    condition_number_ : float
        Condition number of the factored matrix :math:`G + \\lambda M`. With an intercept,
        the constant coordinate is first balanced against the columns of :math:`\\Phi` (an
        exact power of two, which leaves :math:`\\alpha`, the readout and the intercept
        unchanged at full column rank; the minimum-norm solve of a rank-deficient memory is
        taken in the user's coordinates :math:`[\\Phi, 1]`, as ``np.linalg.lstsq`` would),
        so the number does not depend on the units of :math:`\\Phi`.
    solver_ : str
        ``"cholesky"`` or ``"lstsq"``.
    factorization_ : str
        The factorisation ``fit`` used: ``"cholesky_qr2"`` (the fast path),
        ``"cholesky_qr3"`` (one more pass was needed) or ``"householder_tsqr"`` (the
        fallback, or asked for).
    orthogonality_loss_ : float
        :math:`\\lVert Y^\\top Y - I\\rVert_2` of CholeskyQR2's first pass
        (:math:`Y = \\Phi R_1^{-1}`, :math:`R_1` the preconditioner), the measurement that
        decides whether that pass is accepted; nan when the first Cholesky failed.
    dual_ : ndarray of shape (n, H), read-only
        The dual matrix :math:`D = \\Phi (G + \\lambda M)^{-1}` (eq. 10-11), where the fit
        formed it: :math:`\\alpha(x) = D\\varphi(x)` plus :attr:`dual_offset_`, equal to
        :meth:`coefficients` up to rounding. ``fit`` forms it, for an in-memory ``Phi`` it
        copied (``copy=True``), with the Cholesky solver on small memories
        (:math:`n H' \\le 2^{22}` entries, :math:`H'` counting the intercept) and wide ones
        (:math:`n < 64 H'`), and for the minimum-norm solve of a rank-deficient ``Phi``;
        elsewhere (a large in-memory, a memmap, dask or ``copy=False`` ``Phi``, a full-rank
        ``solver="lstsq"`` fit), where each query solves instead, the attribute does not
        exist: use :meth:`coefficients` or :meth:`iter_coefficients`.
    dual_offset_ : ndarray of shape (n,), read-only
        The coefficients' constant part (the intercept's column of the dual matrix); zeros
        when ``intercept=False``. Exists where :attr:`dual_` does.
    case_ids_ : ndarray of shape (n,) or None
        The training cases' labels given to ``fit`` (``case_ids=`` or a ``Phi`` DataFrame's
        index); ``None`` when the cases are named by their positions ``0..n-1``.
    action_names_ : ndarray of shape (|A|,)
        The actions' names: the columns of a returns DataFrame or ``action_names=`` given to
        ``fit``, else the positions ``0..|A|-1``. Every ``action=`` argument accepts them.

    Notes
    -----
    ``fit`` factors :math:`X = [\\Phi, 1]` (the constant only with ``intercept=True``) in
    float64 over row blocks: CholeskyQR2 (a Cholesky factor :math:`R_1` of a Gram matrix,
    then a pass forming :math:`Y = XR_1^{-1}` block by block and the Cholesky factor of
    :math:`Y^\\top Y`, accepted when :math:`\\lVert Y^\\top Y - I\\rVert_2 \\le 1/2`), whose
    factor is then as backward stable as a Householder QR's, and the Householder TSQR where
    it cannot be (see ``factorization``). ``Phi`` may be a :class:`numpy.memmap` larger than
    memory (read about 1.13 times) or a ``dask.array`` on a cluster (each pass per chunk on
    the workers, the sums on the client). The error of :math:`\\alpha` grows with
    :math:`\\mathrm{cond}(\\Phi)`, not its square. An in-memory ``Phi`` is copied once into a
    read-only float64 array (the queries read it, so editing the caller's arrays after
    ``fit`` cannot break Proposition 1), unless ``copy=False``; ``R`` is cached as a
    read-only float64 copy. A memmap or dask ``Phi``, or an in-memory one with
    ``copy=False``, is kept by reference, so its data must not change. A query
    solves :math:`z = R_\\lambda^{-1}R_\\lambda^{-\\top}\\varphi(x)` (two triangular solves
    per query) and forms :math:`\\alpha(x) = \\Phi z` by one matrix product per batch (the
    seminormal form of a minimum-norm problem, as accurate as the QR form, Paige 1973). A
    memory of at most ``2**22`` entries keeps the dual matrix :math:`D = \\Phi(G+\\lambda
    M)^{-1}` instead of the copy (two triangular solves at fit time), so a query is one
    matrix-vector product; so does a wide memory, ``n < 64 H'``, where a query's two
    solves would cost more than a few percent of its product. The coefficients do not depend on a global scale of ``Phi``: entries so large (or small)
    that their squares would overflow (or underflow) are rescaled by an exact power of two.
    No inverse is ever formed.

    Ranking: :meth:`top_cases`, :meth:`explain` and :func:`cbdt.audit.audit_signals` form
    the contributions in cache-sized blocks, screen each block in float32 (a bound on the
    float32 error keeps every case that could enter the top k) and recompute the survivors in
    float64, so the ranking is the float64 one at about the cost of a float32 GEMM. "Exact"
    means: the top k of the library's own float64 evaluation of each :math:`\\psi_i` (one
    per query and case, ties to the lower case index, the same in any batch). It is not
    promised to equal a stable sort of :meth:`contributions`, which forms the same numbers by
    another product (GEMM or GEMV): the two agree to rounding, and may order two cases whose
    contributions lie within a few ulps of each other differently.

    Paths: a memmap, dask or ``copy=False`` fit agrees with the in-memory fit of the same
    ``Phi`` within a bound in :math:`\\mathrm{cond}(\\Phi)\\,\\epsilon` (each path's
    coefficients are within :math:`10\\,\\epsilon\\,\\mathrm{cond}(\\Phi)` of the exact
    ones), not bit for bit; with an intercept, for example, a memmap query adds the
    constant's term after the product with ``Phi`` while the in-memory copy ``[Phi, 1]``
    carries it inside, so their top-k contributions may differ in the last bit.

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
        solver: Literal["auto", "cholesky", "lstsq", "cholesky_or_lstsq"] = "auto",
        ridge_metric: Any = None,
        *,
        max_condition: float = 1e12,
        chunk_size: int = 65_536,
        batch_size: int = 1_024,
        topk_block_entries: int = 16_000_000,
        progress: bool = False,
        factorization: Literal["auto", "householder_tsqr"] = "auto",
        copy: bool = True,
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
        self.factorization = factorization
        self.copy = copy

    #: Shown by ``repr`` whatever their value; the other parameters only when not default.
    _REPR_ALWAYS = ("ridge", "intercept", "solver", "ridge_metric")

    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "ridge": Checked(check_nonnegative_scalar),
        "intercept": Boolean(),
        "solver": Options("auto", "cholesky", "lstsq", "cholesky_or_lstsq"),
        "max_condition": Real(1.0, finite=False),
        "chunk_size": PositiveInteger(),
        "batch_size": PositiveInteger(),
        "topk_block_entries": PositiveInteger(),
        "progress": Boolean(),
        "factorization": Options(
            "auto", "householder_tsqr",
            hint="'auto' is CholeskyQR2, with the Householder TSQR as its guarded fallback.",
        ),
        "copy": Boolean(),
    }

    def __repr__(self) -> str:
        metric = "None" if self.ridge_metric is None else "<matrix>"
        extra = "".join(
            f", {k}={getattr(self, k)!r}"
            for k, v in self._param_defaults().items()
            if k not in self._REPR_ALWAYS and getattr(self, k) != v
        )
        return (
            f"CaseInfluence(ridge={self.ridge!r}, intercept={self.intercept!r}, "
            f"solver={self.solver!r}, ridge_metric={metric}{extra})"
        )

    # ------------------------------------------------------------------ fitting
    def fit(
        self, Phi: Any, R: Any, *, case_ids: Any = None, action_names: Any = None
    ) -> CaseInfluence:
        """Factor the case memory once (a tall-skinny QR of ``Phi``) and solve for the readout.

        Parameters
        ----------
        Phi : array-like, pandas.DataFrame, numpy.memmap or dask.array.Array of shape (n, H)
            Training representations :math:`\\varphi(x_i)` as rows (eq. 4). A memmap is
            read in row chunks; a dask array is factored chunk by chunk on its workers.
            The column names of a DataFrame (all strings) become :attr:`feature_names_in_`.
        R : array-like of shape (n, |A|) or (n,)
            Action-conditional returns :math:`r_i(a)` (eq. 5); 1-D means one action. Rows
            are paired with those of ``Phi`` by position: when both are pandas objects their
            indexes must be equal (else :class:`~cbdt.exceptions.InputError`; align with
            ``R.loc[Phi.index]``).
        case_ids : array-like of shape (n,) or pandas.Index, optional
            Labels of the training cases (row ids of the caller's data). Default: the index
            of a ``Phi`` DataFrame when it is not the plain ``0..n-1``, else none. Kept as
            :attr:`case_ids_`; every result that names cases (:meth:`top_cases`,
            :meth:`explain`) carries them.
        action_names : array-like of shape (|A|,), optional
            Names of the actions (columns of ``R``). Default: the columns of an ``R``
            DataFrame, else the positions ``0..|A|-1``. Kept as :attr:`action_names_`; every
            ``action=`` argument accepts a name, and results and plots show the names.

        Returns
        -------
        self : CaseInfluence

        Notes
        -----
        ``X = [phi_i, 1]`` (the constant only with ``intercept=True``) is factored by
        CholeskyQR2 (or the Householder TSQR, ``factorization_``): ``R_0`` with
        :math:`R_0^\\top R_0 = G` and :math:`c = Q^\\top R`. Ridge rows
        :math:`\\sqrt\\lambda M^{1/2}` are folded into the factor by one small QR, giving
        :math:`R_\\lambda^\\top R_\\lambda = G + \\lambda M` and the readout
        :math:`V = R_\\lambda^{-1} c_\\lambda` (eq. 8/11; with a ridge, :math:`V = (G +
        \\lambda M)^{-1}R_0^\\top c` from the same solves as the coefficients). An in-memory
        ``Phi`` is copied once, in the first pass; a query solves
        :math:`z = R_\\lambda^{-1}R_\\lambda^{-\\top}\\varphi(x)` and forms :math:`\\alpha(x) =
        \\Phi z`. The normal equations are never solved: the error of :math:`\\alpha` grows
        with :math:`\\mathrm{cond}(\\Phi)`, not its square (CholeskyQR2's second pass repairs
        its first, and the seminormal form of a minimum-norm problem is as accurate as the QR
        form, Paige 1973).
        """
        self._validate_params()
        # rank is judged in the precision Phi was computed in (TorchCaseInfluence passes the
        # layer's dtype, its Phi being float64 already)
        data = self._validate_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                   check_phi=self._check_phi,
                                   eps=self.__dict__.pop("_phi_eps", None))
        self._release()
        fac, ridge_rows = self._factor_memory(data)
        sol = self._solve_readout(fac, data, ridge_rows)
        V = self._keep_memory(fac, data, sol)
        self._set_fitted(sol.R0, data.R, V, data.n, data.H, sol.rank_phi, sol.cond, sol.solver)
        self._norms = self._case_norms(fac.row_norms)
        if self._kind == "dask":
            self._chunk_norms = self._dask_norms(fac.chunk_norms)
        self._finish_fit(data)
        return self

    # the named steps of fit ----------------------------------------------------------
    def _release(self) -> None:
        """A refit releases the previous fit's memory first (its pages are reused, and two
        copies of Phi never coexist); until this fit completes the estimator is not fitted."""
        for name in ("_V", "_Phi", "_dual", "_norms", "_chunk_norms", "_dual_public"):
            self.__dict__.pop(name, None)

    def _ridge_rows(
        self, H: int, scale: float, metric_eig: tuple[np.ndarray, np.ndarray] | None
    ) -> np.ndarray | None:
        """The rows :math:`\\sqrt\\lambda M^{1/2}` (in the rescaled coordinates
        ``scale * phi``) folded into the factor, or None without a ridge. ``metric_eig``:
        ``(w, U)`` with ``M = U diag(w) U^T`` (None for ``M = I``), computed once per fit."""
        ridge = float(self.ridge)
        if ridge == 0:
            return None
        Hp = H + int(self.intercept)
        L = np.zeros((H, Hp))  # lambda |v|^2 = lambda s^2 |v_s|^2 for v_s = v / s
        if metric_eig is None:  # M = I: the rows sqrt(lam) I
            L[:, :H] = np.eye(H) * (np.sqrt(ridge) * scale)
        else:  # M = U diag(w) U^T: the rows sqrt(lam w) U^T
            w, U = metric_eig
            L[:, :H] = (np.sqrt(np.clip(w, 0.0, None) * ridge) * scale)[:, None] * U.T
        return L

    def _factor_memory(self, data: FitData) -> tuple[Any, Callable[[float], np.ndarray | None]]:
        """One triangular factor of ``[s Phi, t 1]`` and ``Q^T R`` (eq. 7-8).

        CholeskyQR2, or the Householder TSQR where CholeskyQR2 cannot be trusted
        (:mod:`cbdt._tsqr`). ``s`` and ``t`` are exact powers of two: ``s`` keeps the squares
        of Phi in float64's range (``s = 1`` for every other Phi), ``t`` balances the
        constant column against the columns of ``[Phi; ridge rows]`` (alpha does not depend
        on the scale of any coordinate, Appendix B, but ``cond([s Phi, t 1])`` does).
        """
        M = self._check_metric(data.H)  # validated once, decomposed once
        metric_eig = (linalg.eigh(M) if self.ridge_metric is not None and float(self.ridge) != 0
                      else None)

        def ridge_rows(scale: float) -> np.ndarray | None:
            return self._ridge_rows(data.H, scale, metric_eig)

        Hp = data.H + int(self.intercept)
        fac = factor_memory(
            data.Phi, data.R, kind=data.kind, intercept=bool(self.intercept),
            chunk_size=self.chunk_size, threads=self._fit_threads(data.n, Hp, data.kind),
            ridge_scaled=ridge_rows, householder=self.factorization == "householder_tsqr",
        )
        self._scale, self._const = fac.scale, fac.const
        self.factorization_ = fac.method
        self.orthogonality_loss_ = fac.omega
        self._fallback_reason = fac.reason
        self._fit_passes = fac.passes  # reads of Phi, in whole passes
        return fac, ridge_rows

    def _solve_readout(
        self, fac: Any, data: FitData, ridge_rows: Callable[[float], np.ndarray | None]
    ) -> _Solution:
        """Rank, condition number and the readout ``V`` from the factor (eq. 8/11): the
        Cholesky-like triangular solve at full rank, else the minimum-norm SVD solve."""
        n, H = data.n, data.H
        Hp = H + int(self.intercept)
        ridge = float(self.ridge)
        scale, const = fac.scale, fac.const
        L = ridge_rows(scale)
        R0 = np.ascontiguousarray(fac.R)
        Tf = np.hstack([R0, fac.C])
        if L is not None:  # R_lam^T R_lam = G + lam M: one QR of the factor over the ridge rows
            Tf = qr_r(np.vstack([Tf, np.hstack([L, np.zeros((H, data.R.shape[1]))])]))[:Hp]
        Rf, Cf = np.ascontiguousarray(Tf[:, :Hp]), np.ascontiguousarray(Tf[:, Hp:])

        solver = "lstsq" if self.solver == "lstsq" else "cholesky"
        if solver == "cholesky":
            sv = linalg.svdvals(Rf, check_finite=False)
        else:
            Uf, sv, Wt = linalg.svd(Rf, check_finite=False)
        # singular values of [Phi; sqrt(lam) M^1/2] give rank and condition number
        # (with a ridge, its exact rows make the factored matrix full rank: float64's rule)
        solve_eps = data.eps if L is None else _EPS
        tol, rank, cond = self._rank_cond(sv, n, Hp, solve_eps)
        if solver == "cholesky" and self.solver == "cholesky_or_lstsq" and (
                rank < Hp or cond > self.max_condition):
            solver = "lstsq"  # the same diagnosis as solver="lstsq" makes, from its own SVD
            Uf, sv, Wt = linalg.svd(Rf, check_finite=False)
            tol, rank, cond = self._rank_cond(sv, n, Hp, solve_eps)
        if L is None:
            rank_phi = rank
        else:  # rank_ is that of Phi (with the constant column), not of [Phi; sqrt(lam) M^1/2]
            sv0 = linalg.svdvals(R0, check_finite=False)
            rank_phi = self._rank_cond(sv0, n, Hp, data.eps)[1] if sv0[0] > 0 else 0
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
            if rank < Hp and self.intercept and scale != const:
                # the minimum norm in the user's coordinates [Phi, 1], not in the balanced
                # ones [s Phi, t 1] (the same solution only at full column rank)
                Uk, sk, W, Wr = min_norm_svd(Rf, rank, scale / const, tol)
            else:
                Uk, sk, W = Uf[:, keep], sv[keep], np.array(Wt[keep].T)
                Wr = W
            corrected = Wr is not W
            W = np.ascontiguousarray(W)
            Wr = np.ascontiguousarray(Wr) if corrected else W
            # z = W S^-2 W_r^T rhs (alpha = X z); W_r = W but for the user-coordinate
            # correction (cbdt._tsqr.min_norm_svd)
            self._factor, self._eig = None, (W, sk**2, Wr)
            V = Wr @ ((Uk.T @ Cf) / sk[:, None])  # minimum-norm LS solution
        return _Solution(R0, V, L, rank, rank_phi, cond, tol, solver)

    def _keep_memory(self, fac: Any, data: FitData, sol: _Solution) -> np.ndarray:
        """What a query reads: the dual matrix, the fit's copy of ``Phi`` or the caller's
        memmap / dask ``Phi``; returns the readout (with a ridge, from the same solves as
        the coefficients)."""
        kind, Hp = data.kind, data.H + int(self.intercept)
        V, L = sol.V, sol.L
        self._kind = kind
        self._dual = None
        if kind == "array" and sol.rank < Hp:
            # minimum norm on a rank-deficient memory: the seminormal form would divide by the
            # squares of tiny singular values, so the dual matrix is formed from a thin Q
            self._dual, V = self._min_norm_dual(fac.memory, L, sol.rank, data.R, sol.tol)
            self._Phi = None
        elif kind == "array" and self._factor is not None and (
                data.n * Hp <= self._DUAL_ENTRIES or data.n < self._DUAL_ASPECT * Hp):
            # a small memory, or a wide one (a query's two H' x H' solves would cost more than
            # a few % of its product with Phi): the dual matrix (two triangular solves at fit
            # time) replaces the copy, so a query is one product, no solve
            self._dual, self._Phi = self._dual_from(fac.memory), None
            if L is not None:
                V = self._solve(sol.R0.T @ fac.C)
        else:  # the fit's copy [s Phi, 1] (in memory), or the memmap / dask Phi itself
            self._Phi = fac.memory if kind == "array" else data.Phi
            if L is not None:
                V = self._solve(sol.R0.T @ fac.C)
        # With a ridge the readout is taken from the same solves as the coefficients,
        # V = (G + lam M)^-1 Phi^T R: the QR readout R_lam^-1 Q^T [R; 0] loses digits as
        # lam / |G| grows (relative error ~ eps sqrt(lam / |G|)), and the scores would drift
        # from alpha @ R (Prop. 1) by as much.
        return V

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
        const = getattr(self, "_const", 1.0)
        if scale == 1.0 and const == 1.0:
            self.gram_ = G
        else:  # the Gram matrix of Phi itself (inf where it exceeds float64)
            D = np.full(Hp, 1.0 / scale)
            if self.intercept:
                D[H] = 1.0 / const
            with np.errstate(over="ignore"):
                self.gram_ = G * D[:, None] * D[None, :]
        self.gram_.setflags(write=False)
        self.returns_ = R
        self._returns_t = np.ascontiguousarray(R.T)
        # max |r| per action, and over all: no n x |A| temporary (fresh pages cost)
        Rt = self._returns_t
        self._returns_actmax = np.maximum(Rt.max(axis=1), -Rt.min(axis=1))
        self._returns_absmax = float(self._returns_actmax.max())
        for arr in (R, self._returns_t, V, R0):
            arr.setflags(write=False)
        self.n_cases_ = n
        self.n_features_in_ = H
        self.n_actions_ = R.shape[1]
        self.rank_ = rank
        self.condition_number_ = cond
        self.solver_ = solver
        self._V = V  # weights of the rescaled features scale * phi
        self.readout_ = V[:H] * scale if scale != 1.0 else V[:H].copy()
        if self.intercept:
            self.intercept_ = V[H] * const

    def _fit_threads(self, n: int, Hp: int, kind: str) -> int:
        """Python threads for the fit's passes: numpy's BLAS threads, one per four blocks."""
        if kind == "dask":
            return 1  # the workers do the work
        from ._threads import blas_threads

        return max(1, min(blas_threads(), n // (4 * block_rows(Hp))))

    # memories of at most this many entries (n x H'), or with fewer than this many rows per
    # column, keep the dual matrix instead of Phi
    _DUAL_ENTRIES, _DUAL_ASPECT = 1 << 22, 64

    def _dual_from(self, memory: np.ndarray) -> np.ndarray:
        """``D = [s Phi, t 1] (G + lam M)^-1`` (n, H'), C order, read-only, by two
        triangular solves in place (the seminormal form, Paige 1973; no inverse formed)."""
        D = np.array(memory)
        if self.intercept:
            D[:, -1] = self._const
        trsm = linalg.blas.dtrsm
        Dt = trsm(1.0, self._factor, D.T, side=0, lower=0, trans_a=1, overwrite_b=1)
        Dt = trsm(1.0, self._factor, Dt, side=0, lower=0, trans_a=0, overwrite_b=1)
        if not np.shares_memory(Dt, D):  # pragma: no cover - f2py copied: keep its result
            D = np.ascontiguousarray(Dt.T)
        D.setflags(write=False)
        return D

    def _min_norm_dual(
        self,
        memory: np.ndarray,
        ridge_rows: np.ndarray | None,
        rank: int,
        R: np.ndarray,
        tol: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Dual matrix ``D = X R_q^+ R_q^+T`` of the minimum-norm solver on a rank-deficient
        memory (n, H'), read-only, and the readout ``D^T R`` of the same factors.

        The seminormal form would divide by the squares of the tiny singular values, so use
        the thin Q of ``[X; sqrt(lam) M^1/2] = Q R_q`` with ``R_q = U S W^T``: ``alpha = Q U_k
        S_k^-1 W_k^T phi`` (no pseudo-inverse formed); ``X = [s Phi, t 1]``. With an
        intercept the minimum norm is that of the user's coordinates ``[Phi, 1]``: ``W_k^T``
        becomes ``W_r^T`` (:func:`cbdt._tsqr.min_norm_svd`; ``tol`` is the rank tolerance of
        the singular values).
        """
        n = memory.shape[0]
        X = np.array(memory)
        if self.intercept:
            X[:, -1] = self._const
        if ridge_rows is not None:
            X = np.vstack([X, ridge_rows])
        Q, Rq = linalg.qr(X, mode="economic", overwrite_a=True, check_finite=False)
        U, sv, _, Wr = min_norm_svd(
            Rq, rank, self._scale / self._const if self.intercept else 1.0, tol)
        QU = Q[:n] @ U
        D = (QU / sv) @ Wr.T
        D.setflags(write=False)
        return D, Wr @ ((QU.T @ R) / sv[:, None])

    # ------------------------------------------------------------------ persistence
    _FORMAT = 3
    _READS = (2, 3)  # format 2 (a cached dual matrix) is still read

    def save(self, path: Any, *, include_phi: bool = True) -> None:
        """Write the fitted decomposition to an ``.npz`` file (no pickle).

        The file holds the constructor parameters, the triangular factors of :math:`G` and
        :math:`G + \\lambda M`, the readout, the returns and, unless ``include_phi=False``, what
        the coefficients need of :math:`\\Phi`: the fit's float64 copy of :math:`[\\Phi, 1]`
        for an in-memory fit (the dual matrix of a rank-deficient minimum-norm fit), or
        :math:`\\Phi` itself for a memmap or dask fit (written out in full). Without it the loaded object still answers :meth:`scores` and
        :meth:`leverage`, but not the coefficients (eq. 10).

        Parameters
        ----------
        path : str or path-like
            Target file; numpy appends ``.npz`` when missing.
        include_phi : bool, default=True
        """
        self._check_fitted()
        params = {k: getattr(self, k) for k in CaseInfluence._param_names() if k != "ridge_metric"}
        arrays: dict[str, np.ndarray] = {
            "format": np.array(self._FORMAT),
            "params": np.array(json.dumps(params)),
            "gram_factor": self._R0,
            "returns": self.returns_,
            "V": self._V,
            "fitted": np.array(
                [self._scale, self.rank_, self.condition_number_, self.n_cases_,
                 self.n_features_in_, self.n_actions_]
            ),
            "solver_": np.array(self.solver_),
            "const": np.array(self._const),
            "factorization_": np.array(self.factorization_),
            "orthogonality_loss_": np.array(self.orthogonality_loss_),
        }
        if self.ridge_metric is not None:
            arrays["ridge_metric"] = np.asarray(self.ridge_metric, dtype=np.float64)
        if self.case_ids_ is not None:
            arrays["case_ids"] = storable_ids(self.case_ids_)
        if getattr(self, "feature_names_in_", None) is not None:  # optional entry: older
            arrays["feature_names"] = self.feature_names_in_.astype(str)  # files lack it
        names = getattr(self, "action_names_", None)  # (H3) the actions' names, when named
        if names is not None and not np.array_equal(names, np.arange(self.n_actions_)):
            arrays["action_names"] = storable_ids(names, "action_names_")
        if self._factor is not None:
            arrays["factor"] = self._factor
        else:
            arrays["eig_W"], arrays["eig_w"], Wr = self._eig
            if Wr is not arrays["eig_W"]:  # the user-coordinate correction (optional entry)
                arrays["eig_Wr"] = Wr
        if include_phi:
            if self._dual is not None:
                arrays["dual"] = self._dual
            elif self._kind == "array" and self._Phi is not None:  # the fit's copy [s Phi, 1]
                arrays["memory"] = self._Phi
            elif self._Phi is not None:  # in its own dtype: a float32 memmap is not widened
                Phi = self._Phi
                if _is_dask(Phi):
                    Phi = Phi.compute()
                arrays["Phi"] = Phi if Phi.dtype == np.float32 else np.asarray(Phi, np.float64)
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
        with open_npz(path, cls.__name__) as f:
            if "format" not in f or int(f["format"]) not in cls._READS:
                raise InputError(
                    f"{path!s} is not a CaseInfluence file of format {cls._FORMAT} (written by "
                    "CaseInfluence.save of this version); refit and save it again."
                )
            ci = cls._from_file(f, path)
        return ci

    @classmethod
    def _from_file(cls, f: Any, path: Any) -> CaseInfluence:
        """Build a fitted estimator from an open ``.npz`` file, checking every entry."""

        def bad(what: str) -> InputError:
            return InputError(
                f"{path!s} is damaged or was not written by CaseInfluence.save: {what}. Refit "
                "and save it again."
            )

        for key in ("params", "gram_factor", "returns", "V", "fitted", "solver_"):
            if key not in f:
                raise bad(f"the entry {key!r} is missing")
        params = read_saved_params(f, path, CaseInfluence._param_names(), bad)
        fitted = f["fitted"]
        if fitted.shape != (6,):
            raise bad(f"'fitted' has shape {fitted.shape}, expected (6,)")
        scale, rank, cond, n, H, A = fitted.tolist()
        n, H, A = int(n), int(H), int(A)
        metric = f["ridge_metric"] if "ridge_metric" in f else None
        ci = cls(ridge_metric=metric, **params)
        Hp = H + int(bool(ci.intercept))
        expect = {
            "gram_factor": (Hp, Hp),
            "returns": (n, A),
            "V": (Hp, A),
            "factor": (Hp, Hp),
            "dual": (n, Hp),
            "memory": (n, Hp),
            "Phi": (n, H),
            "eig_W": (Hp, None),
            "eig_Wr": (Hp, None),
            "eig_w": (None,),
            "case_ids": (n,),
            "action_names": (A,),
            "feature_names": (H,),
        }
        for key, shape in expect.items():
            if key in f:
                got = f[key].shape
                if len(got) != len(shape) or any(
                    e is not None and g != e for g, e in zip(got, shape, strict=True)
                ):
                    want = tuple("k" if e is None else e for e in shape)
                    raise bad(
                        f"{key!r} has shape {got}, but the fit it describes (n = {n} cases, "
                        f"H = {H} features, |A| = {A} actions) needs {want}"
                    )
        if "factor" not in f and not ("eig_W" in f and "eig_w" in f):
            raise bad("neither 'factor' nor 'eig_W'/'eig_w' is present")
        if "factor" not in f and f["eig_W"].shape[1] != f["eig_w"].shape[0]:
            raise bad(f"'eig_W' {f['eig_W'].shape} and 'eig_w' {f['eig_w'].shape} disagree")
        ci._scale = float(scale)
        ci._const = float(f["const"]) if "const" in f else 1.0
        if "factor" in f:
            ci._factor, ci._eig = f["factor"], None
        else:
            W = f["eig_W"]
            ci._factor, ci._eig = None, (W, f["eig_w"], f["eig_Wr"] if "eig_Wr" in f else W)
        ci._dual = f["dual"] if "dual" in f else None
        if "memory" in f:  # the fit's copy [s Phi, 1]
            ci._Phi, ci._kind = f["memory"], "array"
        else:
            ci._Phi = f["Phi"] if "Phi" in f else None
            ci._kind = "array" if ci._Phi is None else "loaded"
        ci.factorization_ = str(f["factorization_"]) if "factorization_" in f else "unknown"
        ci.orthogonality_loss_ = (
            float(f["orthogonality_loss_"]) if "orthogonality_loss_" in f else float("nan"))
        for arr in (ci._dual, ci._Phi):
            if arr is not None:
                arr.setflags(write=False)
        ci._set_fitted(
            f["gram_factor"], f["returns"], f["V"], n, H, int(rank), float(cond),
            str(f["solver_"]),
        )
        ci.case_ids_ = f["case_ids"] if "case_ids" in f else None
        if ci.case_ids_ is not None:
            ci.case_ids_.setflags(write=False)
        # (H3) the actions' names; a file without them has unnamed actions 0..|A|-1
        ci.action_names_ = check_action_names(
            f["action_names"] if "action_names" in f else None, A
        )
        if "feature_names" in f:  # written since feature_names_in_ exists (same format)
            ci.feature_names_in_ = f["feature_names"].astype(object)
            ci.feature_names_in_.setflags(write=False)
        ci._norms = ci._case_norms(None)  # the row-norm bounds of the queries, once
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
        # a fixed summation order per query (not GEMV for one query and GEMM for a batch),
        # so a query's scores, and its decision on an exact tie, do not depend on the batch
        S = np.einsum("mh,ha->ma", self._augment(Q), self._V)
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

    # ------------------------------------------------------------------ internals
    # entries (queries x cases) of one cache-sized block of the fused top-k scan
    _SCAN_ENTRIES = 1 << 19
    # at most this many queries are ranked by direct float64 products (a GEMV or small GEMM
    # per block of cases, :func:`cbdt._ranking.rank_direct`) at any n: memory-bound, where
    # the float32 scan's conversion of every block would be extra passes over the memory
    _DIRECT_QUERIES = 16

    def _case_norms(self, fit_norms: np.ndarray | None = None) -> RowNormBounds | None:
        """Bounds on the norms of the case-side rows the queries read (:meth:`_chunks`),
        one per block of :func:`cbdt._tsqr.block_rows` rows; None for dask.

        Taken from the fit's second pass (``fit_norms``: ``max ||s phi_i||`` per block,
        recorded while each block was in cache), else measured once (a dual matrix, a
        Householder fit, a loaded estimator) and kept: a query never recomputes them.
        """
        have = self.__dict__.get("_norms")
        if have is not None or self._kind == "dask":
            return have
        H = self.n_features_in_
        rows = block_rows(H + int(self.intercept))
        if self._dual is None and self._Phi is None:  # saved without Phi: no queries
            return None
        if self._dual is None and fit_norms is not None:
            if self._kind == "array":  # rows [s phi_i, 1] of the fit's copy
                top = np.hypot(fit_norms, 1.0) if self.intercept else fit_norms
            else:  # rows phi_i of the memmap: s is a power of two
                top = fit_norms / self._scale
        else:
            X = self._dual if self._dual is not None else self._Phi
            top = block_max_row_norms(X, rows)
        self._norms = RowNormBounds(rows, top)  # kept: measured once
        return self._norms

    def _dask_norms(self, fit_norms: list[np.ndarray] | None) -> list[RowNormBounds]:
        """Row-norm bounds of a dask ``Phi``, one :class:`RowNormBounds` per row chunk (rows
        counted from the chunk's start), from the fit's second pass on the workers
        (``fit_norms``, of ``s Phi``), else measured once by one dask pass; kept, so a query
        never recomputes them."""
        from ._ranking import row_blocks

        blocks = row_blocks(self._Phi)
        rows = block_rows(self.n_features_in_ + int(self.intercept))
        if fit_norms is None or len(fit_norms) != len(blocks) or any(
                z is None or z.size != -(-(o1 - o0) // rows)
                for z, (_, o0, o1) in zip(fit_norms, blocks, strict=True)):
            import dask

            fit_norms = list(dask.compute(*[dask.delayed(block_max_row_norms)(blk, rows)
                                            for blk, _, _ in blocks]))
            scale = 1.0
        else:
            scale = self._scale  # the pass measured s phi_i; the queries read phi_i
        return [RowNormBounds(rows, np.asarray(z) / scale) for z in fit_norms]

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
        elif self.copy:
            # not kept: the fit copies it in its first pass, so later edits of the caller's
            # Phi cannot break Proposition 1
            arr, kind = as_float_matrix("Phi", Phi, finite=False), "array"
        else:  # kept by reference and read like a memmap (copy=False)
            arr = np.ascontiguousarray(as_float_matrix("Phi", Phi, finite=False))
            kind = "reference"
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

    @staticmethod
    def _rank_cond(
        sv: np.ndarray, n: int, Hp: int, data_eps: float = _EPS
    ) -> tuple[float, int, float]:
        """Rank tolerance, numerical rank and condition number of ``G + lam M`` from the
        singular values of its factor.

        The tolerance is :math:`\\sigma_{\\max}\\max(\\max(n, H')\\,\\epsilon_{64},\\;
        H'\\epsilon_{data})`: numpy's ``matrix_rank`` rule for the float64 arithmetic of the
        fit, and for data computed in a lower precision (``data_eps``, e.g. float32's
        :math:`1.2\\cdot 10^{-7}`) the rounding of the data itself. Rounding every entry of
        :math:`\\Phi` to its dtype moves each singular value by at most
        :math:`\\lVert E\\rVert_F \\le (\\epsilon/2)\\sqrt{H'}\\,\\sigma_{\\max}` (Weyl);
        :math:`H'\\epsilon` leaves a margin for the arithmetic that computed it, and does not
        grow with ``n`` (a float32 layer's rounding directions sit near
        :math:`\\epsilon_{32}\\sigma_{\\max}` whatever the number of cases).
        """
        tol = float(sv[0]) * max(max(n, Hp) * _EPS, Hp * data_eps)
        cond = float((sv[0] / sv[-1]) ** 2) if sv[-1] > 0 else float("inf")
        return tol, int(np.sum(sv > tol)), cond

    def _check_fitted(self) -> None:
        if not hasattr(self, "_V"):
            raise NotFittedError(
                "This CaseInfluence is not fitted yet. Call .fit(Phi, R) before querying it."
            )

    @property
    def dual_(self) -> np.ndarray:
        """The dual matrix (n, H) where the fit formed it (see the class docstring)."""
        return self._dual_parts()[0]

    @property
    def dual_offset_(self) -> np.ndarray:
        """The coefficients' constant part (n,) where :attr:`dual_` exists."""
        return self._dual_parts()[1]

    def _dual_parts(self) -> tuple[np.ndarray, np.ndarray]:
        self._check_fitted()
        if self._dual is None:
            raise AttributeError(
                "dual_: this fit did not form the dual matrix (a large in-memory, memmap or "
                "dask Phi is kept and each query solves instead; an n x H copy is not made "
                "behind your back). Use coefficients(phi) or iter_coefficients(phi)."
            )
        if "_dual_public" not in self.__dict__:
            H = self.n_features_in_
            D = self._dual[:, :H] * self._scale  # a power of two: exact
            off = (self._dual[:, H] * self._const if self.intercept
                   else np.zeros(self._dual.shape[0]))
            D.setflags(write=False)
            off.setflags(write=False)
            self._dual_public = (D, off)
        return self._dual_public

    def _augment(self, Q: np.ndarray) -> np.ndarray:
        """Queries in the fitted coordinates: rescaled, with the constant coordinate."""
        if self._scale != 1.0:
            Q = Q * self._scale
        if self.intercept:
            return np.hstack([Q, np.full((Q.shape[0], 1), self._const)])
        return Q

    def _solve(self, rhs: np.ndarray) -> np.ndarray:
        """(G + lam M)^{-1} rhs by two triangular solves, or the pseudo-inverse (lstsq)."""
        if self._factor is not None:
            Rf = self._factor
            z = linalg.solve_triangular(Rf, rhs, trans="T", check_finite=False)
            return linalg.solve_triangular(Rf, z, check_finite=False)
        W, w, Wr = self._eig
        return W @ ((Wr.T @ rhs) / w[:, None])

    def _need_memory(self) -> None:
        if self._dual is None and self._Phi is None:
            raise InputError(
                "this CaseInfluence was loaded from a file saved with include_phi=False: the "
                "coefficients alpha(x) = Phi G^-1 phi(x) need the training representations. "
                "Save with include_phi=True, or use scores() and leverage(), which do not."
            )

    def _solve_each(self, rhs: np.ndarray) -> np.ndarray:
        """:meth:`_solve` one column at a time (BLAS level 2), so a query's solution does
        not depend on the other queries of the batch; (H', m), C order."""
        out = np.empty(rhs.shape)
        if self._factor is not None:
            trsv = linalg.blas.dtrsv
            # the factor's transpose is the Fortran-ordered lower factor L = R^T: passed as
            # is (f2py would copy a C-ordered R, H'^2 entries, at every call)
            L = self._factor.T if self._factor.flags.c_contiguous else self._factor.T.copy("F")
            for j in range(rhs.shape[1]):
                y = trsv(L, rhs[:, j], lower=1)  # R^T y = L y = rhs
                out[:, j] = trsv(L, y, lower=1, trans=1, overwrite_x=1)  # R z = L^T z = y
            return out
        W, w, Wr = self._eig
        for j in range(rhs.shape[1]):
            out[:, j] = W @ ((rhs[:, j] @ Wr) / w)
        return out

    def _query_side(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(Y, bias) with alpha = X Y + bias for the case-side chunks X of :meth:`_chunks`.

        Each query is solved on its own (:meth:`_solve_each`), so its ``Y`` column, and the
        values and ties of its ranking (:func:`cbdt._ranking._psi`), do not depend on the
        batch; the coefficients themselves come from a GEMV for one query and a GEMM for a
        batch and may differ in the last bit.
        """
        Qa = self._augment(Q)
        if self._dual is not None:  # X = dual rows: alpha = D [s phi; t]
            return np.ascontiguousarray(Qa.T), None
        Z = self._solve_each(Qa.T)  # z = (G + lam M)^-1 [s phi; t]
        H = self.n_features_in_
        if self._kind == "array":  # X = the fit's copy [s Phi, 1]: alpha = X [z_H; t z_c]
            if self.intercept:
                Z[H] *= self._const
            return Z, None
        # X = Phi rows (memmap, dask, loaded): alpha = Phi (s z_H) + t z_c
        Y = Z[:H] * self._scale if self._scale != 1.0 else np.ascontiguousarray(Z[:H])
        return Y, (Z[H] * self._const if self.intercept else None)

    def _chunks(self, widen: bool = True) -> Iterator[tuple[int, np.ndarray]]:
        """Case-side row chunks: (start, X), in float64 (a float32 memmap converted into one
        reused buffer, never as a whole), or with ``widen=False`` its chunks as they are: for
        :class:`cbdt._ranking.Widener`, which reads them in cache-sized pieces, and for the
        fused scan, whose float32 screen reads them as they are and widens only its
        candidates' rows."""
        if self._dual is not None:
            yield 0, self._dual
            return
        Phi = self._Phi
        if not isinstance(Phi, np.memmap) and Phi.dtype == np.float64:
            yield 0, np.asarray(Phi)
            return
        n, cs = self.n_cases_, self.chunk_size
        buf = (None if Phi.dtype == np.float64 or not widen
               else np.empty((min(cs, n), Phi.shape[1])))
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
            with Widener(Y.T) as widen:  # used (and started) by a float32 memmap only
                for s, X in self._chunks(widen=False):
                    o = out[:, s : s + X.shape[0]]
                    if X.dtype != np.float64:  # a float32 memmap: widened in cached pieces
                        widen.products(o, X)
                    else:
                        product_into(o, Y.T, X)
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
        (:func:`scan_top_k`), for ``batch_size`` queries at a time. One query, or up to
        ``_DIRECT_QUERIES`` (and any small block), is ranked by direct float64 products
        instead: a GEMV (or small GEMM) per block of cases, ranked exactly per block and
        merged (:func:`cbdt._ranking.rank_direct`), at any n. Every path
        screens with a rounding bound and takes its keys and values from
        :func:`cbdt._ranking._psi`, one evaluation of :math:`\\psi_i` (eq. 15) per (query,
        case), so a query's cases, its ties (to the lower case index) and its values do not
        depend on the other queries of the call. Returns ``(indices, keys, signed
        values)``, each (m, k).
        """
        self._need_memory()
        m = Q.shape[0]
        Rt = self._returns_t if weight == "psi" else None
        if self._kind != "dask" and m <= self.batch_size and (
                m <= self._DIRECT_QUERIES or m * self.n_cases_ <= self._SCAN_ENTRIES):
            # one query or a few: a GEMV (or small GEMM) per block of cases, formed, bounded
            # with the fit's row-norm bounds and refined directly (memory-bound like the
            # floor: no float32 copy of the memory, no norms recomputed)
            Y, bias = self._query_side(Q)
            keys, idx, vals = rank_direct(self._chunks(widen=False), Y, bias, Rt, acts, k, key,
                                          self._case_norms(), self._returns_actmax,
                                          self._returns_absmax)
            return idx, keys, vals
        idx = np.empty((m, k), dtype=np.intp)
        keys = np.empty((m, k))
        vals = np.empty((m, k))
        for s in self._blocks(m, self.batch_size, what):  # one pass over the memory per block
            sl = slice(s, min(m, s + self.batch_size))
            perm = np.argsort(acts[sl], kind="stable")  # equal actions share a row of returns
            ap = acts[sl][perm]
            Qp = Q[sl][perm]
            Y, bias = self._query_side(Qp)  # solved query by query: batch-invariant
            if self._kind == "dask":
                best = rank_dask(self._Phi, Y, bias, Rt, ap, k, key, self._SCAN_ENTRIES,
                                 norms=self.__dict__.get("_chunk_norms"))
            else:
                best = scan_top_k(
                    # a float32 memmap's chunks as they are: the scan's float32 screen reads
                    # them (no float64 copy of each chunk to narrow again)
                    self._chunks(widen=getattr(self._Phi, "dtype", None) != np.float32), Y,
                    bias, Rt, ap, k, key, self._SCAN_ENTRIES, self.n_cases_,
                    self._threads(sl.stop - sl.start), self._returns_absmax,
                    self._case_norms(),
                )
            rows = np.arange(sl.start, sl.stop)[perm]
            keys[rows], idx[rows], vals[rows] = best
        return idx, keys, vals


# ---------------------------------------------------------------------- module helpers
def _is_dask(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "chunks")
