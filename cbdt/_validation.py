"""Input validation shared by every public function (one place, as in scikit-learn)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .exceptions import InputError

__all__ = [
    "as_float_matrix",
    "check_finite",
    "as_query",
    "check_action",
    "check_k",
    "check_nonnegative_scalar",
]


def check_finite(name: str, array: np.ndarray, *, hint: str = "") -> None:
    """Raise :class:`InputError` when ``array`` holds NaN or inf, naming where."""
    finite = np.isfinite(array)
    if not finite.all():
        bad = np.argwhere(~finite)
        first = tuple(int(i) for i in bad[0])
        n_bad = int(bad.shape[0])
        value = array[first]
        msg = (
            f"{name} contains {n_bad} non-finite value(s) (NaN or inf); the first is {value!r} "
            f"at index {first}. Remove or impute these entries before calling cbdt"
        )
        raise InputError(msg + (f" ({hint})." if hint else "."))


def as_float_matrix(
    name: str, X: Any, *, ndim: int = 2, allow_1d: bool = False, finite: bool = True
) -> np.ndarray:
    """Return ``X`` as a float64 array with ``ndim`` dimensions, validated.

    A 1-D input is accepted when ``allow_1d`` (the caller reshapes it). Complex, object and
    empty arrays are rejected with an explanation.
    """
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - numpy raises for exotic inputs only
        raise InputError(f"{name} could not be converted to a numeric array: {exc}") from exc
    if arr.dtype.kind not in "biuf":
        raise InputError(
            f"{name} must be a real numeric array, got dtype {arr.dtype}. "
            "Convert it with np.asarray(..., dtype=float)."
        )
    if arr.ndim != ndim and not (allow_1d and arr.ndim == 1):
        want = f"{ndim}-D" + (" (or 1-D)" if allow_1d else "")
        raise InputError(f"{name} must be {want}, got an array of shape {arr.shape}.")
    if arr.size == 0:
        raise InputError(f"{name} is empty (shape {arr.shape}); it needs at least one row.")
    arr = np.asarray(arr, dtype=np.float64)
    if finite:
        check_finite(name, arr)
    return arr


def as_query(name: str, phi: Any, width: int) -> tuple[np.ndarray, bool]:
    """Validate a query representation of width ``width``.

    Returns the queries as an ``(m, width)`` float64 array and whether the input was 1-D.
    """
    arr = as_float_matrix(name, phi, allow_1d=True)
    single = arr.ndim == 1
    if single:
        arr = arr[None, :]
    if arr.shape[1] != width:
        raise InputError(
            f"{name} has width {arr.shape[1]} but the model was fitted on representations of "
            f"width H = {width}. Pass phi(x) computed by the same representation "
            f"(shape (m, {width}) or ({width},))."
        )
    return arr, single


def check_action(action: Any, n_actions: int, m: int) -> np.ndarray:
    """Validate an action index (int) or one action per query; return an int array of length m."""
    if isinstance(action, numbers.Integral) and not isinstance(action, bool):
        a = int(action)
        if 0 <= a < n_actions:  # one action for all queries: no array checks needed
            return np.full(m, a, dtype=np.intp)
        acts = np.full(1, a, dtype=np.intp)
    else:
        acts = np.asarray(action)
        if acts.ndim != 1 or acts.dtype.kind not in "iu" or acts.shape[0] != m:
            raise InputError(
                f"action must be an integer in [0, {n_actions}) or an integer array with one "
                f"action per query (length {m}); got {action!r}."
            )
        acts = acts.astype(np.intp)
    bad = (acts < 0) | (acts >= n_actions)
    if bad.any():
        raise InputError(
            f"action index {int(acts[bad][0])} is out of range: the model has {n_actions} "
            f"action(s), indexed 0..{n_actions - 1}."
        )
    return acts


def check_k(k: Any, n: int, *, what: str = "training cases") -> int:
    """Validate a top-k size against the number of available items."""
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise InputError(f"k must be a positive integer, got {k!r}.")
    k = int(k)
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}.")
    if k > n:
        raise InputError(f"k = {k} exceeds the number of {what} n = {n}; choose k <= {n}.")
    return k


def check_nonnegative_scalar(name: str, value: Any) -> float:
    """Validate a finite, non-negative real scalar."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InputError(f"{name} must be a non-negative real number, got {value!r}.")
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise InputError(
            f"{name} must be finite and >= 0, got {value}. Use 0 for no regularisation."
        )
    return value


def check_case_ids(case_ids: Any, n: int, data: Any = None) -> np.ndarray | None:
    """The caller's labels of the ``n`` training cases, or ``None`` for plain positions.

    ``case_ids`` wins; otherwise a pandas ``data`` (the ``Phi`` handed to ``fit``) lends its
    index unless that is the default ``RangeIndex`` (whose labels are the positions).
    """
    if case_ids is None:
        index = getattr(data, "index", None)
        if index is None or not hasattr(index, "to_numpy"):
            return None
        if type(index).__name__ == "RangeIndex" and index.start == 0 and index.step == 1:
            return None
        case_ids = index
    ids = np.asarray(case_ids.to_numpy() if hasattr(case_ids, "to_numpy") else case_ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise InputError(
            f"case_ids must name every training case: one label per row of Phi (n = {n}), got "
            f"shape {ids.shape}."
        )
    ids = ids.copy()
    ids.setflags(write=False)
    return ids
