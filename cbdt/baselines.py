"""Training-data attribution baselines on the last layer, beside the exact coefficient (Sec. 5.3).

Every method explains the score :math:`Q(x, a)` of a network whose last hidden layer is the
frozen representation :math:`\\varphi(x)\\in\\mathbb R^H` and whose head is linear with a
bias. Write :math:`\\tilde\\varphi = (\\varphi, 1)` for the representation with the constant
coordinate (Sec. 2.2), :math:`\\tilde\\Phi` (n, H+1) for the training matrix, ``n`` cases,
:math:`|A|` actions and the per-case training loss of the network (:class:`cbdt.models.CaseNetwork`)

.. math:: \\ell_i(\\theta) = \\frac1{|A|}\\sum_{a} (Q_\\theta(x_i, a) - r_i(a))^2,
          \\qquad \\mathcal L(\\theta) = \\frac1n \\sum_i \\ell_i(\\theta).

Each class has a ``fit`` that caches everything that does not depend on the query, and the
query API of :class:`cbdt.CaseInfluence`:

* ``scores(phi)``: the **action scores** :math:`Q(x, a)`, shape ``(m, |A|)``, of the readout
  the method explains (table below);
* ``contributions(phi, action=None)``: for ``m`` queries, an ``(m, n)`` array of **per-case
  contributions to** :math:`Q(x, a)`; ``action=None`` explains each query's own decision
  :math:`\\arg\\max_a` of ``scores(phi)``, an int (or an ``(m,)`` int array) a given action;
* ``top_cases(phi, action=None, *, k=10, order="magnitude")``: the ``k`` strongest cases
  (:class:`cbdt.TopCases`).

**Sign convention.** For every method a positive contribution *raises* the score (the
direction of :math:`\\psi_i = \\alpha_i r_i(a)`, eq. 15). Captum
(``captum.influence``) scores a test *loss* against the training losses, and with the score
itself as the test "loss" its values have the opposite sign: ours
:math:`= -` ``TracInCP`` exactly (same checkpoints, same learning rates), and ours
:math:`= -n\\,\\times` ``NaiveInfluenceFunction`` (captum's Hessian is that of the *summed*
loss, ours of the mean loss :math:`\\mathcal L`; agreement to float32 precision). Both
relations are tested against captum in ``tests/test_baselines.py``. As implemented:

===================== ===================================================================
method                ``contributions``: training case ``i``'s share of :math:`Q(x, a)`
===================== ===================================================================
Exact coefficient     :math:`\\alpha_i(x)\\, r_i(a)`, :math:`\\alpha(x) = \\tilde\\Phi
                      \\tilde G^{-1}\\tilde\\varphi(x)` (eq. 9-10; eq. 11 with a ridge)
Influence Functions   :math:`-\\nabla_\\theta Q(x,a)^\\top (\\nabla^2_\\theta\\mathcal L +
                      \\delta I)^{-1}\\nabla_\\theta \\ell_i = \\tilde\\varphi(x)^\\top
                      (\\tfrac{2}{n|A|}\\tilde G + \\delta I)^{-1}\\tilde\\varphi_i\\,
                      \\tfrac{2}{|A|}(r_i(a) - Q(x_i, a))`
Representer Point     :math:`\\alpha^{rep}_{i,a}\\, (\\varphi_i^\\top\\varphi(x) + 1)`,
                      :math:`\\alpha^{rep}_{i,a} = -\\frac{1}{2\\lambda n}
                      \\frac{\\partial \\ell_i}{\\partial Q^\\lambda(x_i, a)} =
                      \\frac{r_i(a) - Q^\\lambda(x_i, a)}{\\lambda n |A|}`
TracIn                :math:`\\sum_t \\eta_t\\, \\nabla_\\theta Q_t(x, a)^\\top
                      (-\\nabla_\\theta \\ell_i(\\theta_t)) = \\sum_t \\eta_t
                      \\tfrac{2}{|A|}(r_i(a) - Q_t(x_i, a))(\\varphi_t(x_i)^\\top
                      \\varphi_t(x) + 1)`
Inner product         :math:`\\frac1n \\varphi(x)^\\top\\varphi_i\\; r_i(a)` (eq. 14)
===================== ===================================================================

and the scores each explains (``scores(phi)``, :math:`(m, |A|)`):

===================== ===================================================================
method                ``scores``: the readout explained
===================== ===================================================================
Exact coefficient     the OLS (ridge) probe, :math:`Q(x, a) = \\tilde\\varphi(x)^\\top v_a =
                      \\sum_i \\alpha_i(x) r_i(a)` (eq. 3 = eq. 9); the contributions sum to it
Influence Functions   the head :math:`\\hat\\theta` the influence is taken at (the trained head
                      given to ``fit``, else the OLS head), :math:`\\hat W\\varphi(x) + \\hat b`;
                      the contributions do **not** sum to it
Representer Point     the L2-regularised head :math:`Q^\\lambda(x, a)`; the contributions sum
                      to it exactly
TracIn                the head of the last checkpoint, :math:`W_T\\varphi_T(x) + b_T` (the
                      trained network when the last checkpoint ends the run, as in
                      :class:`cbdt.models.CaseNetwork`); the contributions do not sum to it
Inner product         :math:`\\sum_i w_i(x) r_i(a) = \\varphi(x)^\\top\\Phi^\\top R / n`, the sum of
                      its contributions; a readout of the data only when :math:`G = nI_H`
                      (eq. 13), where it is the OLS probe without intercept
===================== ===================================================================

:math:`\\theta` is always the head :math:`(W, b)` alone (last-layer variants, as in
Yeh et al. 2018 and the last-layer TracIn of Pruthi et al. 2020). The gradients are those
of a squared loss, :math:`\\nabla_{w_a, b_a}\\ell_i = \\tfrac{2}{|A|}(Q(x_i,a) -
r_i(a))\\tilde\\varphi_i` and :math:`\\nabla_{w_a, b_a} Q(x, a) = \\tilde\\varphi(x)`, and only
the block of action ``a`` is non-zero. Three facts worth knowing (tested in
``tests/test_baselines.py``):

* The head Hessian is block diagonal, :math:`\\nabla^2_\\theta\\mathcal L = I_{|A|}\\otimes
  \\tfrac{2}{n|A|}\\tilde G`, so without damping the influence function is
  :math:`n\\,\\alpha_i(x)\\,(r_i(a) - Q(x_i, a))`: the exact coefficient times the *residual*
  of case ``i``. At a converged head the residuals are the return noise, which is why IF can
  rank cases very differently from :math:`\\alpha_i r_i(a)`; with ``residuals="returns"``
  (the loss gradient at a zero head) IF *equals* :math:`n\\,\\alpha_i(x) r_i(a)`.
* The Representer decomposition is exact for the L2-regularised head it fits:
  :math:`\\sum_i \\alpha^{rep}_{i,a} k_i(x) = Q^\\lambda(x, a)`. With
  ``residuals="returns"`` it is :math:`1/(\\lambda|A|)` times the inner-product baseline
  with the constant coordinate.
* With a whitened representation (:math:`G = nI_H`, eq. 13) the inner product *is* the exact
  coefficient (eq. 14).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from scipy import linalg

from ._base import Boolean, CaseEstimator, Checked, Constraint, Options, check_returns
from ._ranking import top_k_indices
from ._tsqr import min_norm_svd
from ._validation import (
    as_float_matrix,
    as_query,
    check_action,
    check_action_names,
    check_case_ids,
    check_feature_names,
    check_finite,
    check_k,
    check_nonnegative_scalar,
    check_same_index,
)
from .exceptions import InputError, NotFittedError
from .influence import CaseInfluence, TopCases

if TYPE_CHECKING:  # pragma: no cover
    from .models import CaseNetwork

__all__ = [
    "ExactCoefficient",
    "InfluenceFunction",
    "RepresenterPoint",
    "TracIn",
    "InnerProduct",
    "HeadCheckpoint",
    "METHODS",
    "fit_methods",
    "query_features",
    "method_scores",
]

#: Display names, in the order of the paper's Table 1.
METHODS: tuple[str, ...] = (
    "Ours (alpha)",
    "Representer Point",
    "TracIn",
    "Influence Functions",
    "Inner product",
)

_Residuals = Literal["trained", "returns"]
_Order = Literal["magnitude", "abs", "positive", "negative"]

def _augment(P: np.ndarray) -> np.ndarray:
    return np.hstack([P, np.ones((P.shape[0], 1))])


def _contiguous_phi(Phi: Any) -> tuple[np.ndarray, str]:
    """A finite float64 C-ordered ``Phi`` (n, H) for the baselines' dense algebra."""
    return np.ascontiguousarray(as_float_matrix("Phi", Phi)), "array"


