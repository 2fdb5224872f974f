"""Returns for a classifier: one-hot labels as action returns (Sec. 2.2 with r_i(a) = 1{y_i = a}).

A classifier trained as a regressor on one-hot targets is the special case
:math:`r_i(a) = \\mathbf 1\\{y_i = a\\}` of the paper's setting, one action per class.
Proposition 1 holds for it unchanged; the audit signals need care (chapter 09):
:func:`cbdt.audit.label_like_returns`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .exceptions import InputError

__all__ = ["returns_from_labels"]


def label_positions(y: Any, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D int64 array of non-negative class indices, or an InputError."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"{name} must be a non-empty 1-D array of class labels, got shape "
                         f"{arr.shape}.")
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or not (arr == np.round(arr)).all():
            bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))][0]
            raise InputError(
                f"{name} must hold integer class indices 0..C-1; found the non-integer value "
                f"{bad!r}. Encode the labels first, e.g. np.unique({name}, "
                "return_inverse=True)[1]."
            )
    elif arr.dtype.kind not in "iu":
        raise InputError(
            f"{name} must hold integer class indices 0..C-1, got dtype {arr.dtype}. Encode the "
            f"labels first, e.g. np.unique({name}, return_inverse=True)[1]."
        )
    if arr.min() < 0:
        raise InputError(
            f"{name} must hold non-negative class indices 0..C-1; found {arr.min()!r}."
        )
    return arr.astype(np.int64)


def returns_from_labels(y: Any, n_classes: int | None = None) -> np.ndarray:
    """One-hot returns :math:`r_i(a) = \\mathbf 1\\{y_i = a\\}` of integer class labels.

    Parameters
    ----------
    y : array-like of int of shape (n,)
        Class indices ``0..C-1`` (integer dtype, or floats with integer values).
    n_classes : int, optional
        ``C``; default ``max(y) + 1``.

    Returns
    -------
    ndarray of float64 of shape (n, C)
        Row ``i`` is 1 at column ``y[i]`` and 0 elsewhere.

    Raises
    ------
    InputError
        For non-integer, negative or non-1-D labels, or labels ``>= n_classes``.

    Examples
    --------
    >>> returns_from_labels([0, 2, 1])
    array([[1., 0., 0.],
           [0., 0., 1.],
           [0., 1., 0.]])
    """
    lab = label_positions(y)
    if n_classes is None:
        C = int(lab.max()) + 1
    else:
        if not isinstance(n_classes, numbers.Integral) or isinstance(n_classes, bool) \
                or n_classes < 1:
            raise InputError(f"n_classes must be a positive integer, got {n_classes!r}.")
        C = int(n_classes)
        if lab.max() >= C:
            raise InputError(
                f"y holds the label {int(lab.max())} but n_classes = {C} allows only 0..{C - 1}."
            )
    out = np.zeros((lab.size, C), dtype=np.float64)
    out[np.arange(lab.size), lab] = 1.0
    return out
