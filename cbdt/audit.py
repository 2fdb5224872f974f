"""Case-influence audit signals (Sec. 4, eq. 15-20).

All functions take contributions :math:`\\psi_i(a, x)` (eq. 15) of one action per query as an
``(m, n)`` array (one row per query, one column per training case) and are vectorised over the
queries. :func:`audit_signals` computes everything for any fitted case-influence estimator
(:class:`~cbdt.CaseInfluence`, :class:`~cbdt.NystromCaseInfluence`, the torch bridge),
through its public ``scores`` and ``top_cases`` only, with the same code as their
``explain``.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from ._ranking import top_k_indices
from ._signals import (
    case_account,
    check_case_actions,
    check_eps,
    entropy,
    label_like,
    top_stats,
)
from ._validation import as_float_matrix, check_k, check_nonnegative_scalar

__all__ = [
    "case_optimal_actions",
    "top_k_cases",
    "influence_distribution",
    "influence_entropy",
    "top_action_distribution",
    "gini_disagreement",
    "risk_score",
    "audit_signals",
    "label_like_returns",
]


def case_optimal_actions(R: Any) -> np.ndarray:
    """Case-optimal actions :math:`a_i^* = \\arg\\max_a r_i(a)` (Sec. 4 (ii)).

    Parameters
    ----------
    R : array-like of shape (n, |A|)
        Training returns.

    Returns
    -------
    ndarray of int of shape (n,)
        Ties go to the lowest action index.
    """
    R = as_float_matrix("R", R)
    return np.argmax(R, axis=1)


def _psi_2d(psi: Any) -> tuple[np.ndarray, bool]:
    P = as_float_matrix("psi", psi, allow_1d=True)
    single = P.ndim == 1
    return (P[None, :] if single else P), single


def top_k_cases(psi: Any, k: int = 10) -> np.ndarray:
    """Indices :math:`I_k(x, a)` of the ``k`` largest :math:`|\\psi_i(a, x)|` per query.

    Strongest first; ties go to the lower case index.

    Parameters
    ----------
    psi : array-like of shape (m, n) or (n,)
        Contributions :math:`\\psi_i(a, x)` (eq. 15) of one action per query, or coefficients
        :math:`\\alpha(x)` for the coefficient ranking.
    k : int, default=10
        Number of cases, ``1 <= k <= n``.

    Returns
    -------
    ndarray of int of shape (m, k), or (k,) for a 1-D ``psi``
    """
    P, single = _psi_2d(psi)
    k = check_k(k, P.shape[1])
    idx = top_k_indices(np.abs(P), k)
    return idx[0] if single else idx


def _top_k_action_stats(
    W: np.ndarray, a: np.ndarray, n_actions: int, k: int, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One top-k pass: :math:`\\pi_k` (eq. 16), :math:`q_x` (eq. 18) and the top-k indices."""
    mass = np.abs(W)
    idx = top_k_indices(mass, k)
    pi, q = top_stats(np.take_along_axis(mass, idx, axis=1), a[idx], n_actions, k, eps)
    return pi, q, idx


def influence_distribution(
    psi: Any, case_actions: Any, n_actions: int, *, k: int = 10, eps: float = 1e-12
) -> np.ndarray:
    """Top-k absolute-mass action distribution :math:`\\pi_k(b \\mid x, a)` (eq. 16).

    .. math:: \\pi_k(b\\mid x,a) = \\frac{\\sum_{i\\in I_k} m_i\\,\\mathbf 1\\{a_i^*=b\\}
              + \\varepsilon/|A|}{\\sum_{i\\in I_k} m_i + \\varepsilon},
              \\qquad m_i = |\\psi_i(a, x)|.

    Parameters
    ----------
    psi : array-like of shape (m, n) or (n,)
        Contributions of the inspected action. Passing coefficients :math:`\\alpha(x)`
        instead gives the coefficient-ranked variant (``rank_by="coefficient"`` of
        :func:`audit_signals`): top set and masses by :math:`|\\alpha_i(x)|`.
    case_actions : array-like of int of shape (n,)
        Case-optimal actions :math:`a_i^*`.
    n_actions : int
        :math:`|A|`.
    k : int, default=10
        Size of the top set :math:`I_k`.
    eps : float, default=1e-12
        The symmetric smoothing :math:`\\varepsilon > 0` of eq. 16. ``0`` gives the limit
        :math:`\\varepsilon \\to 0`: the mass shares of the top-k cases, and the uniform
        distribution where their mass is zero. With :math:`\\varepsilon > 0` the entropy of a
        top-k set whose cases all favour one action is not 0 but a floor of order
        :math:`(\\varepsilon/M)\\log(M/\\varepsilon)` (``M`` the top-k mass), which orders
        such queries by their mass; ranking-based evaluations (AUC) should use the limit.

    Returns
    -------
    ndarray of shape (m, |A|), or (|A|,); rows sum to one
    """
    P, single = _psi_2d(psi)
    a = check_case_actions(case_actions, P.shape[1], int(n_actions))
    k = check_k(k, P.shape[1])
    eps = check_eps(eps)
    pi, _, _ = _top_k_action_stats(P, a, int(n_actions), k, eps)
    return pi[0] if single else pi


