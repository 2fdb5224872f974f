"""Case-influence audit signals (Sec. 4, eq. 15-20).

All functions take contributions :math:`\\psi_i(a, x)` (eq. 15) of one action per query as an
``(m, n)`` array (one row per query, one column per training case) and are vectorised over the
queries. :func:`audit_signals` computes everything for any fitted case-influence estimator
(:class:`~cbdt.CaseInfluence`, :class:`~cbdt.NystromCaseInfluence`, the torch bridge),
through its public ``scores`` and ``top_cases`` only, with the same code as their
``explain``.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.special import entr

from ._ranking import top_k_indices
from ._validation import as_float_matrix, check_k, check_nonnegative_scalar
from .exceptions import DegenerateAuditWarning, InputError

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


# (weak reference to a fitted estimator's read-only returns_, a*, label-like verdict): the
# case-optimal actions are computed once per fit, not at every explain/audit_signals call
_RETURNS_CACHE: dict[int, tuple[Any, np.ndarray, str | None]] = {}


def _returns_facts(R: np.ndarray) -> tuple[np.ndarray, str | None]:
    """Case-optimal actions of ``R`` and why its contribution signals are degenerate (or
    None); cached while ``R`` is a read-only array (a fitted estimator's ``returns_``)."""
    import weakref

    key = id(R)
    hit = _RETURNS_CACHE.get(key)
    if hit is not None and hit[0]() is R:
        return hit[1], hit[2]
    a_star = np.argmax(R, axis=1)
    facts = a_star, _label_like(R, a_star)
    if isinstance(R, np.ndarray) and not R.flags.writeable:
        if len(_RETURNS_CACHE) >= 8:
            _RETURNS_CACHE.pop(next(iter(_RETURNS_CACHE)))
        a_star.setflags(write=False)
        _RETURNS_CACHE[key] = (weakref.ref(R), *facts)
    return facts


def _psi_2d(psi: Any) -> tuple[np.ndarray, bool]:
    P = as_float_matrix("psi", psi, allow_1d=True)
    single = P.ndim == 1
    return (P[None, :] if single else P), single


def _check_case_actions(case_actions: Any, n: int, n_actions: int) -> np.ndarray:
    a = np.asarray(case_actions)
    if a.ndim != 1 or a.dtype.kind not in "iu" or a.shape[0] != n:
        raise InputError(
            f"case_actions must be an integer array of length n = {n} (the case-optimal action "
            f"of every training case, see case_optimal_actions); got shape {a.shape}, dtype "
            f"{a.dtype}."
        )
    if n_actions < 1:
        raise InputError(f"n_actions must be >= 1, got {n_actions}.")
    if a.size and (a.min() < 0 or a.max() >= n_actions):
        raise InputError(
            f"case_actions must lie in 0..{n_actions - 1} (n_actions = {n_actions}); found "
            f"{int(a.min())}..{int(a.max())}."
        )
    return a.astype(np.intp)


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
    pi, q = _top_stats(np.take_along_axis(mass, idx, axis=1), a[idx], n_actions, k, eps)
    return pi, q, idx


def _top_stats(
    m_top: np.ndarray, a_top: np.ndarray, n_actions: int, k: int, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """:math:`\\pi_k` (eq. 16) and :math:`q_x` (eq. 18) from the top-k masses (m, k) and the
    case-optimal actions of those cases (m, k)."""
    votes = a_top[:, :, None] == np.arange(n_actions)  # (m, k, |A|)
    num = np.einsum("mk,mkb->mb", m_top, votes)
    total = m_top.sum(axis=1, keepdims=True)
    if eps > 0:
        pi = (num + eps / n_actions) / (total + eps)
    else:  # the limit eps -> 0: the mass shares, uniform where the top-k mass is zero
        total = num.sum(axis=1, keepdims=True)  # a one-action row is then exactly (0.., 1, ..0)
        pi = np.divide(num, total, out=np.full_like(num, 1.0 / n_actions), where=total > 0)
    q = votes.sum(axis=1) / k
    return pi, q


def _signal_table(
    S: np.ndarray, acts: np.ndarray, ent: np.ndarray, gini: np.ndarray, gamma: float
) -> pd.DataFrame:
    """Per-query signals: audited action, its score, the readout margin (top-1 minus top-2
    score; NaN with one action), entropy, Gini and risk ``entropy + gamma * Gini`` (eq. 20)."""
    m, n_actions = S.shape
    srt = np.sort(S, axis=1)
    margin = srt[:, -1] - srt[:, -2] if n_actions > 1 else np.full(m, np.nan)
    return pd.DataFrame(
        {
            "action": acts,
            "score": S[np.arange(m), acts],
            "margin": margin,
            "entropy": ent,
            "gini": gini,
            "risk": ent + gamma * gini,
        }
    )


def _top_signals(
    m_top: np.ndarray, a_top: np.ndarray, n_actions: int, k: int, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Entropy (eq. 17) and Gini (eq. 19) from the top-k masses and their cases' actions."""
    pi, q = _top_stats(m_top, a_top, n_actions, k, eps)
    return _entropy(pi), 1.0 - (q**2).sum(axis=1)


def influence_distribution(
    psi: Any, case_actions: Any, n_actions: int, k: int = 10, eps: float = 1e-12
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
    a = _check_case_actions(case_actions, P.shape[1], int(n_actions))
    k = check_k(k, P.shape[1])
    eps = _check_eps(eps)
    pi, _, _ = _top_k_action_stats(P, a, int(n_actions), k, eps)
    return pi[0] if single else pi


def _check_eps(eps: Any) -> float:
    return check_nonnegative_scalar("eps", eps)


def _entropy(pi: np.ndarray) -> np.ndarray:
    """Row entropies with :math:`0 \\log 0 = 0` (natural log)."""
    return entr(pi).sum(axis=1)


def influence_entropy(
    psi: Any, case_actions: Any, n_actions: int, k: int = 10, eps: float = 1e-12
) -> np.ndarray:
    """Influence entropy :math:`H_\\alpha(x, a) = -\\sum_b \\pi_k \\log \\pi_k` (eq. 17).

    Natural logarithm; :math:`0 \\le H_\\alpha \\le \\log|A|`. Parameters as in
    :func:`influence_distribution`.

    Returns
    -------
    ndarray of shape (m,), or a float for a 1-D ``psi``
    """
    pi = np.atleast_2d(influence_distribution(psi, case_actions, n_actions, k, eps))
    H = _entropy(pi)
    return H[0] if np.ndim(psi) == 1 else H


def top_action_distribution(
    psi: Any, case_actions: Any, n_actions: int, k: int = 10
) -> np.ndarray:
    """Count distribution :math:`q_x(b)` of case-optimal actions among the top-k (eq. 18).

    Eq. 18 uses :math:`T_{10}(x) = I_{10}(x, a_x)`, i.e. ``k = 10`` and the contributions of
    the selected action :math:`a_x`.

    Returns
    -------
    ndarray of shape (m, |A|), or (|A|,)
    """
    P, single = _psi_2d(psi)
    a = _check_case_actions(case_actions, P.shape[1], int(n_actions))
    k = check_k(k, P.shape[1])
    idx = top_k_indices(np.abs(P), k)
    q = (a[idx][:, :, None] == np.arange(int(n_actions))).sum(axis=1) / k
    return q[0] if single else q


def gini_disagreement(psi: Any, case_actions: Any, n_actions: int, k: int = 10) -> np.ndarray:
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
    q = np.atleast_2d(top_action_distribution(psi, case_actions, n_actions, k))
    D = 1.0 - (q**2).sum(axis=1)
    return D[0] if np.ndim(psi) == 1 else D


def risk_score(
    psi_selected: Any,
    case_actions: Any,
    n_actions: int,
    gamma: float = 1.0,
    k: int = 10,
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
    gamma : float, default=1.0
        Weight :math:`\\gamma \\ge 0` of the Gini term.
    k : int, default=10
        Top-k size of eq. 16-18.
    eps : float, default=1e-12
        Smoothing of eq. 16 (``0``: the limit, see :func:`influence_distribution`).

    Returns
    -------
    ndarray of shape (m,), or a float for a 1-D ``psi_selected``
    """
    gamma = check_nonnegative_scalar("gamma", gamma)
    H = influence_entropy(psi_selected, case_actions, n_actions, k, eps)
    D = gini_disagreement(psi_selected, case_actions, n_actions, k)
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
    return _label_like(R, None if R.ndim == 1 or R.shape[1] == 1 else np.argmax(R, axis=1))


def _label_like(R: np.ndarray, a_star: np.ndarray | None) -> str | None:
    """:func:`label_like_returns` for validated returns and their case-optimal actions."""
    if R.ndim == 1 or R.shape[1] == 1:
        return (
            "the returns have a single action (|A| = 1): every case votes for it, so influence "
            "entropy and Gini disagreement are 0. Pass R with one column per action, e.g. "
            "one-hot labels for a classifier"
        )
    off_label = (R != 0) & (a_star[:, None] != np.arange(R.shape[1]))
    if off_label.any():
        return None
    one_hot = bool(np.isin(R, (0.0, 1.0)).all() and (R.sum(axis=1) == 1).all())
    what = "one-hot labels" if one_hot else "label-like (non-zero only at the case-optimal action)"
    return (
        f"the returns R are {what}: psi_i(a, x) = alpha_i(x) r_i(a) is 0 for every case not "
        "labelled a, so the top-k cases by |psi| all share the audited action's label and "
        "influence entropy and Gini disagreement are 0 by construction"
    )


def _warn_label_like(why: str | None, caller: str, stacklevel: int) -> None:
    """The DegenerateAuditWarning of contribution-ranked signals on label-like returns."""
    if why is not None:
        warnings.warn(
            f"{caller}: {why}. Use rank_by='coefficient' (top-k by |alpha_i(x)|) for "
            "an informative influence entropy and Gini disagreement.",
            DegenerateAuditWarning,
            stacklevel=stacklevel + 1,
        )


def _case_account(
    estimator: Any,
    phi: Any,
    action: Any,
    *,
    k: int,
    rank_by: str,
    case_ids: Any,
    case_actions: Any,
    gamma: float,
    eps: float,
    batch_size: int | None,
    caller: str,
) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, pd.DataFrame]:
    """The one code path of the signals of :func:`audit_signals` and ``explain``.

    Uses only the estimator's public interface: ``scores``, ``top_cases``, ``returns_``,
    ``n_cases_``, ``n_actions_``, ``action_names_``. Returns the top cases (a 2-D
    :class:`~cbdt.TopCases`), the action scores (m, |A|), the audited action positions (m,),
    the case-optimal actions of the training cases (n,) and the per-query signal table
    (eq. 16-20).
    """
    from ._query import TopCases

    if not (callable(getattr(estimator, "top_cases", None))
            and callable(getattr(estimator, "scores", None))):
        raise InputError(
            f"{caller} needs a fitted case-influence estimator (cbdt.CaseInfluence, "
            "cbdt.NystromCaseInfluence, cbdt.torch.TorchCaseInfluence) with scores() and "
            f"top_cases(); got {type(estimator).__name__}."
        )
    if rank_by not in ("contribution", "coefficient"):
        raise InputError(
            f"rank_by must be 'contribution' (eq. 16, |psi|) or 'coefficient' (|alpha|), got "
            f"{rank_by!r}."
        )
    if batch_size is not None and (
        not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool)
        or batch_size < 1
    ):
        raise InputError(f"batch_size must be a positive integer or None, got {batch_size!r}.")
    S = np.atleast_2d(estimator.scores(phi))  # validates phi, raises NotFittedError
    Q = as_float_matrix("phi", phi, allow_1d=True)
    Q = Q[None, :] if Q.ndim == 1 else Q
    n, n_actions = estimator.n_cases_, estimator.n_actions_
    k = check_k(k, n)
    eps = _check_eps(eps)
    gamma = check_nonnegative_scalar("gamma", gamma)
    R = estimator.returns_
    if not isinstance(R, np.ndarray) or R.dtype != np.float64 or R.ndim != 2:
        R = as_float_matrix("returns_", R)
    a_star, why = _returns_facts(R)
    a = a_star if case_actions is None else _check_case_actions(case_actions, n, n_actions)
    if rank_by == "contribution":
        _warn_label_like(why, caller, stacklevel=3)
    m = S.shape[0]
    step = m if batch_size is None else int(batch_size)
    per_query = action is not None and np.ndim(action) > 0
    if per_query:
        action = action.to_numpy() if hasattr(action, "to_numpy") else np.asarray(action)
        if action.ndim != 1 or action.shape[0] != m:
            raise InputError(
                f"action must be one action (position or name) for all queries, or one per "
                f"query (length {m}); got shape {action.shape}."
            )
    parts = []
    for s in range(0, m, step):
        sl = slice(s, min(m, s + step))
        act = action[sl] if per_query else action
        parts.append(estimator.top_cases(Q[sl], act, k=k, rank_by=rank_by, case_ids=case_ids))
    if len(parts) == 1:
        top = parts[0]
    else:
        def cat(name: str) -> Any:
            vals = [getattr(p, name) for p in parts]
            return None if vals[0] is None else np.concatenate(vals)

        top = TopCases(
            cat("indices"), cat("contributions"), cat("case_ids"), cat("action"),
            cat("action_name"), cat("coefficients"), parts[0].order, rank_by,
        )
    acts = np.asarray(top.action, dtype=np.intp)
    mass = np.abs(top.contributions if rank_by == "contribution" else top.coefficients)
    ent, gini = _top_signals(mass, a[top.indices], n_actions, k, eps)
    signals = _signal_table(S, acts, ent, gini, gamma)
    signals["action"] = np.asarray(top.action_name)
    return top, S, acts, a_star, signals


def audit_signals(
    estimator: Any,
    phi: Any,
    action: Any = None,
    *,
    k: int = 10,
    case_actions: Any = None,
    gamma: float = 1.0,
    eps: float = 1e-12,
    rank_by: Literal["contribution", "coefficient"] = "contribution",
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
    case_actions : array-like of int of shape (n,), optional
        Case-optimal actions (positions); default ``case_optimal_actions(estimator.returns_)``.
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
    *_, signals = _case_account(
        estimator, phi, action, k=k, rank_by=rank_by, case_ids=None,
        case_actions=case_actions, gamma=gamma, eps=eps, batch_size=batch_size,
        caller="audit_signals",
    )
    return signals
