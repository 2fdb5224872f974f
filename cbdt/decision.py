"""Case-based decision theory itself (Gilboa & Schmeidler; Sec. 2.1, eq. 1-2).

A *case* is a triple :math:`c = (p_c, a_c, r_c)` of a problem, the action taken and its result.
A *memory* :math:`M` is a multiset of cases, each with a frequency :math:`n(c, M)`. The support
of action :math:`a` for a new problem :math:`p` is (eq. 1)

.. math:: U(a \\mid M, p) = \\sum_{c\\in M} n(c, M)\\, s(p, p_c)\\, u(r_c, a),

and the CBDT decision maker picks :math:`a^*(M, p) = \\arg\\max_a U(a \\mid M, p)` (eq. 2).

Here ``u(r_c, a)`` is stored as a matrix of *outcome supports* with one row per case and one
column per action. Classical cases ``(p, a, r)`` support only the action that was taken,
``u(r_c, a) = u(r_c)`` if ``a == a_c`` and 0 otherwise (:meth:`Memory.from_cases`); cases
whose outcome is observed for every action (as the training cases of Sec. 2.2, with returns
``r_i(a)``) give a full row (:class:`Memory` directly).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.spatial.distance import pdist

from ._validation import as_float_matrix, check_nonnegative_scalar
from .exceptions import InputError

__all__ = [
    "Case",
    "Memory",
    "Similarity",
    "GaussianSimilarity",
    "LaplacianSimilarity",
    "InverseDistanceSimilarity",
    "support",
    "case_contributions",
    "decide",
    "kernel_supports",
    "median_distance",
    "BandwidthSelection",
    "select_bandwidth",
    "decision_margin",
]


@dataclass(frozen=True)
class Case:
    """One remembered case :math:`c = (p_c, a_c, r_c)` with its frequency :math:`n(c, M)`.

    Parameters
    ----------
    problem : array-like of shape (d,)
        The problem :math:`p_c` (a point of the problem space).
    action : int
        The action :math:`a_c` that was taken, indexed from 0.
    result : float
        The result :math:`r_c`.
    frequency : float, default=1
        How many times the case occurs in the memory (:math:`n(c, M) \\ge 0`).
    """

    problem: Sequence[float] | np.ndarray
    action: int
    result: float
    frequency: float = 1.0


class Memory:
    """A CBDT memory: problems, outcome supports :math:`u(r_c, a)` and frequencies.

    Parameters
    ----------
    problems : array-like of shape (N, d)
        The problems :math:`p_c` of the N cases.
    supports : array-like of shape (N, |A|)
        Outcome support :math:`u(r_c, a)` of case c for action a.
    frequencies : array-like of shape (N,), optional
        Case frequencies :math:`n(c, M) \\ge 0`; default all ones.

    Attributes
    ----------
    n_cases : int
    n_actions : int
    dim : int
        Dimension d of the problem space.
    """

    def __init__(self, problems: Any, supports: Any, frequencies: Any = None) -> None:
        P = as_float_matrix("problems", problems, allow_1d=True)
        if P.ndim == 1:
            P = P[:, None]
        U = as_float_matrix("supports", supports, allow_1d=True)
        if U.ndim == 1:
            U = U[:, None]
        if U.shape[0] != P.shape[0]:
            raise InputError(
                f"problems has {P.shape[0]} cases but supports has {U.shape[0]} rows; each "
                "case needs one row of outcome supports u(r_c, a)."
            )
        if frequencies is None:
            f = np.ones(P.shape[0])
        else:
            f = as_float_matrix("frequencies", frequencies, ndim=1)
            if f.shape[0] != P.shape[0]:
                raise InputError(
                    f"frequencies has length {f.shape[0]} but the memory has {P.shape[0]} cases."
                )
            if (f < 0).any():
                raise InputError("frequencies n(c, M) must be >= 0 (they count cases).")
        self.problems = P
        self.supports = U
        self.frequencies = f

    @classmethod
    def from_cases(
        cls,
        cases: Iterable[Case],
        n_actions: int | None = None,
        utility: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> Memory:
        """Build a memory from classical cases ``(p, a, r)``.

        Each case supports only the action taken: :math:`u(r_c, a) = u(r_c)\\,
        \\mathbf 1\\{a = a_c\\}`, with ``utility`` :math:`u` (identity by default).

        Parameters
        ----------
        cases : iterable of Case
        n_actions : int, optional
            Size of the action set; default ``1 + max(action)``.
        utility : callable, optional
            Vectorised map from results to utilities.
        """
        cases = list(cases)
        if not cases:
            raise InputError("a memory needs at least one case.")
        P = np.array([np.atleast_1d(np.asarray(c.problem, dtype=float)) for c in cases])
        acts = np.array([c.action for c in cases])
        if acts.dtype.kind not in "iu" or (acts < 0).any():
            raise InputError("case actions must be non-negative integers (action indices).")
        A = int(acts.max()) + 1 if n_actions is None else int(n_actions)
        if acts.max() >= A:
            raise InputError(
                f"a case has action {int(acts.max())} but n_actions = {A} (indices 0..{A - 1})."
            )
        r = np.array([c.result for c in cases], dtype=float)
        u = r if utility is None else np.asarray(utility(r), dtype=float)
        U = np.zeros((len(cases), A))
        U[np.arange(len(cases)), acts] = u
        return cls(P, U, [c.frequency for c in cases])

    @property
    def n_cases(self) -> int:
        return self.problems.shape[0]

    @property
    def n_actions(self) -> int:
        return self.supports.shape[1]

    @property
    def dim(self) -> int:
        return self.problems.shape[1]

    def __repr__(self) -> str:
        return f"Memory(n_cases={self.n_cases}, n_actions={self.n_actions}, dim={self.dim})"


def _refine_close_pairs(
    d2: np.ndarray, P: np.ndarray, Q: np.ndarray, sp: np.ndarray, sq: np.ndarray
) -> None:
    """Recompute, in place, the squared distances that the expansion
    :math:`|p|^2 + |q|^2 - 2 p\\cdot q` cannot resolve.

    The expansion's rounding error is about :math:`4\\epsilon(|p|^2 + |q|^2)`; where the
    distance is not far above it (close points with large coordinates, e.g. 1 apart at
    :math:`10^8`), :math:`\\lVert p - q\\rVert^2` is summed from the differences directly.
    """
    rows, cols = np.nonzero(d2 <= 1e-6 * (sp[:, None] + sq[None, :]))
    if rows.size:
        diff = P[rows] - Q[cols]
        d2[rows, cols] = np.einsum("ij,ij->i", diff, diff)


class Similarity:
    """Base class of similarity functions :math:`s(p, q) \\ge 0` over the problem space.

    Subclasses implement :meth:`kernel` on squared distances or on coordinates; calling the
    object returns the ``(m, N)`` similarity matrix between m problems and N cases.
    """

    def __call__(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        return self.kernel(P, Q)

    def kernel(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:  # pragma: no cover
        """The ``(m, N)`` similarities :math:`s(p_j, q_k)` of problems ``P`` and cases ``Q``.

        Parameters
        ----------
        P : ndarray of shape (m, d)
            The problems.
        Q : ndarray of shape (N, d)
            The cases' problems.

        Returns
        -------
        ndarray of shape (m, N)
            Non-negative similarities.
        """
        raise NotImplementedError

    @staticmethod
    def _sqdist(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        sp, sq = (P**2).sum(1), (Q**2).sum(1)
        d2 = sp[:, None] + sq[None, :] - 2.0 * P @ Q.T
        np.maximum(d2, 0.0, out=d2)
        _refine_close_pairs(d2, P, Q, sp, sq)
        return d2


class _BandwidthSimilarity(Similarity):
    def __init__(self, bandwidth: float = 1.0) -> None:
        bw = check_nonnegative_scalar("bandwidth", bandwidth)
        if bw == 0:
            raise InputError("bandwidth must be > 0.")
        self.bandwidth = bw

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bandwidth={self.bandwidth!r})"


class GaussianSimilarity(_BandwidthSimilarity):
    """:math:`s(p, q) = \\exp(-\\lVert p - q\\rVert^2 / (2h^2))` with bandwidth ``h``."""

    def kernel(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        return np.exp(-self._sqdist(P, Q) / (2.0 * self.bandwidth**2))


class LaplacianSimilarity(_BandwidthSimilarity):
    """:math:`s(p, q) = \\exp(-\\lVert p - q\\rVert / h)`."""

    def kernel(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        return np.exp(-np.sqrt(self._sqdist(P, Q)) / self.bandwidth)


class InverseDistanceSimilarity(_BandwidthSimilarity):
    """:math:`s(p, q) = 1 / (1 + \\lVert p - q\\rVert / h)`."""

    def kernel(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.sqrt(self._sqdist(P, Q)) / self.bandwidth)


def _similarity_matrix(
    P: np.ndarray, memory: Memory, similarity: Similarity | Callable | None
) -> np.ndarray:
    sim = GaussianSimilarity() if similarity is None else similarity
    if not callable(sim):
        raise InputError(
            f"similarity must be a Similarity or a callable s(P, Q) -> (m, N), got {sim!r}."
        )
    S = np.asarray(sim(P, memory.problems), dtype=float)
    if S.shape != (P.shape[0], memory.n_cases):
        raise InputError(
            f"similarity returned shape {S.shape}; expected (m, N) = "
            f"({P.shape[0]}, {memory.n_cases})."
        )
    if not np.isfinite(S).all():
        raise InputError("similarity returned NaN or inf values.")
    if (S < 0).any():
        raise InputError(
            f"similarity must be non-negative (CBDT similarity, Sec. 2.1); the smallest value "
            f"is {S.min():.3g}. Use a non-negative kernel such as GaussianSimilarity."
        )
    return S


def _check_problems(p: Any, memory: Memory) -> tuple[np.ndarray, bool]:
    if not isinstance(memory, Memory):
        raise InputError(f"memory must be a cbdt.decision.Memory, got {type(memory).__name__}.")
    P = as_float_matrix("p", p, allow_1d=True)
    single = P.ndim == 1  # a 1-D p is one problem of dimension d; pass (m, 1) for d = 1
    if single:
        P = P[None, :]
    if P.shape[1] != memory.dim:
        raise InputError(
            f"problems have dimension {P.shape[1]} but the memory's problems have dimension "
            f"{memory.dim}."
        )
    return P, single


def support(
    p: Any, memory: Memory, similarity: Similarity | Callable | None = None
) -> np.ndarray:
    """CBDT support :math:`U(a \\mid M, p)` of every action (eq. 1), for many problems at once.

    Parameters
    ----------
    p : array-like of shape (m, d) or (d,)
        Problems.
    memory : Memory
    similarity : Similarity or callable, optional
        Non-negative similarity; default ``GaussianSimilarity(1.0)``.

    Returns
    -------
    ndarray of shape (m, |A|), or (|A|,) for one problem
    """
    P, single = _check_problems(p, memory)
    S = _similarity_matrix(P, memory, similarity)
    U = S @ (memory.frequencies[:, None] * memory.supports)
    return U[0] if single else U


def case_contributions(
    p: Any, memory: Memory, similarity: Similarity | Callable | None = None
) -> np.ndarray:
    """Per-case terms :math:`n(c, M)\\, s(p, p_c)\\, u(r_c, a)` of the CBDT support (eq. 1).

    Summing over the cases gives :func:`support`, so these terms say which cases carry an
    action's support and by how much.

    Returns
    -------
    ndarray of shape (m, N, |A|), or (N, |A|) for one problem
    """
    P, single = _check_problems(p, memory)
    S = _similarity_matrix(P, memory, similarity)
    C = (S * memory.frequencies)[:, :, None] * memory.supports[None]
    return C[0] if single else C


def decide(
    p: Any, memory: Memory, similarity: Similarity | Callable | None = None
) -> np.ndarray:
    """CBDT choice :math:`a^*(M, p) = \\arg\\max_a U(a \\mid M, p)` (eq. 2).

    Ties go to the lowest action index. For the Gaussian and Laplacian similarities each
    problem's supports are computed relative to its most similar case (a positive factor per
    problem, which changes no choice), so problems far from every case, where all
    similarities underflow to 0, still get the choice of the nearest cases.

    Returns
    -------
    ndarray of int of shape (m,), or an int for one problem
    """
    P, single = _check_problems(p, memory)
    sim = GaussianSimilarity() if similarity is None else similarity
    if isinstance(sim, GaussianSimilarity | LaplacianSimilarity):
        # Far from every case all similarities underflow to 0 and every action would tie.
        # Each problem's supports may be multiplied by a positive factor without changing
        # its choice: subtract the largest log-similarity of the row before exponentiating.
        d2 = Similarity._sqdist(P, memory.problems)
        if isinstance(sim, GaussianSimilarity):
            log_s = -d2 / (2.0 * sim.bandwidth**2)
        else:
            log_s = -np.sqrt(d2) / sim.bandwidth
        log_s -= log_s.max(axis=1, keepdims=True)
        U = np.exp(log_s) @ (memory.frequencies[:, None] * memory.supports)
    else:
        U = _similarity_matrix(P, memory, sim) @ (
            memory.frequencies[:, None] * memory.supports
        )
    a = np.argmax(U, axis=-1)
    return a[0] if single else a


# ---------------------------------------------------------------- large memories
def median_distance(X: Any, n_sample: int = 2000, seed: int = 0) -> float:
    """Median Euclidean distance between the rows of ``X`` (a random subsample of them).

    ``n_sample`` rows are drawn without replacement with ``numpy.random.default_rng(seed)``
    (all rows when there are fewer) and the median of their pairwise distances is returned.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise InputError(f"X must be 2-D with at least 2 rows, got shape {X.shape}.")
    if X.shape[0] > n_sample:
        X = X[np.random.default_rng(seed).choice(X.shape[0], n_sample, replace=False)]
    d = float(np.median(pdist(X)))
    if d <= 0:
        raise InputError("the median distance is 0 (most rows coincide); give a bandwidth.")
    return d


