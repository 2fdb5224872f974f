"""Exact, deterministic top-k selection (ties broken by the lower case index)."""

from __future__ import annotations

import numpy as np

__all__ = ["top_k_indices"]


def top_k_indices(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of each row, in descending order of value.

    Ties are broken by the lower column index, also at the k-th place, so the result is a
    deterministic function of ``values``. Runs in O(m n) time (``np.partition``) plus
    O(m k log k) for the final ordering.

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
    if k == n:
        return np.argsort(-values, axis=1, kind="stable")
    # k-th largest value of each row
    kth = -np.partition(-values, k - 1, axis=1)[:, k - 1]
    greater = values > kth[:, None]
    equal = values == kth[:, None]
    need = k - greater.sum(axis=1)  # how many ties at the threshold to take, lowest index first
    take_equal = equal & (np.cumsum(equal, axis=1) <= need[:, None])
    selected = greater | take_equal
    cols = np.nonzero(selected)[1].reshape(m, k)  # ascending index within each row
    vals = np.take_along_axis(values, cols, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    return np.take_along_axis(cols, order, axis=1)
