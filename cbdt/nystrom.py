"""Nyström-approximate case influence (App. C.7, Table C2).

The exact regularised coefficient (eq. 11)

.. math:: \\alpha_\\lambda(x) = \\Phi (G + \\lambda I_H)^{-1}\\varphi(x), \\qquad G = \\Phi^\\top\\Phi,

needs the factor of the :math:`H\\times H` Gram matrix. :class:`NystromCaseInfluence`
replaces the Gram matrix by a rank-:math:`m` Nyström approximation built from ``m``
uniformly sampled columns (Williams and Seeger, 2001; Drineas and Mahoney, 2005) and applies
the regularised inverse through the Woodbury identity, so only :math:`m\\times m` and
:math:`k\\times k` (:math:`k\\le m`) matrices are ever factored. Two readings are offered:
``method="features"`` samples columns of the feature-side Gram matrix :math:`G` (the paper's
App. C.7), ``method="cases"`` samples landmark training cases of the sample-side kernel
:math:`K = \\Phi\\Phi^\\top` (Williams and Seeger's reading).
"""

from __future__ import annotations

import json
import numbers
from typing import Any, ClassVar, Literal

import numpy as np
from scipy import linalg

from ._base import CaseEstimator, Checked, Constraint, Options, PositiveInteger
from ._params import read_saved_params
from ._query import CaseQueryMixin
from ._ranking import RowNormBounds, block_max_row_norms, scan_top_k
from ._savefile import open_npz
from ._validation import (
    as_float_matrix,
    check_action_names,
    check_finite,
    storable_ids,
)
from .exceptions import InputError, NotFittedError

__all__ = ["NystromCaseInfluence", "DEFAULT_RIDGE_MULTIPLE"]

_EPS = np.finfo(np.float64).eps

#: ``ridge=None`` means :math:`\lambda = 10^{-3}\,\mathrm{tr}(G)/H`.
DEFAULT_RIDGE_MULTIPLE = 1e-3


def _private_phi(Phi: Any) -> tuple[np.ndarray, str]:
    """A finite, C-ordered, read-only float64 copy of ``Phi`` that never shares the caller's
    memory (the dual matrix is formed from it once)."""
    P = np.ascontiguousarray(as_float_matrix("Phi", Phi, finite=False))
    check_finite("Phi", P, hint="training representations must be finite")
    if isinstance(Phi, np.ndarray) and np.shares_memory(P, Phi):
        P = P.copy()
    P.setflags(write=False)
    return P, "array"


def _check_n_components(name: str, r: Any) -> None:
    if not isinstance(r, numbers.Integral) or isinstance(r, bool) or r < 1:
        raise InputError(
            f"{name} must be a positive integer (m >= 1, the number of sampled "
            f"columns or landmark cases), got {r!r}; e.g. "
            "NystromCaseInfluence(n_components=64)."
        )


def _check_ridge(name: str, lam: Any) -> None:
    if lam is None:
        return
    if not isinstance(lam, numbers.Real) or isinstance(lam, bool):
        raise InputError(f"{name} must be a positive real number or None, got {lam!r}.")
    if not (np.isfinite(lam) and lam > 0):
        raise InputError(
            f"{name} must be finite and > 0, got {lam!r}: the Woodbury identity "
            "(lam I + C W^+ C^T)^{-1} = (1/lam)[I - B (lam I + B^T B)^{-1} B^T] needs "
            "lam > 0, since the Nyström Gram matrix has rank <= m and is singular. "
            "Use ridge=None for the default lam = 1e-3 tr(G)/H."
        )


def _check_random_state(name: str, s: Any) -> None:
    if s is not None and not isinstance(s, np.random.Generator) and (
        not isinstance(s, numbers.Integral) or isinstance(s, bool) or s < 0
    ):
        raise InputError(
            f"{name} must be a non-negative integer, a numpy.random.Generator or "
            f"None, got {s!r}."
        )


