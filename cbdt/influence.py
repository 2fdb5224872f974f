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

from ._ranking import top_k_indices
from ._validation import (
    as_float_matrix,
    as_query,
    check_action,
    check_finite,
    check_k,
    check_nonnegative_scalar,
)
from .exceptions import InputError, NotFittedError, RankDeficientError, ReturnsWarning

__all__ = ["CaseInfluence", "TopCases", "Explanation"]

_EPS = np.finfo(np.float64).eps


class TopCases(NamedTuple):
    """Result of :meth:`CaseInfluence.top_cases`.

    Attributes
    ----------
    indices : ndarray of int, shape (m, k) or (k,)
        Training-case indices, strongest first.
    contributions : ndarray of float, shape (m, k) or (k,)
        The signed contributions :math:`\\psi_i(a, x)` (eq. 15) of those cases.
    """

    indices: np.ndarray
    contributions: np.ndarray


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


class CaseInfluence:
    """Exact case-influence decomposition of an OLS (or ridge) readout (Proposition 1).

    Parameters
    ----------
    ridge : float, default=0.0
        Tikhonov strength :math:`\\lambda \\ge 0` (eq. 11). ``0`` is plain OLS (eq. 8, 10).
    intercept : bool, default=False
        Absorb a constant coordinate into :math:`\\varphi` (Sec. 2.2). The intercept is not
        penalised by ``ridge``.
    solver : {"auto", "cholesky", "lstsq"}, default="auto"
        ``"cholesky"`` factors :math:`G + \\lambda M` once (``scipy.linalg.cho_factor``) and
        raises :class:`~cbdt.exceptions.RankDeficientError` when it is singular or its
        condition number exceeds :attr:`max_condition`. ``"lstsq"`` uses the eigendecomposition
        of the Gram matrix and its pseudo-inverse, which gives the *minimum-norm* readout and
        coefficients when :math:`\\Phi` is rank-deficient (:math:`\\alpha = \\Phi G^{+}
        \\varphi(x)`, the minimum-norm solution of :math:`\\Phi^\\top\\beta = \\varphi(x)`).
        ``"auto"`` resolves to ``"cholesky"``: Proposition 1 assumes full column rank, so a
        rank-deficient memory is reported rather than silently answered by another estimator.
        The resolved solver is stored in ``solver_``.
    ridge_metric : array-like of shape (H, H), optional
        Symmetric positive semi-definite metric :math:`M` of the penalty
        :math:`\\lambda v^\\top M v`; default :math:`I_H`. After a reparameterisation
        :math:`\\varphi \\mapsto B\\varphi`, ``ridge_metric = B M B^T`` keeps the regularised
        coefficients invariant (Appendix B.2, :func:`cbdt.geometry.cotransformed_metric`).
    max_condition : float, default=1e12
        Largest condition number of :math:`G + \\lambda M` the Cholesky solver accepts.
    chunk_size : int, default=65536
        Rows of ``Phi`` processed at once when accumulating the Gram matrix (and when a
        memmap ``Phi`` is read at query time).
    batch_size : int, default=1024
        Queries answered at once by the query methods.
    topk_block_entries : int, default=16_000_000
        Entries (queries x cases) of one block of contributions ranked by :meth:`top_cases`
        and by :func:`cbdt.audit.audit_signals`, about 128 MB of float64: the (m, n)
        contributions are never held at once.

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

    Notes
    -----
    The Gram matrix is accumulated in float64 over row chunks of ``chunk_size`` rows, so
    ``Phi`` may be an :class:`numpy.memmap` larger than memory; only an ``(H', H')`` factor is
    kept besides ``Phi``. An in-memory ``Phi`` and ``R`` are cached as read-only float64
    copies (a new array is not copied twice), so editing the caller's arrays after ``fit``
    cannot break Proposition 1; a memmap is kept by reference and read at every query, so its
    file must not change. The coefficients do not depend on a global scale of ``Phi``: entries
    so large (or small) that :math:`\\Phi^\\top\\Phi` would overflow (or underflow) are
    rescaled by an exact power of two. Queries are answered in batches of ``batch_size``.
    No inverse is ever formed: :math:`\\alpha = \\Phi\\,\\mathrm{solve}(G, \\varphi^\\top)`.

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

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters, as scikit-learn's ``get_params`` (``clone`` works).

        Parameters
        ----------
        deep : bool, default=True
            Accepted for compatibility; there are no nested estimators.

        Returns
        -------
        dict
        """
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params: Any) -> CaseInfluence:
        """Set constructor parameters (scikit-learn convention); refit to apply them.

        Returns
        -------
        self : CaseInfluence
        """
        bad = sorted(set(params) - set(self._PARAMS))
        if bad:
            raise InputError(
                f"unknown parameter(s) {bad} for CaseInfluence; valid: {list(self._PARAMS)}."
            )
        for name, value in params.items():
            setattr(self, name, value)
        return self

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
    def fit(self, Phi: Any, R: Any) -> CaseInfluence:
        """Accumulate the Gram matrix of ``Phi``, factor it once and solve for the readout.

        Parameters
        ----------
        Phi : array-like or numpy.memmap of shape (n, H)
            Training representations :math:`\\varphi(x_i)` as rows (eq. 4).
        R : array-like of shape (n, |A|) or (n,)
            Action-conditional returns :math:`r_i(a)` (eq. 5); 1-D means one action.

        Returns
        -------
        self : CaseInfluence
        """
        ridge = check_nonnegative_scalar("ridge", self.ridge)
        self._check_tunables()
        if self.solver not in ("auto", "cholesky", "lstsq"):
            raise InputError(
                f"solver must be 'auto', 'cholesky' or 'lstsq', got {self.solver!r}."
            )
        if not isinstance(self.intercept, bool | np.bool_):
            raise InputError(f"intercept must be True or False, got {self.intercept!r}.")
        Phi = self._check_phi(Phi)
        n, H = Phi.shape
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

        # Gram matrix and Phi^T R in float64, accumulated over row chunks (memmap friendly).
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is handled below
            G, PtR, max_abs = self._accumulate(Phi, R, 1.0)
        # alpha does not depend on a global scale of Phi. Entries so large that Phi^T Phi
        # overflows, or so small that it underflows, are handled by an exact power-of-two
        # rescaling (scale = 1, and bit-identical results, for every other Phi).
        scale = 1.0
        if max_abs > 0 and (not np.all(np.isfinite(G)) or not 2.0**-400 < max_abs < 2.0**400):
            scale = float(2.0 ** -np.round(np.log2(max_abs)))
            G, PtR, _ = self._accumulate(Phi, R, scale)
        self._scale = scale
        Hp = H + int(self.intercept)

        A = G.copy()
        if ridge > 0:  # lambda |v|^2 = lambda c^2 |v_c|^2 for the rescaled weights v_c = v / c
            A[:H, :H] += (ridge * scale * scale) * metric
        # eigenvalues of the factored matrix give rank and condition number for diagnostics
        w, U = linalg.eigh(A)
        w_max = float(max(w[-1], 0.0))
        tol = w_max * max(n, Hp) * _EPS
        rank = int(np.sum(w > tol))
        w_min = float(w[0])
        cond = float(w_max / w_min) if w_min > 0 else float("inf")

        solver = "cholesky" if self.solver == "auto" else self.solver
        if solver == "cholesky":
            if rank < Hp or cond > self.max_condition:
                raise RankDeficientError(
                    self._rank_message(n, H, rank, Hp, cond, ridge),
                    rank=rank,
                    dim=Hp,
                    condition_number=cond,
                )
            try:
                self._factor = linalg.cho_factor(A, lower=True, check_finite=False)
            except linalg.LinAlgError as exc:  # pragma: no cover - caught by the eigen test
                raise RankDeficientError(
                    self._rank_message(n, H, rank, Hp, cond, ridge),
                    rank=rank,
                    dim=Hp,
                    condition_number=cond,
                ) from exc
            self._eig = None
        else:
            if rank == 0:
                raise RankDeficientError(
                    "Phi is numerically zero (rank 0): every coefficient would be 0. Check the "
                    "representation.",
                    rank=0,
                    dim=Hp,
                    condition_number=cond,
                )
            keep = w > tol
            self._eig = (U[:, keep], w[keep])
            self._factor = None

        self._Phi = Phi
        self._gram_scaled = G
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
        self._returns_t.setflags(write=False)
        self.n_cases_ = n
        self.n_features_ = H
        self.n_actions_ = R.shape[1]
        self.rank_ = rank
        self.condition_number_ = cond
        self.solver_ = solver
        V = self._solve(PtR)  # weights of the rescaled features scale * phi
        self._V = V
        self.readout_ = V[:H] * scale if scale != 1.0 else V[:H].copy()
        if self.intercept:
            self.intercept_ = V[H].copy()
        return self

    def _accumulate(
        self, Phi: np.ndarray, R: np.ndarray, scale: float
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Gram matrix and Phi^T R of ``scale * Phi`` (with the constant column), and max |Phi|."""
        n, H = Phi.shape
        Hp = H + int(self.intercept)
        G = np.zeros((Hp, Hp))
        PtR = np.zeros((Hp, R.shape[1]))
        max_abs = 0.0
        for start in range(0, n, self.chunk_size):
            block = np.asarray(Phi[start : start + self.chunk_size], dtype=np.float64)
            check_finite(
                "Phi" if start == 0 else f"Phi (rows from {start})",
                block,
                hint="training representations must be finite",
            )
            max_abs = max(max_abs, float(np.abs(block).max()))
            if scale != 1.0:
                block = block * scale
            Rb = R[start : start + self.chunk_size]
            G[:H, :H] += block.T @ block
            PtR[:H] += block.T @ Rb
            if self.intercept:
                sb = block.sum(axis=0)
                G[:H, H] += sb
                G[H, :H] += sb
                PtR[H] += Rb.sum(axis=0)
        if self.intercept:
            G[H, H] = n
        return 0.5 * (G + G.T), PtR, max_abs

    # ------------------------------------------------------------------ persistence
    _FORMAT = 1

    def save(self, path: Any, *, include_phi: bool = True) -> None:
        """Write the fitted decomposition to an ``.npz`` file (no pickle).

        The file holds the constructor parameters, the factor of :math:`G + \\lambda M`, the
        readout, the returns and, unless ``include_phi=False``, the training representations
        :math:`\\Phi` (a memmap is written out in full). Without :math:`\\Phi` the loaded object
        still answers :meth:`scores` and :meth:`leverage`, but not the coefficients, which
        need :math:`\\Phi` (eq. 10).

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
            "gram_scaled": self._gram_scaled,
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
        if self._factor is not None:
            arrays["cho_factor"], arrays["cho_lower"] = self._factor[0], np.array(self._factor[1])
        else:
            arrays["eig_U"], arrays["eig_w"] = self._eig
        if include_phi:
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
                    "CaseInfluence.save)."
                )
            params = json.loads(str(f["params"]))
            metric = f["ridge_metric"] if "ridge_metric" in f else None
            ci = cls(ridge_metric=metric, **params)
            scale, rank, cond, n, H, A = f["fitted"].tolist()
            ci._scale = float(scale)
            ci.rank_, ci.condition_number_ = int(rank), float(cond)
            ci.n_cases_, ci.n_features_, ci.n_actions_ = int(n), int(H), int(A)
            ci.solver_ = str(f["solver_"])
            ci._gram_scaled = f["gram_scaled"]
            Hp = ci.n_features_ + int(ci.intercept)
            D = np.full(Hp, 1.0 / ci._scale)
            if ci.intercept:
                D[-1] = 1.0
            with np.errstate(over="ignore"):
                ci.gram_ = ci._gram_scaled * D[:, None] * D[None, :]
            ci.returns_ = f["returns"]
            ci._returns_t = np.ascontiguousarray(ci.returns_.T)
            ci._V = f["V"]
            if "cho_factor" in f:
                ci._factor, ci._eig = (f["cho_factor"], bool(f["cho_lower"])), None
            else:
                ci._factor, ci._eig = None, (f["eig_U"], f["eig_w"])
            ci._Phi = f["Phi"] if "Phi" in f else None
        for arr in (ci.gram_, ci.returns_, ci._returns_t) + (
            () if ci._Phi is None else (ci._Phi,)
        ):
            arr.setflags(write=False)
        Hf = ci.n_features_
        ci.readout_ = ci._V[:Hf] * ci._scale if ci._scale != 1.0 else ci._V[:Hf].copy()
        if ci.intercept:
            ci.intercept_ = ci._V[Hf].copy()
        return ci

    # ------------------------------------------------------------------ queries
    def coefficients(self, phi: Any) -> np.ndarray:
        """Case-influence coefficients :math:`\\alpha(x) = \\Phi (G + \\lambda M)^{-1}\\varphi(x)`.

        Eq. 10 (OLS) and eq. 11 (ridge).

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations :math:`\\varphi(x)`.

        Returns
        -------
        alpha : ndarray of shape (m, n), or (n,) for a 1-D query
        """
        Q, single = self._check_query(phi)
        out = np.empty((Q.shape[0], self.n_cases_))
        for s in self._blocks(Q.shape[0], self.batch_size, "coefficients"):
            self._alpha(Q[s : s + self.batch_size], out=out[s : s + self.batch_size])
        return out[0] if single else out

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
        :math:`\\lVert\\Phi z\\rVert^2 = \\lVert\\alpha(x)\\rVert^2` for every solver and ridge.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)

        Returns
        -------
        ndarray of shape (m,), or a float for a 1-D query
        """
        Q, single = self._check_query(phi)
        Z = self._solve(self._augment(Q).T)  # (H', m)
        lev = np.einsum("hm,hm->m", Z, self._gram_scaled @ Z)
        lev = np.maximum(lev, 0.0)  # z^T G z >= 0; rounding can give -1e-17
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
            the positions ``0..n-1``.
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
        from .audit import _block_signals, _check_eps

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
        srt = np.sort(S, axis=1)
        margin = srt[:, -1] - srt[:, -2] if A > 1 else np.full(m, np.nan)
        a_star = np.argmax(self.returns_, axis=1)
        idx = np.empty((m, k), dtype=np.intp)
        alpha_k = np.empty((m, k))
        ent = np.empty(m)
        gini = np.empty(m)
        step = max(1, min(self.batch_size, self.topk_block_entries // n))
        for s in self._blocks(m, step, "explain"):
            sl = slice(s, s + step)
            alpha = self._alpha(Q[sl])
            psi = alpha * self._returns_t[acts[sl]]
            W = psi if rank_by == "contribution" else alpha
            ent[sl], gini[sl], idx[sl] = _block_signals(W, a_star, A, k, eps)
            alpha_k[sl] = np.take_along_axis(alpha, idx[sl], axis=1)
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
        signals = pd.DataFrame(
            {
                "action": acts,
                "score": S[np.arange(m), acts],
                "margin": margin,
                "entropy": ent,
                "gini": gini,
                "risk": ent + gamma * gini,
            }
        )
        signals.index.name = "query"
        return Explanation(cases, signals)

    def _case_ids(self, case_ids: Any) -> np.ndarray:
        if case_ids is None:
            return np.arange(self.n_cases_)
        ids = np.asarray(case_ids.to_numpy() if hasattr(case_ids, "to_numpy") else case_ids)
        if ids.ndim != 1 or ids.shape[0] != self.n_cases_:
            raise InputError(
                f"case_ids must name every training case: one label per row of Phi (n = "
                f"{self.n_cases_}), got shape {ids.shape}."
            )
        return ids

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
        Queries are ranked in blocks of about ``topk_block_entries`` values, so only the
        ``(m, k)`` result is kept, never the ``(m, n)`` contributions.

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
            ``(indices, contributions)``, each of shape (m, k), or (k,) for a 1-D query.
        """
        if order not in ("abs", "positive", "negative"):
            raise InputError(f"order must be 'abs', 'positive' or 'negative', got {order!r}.")
        self._check_fitted()
        k = check_k(k, self.n_cases_)
        Q, single = self._check_query(phi)
        acts = check_action(action, self.n_actions_, Q.shape[0])
        m = Q.shape[0]
        idx = np.empty((m, k), dtype=np.intp)
        vals = np.empty((m, k))
        # query blocks of bounded size: only (m, k) results are kept, never the (m, n)
        # contributions (16,000 x 32,000 of them would not fit in memory)
        step = int(min(self.batch_size, max(1, self.topk_block_entries // self.n_cases_)))
        for s in self._blocks(m, step, "top_cases"):
            sl = slice(s, s + step)
            psi = self._alpha(Q[sl])
            psi *= self._returns_t[acts[sl]]
            key = np.abs(psi) if order == "abs" else (psi if order == "positive" else -psi)
            idx[sl] = top_k_indices(key, k)
            vals[sl] = np.take_along_axis(psi, idx[sl], axis=1)
        if single:
            return TopCases(idx[0], vals[0])
        return TopCases(idx, vals)

    # ------------------------------------------------------------------ internals
    def _check_phi(self, Phi: Any) -> np.ndarray:
        if isinstance(Phi, np.memmap):
            if Phi.ndim != 2 or Phi.dtype.kind not in "iuf":
                raise InputError(
                    f"Phi must be a real 2-D array (n, H), got memmap of shape {Phi.shape} and "
                    f"dtype {Phi.dtype}."
                )
            arr = Phi  # finiteness is checked chunk by chunk during accumulation
        else:
            arr = np.ascontiguousarray(as_float_matrix("Phi", Phi, finite=False))
            if isinstance(Phi, np.ndarray) and np.shares_memory(arr, Phi):
                arr = arr.copy()  # the fit must not change when the caller edits Phi later
            arr.setflags(write=False)
        n, H = arr.shape
        if n == 0 or H == 0:
            raise InputError(f"Phi must have at least one row and column, got {arr.shape}.")
        return arr

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
        """(G + lam M)^{-1} rhs, or its pseudo-inverse for the lstsq solver."""
        if self._factor is not None:
            return linalg.cho_solve(self._factor, rhs, check_finite=False)
        U, w = self._eig
        return U @ ((U.T @ rhs) / w[:, None])

    def _alpha(self, Q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """alpha for a batch of validated queries, shape (b, n), written into ``out``."""
        Phi = self._Phi
        if Phi is None:
            raise InputError(
                "this CaseInfluence was loaded from a file saved with include_phi=False: the "
                "coefficients alpha(x) = Phi G^-1 phi(x) need the training representations. "
                "Save with include_phi=True, or use scores() and leverage(), which do not."
            )
        Z = self._solve(self._augment(Q).T)  # (H', b)
        H = self.n_features_
        if self._scale != 1.0:  # alpha = (c Phi) z = Phi (c z)
            Z = Z.copy()
            Z[:H] *= self._scale
        if out is None:
            out = np.empty((Q.shape[0], self.n_cases_))
        if isinstance(Phi, np.memmap):
            for s in range(0, self.n_cases_, self.chunk_size):
                block = np.asarray(Phi[s : s + self.chunk_size], dtype=np.float64)
                out[:, s : s + block.shape[0]] = (block @ Z[:H]).T
        else:  # straight into the output: no (b, n) temporary
            np.matmul(Z[:H].T, Phi.T, out=out)
        if self.intercept:
            out += Z[H][:, None]
        return out