def _psd_solve_matrix(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A^+ B`` for a symmetric PSD ``A``: Cholesky when well conditioned, else pseudo-inverse."""
    w, U = linalg.eigh(A)
    tol = max(w[-1], 0.0) * A.shape[0] * np.finfo(float).eps
    if w[0] > tol and w[-1] / w[0] < 1e12:
        return linalg.cho_solve(linalg.cho_factor(A, lower=True), B)
    keep = w > tol
    Uk = U[:, keep]
    return Uk @ ((Uk.T @ B) / w[keep][:, None])


class _Attribution(CaseEstimator):
    """Common query plumbing: validation, 1-D queries, per-query actions, the query API.

    Subclasses implement ``_prepare`` (validate a query batch), ``_action_scores`` (the
    ``(m, |A|)`` scores of the readout they explain) and ``_contrib`` (the ``(m, n)``
    contributions for one action per query).
    """

    name: str = ""

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_cases_"):
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet. Call .fit(...) before "
                ".scores(...), .contributions(...) or .top_cases(...)."
            )

    def _query(self, phi: Any, stacklevel: int = 4) -> tuple[np.ndarray, bool]:
        """Validated queries; ``stacklevel`` makes a feature-names warning name the line that
        called the public method (4: called from it, 5: through :meth:`_prepare`)."""
        self._check_fitted()
        check_feature_names(self, phi, reset=False, name="phi", stacklevel=stacklevel)
        return as_query("phi", phi, self.n_features_in_)

    def _prepare(self, phi: Any) -> tuple[np.ndarray, bool, int]:
        """(validated queries, 1-D query?, number of queries m)."""
        Q, single = self._query(phi, stacklevel=5)
        return Q, single, Q.shape[0]

    def _action_scores(self, P: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _contrib(self, P: np.ndarray, acts: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _per_action(
        self, Q: np.ndarray, action: Any, kernel: np.ndarray, weights: np.ndarray
    ) -> np.ndarray:
        """``kernel[j] * weights[:, a_j]`` for every query j (kernel (m, n), weights (n, |A|))."""
        acts = check_action(action, self.n_actions_, Q.shape[0])
        if np.all(acts == acts[0]):
            kernel *= weights[:, acts[0]]
            return kernel
        kernel *= weights[:, acts].T
        return kernel

    def _actions(self, P: np.ndarray, m: int, action: Any) -> np.ndarray:
        """One action position per query: the decision of :meth:`scores` for ``None``; a
        position, a name (``action_names_``) or one of either per query otherwise."""
        if action is None:
            return np.argmax(self._action_scores(P), axis=1).astype(np.intp)
        return check_action(
            action, self.n_actions_, m, names=getattr(self, "action_names_", None)
        )

    def scores(self, phi: Any) -> np.ndarray:
        """Action scores :math:`Q(x, a)` of the readout the method explains, shape (m, |A|).

        See the class docstring (and the module's table) for which readout that is; as
        :meth:`cbdt.CaseInfluence.scores`, these are action scores, and the per-case
        attributions are :meth:`contributions`.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations (for :class:`TracIn` of shape (T, m, H) or (T, H)).

        Returns
        -------
        ndarray of shape (m, |A|), or (|A|,) for a 1-D query
        """
        P, single, _ = self._prepare(phi)
        S = self._action_scores(P)
        return S[0] if single else S

    def contributions(self, phi: Any, action: Any = None) -> np.ndarray:
        """Per-case contributions to :math:`Q(x, a)`, shape (m, n) ((n,) for a 1-D query).

        Positive raises the score (see the module docstring for the sign against captum).

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations (for :class:`TracIn` of shape (T, m, H) or (T, H)).
        action : int, str, or array-like of shape (m,), optional
            The action whose score is explained, by position or by name
            (``action_names_``), one for all queries or one per query; default (``None``)
            each query's decision, :math:`\\arg\\max_a` of :meth:`scores`.

        Returns
        -------
        ndarray of shape (m, n), or (n,) for a 1-D query
        """
        P, single, m = self._prepare(phi)
        out = self._contrib(P, self._actions(P, m, action))
        return out[0] if single else out

    def top_cases(
        self,
        phi: Any,
        action: Any = None,
        *,
        k: int = 10,
        order: _Order = "magnitude",
        case_ids: Any = None,
    ) -> TopCases:
        """The ``k`` training cases with the strongest contributions, as
        :meth:`cbdt.CaseInfluence.top_cases`.

        Parameters
        ----------
        phi : array-like
            As in :meth:`contributions`.
        action : int, str, or array-like of shape (m,), optional
            By position or name; default each query's decision (:meth:`scores`).
        k : int, default=10
            Cases per query, ``1 <= k <= n``.
        order : {"magnitude", "positive", "negative"}, default="magnitude"
            Rank by :math:`|c_i|` (``"abs"`` is the same), by :math:`c_i` descending (cases
            that raise the score most) or ascending (that lower it most); ties go to the
            lower case index.
        case_ids : array-like of shape (n,), optional
            Labels of the training cases returned as ``case_ids`` (default ``case_ids_`` of
            the fit, else the positions).

        Returns
        -------
        TopCases
            ``indices``, ``contributions`` (each (m, k), or (k,) for a 1-D query),
            ``case_ids``, ``action``, ``action_name``; unpacks as ``(indices,
            contributions)``.
        """
        if order not in ("magnitude", "abs", "positive", "negative"):
            raise InputError(
                f"order must be 'magnitude', 'positive' or 'negative', got {order!r}."
            )
        self._check_fitted()
        k = check_k(k, self.n_cases_)
        ids = check_case_ids(case_ids, self.n_cases_) if case_ids is not None else \
            getattr(self, "case_ids_", None)
        P, single, m = self._prepare(phi)
        acts = self._actions(P, m, action)
        C = self._contrib(P, acts)
        key = np.abs(C) if order in ("magnitude", "abs") else (C if order == "positive" else -C)
        idx = top_k_indices(key, k)
        vals = np.take_along_axis(C, idx, axis=1)
        labels = idx if ids is None else np.asarray(ids)[idx]
        names = getattr(self, "action_names_", None)
        names = acts if names is None else names[acts]
        order = "magnitude" if order == "abs" else order
        if single:
            return TopCases(idx[0], vals[0], labels[0], int(acts[0]), names[0], None, order)
        return TopCases(idx, vals, labels, acts, names, None, order)


class ExactCoefficient(_Attribution):
    """The exact OLS coefficient as an attribution method (eq. 9-11, 15).

    ``contributions``: :math:`\\psi_i(a, x) = \\alpha_i(x) r_i(a)` with
    :math:`\\alpha(x) = \\tilde\\Phi(\\tilde G + \\lambda M)^{-1}\\tilde\\varphi(x)` from
    :meth:`cbdt.influence.CaseInfluence.coefficients`. ``scores``: the probe's action scores
    :math:`Q(x, a) = \\sum_i \\alpha_i(x) r_i(a)` (``alpha @ R``, eq. 9, computed from the
    readout, eq. 3); the contributions sum to them exactly (Proposition 1), to rounding. The
    sign is that of :math:`\\psi_i`: positive raises the score.

    Parameters
    ----------
    ridge : float, default=0.0
        Probe ridge (eq. 11); 0 is Proposition 1.
    intercept : bool, default=True
        The network head has a bias, so the probe absorbs a constant coordinate (Sec. 2.2).
    solver : {"auto", "cholesky", "lstsq"}, default="auto"
        See :class:`~cbdt.influence.CaseInfluence`.
    precompute : bool, default=True
        ``True``: cache here the *dual matrix* :math:`D = \\tilde\\Phi(\\tilde G +
        \\lambda M)^{-1}` in the (H, n) layout of the inner-product baseline: the probe's
        ``dual_`` where its fit formed one, else read off ``CaseInfluence.coefficients`` at
        the basis vectors (the coefficient is affine in :math:`\\varphi`). A query then costs one (H, n) matrix-vector product, the same
        operation as the inner product. ``False``: no dual matrix; keep the augmented
        training representations :math:`\\tilde\\Phi = [\\Phi, 1]` (n, H+1) and the upper
        triangular factor :math:`R` of a QR of :math:`[\\tilde\\Phi; \\sqrt\\lambda
        M^{1/2}]` (:math:`R^\\top R = \\tilde G + \\lambda M`), and answer each query by
        two triangular solves, :math:`z = R^{-1}R^{-\\top}\\tilde\\varphi(x)`, and one
        matrix-vector product, :math:`\\alpha(x) = \\tilde\\Phi z` (eq. 10-11): the
        per-query solve of the benchmark's ``"Ours (alpha), per-query solve"`` row. With
        ``solver="lstsq"`` the two solves are replaced by the minimum-norm
        :math:`z = W_k S_k^{-2} W_k^\\top\\tilde\\varphi(x)` from the SVD
        :math:`R = U S W^\\top` (the singular values above the rank tolerance of
        :class:`~cbdt.influence.CaseInfluence`). :meth:`scores` is answered by
        ``influence_`` in both cases (that fitted estimator keeps its own cache; the
        coefficients and contributions of ``precompute=False`` never read it).

    Attributes
    ----------
    influence_ : CaseInfluence
        The fitted probe (its ``scores`` are :meth:`scores`).
    """

    name = "Ours (alpha)"

    def __init__(
        self,
        ridge: float = 0.0,
        intercept: bool = True,
        solver: Literal["auto", "cholesky", "lstsq"] = "auto",
        precompute: bool = True,
    ) -> None:
        self.ridge = ridge
        self.intercept = intercept
        self.solver = solver
        self.precompute = precompute

    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "ridge": Checked(check_nonnegative_scalar),
        "intercept": Boolean(),
        "solver": Options("auto", "cholesky", "lstsq", "cholesky_or_lstsq"),
        "precompute": Boolean(),
    }

    def fit(
        self, Phi: Any, R: Any, *, case_ids: Any = None, action_names: Any = None
    ) -> ExactCoefficient:
        """Fit the OLS (ridge) probe on training representations and returns.

        ``case_ids`` and ``action_names`` as in :meth:`cbdt.CaseInfluence.fit` (kept as
        ``case_ids_`` and ``action_names_``; ``action=`` then accepts the names).
        """
        self._validate_params()
        data = self._validate_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                   check_phi=_contiguous_phi)
        Phi, R = data.Phi, data.R
        ci = CaseInfluence(ridge=self.ridge, intercept=self.intercept, solver=self.solver)
        ci.fit(Phi, R)
        self.influence_ = ci
        self.returns_ = ci.returns_
        H = Phi.shape[1]
        self.n_features_in_ = H
        self.n_actions_ = ci.n_actions_
        if self.precompute and hasattr(ci, "dual_"):  # the fit formed the dual matrix
            self._dual = np.ascontiguousarray(ci.dual_.T)  # (H, n)
            self._offset = np.array(ci.dual_offset_)
        elif self.precompute:
            # alpha is affine in phi: D_j = (alpha(t_j e_j) - alpha(0)) / t_j, with t_j the
            # power of two nearest column j's largest |entry|, so that alpha(t_j e_j) and
            # alpha(0) are of the same size (at t_j = 1 the difference cancels to nothing
            # when |Phi| is far from 1); dividing by a power of two is exact
            c0 = ci.coefficients(np.zeros(H))
            top = np.abs(Phi).max(axis=0) if Phi.shape[0] else np.ones(H)
            t = np.where(top > 0, 2.0 ** np.round(np.log2(np.where(top > 0, top, 1.0))), 1.0)
            D = ci.coefficients(np.diag(t)) - c0
            D /= t[:, None]
            self._dual = np.ascontiguousarray(D)  # (H, n)
            self._offset = c0
        else:
            self._dual = None
            self._fit_solve(Phi, ci.solver_)
        self.n_cases_ = ci.n_cases_
        self._finish_fit(data)
        return self

    def _fit_solve(self, Phi: np.ndarray, solver: str) -> None:
        """``precompute=False``: keep :math:`\\tilde\\Phi` and a triangular factor of
        :math:`\\tilde G + \\lambda M` (or its SVD for ``solver="lstsq"``), no dual matrix.

        Exact powers of two keep the factor accurate and finite without changing
        :math:`\\alpha` (it does not depend on the scale of any coordinate, eq. 12): ``Phi``
        is rescaled when its entries would overflow or underflow the factor, and the constant
        column is balanced against the geometric mean of the feature columns' norms. A
        rank-deficient minimum-norm solve undoes the balancing (it depends on the
        coordinates): its minimum norm is that of :math:`[\\Phi, 1]`.
        """
        n, H = Phi.shape
        ridge = float(self.ridge)
        max_abs = float(np.abs(Phi).max()) if Phi.size else 0.0
        scale = 1.0
        if max_abs > 0 and not 2.0**-400 < max_abs < 2.0**400:
            scale = float(2.0 ** -np.round(np.log2(max_abs)))
        feats = Phi * scale if scale != 1.0 else Phi
        ridge_rows = np.sqrt(ridge) * scale * np.eye(H) if ridge > 0 else None
        const = 1.0
        if self.intercept:
            norms = np.sqrt(np.sum(feats**2, axis=0) + (ridge * scale**2 if ridge > 0 else 0.0))
            norms = norms[norms > 0]
            if norms.size:
                const = float(2.0 ** np.round(np.mean(np.log2(norms)) - 0.5 * np.log2(n)))
        Hp = H + int(self.intercept)
        X = np.empty((n, Hp))  # Phi~ in the factor's coordinates
        np.copyto(X[:, :H], feats)
        if self.intercept:
            X[:, H] = const
        Y = X if ridge_rows is None else np.vstack([X, np.c_[ridge_rows, np.zeros((H, Hp - H))]])
        (Rf,) = linalg.qr(Y, mode="r", check_finite=False)
        Rf = np.ascontiguousarray(Rf[:Hp])
        # kept as Phi~^T (H+1, n), C order: the layout of the cached dual matrix (and of the
        # inner product), in which a query's alpha = z^T Phi~^T streams the rows of the
        # memory once (the (n, H+1) layout's GEMV is about twice as slow with OpenBLAS)
        PT = np.ascontiguousarray(X.T)
        PT.setflags(write=False)
        self._phi_aug_t, self._solve_scale, self._solve_const = PT, scale, const
        if solver == "lstsq":  # minimum norm: z = W_k S_k^-2 W_k^T phi~
            _, sv, Wt = linalg.svd(Rf, check_finite=False)
            rank = int(np.sum(sv > float(sv[0]) * max(n, Hp) * np.finfo(float).eps))
            if self.intercept and rank < Hp and const != scale:
                # the minimum norm of the user's coordinates [Phi, 1], not of the balanced
                # [s Phi, t 1] (the same solution only at full column rank)
                _, sk, W, Wr = min_norm_svd(Rf, rank, scale / const,
                                            float(sv[0]) * max(n, Hp) * np.finfo(float).eps)
            else:
                sk, W = sv[:rank], Wt[:rank].T
                Wr = W
            self._gram_factor = None
            self._gram_eig = (np.ascontiguousarray(W), sk**2, np.ascontiguousarray(Wr))
        else:
            self._gram_factor = np.asfortranarray(Rf)
            self._gram_eig = None

    def _alpha_solve(self, Q: np.ndarray) -> np.ndarray:
        """:math:`\\alpha = \\tilde\\Phi\\,(\\tilde G + \\lambda M)^{-1}\\tilde\\varphi`
        for a validated batch, shape (m, n): two triangular solves per query (BLAS ``trsm``
        on the (H+1, m) right-hand sides), then one matrix-vector product (a GEMM for m > 1)
        with :math:`\\tilde\\Phi`."""
        m, H = Q.shape
        Qa = np.empty((m, self._phi_aug_t.shape[0]))
        np.multiply(Q, self._solve_scale, out=Qa[:, :H])
        if self.intercept:
            Qa[:, H] = self._solve_const
        B = Qa.T  # (H+1, m), Fortran order: trsm works on it in place
        if self._gram_factor is not None:
            trsm = linalg.blas.dtrsm
            Rf = self._gram_factor
            Z = trsm(1.0, Rf, B, side=0, lower=0, trans_a=1, overwrite_b=1)  # R^T y = phi~
            Z = trsm(1.0, Rf, Z, side=0, lower=0, trans_a=0, overwrite_b=1)  # R z = y
        else:
            W, w, Wr = self._gram_eig
            Z = W @ ((Wr.T @ B) / w[:, None])
        if m == 1:  # one GEMV
            return (Z[:, 0] @ self._phi_aug_t)[None, :]
        return Z.T @ self._phi_aug_t

    def coefficients(self, phi: Any) -> np.ndarray:
        """:math:`\\alpha(x)`, shape (m, n) ((n,) for a 1-D query)."""
        Q, single = self._query(phi)
        if self._dual is None:
            A = self._alpha_solve(Q)
        else:
            A = Q @ self._dual
            A += self._offset
        return A[0] if single else A

    def _action_scores(self, Q: np.ndarray) -> np.ndarray:
        """The probe's scores :math:`Q(x, a) = \\sum_i\\alpha_i(x) r_i(a)` (eq. 3 = eq. 9)."""
        return self.influence_.scores(Q)

    def _contrib(self, Q: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """:math:`\\psi_i(a, x) = \\alpha_i(x) r_i(a)` (eq. 15), shape (m, n)."""
        if self._dual is None:
            A = self._alpha_solve(Q)
        else:
            A = Q @ self._dual
            A += self._offset
        return self._per_action(Q, acts, A, self.returns_)


class InfluenceFunction(_Attribution):
    """Influence Functions (Koh & Liang 2017) on the head parameters, exact Hessian.

    The effect on :math:`Q(x, a)` of up-weighting training case ``i`` by :math:`\\epsilon`
    in :math:`\\mathcal L`, to first order,

    .. math:: \\mathcal I_i(x, a) = -\\nabla_\\theta Q(x, a)^\\top (\\mathbf H + \\delta I)^{-1}
              \\nabla_\\theta \\ell_i(\\hat\\theta), \\qquad \\mathbf H =
              \\nabla^2_\\theta \\mathcal L = I_{|A|} \\otimes \\tfrac{2}{n|A|}\\tilde G,

    over :math:`\\theta = (W, b)` (all :math:`|A|(H+1)` head parameters): ``contributions``.
    ``scores`` are those of the head :math:`\\hat\\theta` (``head_``) the influence is taken
    at; the contributions do not sum to them. Sign: positive raises the score; captum's
    ``NaiveInfluenceFunction`` with the score as test loss gives :math:`-1/n` times these
    values (its Hessian is that of the summed loss). The head loss is a
    convex quadratic, so :math:`\\mathbf H` is exact and constant; it is positive definite
    when :math:`\\tilde\\Phi` has full column rank. Hence the default ``ridge=0``:
    Koh & Liang's damping exists to make a non-convex Hessian invertible, which is not
    needed here. When :math:`\\tilde G` is singular (e.g. dead ReLU units) the Moore-Penrose
    pseudo-inverse (the :math:`\\delta \\to 0` limit on its range) is used.

    Parameters
    ----------
    ridge : float, default=0.0
        :math:`\\delta \\ge 0` added to the diagonal of :math:`\\mathbf H` (the Hessian of the
        *mean* loss): Koh & Liang's damping, the ridge penalty :math:`\\tfrac\\delta2
        \\lVert\\theta\\rVert^2` added to that loss (the penalty is called ``ridge`` in
        every estimator).
    residuals : {"trained", "returns"}, default="trained"
        ``"trained"``: :math:`\\nabla\\ell_i` at the trained head :math:`\\hat\\theta` (the
        method as defined), residual :math:`r_i(a) - Q(x_i, a)`. ``"returns"``: at
        :math:`\\theta = 0`, residual :math:`r_i(a)` (a sensitivity variant; then
        :math:`\\mathcal I_i = n\\alpha_i(x) r_i(a)` for ``ridge=0``).

    Attributes
    ----------
    head_ : ndarray of shape (H+1, |A|)
        The head :math:`\\hat\\theta` (last row: bias) whose scores ``scores`` returns.
    hessian_block_ : ndarray of shape (H+1, H+1)
        :math:`\\tfrac{2}{n|A|}\\tilde G + \\delta I`, one diagonal block of the head Hessian.
    residuals_ : ndarray of shape (n, |A|)
        The residuals used, :math:`r_i(a) - Q(x_i, a)` (or :math:`r_i(a)`).
    """

    name = "Influence Functions"

    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "ridge": Checked(check_nonnegative_scalar),
        "residuals": Options("trained", "returns"),
    }

    def __init__(self, ridge: float = 0.0, residuals: _Residuals = "trained") -> None:
        self.ridge = ridge
        self.residuals = residuals

    def fit(
        self,
        Phi: Any,
        R: Any,
        weight: Any = None,
        bias: Any = None,
        *,
        case_ids: Any = None,
        action_names: Any = None,
    ) -> InfluenceFunction:
        """Cache :math:`\\tilde\\Phi\\mathbf H_a^{-1}` and the loss-gradient residuals.

        Parameters
        ----------
        Phi : array-like of shape (n, H)
        R : array-like of shape (n, |A|)
        weight, bias : array-like of shape (|A|, H) and (|A|,), optional
            The trained head :math:`\\hat\\theta` (e.g. ``CaseNetwork.head_weight_``,
            ``head_bias_``). Default: the OLS head on ``Phi`` (a converged head).
        case_ids, action_names : optional
            As in :meth:`cbdt.CaseInfluence.fit`; kept as ``case_ids_`` and
            ``action_names_``.
        """
        self._validate_params()
        damping, residuals = float(self.ridge), self.residuals
        data = self._validate_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                   check_phi=_contiguous_phi)
        Phi, R = data.Phi, data.R
        n, H = Phi.shape
        A = R.shape[1]
        Pt = _augment(Phi)
        if weight is None and bias is None:
            theta = np.linalg.lstsq(Pt, R, rcond=None)[0]  # (H+1, |A|)
        elif weight is None or bias is None:
            raise InputError("pass both weight and bias of the trained head, or neither.")
        else:
            W = as_float_matrix("weight", weight)
            b = as_float_matrix("bias", bias, ndim=1)
            if W.shape != (A, H) or b.shape != (A,):
                raise InputError(
                    f"the head must have weight of shape (|A|, H) = ({A}, {H}) and bias of "
                    f"shape ({A},), got {W.shape} and {b.shape}."
                )
            theta = np.vstack([W.T, b[None, :]])
        Hb = (2.0 / (n * A)) * (Pt.T @ Pt) + damping * np.eye(H + 1)
        Hb = 0.5 * (Hb + Hb.T)
        fitted = Pt @ theta
        res = R - fitted if residuals == "trained" else R.copy()
        self.head_ = theta
        self.hessian_block_ = Hb
        self.residuals_ = res
        # contribution = phi~(x)^T Hb^{-1} phi~_i * (2/|A|) res_ia ; cache (H+1, n)
        self._K = np.ascontiguousarray(_psd_solve_matrix(Hb, Pt.T))
        self._c = (2.0 / A) * res
        self.n_cases_, self.n_features_in_, self.n_actions_ = n, H, A
        self._finish_fit(data)
        return self

    def hessian(self) -> np.ndarray:
        """The full head Hessian :math:`I_{|A|}\\otimes` ``hessian_block_``, parameters ordered
        action by action as :math:`(w_1, b_1, w_2, b_2, \\dots)`."""
        self._check_fitted()
        return np.kron(np.eye(self.n_actions_), self.hessian_block_)

    def _action_scores(self, Q: np.ndarray) -> np.ndarray:
        """Scores :math:`\\hat W\\varphi(x) + \\hat b` of the head :math:`\\hat\\theta`."""
        return _augment(Q) @ self.head_

    def _contrib(self, Q: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """:math:`\\mathcal I_i(x, a)` for every training case, shape (m, n)."""
        return self._per_action(Q, acts, _augment(Q) @ self._K, self._c)


class RepresenterPoint(_Attribution):
    """Representer Point Selection (Yeh et al. 2018) for the L2-regularised head.

    Fits the head :math:`\\Theta^\\lambda = \\arg\\min_\\Theta \\frac1n\\sum_i \\ell_i(\\Theta)
    + \\lambda\\lVert\\Theta\\rVert_F^2` on the frozen representation with the constant
    coordinate (the bias is penalised like every weight, so the representer theorem holds
    exactly with the kernel :math:`k(x_i, x) = \\tilde\\varphi_i^\\top\\tilde\\varphi(x) =
    \\varphi_i^\\top\\varphi(x) + 1`). Its stationarity condition gives

    .. math:: Q^\\lambda(x, a) = \\sum_i \\alpha^{rep}_{i,a}\\, k(x_i, x), \\qquad
              \\alpha^{rep}_{i,a} = -\\frac{1}{2\\lambda n}\\frac{\\partial \\ell_i}
              {\\partial Q^\\lambda(x_i, a)} = \\frac{r_i(a) - Q^\\lambda(x_i, a)}{\\lambda n|A|},

    and the contribution of case ``i`` is :math:`\\alpha^{rep}_{i,a} k(x_i, x)`
    (``contributions``; positive raises the score). ``scores`` are those of the regularised
    head, :math:`Q^\\lambda(x, a)`, and the contributions sum to them exactly.

    :math:`\\lambda`: Yeh et al. choose it small enough that the regularised head keeps the
    network's predictions. Here :math:`\\lambda n|A| = c\\cdot\\mathrm{tr}(\\tilde G)/(H+1)`
    with ``relative_ridge`` :math:`c = 10^{-3}` (a thousandth of the mean Gram eigenvalue),
    unless ``ridge`` is given.

    Parameters
    ----------
    ridge : float, optional
        :math:`\\lambda > 0` of the mean-loss objective above (the penalty is called
        ``ridge`` in every estimator).
    relative_ridge : float, default=1e-3
        Used when ``ridge`` is None.
    residuals : {"trained", "returns"}, default="trained"
        ``"trained"``: :math:`\\alpha^{rep}` from the regularised head's residuals (the
        method). ``"returns"``: :math:`\\alpha^{rep}_{i,a} = r_i(a)/(\\lambda n|A|)`
        (sensitivity variant; proportional to the inner product with the constant coordinate).

    Attributes
    ----------
    ridge_ : float
        The :math:`\\lambda` used.
    weight_ : ndarray of shape (H+1, |A|)
        :math:`\\Theta^\\lambda` (last row: bias).
    representer_values_ : ndarray of shape (n, |A|)
        :math:`\\alpha^{rep}_{i,a}`.
    """

    name = "Representer Point"

    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "residuals": Options("trained", "returns"),
    }

    def __init__(
        self,
        ridge: float | None = None,
        relative_ridge: float = 1e-3,
        residuals: _Residuals = "trained",
    ) -> None:
        self.ridge = ridge
        self.relative_ridge = relative_ridge
        self.residuals = residuals

    def fit(
        self, Phi: Any, R: Any, *, case_ids: Any = None, action_names: Any = None
    ) -> RepresenterPoint:
        """Fit the regularised head and cache the representer values (``case_ids`` and
        ``action_names`` as in :meth:`ExactCoefficient.fit`)."""
        self._validate_params()
        residuals = self.residuals
        data = self._validate_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                   check_phi=_contiguous_phi)
        Phi, R = data.Phi, data.R
        n, H = Phi.shape
        A = R.shape[1]
        Pt = _augment(Phi)
        G = Pt.T @ Pt
        if self.ridge is None:
            c = check_nonnegative_scalar("relative_ridge", self.relative_ridge)
            if c == 0:
                raise InputError("relative_ridge must be > 0 (the representer theorem needs it).")
            lam = c * np.trace(G) / (H + 1) / (n * A)
        else:
            lam = check_nonnegative_scalar("ridge", self.ridge)
            if lam == 0:
                raise InputError("ridge must be > 0 (the representer theorem needs it).")
        rho = lam * n * A
        theta = linalg.cho_solve(linalg.cho_factor(G + rho * np.eye(H + 1)), Pt.T @ R)
        res = R - Pt @ theta if residuals == "trained" else R.copy()
        self.ridge_ = float(lam)
        self.weight_ = theta
        self.representer_values_ = res / rho
        self._PtT = np.ascontiguousarray(Pt.T)  # (H+1, n)
        self.n_cases_, self.n_features_in_, self.n_actions_ = n, H, A
        self._finish_fit(data)
        return self

    def head_scores(self, phi: Any) -> np.ndarray:
        """Scores :math:`Q^\\lambda(x, a)` of the regularised head, shape (m, |A|); the same
        as :meth:`scores`."""
        return self.scores(phi)

    def _action_scores(self, Q: np.ndarray) -> np.ndarray:
        return _augment(Q) @ self.weight_

    def _contrib(self, Q: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """:math:`\\alpha^{rep}_{i,a}k(x_i, x)` for every training case, shape (m, n)."""
        return self._per_action(Q, acts, _augment(Q) @ self._PtT, self.representer_values_)


@dataclass(frozen=True)
class HeadCheckpoint:
    """What last-layer TracIn needs from one training checkpoint :math:`t`.

    Attributes
    ----------
    features : ndarray of shape (n, H)
        :math:`\\varphi_t(x_i)` of the training cases at this checkpoint.
    weight : ndarray of shape (|A|, H)
        Head weights :math:`W_t`.
    bias : ndarray of shape (|A|,)
        Head bias :math:`b_t`.
    lr : float
        Learning rate :math:`\\eta_t`.
    """

    features: np.ndarray
    weight: np.ndarray
    bias: np.ndarray
    lr: float


class TracIn(_Attribution):
    """TracIn-CP (Pruthi et al. 2020) restricted to the head parameters.

    .. math:: \\mathrm{TracIn}_i(x, a) = \\sum_t \\eta_t\\, \\nabla_\\theta Q_t(x, a)^\\top
              \\big(-\\nabla_\\theta \\ell_i(\\theta_t)\\big) = \\sum_t \\eta_t
              \\tfrac{2}{|A|}\\big(r_i(a) - Q_t(x_i, a)\\big)\\big(\\varphi_t(x_i)^\\top
              \\varphi_t(x) + 1\\big),

    the first-order change of :math:`Q(x, a)` produced by the gradient steps on case ``i``
    (the test "loss" is the score itself, and the sign is flipped from Pruthi et al.'s
    loss-loss form so that a positive value raises the score: captum's ``TracInCP`` with the
    score as test loss gives exactly minus these values). These are the ``contributions``;
    ``scores`` are those of the head at the last checkpoint, :math:`W_T\\varphi_T(x) + b_T`
    (the trained network when, as in :class:`cbdt.models.CaseNetwork`, the last checkpoint
    ends the run); the contributions do not sum to them. The representation
    :math:`\\varphi_t` of *that* checkpoint is used for both the training case and the query,
    so queries need :math:`\\varphi_t(x)` at every checkpoint: every query takes an array of
    shape (T, m, H) (:meth:`cbdt.models.CaseNetwork.represent_checkpoints`). With Adam the
    :math:`\\eta_t` are the nominal learning rates, as in Pruthi et al.; the constant
    :math:`1/n` of a full-batch step is dropped (it changes no ranking or correlation).

    Attributes
    ----------
    n_checkpoints_ : int
    head_weight_, head_bias_ : ndarray of shape (|A|, H) and (|A|,)
        The head :math:`(W_T, b_T)` of the last checkpoint (``scores``).
    residuals_ : ndarray of shape (T, n, |A|)
        :math:`r_i(a) - Q_t(x_i, a)`.
    """

    name = "TracIn"

    def fit(
        self,
        checkpoints: Sequence[HeadCheckpoint],
        R: Any,
        *,
        case_ids: Any = None,
        action_names: Any = None,
    ) -> TracIn:
        """Cache :math:`\\tilde\\varphi_t(x_i)` and :math:`\\eta_t\\tfrac{2}{|A|}(r_i(a) - Q_t(x_i, a))`
        (``action_names`` as in :meth:`ExactCoefficient.fit`)."""
        R_in = R
        if not isinstance(checkpoints, Sequence) or len(checkpoints) == 0:
            raise InputError("checkpoints must be a non-empty sequence of HeadCheckpoint.")
        R = check_returns(R, int(np.shape(R)[0]) if np.ndim(R) else 0, stacklevel=2)
        n, A = R.shape
        feats, coefs, res_all = [], [], []
        H = None
        for t, ck in enumerate(checkpoints):
            if not isinstance(ck, HeadCheckpoint):
                raise InputError(f"checkpoints[{t}] is not a HeadCheckpoint.")
            check_same_index(ck.features, R_in, x_name=f"checkpoints[{t}].features")
            P = as_float_matrix(f"checkpoints[{t}].features", ck.features)
            W = as_float_matrix(f"checkpoints[{t}].weight", ck.weight)
            b = as_float_matrix(f"checkpoints[{t}].bias", ck.bias, ndim=1)
            H = P.shape[1] if H is None else H
            if P.shape != (n, H) or W.shape != (A, H) or b.shape != (A,):
                raise InputError(
                    f"checkpoint {t}: features {P.shape}, weight {W.shape} and bias {b.shape} "
                    f"do not match n = {n}, H = {H}, |A| = {A}."
                )
            lr = check_nonnegative_scalar(f"checkpoints[{t}].lr", ck.lr)
            res = R - (P @ W.T + b)
            feats.append(_augment(P).T)  # (H+1, n)
            coefs.append(lr * (2.0 / A) * res)
            res_all.append(res)
        self._F = np.ascontiguousarray(np.stack(feats))  # (T, H+1, n)
        self._C = np.ascontiguousarray(np.stack(coefs))  # (T, n, A)
        self.residuals_ = np.stack(res_all)
        self.head_weight_ = np.array(W, dtype=np.float64)
        self.head_bias_ = np.array(b, dtype=np.float64)
        self.n_checkpoints_ = len(checkpoints)
        self.n_cases_, self.n_features_in_, self.n_actions_ = n, int(H), A
        self.case_ids_ = check_case_ids(case_ids, n, checkpoints[-1].features)
        self.action_names_ = check_action_names(action_names, A, R_in)
        return self

    @classmethod
    def from_network(cls, network: CaseNetwork, X_train: Any, R_train: Any) -> TracIn:
        """Build the checkpoints from :attr:`cbdt.models.CaseNetwork.checkpoints_` and fit."""
        cks = [
            HeadCheckpoint(
                network.represent(X_train, checkpoint=t), c.head_weight, c.head_bias, c.lr
            )
            for t, c in enumerate(network.checkpoints_)
        ]
        return cls().fit(cks, R_train)

    def _prepare(self, phi: Any) -> tuple[np.ndarray, bool, int]:
        """Validate queries at every checkpoint: (T, m, H) or (T, H)."""
        self._check_fitted()
        P = np.asarray(phi)
        if P.dtype.kind not in "biuf":
            raise InputError(f"phi must be a real array, got dtype {P.dtype}.")
        single = P.ndim == 2
        if single:
            P = P[:, None, :]
        T = self.n_checkpoints_
        if P.ndim != 3 or P.shape[0] != T or P.shape[2] != self.n_features_in_:
            raise InputError(
                f"TracIn queries need phi_t(x) at all T = {T} checkpoints: shape (T, m, H) = "
                f"({T}, m, {self.n_features_in_}) or (T, H); got {P.shape}. Use "
                "CaseNetwork.represent_checkpoints(X)."
            )
        P = np.asarray(P, dtype=np.float64)
        check_finite("phi", P)
        return P, single, P.shape[1]

    def _action_scores(self, P: np.ndarray) -> np.ndarray:
        """Scores :math:`W_T\\varphi_T(x) + b_T` of the last checkpoint's head."""
        return P[-1] @ self.head_weight_.T + self.head_bias_

    def _contrib(self, P: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """TracIn contributions, shape (m, n), for queries P of shape (T, m, H)."""
        T, m = P.shape[0], P.shape[1]
        Pt = np.concatenate([P, np.ones((T, m, 1))], axis=2)  # (T, m, H+1)
        K = np.matmul(Pt, self._F)  # (T, m, n)
        if np.all(acts == acts[0]):
            return np.einsum("tmn,tn->mn", K, self._C[:, :, acts[0]])
        return np.einsum("tmn,tnm->mn", K, self._C[:, :, acts])


class InnerProduct(_Attribution):
    """Inner-product baseline, the sufficient similarity regime of Sec. 3.3 (eq. 14).

    Weight :math:`w_i(x) = \\varphi(x)^\\top\\varphi_i / n` (no constant coordinate: this is
    eq. 14 literally), contribution :math:`w_i(x) r_i(a)` (``contributions``; positive raises
    the score). ``scores``:
    the weights times the returns, :math:`\\sum_i w_i(x) r_i(a) =
    \\varphi(x)^\\top\\Phi^\\top R/n` (``weights @ R``), the sum of the contributions; a
    readout of the data only when :math:`G = nI_H`. It equals the exact coefficient
    when :math:`G = nI_H` (eq. 13), e.g. after ZCA whitening
    (:func:`cbdt.geometry.zca_whitening`) of a centred representation without intercept.
    """

    name = "Inner product"

    def fit(
        self, Phi: Any, R: Any, *, case_ids: Any = None, action_names: Any = None
    ) -> InnerProduct:
        """Cache :math:`\\Phi^\\top / n` and the returns (``case_ids`` and ``action_names``
        as in :meth:`ExactCoefficient.fit`)."""
        data = self._validate_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                   check_phi=_contiguous_phi)
        Phi, R = data.Phi, data.R
        n, H = Phi.shape
        self._PT = np.ascontiguousarray(Phi.T / n)
        self._PTR = self._PT @ R  # (H, |A|): scores = phi(x)^T Phi^T R / n
        self.returns_ = R
        self.n_cases_, self.n_features_in_, self.n_actions_ = n, H, R.shape[1]
        self._finish_fit(data)
        return self

    def weights(self, phi: Any) -> np.ndarray:
        """:math:`\\varphi(x)^\\top\\varphi_i / n`, shape (m, n)."""
        Q, single = self._query(phi)
        W = Q @ self._PT
        return W[0] if single else W

    def _action_scores(self, Q: np.ndarray) -> np.ndarray:
        """:math:`\\sum_i w_i(x) r_i(a) = \\varphi(x)^\\top\\Phi^\\top R / n`, shape (m, |A|)."""
        return Q @ self._PTR

    def _contrib(self, Q: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """:math:`\\varphi(x)^\\top\\varphi_i\\, r_i(a) / n`, shape (m, n)."""
        return self._per_action(Q, acts, Q @ self._PT, self.returns_)


# ---------------------------------------------------------------------- network helpers
def fit_methods(
    network: CaseNetwork,
    X_train: Any,
    R_train: Any,
    *,
    probe_ridge: float = 0.0,
    probe_solver: Literal["auto", "cholesky", "lstsq"] = "auto",
    residuals: _Residuals = "trained",
    influence_ridge: float = 0.0,
    relative_ridge: float = 1e-3,
) -> dict[str, _Attribution]:
    """Fit all five methods of Table 1 on a trained network's last layer.

    Parameters
    ----------
    network : CaseNetwork
        Fitted network (its head is the IF's :math:`\\hat\\theta`, its checkpoints TracIn's).
    X_train, R_train : array-like
        The network's training problems and returns.
    probe_ridge, probe_solver
        For :class:`ExactCoefficient`.
    residuals
        For :class:`InfluenceFunction` and :class:`RepresenterPoint`.
    influence_ridge, relative_ridge
        ``ridge`` of :class:`InfluenceFunction` and ``relative_ridge`` of
        :class:`RepresenterPoint`.

    Returns
    -------
    dict
        Method name (:data:`METHODS`) to fitted method, in Table 1 order.
    """
    check_same_index(X_train, R_train, x_name="X_train", r_name="R_train")
    Phi = network.represent(X_train)
    R = as_float_matrix("R_train", R_train, allow_1d=True)
    methods: dict[str, _Attribution] = {
        ExactCoefficient.name: ExactCoefficient(ridge=probe_ridge, solver=probe_solver).fit(Phi, R),
        RepresenterPoint.name: RepresenterPoint(relative_ridge=relative_ridge, residuals=residuals).fit(
            Phi, R
        ),
        TracIn.name: TracIn.from_network(network, X_train, R),
        InfluenceFunction.name: InfluenceFunction(ridge=influence_ridge, residuals=residuals).fit(
            Phi, R, weight=network.head_weight_, bias=network.head_bias_
        ),
        InnerProduct.name: InnerProduct().fit(Phi, R),
    }
    return methods


def query_features(method: _Attribution, network: CaseNetwork, X: Any) -> np.ndarray:
    """The query representation a method needs: :math:`\\varphi(x)` (m, H), or for TracIn
    :math:`\\varphi_t(x)` at every checkpoint (T, m, H)."""
    if isinstance(method, TracIn):
        return network.represent_checkpoints(X)
    return network.represent(X)


def method_scores(
    methods: dict[str, _Attribution], network: CaseNetwork, X: Any, action: Any = None
) -> dict[str, np.ndarray]:
    """Contributions of every method for queries ``X`` (raw inputs), each (m, n).

    ``action=None`` explains, per method, the decision of the readout it explains
    (each method's ``contributions``)."""
    phi = network.represent(X)
    phi_t = None
    out = {}
    for name, meth in methods.items():
        if isinstance(meth, TracIn):
            if phi_t is None:
                phi_t = network.represent_checkpoints(X)
            out[name] = meth.contributions(phi_t, action)
        else:
            out[name] = meth.contributions(phi, action)
    return out