def influence_entropy(
    psi: Any, case_actions: Any, n_actions: int, *, k: int = 10, eps: float = 1e-12
) -> np.ndarray:
    """Influence entropy :math:`H_\\alpha(x, a) = -\\sum_b \\pi_k \\log \\pi_k` (eq. 17).

    Natural logarithm; :math:`0 \\le H_\\alpha \\le \\log|A|`. Parameters as in
    :func:`influence_distribution`.

    Returns
    -------
    ndarray of shape (m,), or a float for a 1-D ``psi``
    """
    pi = np.atleast_2d(influence_distribution(psi, case_actions, n_actions, k=k, eps=eps))
    H = entropy(pi)
    return H[0] if np.ndim(psi) == 1 else H


def top_action_distribution(
    psi: Any, case_actions: Any, n_actions: int, *, k: int = 10
) -> np.ndarray:
    """Count distribution :math:`q_x(b)` of case-optimal actions among the top-k (eq. 18).

    Eq. 18 uses :math:`T_{10}(x) = I_{10}(x, a_x)`, i.e. ``k = 10`` and the contributions of
    the selected action :math:`a_x`.

    Returns
    -------
    ndarray of shape (m, |A|), or (|A|,)
    """
    P, single = _psi_2d(psi)
    a = check_case_actions(case_actions, P.shape[1], int(n_actions))
    k = check_k(k, P.shape[1])
    idx = top_k_indices(np.abs(P), k)
    q = (a[idx][:, :, None] == np.arange(int(n_actions))).sum(axis=1) / k
    return q[0] if single else q


def gini_disagreement(psi: Any, case_actions: Any, n_actions: int, *, k: int = 10
                      ) -> np.ndarray:
    """Gini disagreement :math:`D_{Gini}(x) = 1 - \\sum_b q_x(b)^2` (eq. 19).

    :math:`0 \\le D_{Gini} \\le 1 - 1/|A|` (the upper bound is reached only when ``k`` is a
    multiple of :math:`|A|`).

    Parameters
    ----------
    psi : array-like of shape (m, n) or (n,)
        Contributions of the audited action per query (eq. 15).
    case_actions : array-like of int of shape (n,)
        Case-optimal actions :math:`a_i^*`.
    n_actions : int
        :math:`|A|`.
    k : int, default=10
        Size of the top set :math:`T_k` (eq. 18 fixes 10).

    Returns
    -------
    ndarray of shape (m,), or a float for a 1-D ``psi``
    """
    q = np.atleast_2d(top_action_distribution(psi, case_actions, n_actions, k=k))
    D = 1.0 - (q**2).sum(axis=1)
    return D[0] if np.ndim(psi) == 1 else D


def risk_score(
    psi_selected: Any,
    case_actions: Any,
    n_actions: int,
    *,
    k: int = 10,
    gamma: float = 1.0,
    eps: float = 1e-12,
) -> np.ndarray:
    """Case-influence risk score :math:`O_\\alpha(x) = H_\\alpha(x, a_x) + \\gamma D_{Gini}(x)`.

    Eq. 20, with the paper's :math:`\\gamma = 1` by default. ``psi_selected`` must hold the
    contributions of the readout's selected action :math:`a_x = \\arg\\max_a Q(x, a)`; the same
    top-k set (``k = 10``, eq. 18) is used for both terms.

    Parameters
    ----------
    psi_selected : array-like of shape (m, n) or (n,)
        Contributions :math:`\\psi_i(a_x, x)` of the selected action (eq. 15).
    case_actions : array-like of int of shape (n,)
        Case-optimal actions :math:`a_i^*`.
    n_actions : int
        :math:`|A|`.
    k : int, default=10
        Top-k size of eq. 16-18 (keyword-only, as ``gamma`` and ``eps``: every signal
        function takes them in the order ``k, gamma, eps``).
    gamma : float, default=1.0
        Weight :math:`\\gamma \\ge 0` of the Gini term.
    eps : float, default=1e-12
        Smoothing of eq. 16 (``0``: the limit, see :func:`influence_distribution`).

    Returns
    -------
    ndarray of shape (m,), or a float for a 1-D ``psi_selected``
    """
    gamma = check_nonnegative_scalar("gamma", gamma)
    H = influence_entropy(psi_selected, case_actions, n_actions, k=k, eps=eps)
    D = gini_disagreement(psi_selected, case_actions, n_actions, k=k)
    return H + gamma * D


