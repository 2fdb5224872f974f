"""The queries every case-influence estimator answers (Sec. 4), shared as a mixin.

:class:`CaseQueryMixin` plays the part of scikit-learn's ``KNeighborsMixin``: an estimator
that can form its coefficients :math:`\\alpha(x)` (eq. 10) for a batch of validated queries
and holds its training returns gets :meth:`~CaseQueryMixin.contributions` (eq. 15),
:meth:`~CaseQueryMixin.top_cases`, :meth:`~CaseQueryMixin.explain` (eq. 15-20), action
names and case ids with one signature and one behaviour. :func:`cbdt.audit.audit_signals`
works on any such estimator through its public methods.

Hooks a subclass provides
-------------------------
``_check_fitted()``
    Raise :class:`~cbdt.exceptions.NotFittedError` when not fitted.
``_alpha(Q, out=None)``
    Coefficients of a batch of validated queries ``Q`` (b, H), shape (b, n).
``scores(phi)``
    Public action scores (m, |A|) (eq. 9).
attributes
    ``returns_`` (n, |A|), ``n_cases_``, ``n_actions_``, ``n_features_in_``, ``batch_size``;
    optional ``case_ids_``, ``action_names_`` (set by ``fit``), ``progress``.

Optional fast paths: ``_rank(Q, acts, k, key, weight, what)`` (top-k without materialising
the (m, n) contributions; :class:`cbdt.CaseInfluence` overrides it with its fused scan) and
``_alpha_at(Q, idx)`` (coefficients at given case indices).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._ranking import top_k_indices
from ._results import Explanation, TopCases
from ._signals import case_account
from ._validation import (
    as_query,
    check_action,
    check_case_ids,
    check_feature_names,
    check_k,
    check_positive_int,
)
from .exceptions import InputError

__all__ = ["CaseQueryMixin", "TopCases", "Explanation"]

_ORDERS = ("magnitude", "abs", "positive", "negative")
_RANK_BY = ("contribution", "coefficient")


class CaseQueryMixin:
    """Case queries shared by every case-influence estimator (Sec. 4, eq. 10, 15-20).

    As scikit-learn's ``KNeighborsMixin``: a subclass supplies its coefficients and
    returns (see the module docstring for the hooks) and inherits
    :meth:`contributions`, :meth:`top_cases`, :meth:`explain`, action names, case ids,
    ``n_features_in_`` and :func:`cbdt.audit.audit_signals` support. An estimator with a
    faster top-k scan overrides ``_rank``.
    """

    # ------------------------------------------------------------- hooks (defaults)
    def _check_fitted(self) -> None:  # pragma: no cover - every estimator overrides it
        raise NotImplementedError

    def _alpha(self, Q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def _check_query(self, phi: Any) -> tuple[np.ndarray, bool]:
        """Validated queries ``(m, H)`` and whether ``phi`` was 1-D; a DataFrame's columns
        are checked against ``feature_names_in_`` (:func:`cbdt._validation.check_feature_names`)."""
        self._check_fitted()
        check_feature_names(self, phi, reset=False, name="phi")
        return as_query("phi", phi, self.n_features_in_)

    def _blocks(self, m: int, step: int, what: str) -> Any:
        """Block starts ``0, step, ...``; a tqdm bar when ``progress`` and several blocks."""
        starts = range(0, m, step)
        if getattr(self, "progress", False) and len(starts) > 1:
            from ._optional import require

            tqdm = require("tqdm.auto", "progress=True").tqdm

            return tqdm(starts, desc=what, unit="block", leave=False)
        return starts

    def _returns_by_action(self) -> np.ndarray:
        """``returns_.T`` (|A|, n), C-contiguous: one row of returns per action."""
        Rt = getattr(self, "_returns_t", None)
        return np.ascontiguousarray(self.returns_.T) if Rt is None else Rt

    def _query_step(self) -> int:
        """Queries per materialised block of coefficients (about 128 MB of float64)."""
        entries = getattr(self, "topk_block_entries", 16_000_000)
        return int(max(1, min(self.batch_size, entries // max(1, self.n_cases_))))

    def _rank(
        self, Q: np.ndarray, acts: np.ndarray, k: int, key: str, weight: str, what: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k cases of every query by ``key`` ("abs", "positive", "negative") of psi
        (``weight="psi"``) or alpha; ``(indices, keys, signed values)``, each (m, k). Default:
        blocks of coefficients materialised and ranked (ties to the lower index)."""
        m = Q.shape[0]
        idx = np.empty((m, k), dtype=np.intp)
        keys = np.empty((m, k))
        vals = np.empty((m, k))
        Rt = self._returns_by_action() if weight == "psi" else None
        step = self._query_step()
        for s in self._blocks(m, step, what):
            sl = slice(s, min(m, s + step))
            B = self._alpha(Q[sl])
            if Rt is not None:
                B *= Rt[acts[sl]]
            K = np.abs(B) if key == "abs" else (B if key == "positive" else -B)
            i = top_k_indices(K, k)
            rows = np.arange(sl.stop - sl.start)[:, None]
            idx[sl], keys[sl], vals[sl] = i, K[rows, i], B[rows, i]
        return idx, keys, vals

    def _alpha_at(self, Q: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """alpha_i(x_q) at the case indices ``idx`` (m, k) only."""
        out = np.empty(idx.shape)
        step = self._query_step()
        for s in range(0, Q.shape[0], step):
            sl = slice(s, s + step)
            out[sl] = np.take_along_axis(self._alpha(Q[sl]), idx[sl], axis=1)
        return out

    # ------------------------------------------------------------- names
    def _action_labels(self) -> np.ndarray:
        """``action_names_``, or the positions ``0..|A|-1`` when the actions are unnamed."""
        names = getattr(self, "action_names_", None)
        return np.arange(self.n_actions_) if names is None else names

    def _actions(self, action: Any, Q: np.ndarray) -> np.ndarray:
        """Action positions (m,) of an ``action=`` argument: ``None`` (each query's decision),
        a position, a name, or one of either per query."""
        if action is None:
            S = np.atleast_2d(self.scores(Q))
            return np.argmax(S, axis=1)
        return check_action(action, self.n_actions_, Q.shape[0], names=self._action_labels())

    def _case_ids(self, case_ids: Any = None) -> np.ndarray:
        """The labels results name cases by: ``case_ids``, else those given to ``fit``."""
        ids = check_case_ids(case_ids, self.n_cases_)
        if ids is None:
            ids = getattr(self, "case_ids_", None)
        return np.arange(self.n_cases_) if ids is None else ids

    # ------------------------------------------------------------- queries
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
            step = self._query_step()
        else:
            step = check_positive_int("block_size", block_size)
        buf = np.empty((min(step, Q.shape[0]), self.n_cases_))
        for s in range(0, Q.shape[0], step):
            sl = slice(s, min(s + step, Q.shape[0]))
            block = buf[: sl.stop - sl.start]
            self._alpha(Q[sl], out=block)
            yield sl, block

    def leverage(self, phi: Any) -> np.ndarray:
        """Leverage :math:`\\lVert\\alpha(x)\\rVert^2` of each query (no returns involved).

        For OLS, :math:`\\lVert\\alpha(x)\\rVert^2 = \\varphi(x)^\\top G^{-1}\\varphi(x)`
        (eq. 10): the factor by which the noise variance of the returns scales the variance
        of the readout score, large far from the training representations. This default sums
        the squares of blocks of coefficients (:meth:`iter_coefficients`, :math:`O(nH)` per
        query); :class:`~cbdt.CaseInfluence` computes it in :math:`O(H^2)`.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)

        Returns
        -------
        ndarray of shape (m,), or a float for a 1-D query
        """
        Q, single = self._check_query(phi)
        lev = np.empty(Q.shape[0])
        for sl, A in self.iter_coefficients(Q):
            lev[sl] = np.einsum("mn,mn->m", A, A)
        return float(lev[0]) if single else lev

    def contributions(self, phi: Any, action: Any = None) -> np.ndarray:
        """Case audit contributions :math:`\\psi_i(a, x) = \\alpha_i(x) r_{i,a}` (eq. 15).

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
        action : int, str, or array-like of shape (m,), optional
            The action by position or by name (``action_names_``), one for all queries or
            one per query. Default: each query's decision :math:`\\arg\\max_a Q(x, a)`.

        Returns
        -------
        psi : ndarray of shape (m, n), or (n,) for a 1-D query
        """
        Q, single = self._check_query(phi)
        acts = self._actions(action, Q)
        Rt = self._returns_by_action()
        out = np.empty((Q.shape[0], self.n_cases_))
        for s in self._blocks(Q.shape[0], self.batch_size, "contributions"):
            sl = slice(s, s + self.batch_size)
            self._alpha(Q[sl], out=out[sl])
            out[sl] *= Rt[acts[sl]]  # rows of R^T: contiguous, in place
        return out[0] if single else out

    def top_cases(
        self,
        phi: Any,
        action: Any = None,
        *,
        k: int = 10,
        order: Literal["magnitude", "positive", "negative"] = "magnitude",
        rank_by: Literal["contribution", "coefficient"] = "contribution",
        case_ids: Any = None,
    ) -> TopCases:
        """The ``k`` training cases with the strongest contributions to ``Q(x, action)``.

        Sec. 4 (i): ``order="magnitude"`` ranks by :math:`|\\psi_i|` (the most influential
        cases; ``"abs"`` is accepted as the same), ``"positive"`` by :math:`\\psi_i`
        descending (strongest support), ``"negative"`` by :math:`\\psi_i` ascending
        (strongest offsets). Ties go to the lower case index. ``rank_by="coefficient"``
        ranks by :math:`\\alpha_i(x)` instead (the cases the readout leans on, whatever their
        return). Only the ``(m, k)`` result is kept, never the ``(m, n)`` contributions.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations.
        action : int, str, or array-like of shape (m,), optional
            The explained action by position or name, one for all queries or one per query;
            default each query's decision :math:`\\arg\\max_a Q(x, a)`.
        k : int, default=10
            Cases per query, ``1 <= k <= n`` (keyword-only).
        order : {"magnitude", "positive", "negative"}, default="magnitude"
        rank_by : {"contribution", "coefficient"}, default="contribution"
        case_ids : array-like of shape (n,), optional
            Labels to name the cases by; default :attr:`case_ids_` from ``fit``.

        Returns
        -------
        TopCases
            ``indices``, ``contributions`` (each (m, k), or (k,) for a 1-D query),
            ``case_ids``, ``action``, ``action_name``; unpacks as ``(indices,
            contributions)``.
        """
        if order not in _ORDERS:
            raise InputError(
                f"order must be 'magnitude' (|psi|), 'positive' or 'negative', got {order!r}."
            )
        if rank_by not in _RANK_BY:
            raise InputError(
                f"rank_by must be 'contribution' (psi_i, eq. 15) or 'coefficient' (alpha_i, "
                f"eq. 10), got {rank_by!r}."
            )
        Q, single = self._check_query(phi)
        k = check_k(k, self.n_cases_)
        acts = self._actions(action, Q)
        key = "abs" if order in ("magnitude", "abs") else order
        if rank_by == "contribution":
            idx, _, vals = self._rank(Q, acts, k, key, "psi", "top_cases")
            alpha = None
        else:
            idx, _, alpha = self._rank(Q, acts, k, key, "alpha", "top_cases")
            vals = alpha * self.returns_[idx, acts[:, None]]
        ids = self._case_ids(case_ids)[idx] if (
            case_ids is not None or getattr(self, "case_ids_", None) is not None
        ) else idx
        names = self._action_labels()[acts]
        order = "magnitude" if order == "abs" else order
        if single:
            return TopCases(
                idx[0], vals[0], ids[0], int(acts[0]), names[0],
                None if alpha is None else alpha[0], order, rank_by,
            )
        return TopCases(idx, vals, ids, acts, names, alpha, order, rank_by)

    def explain(
        self,
        phi: Any,
        action: Any = None,
        *,
        k: int = 10,
        gamma: float = 1.0,
        eps: float = 1e-12,
        rank_by: Literal["contribution", "coefficient"] = "contribution",
        case_ids: Any = None,
    ) -> Explanation:
        """One-call case account of many decisions: top cases and audit signals (Sec. 4).

        For every query, its ``k`` strongest cases (eq. 15) and its signals (eq. 16-20),
        computed by the same code as :func:`cbdt.audit.audit_signals` (and warning like it,
        :class:`~cbdt.exceptions.DegenerateAuditWarning`, when contribution-ranked entropy
        and Gini are 0 by construction), with the caller's case ids and action names.

        Parameters
        ----------
        phi : array-like of shape (m, H) or (H,)
            Query representations.
        action : int, str, or array-like of shape (m,), optional
            Audited action per query (position or name); default the readout's choice
            :math:`\\arg\\max_a Q`. May be passed as the second positional argument.
        k : int, default=10
            Cases listed per query, and the top-k of eq. 16-18 (keyword-only).
        gamma, eps : float
            As in :func:`cbdt.audit.risk_score` (keyword-only; the order ``k, gamma, eps``
            of every signal function).
        rank_by : {"contribution", "coefficient"}, default="contribution"
            Rank cases (and form eq. 16-18) by :math:`|\\psi_i|` or by :math:`|\\alpha_i|`
            (:func:`cbdt.audit.audit_signals`).
        case_ids : array-like of shape (n,) or pandas.Index, optional
            Labels of the training cases; default :attr:`case_ids_` from ``fit``, else the
            positions ``0..n-1``.

        Returns
        -------
        Explanation
            ``cases``: one row per (query, rank) with ``query, rank, case_id, alpha, psi,
            return, case_action, effect`` (``"raises"`` or ``"lowers"`` the audited score, or
            ``"none"`` for a contribution of exactly 0, a case whose return for the audited
            action is 0); ``signals``: one row per query with ``action, score, margin,
            entropy, gini, risk``, those of :func:`cbdt.audit.audit_signals`. Actions are given
            by name (``action_names_``). A top-k set whose mass lies on one action has the
            small positive entropy of the smoothing ``eps`` of eq. 16 (about
            ``(eps / M) log(M / eps)`` for a mass ``M``, e.g. ``7e-11``), not 0: that floor
            orders such queries by their mass.
        """
        Q, _ = self._check_query(phi)
        top, S, acts, a_star, signals = case_account(
            self, Q, action, k=k, rank_by=rank_by, case_ids=case_ids, case_actions=None,
            gamma=gamma, eps=eps, batch_size=None, caller="explain",
        )
        idx = top.indices
        m, k = idx.shape
        alpha_k = top.coefficients if top.coefficients is not None else self._alpha_at(Q, idx)
        ret = self.returns_[idx, acts[:, None]]
        psi_k = alpha_k * ret + 0.0  # + 0.0: a zero contribution is 0.0, never -0.0
        cases = pd.DataFrame(
            {
                "query": np.repeat(np.arange(m), k),
                "rank": np.tile(np.arange(1, k + 1), m),
                "case_id": np.asarray(top.case_ids).ravel(),
                "alpha": alpha_k.ravel(),
                "psi": psi_k.ravel(),
                "return": ret.ravel(),
                "case_action": self._action_labels()[a_star[idx.ravel()]],
                "effect": np.select([psi_k.ravel() > 0, psi_k.ravel() < 0], ["raises", "lowers"],
                                    "none"),
            }
        )
        signals.index.name = "query"
        labels = self._action_labels()
        named = not np.array_equal(labels, np.arange(self.n_actions_))
        return Explanation(cases, signals, labels if named else None)

