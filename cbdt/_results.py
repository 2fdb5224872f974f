"""What the case queries return: :class:`TopCases` (``top_cases``) and :class:`Explanation`
(``explain``), shared by every case-influence estimator."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["TopCases", "Explanation"]


@dataclass(frozen=True, eq=False)
class TopCases:
    """Result of ``top_cases``: the strongest cases of each query, still unpacking as a pair.

    ``idx, psi = est.top_cases(phi)`` keeps working: iterating (or indexing ``[0]``,
    ``[1]``) gives ``indices`` and ``contributions``. Two results are equal (``==``) when
    every field is (arrays compared with :func:`numpy.array_equal`). Frozen and picklable.

    Attributes
    ----------
    indices : ndarray of int, shape (m, k) or (k,)
        Training-case positions (rows of ``Phi``), strongest first.
    contributions : ndarray of float, shape (m, k) or (k,)
        The signed contributions :math:`\\psi_i(a, x) = \\alpha_i(x) r_i(a)` (eq. 15).
    case_ids : ndarray, shape (m, k) or (k,)
        The same cases named by the labels given to ``fit`` (``case_ids=`` or the index of a
        ``Phi`` DataFrame); the positions when the cases were not labelled.
    action : ndarray of int, shape (m,), or int
        Position of the action whose score is explained, per query (the decision
        :math:`\\arg\\max_a Q(x, a)` when ``action=None`` was passed).
    action_name : ndarray, shape (m,), or scalar
        The same action by its name (``action_names_``; the position when unnamed).
    coefficients : ndarray of float, shape (m, k) or (k,), or None
        :math:`\\alpha_i(x)` of the listed cases (eq. 10); filled when
        ``rank_by="coefficient"`` (``None`` otherwise: ranking by contribution never needs
        them, and :meth:`~cbdt.CaseInfluence.explain` lists them).
    order : str
        ``"magnitude"``, ``"positive"`` or ``"negative"``.
    rank_by : str
        ``"contribution"`` (:math:`\\psi_i`) or ``"coefficient"`` (:math:`\\alpha_i`).
    """

    indices: np.ndarray
    contributions: np.ndarray
    case_ids: np.ndarray | None = None
    action: Any = None
    action_name: Any = None
    coefficients: np.ndarray | None = None
    order: str = "magnitude"
    rank_by: str = "contribution"

    def __post_init__(self) -> None:
        if self.case_ids is None:
            object.__setattr__(self, "case_ids", self.indices)
        if self.action_name is None and self.action is not None:
            object.__setattr__(self, "action_name", self.action)

    # a pair, as the NamedTuple this replaces: ``idx, psi = top``, ``top[0]``
    def __iter__(self) -> Any:
        return iter((self.indices, self.contributions))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: Any) -> Any:
        return (self.indices, self.contributions)[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopCases):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a is None or b is None:
                if a is not b:
                    return False
            elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not np.array_equal(np.asarray(a), np.asarray(b)):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def to_frame(self) -> pd.DataFrame:
        """One row per (query, rank): ``query, rank, action, position, case_id, psi`` (and
        ``alpha`` when the coefficients are known).

        Returns
        -------
        pandas.DataFrame
            ``k`` rows for a 1-D query, ``m * k`` rows otherwise.
        """
        idx = np.atleast_2d(self.indices)
        m, k = idx.shape
        names = self.action_name if self.action_name is not None else np.full(m, None)
        cols: dict[str, Any] = {
            "query": np.repeat(np.arange(m), k),
            "rank": np.tile(np.arange(1, k + 1), m),
            "action": np.repeat(np.broadcast_to(np.asarray(names, dtype=object), (m,)), k),
            "position": idx.ravel(),
            "case_id": np.atleast_2d(self.case_ids).ravel(),
            "psi": np.atleast_2d(self.contributions).ravel(),
        }
        if self.coefficients is not None:
            cols["alpha"] = np.atleast_2d(self.coefficients).ravel()
        frame = pd.DataFrame(cols)
        if self.action_name is not None:
            frame["action"] = frame["action"].infer_objects()
        return frame


@dataclass(frozen=True, eq=False)
class Explanation:
    """Result of ``explain``: the case account of many decisions (Sec. 4).

    Attributes
    ----------
    cases : pandas.DataFrame
        One row per (query, rank): ``query, rank, case_id, alpha, psi, return, case_action,
        effect``; ``case_action`` is the case-optimal action :math:`a_i^*` by name, ``effect``
        ``"raises"``, ``"lowers"`` or (a contribution of exactly 0) ``"none"``.
    signals : pandas.DataFrame
        One row per query (index ``query``): ``action`` (by name), ``score``, ``margin``,
        ``entropy``, ``gini``, ``risk`` (eq. 16-20); an entropy that the smoothing of eq. 16
        and rounding alone explain is 0 here (``explain``'s Returns).
    action_names : ndarray or None
        The estimator's ``action_names_`` when its actions are named (the frames then hold
        names), ``None`` when they are the positions ``0..|A|-1``.

    Unpacks as ``cases, signals = est.explain(phi)``.
    """

    cases: pd.DataFrame
    signals: pd.DataFrame
    action_names: np.ndarray | None = None

    def __iter__(self) -> Any:
        return iter((self.cases, self.signals))

    def __getitem__(self, i: Any) -> Any:
        return (self.cases, self.signals)[i]

    def __len__(self) -> int:
        return 2

    def plot(self, query: int = 0, **kwargs: Any) -> Any:
        """Draw one query's top cases (:func:`cbdt.plotting.plot_top_cases`).

        Parameters
        ----------
        query : int, default=0
        **kwargs
            Passed on (``action_names``, ``ax``, ``max_label``).

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .plotting import plot_top_cases

        return plot_top_cases(self, query, **kwargs)
