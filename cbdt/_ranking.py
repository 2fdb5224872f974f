"""Exact, deterministic top-k selection (ties broken by the lower case index)."""

from __future__ import annotations

import numpy as np

__all__ = ["top_k_indices", "merge_top_k"]


def top_k_indices(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of each row, in descending order of value.

    Ties are broken by the lower column index, also at the k-th place: the result equals
    ``np.argsort(-values, axis=1, kind="stable")[:, :k]``.

    Notes
    -----
    Each row is cut into blocks of about ``sqrt(n / k)`` entries. The k blocks with the largest
    maxima contain the k largest entries (an entry outside them is at most the k-th largest
    block maximum, which is at most the k-th largest entry), so only ``k`` blocks are sorted.
    Rows where a tie with the k-th value could hide in another block are sorted in full. The
    cost is one pass over the ``(m, n)`` array (block maxima) plus small sorts.

    Parameters
    ----------
    values : ndarray of shape (m, n)
        Finite scores.
    k : int
        ``1 <= k <= n``.

    Returns
    -------
    ndarray of shape (m, k)
        Column indices.
    """
    m, n = values.shape
    if m == 1:  # one row: a partition and a sort of the tied candidates, no 2-D machinery
        return _top_k_row(values[0], k)[None, :]
    b = int(np.sqrt(n / k))
    if b < 8 or 2 * k * b > n:  # short rows: partition, then sort only the candidates
        return _top_k_partition(values, k)
    starts = np.arange(0, n, b)
    bmax = np.maximum.reduceat(values, starts, axis=1)  # (m, n_blocks)
    blocks = np.sort(np.argpartition(bmax, bmax.shape[1] - k, axis=1)[:, -k:], axis=1)
    cols = (blocks[:, :, None] * b + np.arange(b)).reshape(m, k * b)  # ascending per row
    valid = cols < n
    cand = np.where(valid, np.take_along_axis(values, np.minimum(cols, n - 1), axis=1), -np.inf)
    order = np.argsort(-cand, axis=1, kind="stable")[:, :k]  # ties: lower column first
    out = np.take_along_axis(cols, order, axis=1)
    # a block outside the chosen ones may reach the k-th value only through an exact tie
    kth = np.take_along_axis(cand, order[:, -1:], axis=1)
    tied = np.flatnonzero((bmax >= kth).sum(axis=1) > k)
    if tied.size:
        out[tied] = np.argsort(-values[tied], axis=1, kind="stable")[:, :k]
    return out


def _top_k_row(v: np.ndarray, k: int) -> np.ndarray:
    """Top-k of one row: the k-th largest by partition, then a stable sort of the entries at
    or above it (ties with the k-th value included, lower index first)."""
    n = v.shape[0]
    if 4 * k >= n:
        return np.argsort(-v, kind="stable")[:k]
    kth = np.partition(v, n - k)[n - k]
    cand = np.flatnonzero(v >= kth)  # ascending
    return cand[np.argsort(-v[cand], kind="stable")[:k]]


def _top_k_partition(values: np.ndarray, k: int) -> np.ndarray:
    """Top-k of short rows: the k-th largest value by partition, then a stable sort of the
    entries at or above it (every tie with the k-th value included)."""
    m, n = values.shape
    if 4 * k >= n:
        return np.argsort(-values, axis=1, kind="stable")[:, :k]
    kth = np.partition(values, n - k, axis=1)[:, n - k]  # k-th largest of each row
    rows, cols = np.nonzero(values >= kth[:, None])  # row-major: columns ascend per row
    order = np.lexsort((cols, -values[rows, cols], rows))  # by row, value desc, column asc
    counts = np.bincount(rows, minlength=m)  # >= k per row
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    take = order[first[:, None] + np.arange(k)]
    return cols[take]


def merge_top_k(
    best_v: np.ndarray,
    best_i: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    best_p: np.ndarray | None = None,
    payload: np.ndarray | None = None,
) -> None:
    """Merge candidate entries into running top-k lists, in place.

    ``best_v``/``best_i`` (shape (m, k)) hold each row's k largest values so far, in
    descending order with ties by the lower index; the candidates ``(rows, cols, vals)`` come
    from later columns, so a candidate that ties with a kept value ranks after it. Only rows
    with candidates are touched; the result equals a stable top-k over all columns seen.
    ``best_p``/``payload`` carry one more value per entry (e.g. the signed contribution
    behind an absolute key) through the same reordering.
    """
    if rows.size == 0:
        return
    k = best_v.shape[1]
    touched, inv = np.unique(rows, return_inverse=True)
    t = touched.size
    # candidates by (row, column): a stable sort by value then breaks ties by column, and
    # the kept entries (all from earlier columns) come first in each row
    span = int(cols.max()) + 1
    o = np.argsort(inv.astype(np.int64) * span + cols, kind="stable")
    inv_o, cols_o = inv[o], cols[o]
    counts = np.bincount(inv_o, minlength=t)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(inv_o.size) - start[inv_o] + k
    width = k + int(counts.max())
    V = np.full((t, width), -np.inf)
    V[:, :k] = best_v[touched]
    V[inv_o, pos] = vals[o]
    idx = np.full((t, width), np.iinfo(np.intp).max, dtype=np.intp)
    idx[:, :k] = best_i[touched]
    idx[inv_o, pos] = cols_o
    take = np.argsort(-V, axis=1, kind="stable")[:, :k]
    best_v[touched] = np.take_along_axis(V, take, axis=1)
    best_i[touched] = np.take_along_axis(idx, take, axis=1)
    if best_p is not None:
        P = np.zeros((t, width))
        P[:, :k] = best_p[touched]
        P[inv_o, pos] = payload[o]
        best_p[touched] = np.take_along_axis(P, take, axis=1)
