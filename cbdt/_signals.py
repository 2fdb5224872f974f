"""The audit signals of one query batch (Sec. 4, eq. 16-20) from its top-k cases: the kernels
behind :func:`cbdt.audit.audit_signals` and every estimator's ``explain`` (one code path,
:func:`case_account`), through the estimator's public ``scores`` and ``top_cases`` only."""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import entr

from ._results import TopCases
from ._validation import as_float_matrix, check_k, check_nonnegative_scalar
from .exceptions import DegenerateAuditWarning, InputError


def returns_facts(R: np.ndarray, owner: Any = None) -> tuple[np.ndarray, str | None]:
    """Case-optimal actions of ``R`` and why its contribution signals are degenerate (or
    None). With ``owner`` (the fitted estimator whose read-only ``returns_`` is ``R``) they
    are kept on the estimator, so they are computed once per fit, not at every ``explain``
    or ``audit_signals`` call; a refit replaces ``returns_`` and so the facts."""
    held = getattr(owner, "_returns_facts", None)
    if held is not None and held[0] is R:
        return held[1], held[2]
    a_star = np.argmax(R, axis=1)
    facts = a_star, label_like(R, a_star)
    if owner is not None and isinstance(R, np.ndarray) and not R.flags.writeable:
        a_star.setflags(write=False)
        try:
            owner._returns_facts = (R, *facts)
        except AttributeError:  # an estimator that takes no attributes: no cache
            pass
    return facts


def check_case_actions(case_actions: Any, n: int, n_actions: int) -> np.ndarray:
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


def top_stats(
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


def signal_table(
    S: np.ndarray, acts: np.ndarray, ent: np.ndarray, gini: np.ndarray, gamma: float,
    names: Any = None,
) -> pd.DataFrame:
    """Per-query signals: audited action (``names``, else its position), its score, the
    readout margin (top-1 minus top-2 score; NaN with one action), entropy, Gini and risk
    ``entropy + gamma * Gini`` (eq. 20)."""
    m, n_actions = S.shape
    srt = np.sort(S, axis=1)
    margin = srt[:, -1] - srt[:, -2] if n_actions > 1 else np.full(m, np.nan)
    return pd.DataFrame(
        {
            "action": acts if names is None else names,
            "score": S[np.arange(m), acts],
            "margin": margin,
            "entropy": ent,
            "gini": gini,
            "risk": ent + gamma * gini,
        }
    )


def top_signals(
    m_top: np.ndarray, a_top: np.ndarray, n_actions: int, k: int, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Entropy (eq. 17) and Gini (eq. 19) from the top-k masses and their cases' actions."""
    pi, q = top_stats(m_top, a_top, n_actions, k, eps)
    return entropy(pi), 1.0 - (q**2).sum(axis=1)


def check_eps(eps: Any) -> float:
    return check_nonnegative_scalar("eps", eps)


def entropy(pi: np.ndarray) -> np.ndarray:
    """Row entropies with :math:`0 \\log 0 = 0` (natural log)."""
    return entr(pi).sum(axis=1)


def label_like(R: np.ndarray, a_star: np.ndarray | None) -> str | None:
    """:func:`cbdt.audit.label_like_returns` for validated returns and their case-optimal actions."""
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


def warn_label_like(why: str | None, caller: str, stacklevel: int) -> None:
    """The DegenerateAuditWarning of contribution-ranked signals on label-like returns."""
    if why is not None:
        warnings.warn(
            f"{caller}: {why}. Use rank_by='coefficient' (top-k by |alpha_i(x)|) for "
            "an informative influence entropy and Gini disagreement.",
            DegenerateAuditWarning,
            stacklevel=stacklevel + 1,
        )


def case_account(
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
    eps = check_eps(eps)
    gamma = check_nonnegative_scalar("gamma", gamma)
    R = estimator.returns_
    if not isinstance(R, np.ndarray) or R.dtype != np.float64 or R.ndim != 2:
        R = as_float_matrix("returns_", R)
    a_star, why = returns_facts(R, estimator if R is estimator.returns_ else None)
    a = a_star if case_actions is None else check_case_actions(case_actions, n, n_actions)
    if rank_by == "contribution":
        warn_label_like(why, caller, stacklevel=3)
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
    ent, gini = top_signals(mass, a[top.indices], n_actions, k, eps)
    # the action by name, in the one construction of the table (a column set afterwards
    # costs a second pass of pandas' checks)
    signals = signal_table(S, acts, ent, gini, gamma, np.asarray(top.action_name))
    return top, S, acts, a_star, signals