def label_like_returns(R: Any) -> str | None:
    """Why contribution-ranked entropy and Gini are uninformative for ``R``, or ``None``.

    With returns that are non-zero only at a case's own optimal action (one-hot class labels
    :math:`r_i(a) = \\mathbf 1\\{y_i = a\\}`, or classical CBDT cases
    :math:`u(r, a) = r\\,\\mathbf 1\\{a = a_c\\}`), the contribution
    :math:`\\psi_i(a, x) = \\alpha_i(x) r_i(a)` (eq. 15) vanishes for every case whose
    case-optimal action is not ``a``. The top-k cases by :math:`|\\psi_i(a, x)|` (eq. 16, 18)
    then all carry the label ``a`` (as long as at least ``k`` cases do), so influence entropy
    (eq. 17) and Gini disagreement (eq. 19) are 0 for every query.

    Parameters
    ----------
    R : array-like of shape (n, |A|)

    Returns
    -------
    str or None
        A sentence naming the condition found, ``None`` when the returns are not degenerate.
    """
    R = as_float_matrix("R", R, allow_1d=True)
    return label_like(R, None if R.ndim == 1 or R.shape[1] == 1 else np.argmax(R, axis=1))


def audit_signals(
    estimator: Any,
    phi: Any,
    action: Any = None,
    *,
    k: int = 10,
    gamma: float = 1.0,
    eps: float = 1e-12,
    rank_by: Literal["contribution", "coefficient"] = "contribution",
    case_actions: Any = None,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """Every Sec. 4 signal for many queries, for any case-influence estimator.

    Works through the estimator's public methods only (``scores`` and ``top_cases``), so
    :class:`~cbdt.CaseInfluence`, :class:`~cbdt.NystromCaseInfluence` and the torch bridge
    all answer it; the signals are computed by the same code as their ``explain``.

    Parameters
    ----------
    estimator : CaseInfluence, NystromCaseInfluence or TorchCaseInfluence
        A fitted decomposition.
    phi : array-like of shape (m, H)
        Query representations.
    action : int, str, or array-like of shape (m,), optional
        The audited action :math:`a_x` of each query, by position or by name
        (``action_names_``). Default: the readout's selected action
        :math:`\\arg\\max_a Q(x, a)` (eq. 20). Pass e.g. a network's own decisions to
        audit those.
    k : int, default=10
        Top-k size of eq. 16-18.
    gamma : float, default=1.0
        Weight of the Gini term in eq. 20.
    eps : float, default=1e-12
        Smoothing of eq. 16; ``0`` is the limit :math:`\\varepsilon \\to 0`.
    rank_by : {"contribution", "coefficient"}, default="contribution"
        How the top-k set :math:`I_k` and its masses are formed. ``"contribution"`` is the
        paper's eq. 16/18: rank by :math:`|\\psi_i(a_x, x)|` with masses
        :math:`|\\psi_i|`. ``"coefficient"`` ranks by :math:`|\\alpha_i(x)|` with masses
        :math:`|\\alpha_i(x)|`: the cases the readout leans on, whatever their return for
        :math:`a_x`. The two coincide when every :math:`|r_i(a_x)|` is equal; the coefficient
        variant stays informative for label-like returns (see :func:`label_like_returns`).
    case_actions : array-like of int of shape (n,), optional
        Case-optimal actions (positions); default ``case_optimal_actions(estimator.returns_)``.
    batch_size : int, optional
        Queries per call of ``top_cases``. Default: all at once; the exact estimator's fused
        top-k scan forms the contributions in cache-sized blocks, so memory is ``O(m k)``.

    Returns
    -------
    pandas.DataFrame
        One row per query: ``action`` (audited :math:`a_x`, by name), ``score``
        (:math:`Q(x, a_x)`), ``margin`` (the readout's best minus second-best score),
        ``entropy`` (:math:`H_\\alpha(x, a_x)`), ``gini`` (:math:`D_{Gini}`), ``risk``
        (:math:`O_\\alpha`).

    Warns
    -----
    DegenerateAuditWarning
        With ``rank_by="contribution"`` when the returns are label-like or have one action
        (:func:`label_like_returns`): entropy and Gini are then 0 by construction.
    """
    *_, signals = case_account(
        estimator, phi, action, k=k, rank_by=rank_by, case_ids=None,
        case_actions=case_actions, gamma=gamma, eps=eps, batch_size=batch_size,
        caller="audit_signals",
    )
    return signals