def kernel_supports(
    X_query: Any,
    X_memory: Any,
    columns: Any,
    bandwidths: Sequence[float],
    *,
    chunk_size: int = 512,
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian-similarity sums :math:`\\sum_i s_h(x, x_i) c_i` for many queries and bandwidths.

    Computed in chunks of ``chunk_size`` queries, so only a ``(chunk_size, n)`` similarity
    block is held at a time. Each query's sums are multiplied by the positive factor
    :math:`e^{d_{min}(x)^2/2h^2}` (``d_min`` the distance to the nearest memory row), which
    prevents underflow for small ``h`` and changes no comparison between columns or between
    memories of the same query.

    Parameters
    ----------
    X_query : array-like of shape (m, d)
    X_memory : array-like of shape (n, d)
    columns : array-like of shape (n, k)
        Per-case values to sum, e.g. returns :math:`r_i(a)` (eq. 1 with :math:`u(r, a) =
        r(a)`), returns masked to a sub-memory, or ones (the similarity mass).
    bandwidths : sequence of float
        Bandwidths ``h > 0``.

    Returns
    -------
    sums : ndarray of shape (len(bandwidths), m, k)
        Scaled sums.
    d2_min : ndarray of shape (m,)
        Squared distance to the nearest memory row: the unscaled sums are
        ``sums[b] * exp(-d2_min / (2 h_b^2))[:, None]``.
    """
    Xq = np.ascontiguousarray(np.asarray(X_query, dtype=np.float64))
    Xm = np.asarray(X_memory, dtype=np.float64)
    C = np.asarray(columns, dtype=np.float64)
    if C.ndim == 1:
        C = C[:, None]
    if Xq.ndim != 2 or Xm.ndim != 2 or Xq.shape[1] != Xm.shape[1]:
        raise InputError(
            f"X_query {Xq.shape} and X_memory {Xm.shape} must be 2-D with equal widths."
        )
    if C.shape[0] != Xm.shape[0]:
        raise InputError(f"columns has {C.shape[0]} rows but the memory has {Xm.shape[0]}.")
    h = np.asarray(bandwidths, dtype=np.float64)
    if h.ndim != 1 or h.size == 0 or not np.all(h > 0):
        raise InputError(f"bandwidths must be a non-empty sequence of positive numbers, got {h}.")
    m, n = Xq.shape[0], Xm.shape[0]
    XmT = np.ascontiguousarray(Xm.T)
    sq_m = (Xm**2).sum(axis=1)
    out = np.empty((h.size, m, C.shape[1]))
    d2_min = np.empty(m)
    c = max(1, min(int(chunk_size), m))
    buf = np.empty((c, n))
    ebuf = np.empty((c, n))
    for s in range(0, m, c):
        Q = Xq[s : s + c]
        b = Q.shape[0]
        D = buf[:b]
        np.matmul(Q, XmT, out=D)
        D *= -2.0
        sq_q = (Q**2).sum(axis=1)
        D += sq_q[:, None]
        D += sq_m[None, :]
        np.maximum(D, 0.0, out=D)
        _refine_close_pairs(D, Q, Xm, sq_q, sq_m)
        dmin = D.min(axis=1)
        D -= dmin[:, None]
        d2_min[s : s + b] = dmin
        E = ebuf[:b]
        for j, hj in enumerate(h):
            np.multiply(D, -1.0 / (2.0 * hj * hj), out=E)
            np.exp(E, out=E)
            out[j, s : s + b] = E @ C
    return out, d2_min


@dataclass(frozen=True)
class BandwidthSelection:
    r"""Result of :func:`select_bandwidth`.

    Attributes
    ----------
    bandwidth : float
        The chosen bandwidth.
    criterion : str
        ``"mean_return"`` or ``"support_mse"``.
    table : pandas.DataFrame
        One row per candidate, in the given order: ``bandwidth``, ``mean_return`` (mean
        realised return :math:`r_v(a^*(x_v))` of the CBDT decisions on the validation rows),
        ``support_mse`` (with ``criterion="support_mse"``: mean squared error of the
        normalised supports :math:`U(a\mid M, x_v)/\sum_i s(x_v, x_i)` against the
        validation returns), ``chosen``.
    """

    bandwidth: float
    criterion: str
    table: pd.DataFrame


def select_bandwidth(
    X_memory: Any,
    R_memory: Any,
    X_validation: Any,
    R_validation: Any,
    bandwidths: Sequence[float],
    *,
    criterion: Literal["mean_return", "support_mse"] = "mean_return",
    atol: float = 1e-12,
    chunk_size: int = 512,
) -> BandwidthSelection:
    """Bandwidth of the Gaussian similarity chosen on held-out cases (eq. 1-2).

    Every validation row gets its CBDT supports from the memory rows, for every candidate
    bandwidth at once (:func:`kernel_supports`), and the candidates are scored by

    - ``"mean_return"``: the mean realised return :math:`r_v(a^*(x_v))` of the CBDT decision
      (eq. 2), to maximise (a decision maker's criterion);
    - ``"support_mse"``: the mean squared error of the *normalised* supports (a kernel
      regression of each action's return) against the validation returns, to minimise (a
      forecaster's criterion, for returns that are smooth in the state).

    Candidates within ``atol`` of the best count as tied; the largest tied bandwidth wins (the
    smoother rule). How the validation rows are drawn (at random, or the latest rows of a time
    series) is the caller's choice.

    Parameters
    ----------
    X_memory : array-like of shape (n, d)
    R_memory : array-like of shape (n, |A|)
    X_validation : array-like of shape (m, d)
    R_validation : array-like of shape (m, |A|)
    bandwidths : sequence of float
        Positive candidates.
    criterion : {"mean_return", "support_mse"}, default="mean_return"
    atol : float, default=1e-12
        Absolute tolerance of a tie.
    chunk_size : int, default=512
        Validation rows per similarity block.

    Returns
    -------
    BandwidthSelection
    """
    if criterion not in ("mean_return", "support_mse"):
        raise InputError(
            f"criterion must be 'mean_return' or 'support_mse', got {criterion!r}."
        )
    Rm = as_float_matrix("R_memory", R_memory)
    Rv = as_float_matrix("R_validation", R_validation)
    if Rv.shape[1] != Rm.shape[1]:
        raise InputError(
            f"R_validation has {Rv.shape[1]} actions but R_memory has {Rm.shape[1]}."
        )
    if Rv.shape[0] == 0 or Rm.shape[0] == 0:
        raise InputError("select_bandwidth needs at least one memory and one validation row.")
    atol = check_nonnegative_scalar("atol", atol)
    h = np.asarray(bandwidths, dtype=np.float64)
    k = Rv.shape[0]
    rows = np.arange(k)[None, :]
    if criterion == "support_mse":
        cols = np.column_stack([Rm, np.ones(Rm.shape[0])])
        U, _ = kernel_supports(X_validation, X_memory, cols, h, chunk_size=chunk_size)
        Ubar = U[..., :-1] / U[..., -1:]
        loss = ((Ubar - Rv[None]) ** 2).sum(axis=(1, 2)) / Rv.size
        value = Rv[rows, np.argmax(Ubar, axis=2)].mean(axis=1)
        tied = np.flatnonzero(loss <= loss.min() + atol)
    else:
        U, _ = kernel_supports(X_validation, X_memory, Rm, h, chunk_size=chunk_size)
        value = Rv[rows, U.argmax(axis=2)].mean(axis=1)
        tied = np.flatnonzero(value >= value.max() - atol)
    chosen = int(tied[np.argmax(h[tied])])
    table = pd.DataFrame({"bandwidth": h, "mean_return": value})
    if criterion == "support_mse":
        table["support_mse"] = loss
    table["chosen"] = np.arange(h.size) == chosen
    return BandwidthSelection(float(h[chosen]), criterion, table)


def decision_margin(scores: Any, action: Any | None = None) -> np.ndarray:
    """Margin of a decision: :math:`Q(x, a) - \\max_{b \\ne a} Q(x, b)`.

    With ``action=None``, ``a`` is the best action and the margin is the best minus the
    second-best score (0 for a tie). Positive when ``a`` is the unique best action, negative
    when another action beats it.

    Parameters
    ----------
    scores : array-like of shape (m, |A|), |A| >= 2
        Action scores (a network's, a probe's, or CBDT supports).
    action : array-like of int of shape (m,), optional
        The action of each row; default the argmax.

    Returns
    -------
    ndarray of shape (m,)
    """
    S = as_float_matrix("scores", scores, finite=False)
    if S.shape[1] < 2:
        raise InputError(f"scores must be (m, |A|) with |A| >= 2, got {S.shape}.")
    if action is None:
        srt = np.sort(S, axis=1)
        return srt[:, -1] - srt[:, -2]
    a = np.asarray(action)
    if a.shape != (S.shape[0],) or a.dtype.kind not in "iu":
        raise InputError(f"action must be {S.shape[0]} integers, got {a.dtype} {a.shape}.")
    if a.size and (a.min() < 0 or a.max() >= S.shape[1]):
        raise InputError(f"action holds an unknown action; scores have {S.shape[1]}.")
    rows = np.arange(S.shape[0])
    other = S.copy()
    other[rows, a] = -np.inf
    return S[rows, a] - other.max(axis=1)