class NystromCaseInfluence(CaseQueryMixin, CaseEstimator):
    """Case-influence coefficients of a ridge readout with a Nyström-approximated Gram matrix.

    The same queries as :class:`cbdt.influence.CaseInfluence` (``coefficients``, ``scores``,
    ``contributions``, ``top_cases``, ``explain``, and :func:`cbdt.audit_signals`, from the
    query code both share: ``action=None`` is each query's decision,
    actions may be named, ``k`` is keyword-only), answered for an approximate regularised Gram matrix
    :math:`\\tilde G + \\lambda I` in place of :math:`G + \\lambda I` (eq. 11). The
    decomposition eq. 9 stays *exact* for the approximate readout:
    :math:`\\tilde Q(x, a) = \\varphi(x)^\\top\\tilde v_a = \\sum_i \\tilde\\alpha_i(x) r_{i,a}`
    to rounding error, for both methods.

    **method="features"** (the paper's reading, App. C.7: "samples m columns of the feature
    matrix"). Sample ``m`` column indices :math:`S\\subset\\{1..H\\}` uniformly without
    replacement and set :math:`C = G_{:,S} = \\Phi^\\top\\Phi_{:,S}` (:math:`H\\times m`),
    :math:`W = G_{S,S}` (:math:`m\\times m`); the full :math:`G` is never formed. With the
    eigendecomposition :math:`W = U\\,\\mathrm{diag}(w)\\,U^\\top` and the :math:`k` eigenvalues
    above :math:`w_{\\max}\\max(n, m)\\,\\epsilon` kept (:math:`W^+` is the pseudo-inverse on
    them),

    .. math::
        \\tilde G = C W^{+} C^\\top = B B^\\top, \\qquad
        B = C U_k\\,\\mathrm{diag}(w_k^{-1/2}) \\in \\mathbb{R}^{H\\times k}.

    For :math:`\\lambda > 0` the Woodbury identity gives, with the :math:`k\\times k` Cholesky
    factor of :math:`M = \\lambda I_k + B^\\top B`,

    .. math::
        (\\lambda I_H + \\tilde G)^{-1} = \\tfrac{1}{\\lambda}\\bigl[I_H - B M^{-1} B^\\top\\bigr]
        \\;\\Bigl(= \\tfrac{1}{\\lambda}\\bigl[I - C(\\lambda W + C^\\top C)^{-1}C^\\top\\bigr]
        \\text{ when } W \\text{ is invertible}\\Bigr),

    .. math::
        \\tilde\\alpha(x) = \\Phi(\\lambda I + \\tilde G)^{-1}\\varphi(x), \\qquad
        \\tilde V = (\\lambda I + \\tilde G)^{-1}\\Phi^\\top R.

    Because :math:`\\tilde G = \\Phi^\\top P\\,\\Phi` with :math:`P` the orthogonal projector
    onto the span of the sampled columns :math:`\\Phi_{:,S}`, ``n_components=H`` (every column) gives
    :math:`\\tilde G = G` and the exact coefficients of ``CaseInfluence(ridge=lam)``.

    **method="cases"** (Williams and Seeger, 2001). Sample ``m`` landmark cases
    :math:`L\\subset\\{1..n\\}` and approximate the kernel :math:`K = \\Phi\\Phi^\\top` by
    :math:`\\tilde K = K_{nL} K_{LL}^{+} K_{Ln} = BB^\\top`,
    :math:`B = K_{nL} U_k\\,\\mathrm{diag}(w_k^{-1/2})\\in\\mathbb{R}^{n\\times k}` from the
    eigendecomposition of :math:`K_{LL}`. By the push-through identity eq. 11 reads
    :math:`\\alpha_\\lambda(x) = (K + \\lambda I_n)^{-1}\\Phi\\varphi(x)`; with
    :math:`\\tilde K` in place of :math:`K` and Woodbury,

    .. math::
        \\tilde\\alpha(x) = \\tfrac{1}{\\lambda}\\bigl[k(x) - B M^{-1} B^\\top k(x)\\bigr],
        \\qquad k(x) = \\Phi\\varphi(x), \\quad M = \\lambda I_k + B^\\top B,

    .. math::
        \\tilde V = \\Phi^\\top(\\tilde K + \\lambda I_n)^{-1} R, \\qquad\\text{so}\\qquad
        \\tilde Q(x, a) = \\varphi(x)^\\top\\tilde v_a = \\tilde\\alpha(x)^\\top r_a.

    :math:`\\tilde K = \\Phi P' \\Phi^\\top` with :math:`P'` the projector onto the span of the
    landmark representations, so ``n_components=n`` landmarks give :math:`\\tilde K = K` and again
    the exact coefficients of ``CaseInfluence(ridge=lam)``.

    Parameters
    ----------
    n_components : int
        Number ``m`` of sampled columns (``1 <= m <= H``, method ``"features"``) or landmark
        cases (``1 <= m <= n``, method ``"cases"``); scikit-learn's name
        (:class:`sklearn.kernel_approximation.Nystroem`).
    method : {"features", "cases"}, default="features"
    ridge : float or None, default=None
        :math:`\\lambda > 0`; the Woodbury identity needs it, because :math:`\\tilde G` has
        rank at most ``m`` and is singular for ``m < H``. ``None`` uses the scale-aware
        default :math:`\\lambda = 10^{-3}\\,\\mathrm{tr}(G)/H`
        (:data:`DEFAULT_RIDGE_MULTIPLE`): :math:`\\mathrm{tr}(G)/H` is the mean eigenvalue of
        :math:`G`, so the coefficients do not change when :math:`\\Phi` and
        :math:`\\varphi` are rescaled together, :math:`\\lambda` stays 0.1% of the average
        curvature (close to the OLS coefficients eq. 10 where :math:`G` is well conditioned)
        and the condition number of :math:`\\tilde G + \\lambda I` is at most
        :math:`1 + 10^3 H`. The value used is stored in ``ridge_``; pass the same value to
        ``CaseInfluence(ridge=...)`` to compare with the exact eq. 11.
    random_state : int, numpy.random.Generator or None, default=0
        Seed of ``numpy.random.default_rng`` drawing the sample; a fixed seed gives the same
        sample and bit-identical results (a ``Generator`` is drawn from as it stands, ``None``
        draws fresh entropy). scikit-learn's name.
    batch_size : int, default=1024
        Queries answered at once.
    topk_block_entries : int, default=16_000_000
        Entries (queries x cases) ranked at once by :meth:`top_cases`.

    Attributes
    ----------
    readout_ : ndarray of shape (H, |A|)
        Approximate readout :math:`\\tilde V`.
    ridge_ : float
        The :math:`\\lambda` used.
    sample_ : ndarray of int of shape (m,)
        Sampled column indices :math:`S` (features) or landmark cases :math:`L` (cases),
        ascending.
    nystrom_rank_ : int
        Rank ``k <= m`` of :math:`\\tilde G` (:math:`\\tilde K`): eigenvalues of :math:`W`
        (:math:`K_{LL}`) kept by the cutoff.
    returns_ : ndarray of shape (n, |A|)
        A read-only float64 copy of ``R`` (always a copy, also of a DataFrame or a tensor:
        editing the caller's ``R`` after ``fit`` changes nothing).
    n_cases_, n_features_in_, n_actions_ : int
        ``n``, ``H`` (scikit-learn's name) and :math:`|A|`.
    case_ids_ : ndarray of shape (n,) or None
        The training cases' labels given to ``fit``; ``None`` for positions.
    action_names_ : ndarray of shape (|A|,)
        The actions' names: a returns DataFrame's columns or ``action_names=``, else
        ``0..|A|-1``.
    feature_names_in_ : ndarray of str objects, shape (H,)
        The string column names of a ``Phi`` DataFrame, checked against query DataFrames
        as in :class:`cbdt.CaseInfluence`; absent otherwise.

    Notes
    -----
    ``fit`` costs :math:`O(nHm + m^3)` and caches the dual matrix
    :math:`D = \\Phi(\\lambda I + \\tilde G)^{-1}` (features) or
    :math:`(\\tilde K + \\lambda I)^{-1}\\Phi` (cases), both :math:`n\\times H`, so
    :math:`\\tilde\\alpha(x) = D\\varphi(x)` is one matrix product per query batch. No
    inverse is formed: only Cholesky solves with :math:`M` and an eigendecomposition of the
    sampled block. Sampling is uniform; Drineas and Mahoney (2005) also analyse
    probabilities proportional to :math:`G_{ii}^2`. The Woodbury form divides by
    :math:`\\lambda`, so its rounding error grows like
    :math:`\\epsilon\\,\\lVert G\\rVert/\\lambda`; with the default ridge
    :math:`\\lVert G\\rVert/\\lambda \\le \\mathrm{tr}(G)/\\lambda = 10^3 H`, so at most about
    :math:`10^{-10}` relative at :math:`H = 512`.

    References
    ----------
    .. [1] C. K. I. Williams and M. Seeger, "Using the Nyström method to speed up kernel
       machines", NeurIPS 13, 682-688, 2001.
    .. [2] P. Drineas and M. W. Mahoney, "On the Nyström method for approximating a Gram
       matrix for improved kernel-based learning", JMLR 6, 2153-2175, 2005.

    Examples
    --------
    >>> import numpy as np, cbdt
    >>> from cbdt.nystrom import NystromCaseInfluence
    >>> rng = np.random.default_rng(0)
    >>> Phi, R = rng.normal(size=(100, 8)), rng.normal(size=(100, 3))
    >>> ny = NystromCaseInfluence(4, random_state=0).fit(Phi, R)
    >>> phi = rng.normal(size=8)
    >>> np.allclose(ny.coefficients(phi) @ R, ny.scores(phi))
    True
    >>> full = NystromCaseInfluence(8).fit(Phi, R)
    >>> exact = cbdt.CaseInfluence(ridge=full.ridge_).fit(Phi, R)
    >>> np.allclose(full.coefficients(phi), exact.coefficients(phi))
    True
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        method: Literal["features", "cases"] = "features",
        ridge: float | None = None,
        random_state: int | np.random.Generator | None = 0,
        batch_size: int = 1_024,
        topk_block_entries: int = 16_000_000,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.ridge = ridge
        self.random_state = random_state
        self.batch_size = batch_size
        self.topk_block_entries = topk_block_entries

    def __repr__(self) -> str:
        return (
            f"NystromCaseInfluence(n_components={self.n_components!r}, "
            f"method={self.method!r}, ridge={self.ridge!r}, "
            f"random_state={self.random_state!r})"
        )

    # ------------------------------------------------------------------ validation
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "n_components": Checked(_check_n_components),
        "method": Options(
            "features", "cases",
            hint="'features' samples Gram columns (App. C.7), 'cases' landmark training cases.",
        ),
        "ridge": Checked(_check_ridge),
        "random_state": Checked(_check_random_state),
        "batch_size": PositiveInteger(),
        "topk_block_entries": PositiveInteger(),
    }

    # ------------------------------------------------------------------ fitting
    def fit(
        self, Phi: Any, R: Any, *, case_ids: Any = None, action_names: Any = None
    ) -> NystromCaseInfluence:
        """Sample, factor the Woodbury core once and cache the dual matrix and readout.

        Parameters
        ----------
        Phi : array-like of shape (n, H)
            Training representations :math:`\\varphi(x_i)` as rows (eq. 4); a DataFrame's
            string column names become ``feature_names_in_``.
        R : array-like of shape (n, |A|) or (n,)
            Action-conditional returns :math:`r_i(a)` (eq. 5); 1-D means one action. As
            pandas objects, ``Phi`` and ``R`` must have equal indexes (rows are paired by
            position).
        case_ids : array-like of shape (n,) or pandas.Index, optional
            Labels of the training cases, as in :meth:`cbdt.CaseInfluence.fit` (default the
            index of a ``Phi`` DataFrame when it is not ``0..n-1``); kept as ``case_ids_``.
        action_names : array-like of shape (|A|,), optional
            Names of the actions (columns of ``R``); default the columns of an ``R``
            DataFrame, else ``0..|A|-1``. Kept as ``action_names_``; every ``action=``
            argument accepts them.

        Returns
        -------
        self : NystromCaseInfluence
        """
        self._validate_params()
        data = self._validate_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                   check_phi=_private_phi)
        Phi, R = data.Phi, data.R
        n, H = Phi.shape

        m = int(self.n_components)
        size, what = (H, "features H") if self.method == "features" else (n, "cases n")
        if m > size:
            raise InputError(
                f"n_components m = {m} exceeds the number of {what} = {size} that method="
                f"{self.method!r} samples from; choose 1 <= n_components <= {size}."
            )

        trace = float(np.einsum("ij,ij->", Phi, Phi))
        if not np.isfinite(trace):
            raise InputError(
                "tr(Phi^T Phi) overflows float64; rescale Phi (the coefficients with the "
                "default ridge do not depend on a global scale)."
            )
        if self.ridge is None:
            if trace == 0:
                raise InputError(
                    "Phi is identically zero, so the default ridge 1e-3 tr(G)/H is 0; pass "
                    "ridge > 0 or check the representation."
                )
            lam = DEFAULT_RIDGE_MULTIPLE * trace / H
        else:
            lam = float(self.ridge)

        rng = np.random.default_rng(self.random_state)
        sample = np.sort(rng.choice(size, size=m, replace=False))
        if self.method == "features":
            C = Phi.T @ Phi[:, sample]  # (H, m) = G[:, S], without forming G
            W = C[sample]  # (m, m) = G[S, S]
            B = self._sketch(C, W, n)  # (H, k): G~ = B B^T
        else:
            KnL = Phi @ Phi[sample].T  # (n, m) = K[:, L]
            KLL = KnL[sample]  # (m, m) = K[L, L]
            B = self._sketch(KnL, KLL, n)  # (n, k): K~ = B B^T
        k = B.shape[1]
        core = (
            linalg.cho_factor(lam * np.eye(k) + B.T @ B, lower=True, check_finite=False)
            if k
            else None
        )

        def inv_apply(X: np.ndarray) -> np.ndarray:
            """(lam I + B B^T)^{-1} X by Woodbury (no inverse formed)."""
            if core is None:
                return X / lam
            return (X - B @ linalg.cho_solve(core, B.T @ X, check_finite=False)) / lam

        if self.method == "features":
            # D = Phi (lam I + G~)^{-1}  (the inverse is symmetric: D^T = inv_apply(Phi^T))
            dual = np.ascontiguousarray(inv_apply(Phi.T).T)
            V = inv_apply(Phi.T @ R)
        else:
            # D = (K~ + lam I)^{-1} Phi ;  V = Phi^T (K~ + lam I)^{-1} R
            dual = np.ascontiguousarray(inv_apply(Phi))
            V = Phi.T @ inv_apply(R)
        dual.setflags(write=False)

        self._dual = dual
        self.readout_ = V
        self.ridge_ = lam
        self.sample_ = sample
        self.nystrom_rank_ = int(k)
        self.returns_ = R
        self._returns_t = np.ascontiguousarray(R.T)
        self.n_cases_ = n
        self.n_features_in_ = H
        self.n_actions_ = R.shape[1]
        self._set_query_bounds()
        self._finish_fit(data)  # case_ids_, action_names_, feature_names_in_
        return self

    def _set_query_bounds(self) -> None:
        """What the ranking's rounding bounds need, measured once (at fit and at load), never
        per query: the largest row norm of the dual matrix per block of rows and max |r|."""
        from ._tsqr import block_rows

        rows = block_rows(self._dual.shape[1])
        self._norms = RowNormBounds(rows, block_max_row_norms(self._dual, rows))
        self._rmax = float(np.abs(self.returns_).max()) if self.returns_.size else 0.0

    @staticmethod
    def _sketch(C: np.ndarray, W: np.ndarray, n: int) -> np.ndarray:
        """``B = C U_k diag(w_k^{-1/2})`` with ``C W^+ C^T = B B^T`` (eigen-cutoff ``W^+``)."""
        w, U = linalg.eigh(0.5 * (W + W.T), check_finite=False)
        w_max = float(max(w[-1], 0.0))
        keep = w > w_max * max(n, W.shape[0]) * _EPS
        if not keep.any():
            return np.zeros((C.shape[0], 0))
        return (C @ U[:, keep]) / np.sqrt(w[keep])

    # ------------------------------------------------------------------ persistence
    _FORMAT = 1

    @property
    def dual_(self) -> np.ndarray:
        """The dual matrix :math:`D` (n, H), read-only: :math:`\\tilde\\alpha(x) = D\\,
        \\varphi(x)` (``Phi (lam I + G~)^-1`` for ``method="features"``, ``(K~ + lam I)^-1
        Phi`` for ``"cases"``)."""
        self._check_fitted()
        return self._dual

    def save(self, path: Any) -> None:
        """Write the fitted approximation to an ``.npz`` file (no pickle).

        The file holds the constructor parameters, the dual matrix (what the coefficients
        need), the readout, the returns, the sample and the ridge; :meth:`load` gives back an
        estimator whose every query equals this one's bit for bit.

        Parameters
        ----------
        path : str or path-like
            Target file; numpy appends ``.npz`` when missing.
        """
        self._check_fitted()
        params = self.get_params()
        arrays: dict[str, np.ndarray] = {
            "format": np.array(self._FORMAT),
            "kind": np.array("NystromCaseInfluence"),
            "params": np.array(json.dumps(params)),
            "dual": self._dual,
            "readout": self.readout_,
            "returns": self.returns_,
            "sample": self.sample_,
            "fitted": np.array([self.ridge_, self.nystrom_rank_]),
        }
        if self.case_ids_ is not None:
            arrays["case_ids"] = storable_ids(self.case_ids_)
        if getattr(self, "feature_names_in_", None) is not None:  # optional: older files
            arrays["feature_names"] = self.feature_names_in_.astype(str)  # lack it
        names = self.action_names_
        if names is not None and not np.array_equal(names, np.arange(self.n_actions_)):
            arrays["action_names"] = storable_ids(names, "action_names_")
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: Any) -> NystromCaseInfluence:
        """Read an approximation written by :meth:`save`, checking every entry."""

        def bad(what: str) -> InputError:
            return InputError(
                f"{path!s} is damaged or was not written by NystromCaseInfluence.save: {what}. "
                "Refit and save it again."
            )

        with open_npz(path, "NystromCaseInfluence") as f:
            if "kind" not in f or str(f["kind"]) != "NystromCaseInfluence":
                raise InputError(
                    f"{path!s} is not a NystromCaseInfluence file (a CaseInfluence file is read "
                    "by cbdt.CaseInfluence.load)."
                )
            if "format" not in f or int(f["format"]) != cls._FORMAT:
                raise InputError(
                    f"{path!s} is not a NystromCaseInfluence file of format {cls._FORMAT}; "
                    "refit and save it again with this version of cbdt."
                )
            for key in ("params", "dual", "readout", "returns", "sample", "fitted"):
                if key not in f:
                    raise bad(f"the entry {key!r} is missing")
            params = read_saved_params(f, path, cls._param_names(), bad)
            dual, V, R = f["dual"], f["readout"], f["returns"]
            if dual.ndim != 2 or R.ndim != 2 or R.shape[0] != dual.shape[0]:
                raise bad(f"'dual' {dual.shape} and 'returns' {R.shape} disagree")
            n, H = dual.shape
            A = R.shape[1]
            expect = {"readout": (H, A), "fitted": (2,), "case_ids": (n,),
                      "action_names": (A,), "feature_names": (H,)}
            for key, shape in expect.items():
                if key in f and f[key].shape != shape:
                    raise bad(f"{key!r} has shape {f[key].shape}, the fit it describes "
                              f"(n = {n}, H = {H}, |A| = {A}) needs {shape}")
            est = cls(**params)
            lam, k = f["fitted"].tolist()
            for arr in (dual, V, R):
                arr.setflags(write=False)
            est._dual = dual
            est.readout_ = V
            est.ridge_ = float(lam)
            est.sample_ = f["sample"]
            est.nystrom_rank_ = int(k)
            est.returns_ = R
            est._returns_t = np.ascontiguousarray(R.T)
            est.n_cases_, est.n_features_in_, est.n_actions_ = n, H, A
            est._set_query_bounds()
            ids = f["case_ids"] if "case_ids" in f else None
            if ids is not None:
                ids.setflags(write=False)
            est.case_ids_ = ids
            est.action_names_ = check_action_names(
                f["action_names"] if "action_names" in f else None, A
            )
            if "feature_names" in f:  # written since feature_names_in_ exists (same format)
                est.feature_names_in_ = f["feature_names"].astype(object)
                est.feature_names_in_.setflags(write=False)
        return est

    # ------------------------------------------------------------------ queries
    def _check_fitted(self) -> None:
        if not hasattr(self, "_dual"):
            raise NotFittedError(
                "This NystromCaseInfluence is not fitted yet. Call .fit(Phi, R) before "
                "querying it."
            )

    def _alpha(self, Q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """alpha~ for a batch of validated queries: one GEMM with the cached dual matrix."""
        if out is None:
            out = np.empty((Q.shape[0], self.n_cases_))
        np.matmul(Q, self._dual.T, out=out)
        return out

    # entries (queries x cases) of one cache-sized block of the fused top-k scan
    _SCAN_ENTRIES = 1 << 19

    def _rank(
        self, Q: np.ndarray, acts: np.ndarray, k: int, key: str, weight: str, what: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k cases by ``key`` of psi or alpha through the fused scan of
        :func:`cbdt._ranking.scan_top_k` over the dual matrix (alpha~ = D phi): the (m, n)
        coefficients are never held, and a query's cases, ties and values do not depend on
        the batch (the same scan as :class:`~cbdt.CaseInfluence`'s)."""
        m = Q.shape[0]
        Rt = self._returns_t if weight == "psi" else None
        idx = np.empty((m, k), dtype=np.intp)
        keys = np.empty((m, k))
        vals = np.empty((m, k))
        threads = 1
        if m * self.n_cases_ >= (1 << 20):
            from ._threads import blas_threads

            threads = blas_threads()
        for s in self._blocks(m, self.batch_size, what):
            sl = slice(s, min(m, s + self.batch_size))
            Y = np.ascontiguousarray(Q[sl].T)  # alpha~ = D Y
            best = scan_top_k(iter([(0, self._dual)]), Y, None, Rt, acts[sl], k, key,
                              self._SCAN_ENTRIES, self.n_cases_, threads, self._rmax,
                              self._norms)  # bounds measured once, at fit or load
            keys[sl], idx[sl], vals[sl] = best
        return idx, keys, vals

    def coefficients(self, phi: Any) -> np.ndarray:
        """Approximate coefficients :math:`\\tilde\\alpha(x)` (Nyström version of eq. 11).

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
        for s in range(0, Q.shape[0], self.batch_size):
            sl = slice(s, s + self.batch_size)
            self._alpha(Q[sl], out=out[sl])
        return out[0] if single else out

    def scores(self, phi: Any) -> np.ndarray:
        """Approximate action scores :math:`\\varphi(x)^\\top\\tilde v_a` (eq. 3).

        Equal to :math:`\\sum_i\\tilde\\alpha_i(x) r_{i,a}` (eq. 9) to rounding error.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)

        Returns
        -------
        ndarray of shape (m, |A|), or (|A|,) for a 1-D query
        """
        Q, single = self._check_query(phi)
        S = Q @ self.readout_
        return S[0] if single else S
