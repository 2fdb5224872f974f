"""Input validation shared by every public function (one place, as in scikit-learn)."""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from .exceptions import InputError

__all__ = [
    "as_float_matrix",
    "check_finite",
    "non_numeric_columns",
    "non_numeric_message",
    "as_query",
    "check_action",
    "check_action_names",
    "check_k",
    "check_nonnegative_scalar",
]


def shown(value: Any) -> str:
    """``repr`` of ``value`` as a reader wrote it: a numpy scalar as its Python value
    (``nan``, ``3``, ``'buy'``), not ``np.float64(nan)``."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def check_finite(name: str, array: np.ndarray, *, hint: str = "") -> None:
    """Raise :class:`InputError` when ``array`` holds NaN or inf, naming where."""
    finite = np.isfinite(array)
    if not finite.all():
        bad = np.argwhere(~finite)
        first = tuple(int(i) for i in bad[0])
        n_bad = int(bad.shape[0])
        value = array[first]
        msg = (
            f"{name} contains {n_bad} non-finite value(s) (NaN or inf); the first is {shown(value)} "
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
    if _is_pandas(X):
        non_numeric_columns(name, X)  # raises, naming the columns, when any is not numeric
        try:  # nullable (Int64, Float64, boolean) columns: missing values become NaN
            X = X.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):  # pragma: no cover - numeric columns convert
            X = X.to_numpy()
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - numpy raises for exotic inputs only
        raise InputError(f"{name} could not be converted to a numeric array: {exc}") from exc
    if arr.dtype.kind not in "biuf":
        raise InputError(non_numeric_message(name, arr))
    if arr.ndim != ndim and not (allow_1d and arr.ndim == 1):
        want = f"{ndim}-D" + (" (or 1-D)" if allow_1d else "")
        raise InputError(f"{name} must be {want}, got an array of shape {arr.shape}.")
    if arr.size == 0:
        if arr.ndim == 2 and arr.shape[0] > 0:
            raise InputError(
                f"{name} has no columns (shape {arr.shape}); it needs at least one column "
                "(a feature, or an action for returns)."
            )
        raise InputError(f"{name} has no rows (shape {arr.shape}); it needs at least one.")
    arr = np.asarray(arr, dtype=np.float64)
    if finite:
        check_finite(name, arr)
    return arr


def _is_pandas(X: Any) -> bool:
    return type(X).__module__.split(".")[0] == "pandas" and hasattr(X, "to_numpy")


def non_numeric_columns(name: str, X: Any) -> None:
    """Raise :class:`InputError` naming the non-numeric columns of a pandas ``X``.

    The advice works: one-hot encode the columns (``pandas.get_dummies``) or drop them.
    A Series is treated as one column.
    """
    import pandas as pd

    frame = X.to_frame() if isinstance(X, pd.Series) else X
    if not isinstance(frame, pd.DataFrame):
        return
    bad = [
        c for c, dt in frame.dtypes.items()
        if not (pd.api.types.is_numeric_dtype(dt) and not pd.api.types.is_complex_dtype(dt))
    ]
    if not bad:
        return
    listed = ", ".join(f"{c!r} ({frame.dtypes[c]}, e.g. {_example(frame[c])})" for c in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    var = name.split()[0] if name.split()[0].isidentifier() else "X"
    # numbers stored as text need a conversion, not an encoding
    text = [c for c in bad if _numbers_as_text(frame[c])]
    other = [c for c in bad if c not in text]
    advice = []
    if text:
        advice.append(
            f"{'Column(s) ' + repr(text[:5]) + ' hold' if other else 'They hold'} numbers "
            f"stored as text: convert them with {var}[{text[:5]!r}] = "
            f"{var}[{text[:5]!r}].apply(pandas.to_numeric)."
        )
    if other:
        advice.append(
            f"Encode {'the others' if text else 'them'} as numbers first, e.g. one-hot with "
            f"{var} = pandas.get_dummies({var}, columns={other[:5]!r}, dtype=float), or drop "
            f"them with {var} = {var}.drop(columns={other[:5]!r})."
        )
    raise InputError(
        f"{name} must be numeric, but {len(bad)} column(s) of the DataFrame are not: "
        f"{listed}{more}. " + " ".join(advice)
    )


def _numbers_as_text(col: Any) -> bool:
    """Whether a non-numeric column holds only numbers written as text (``"1.5"``)."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(col.dtype) or pd.api.types.is_datetime64_any_dtype(
            col.dtype) or isinstance(col.dtype, pd.CategoricalDtype):
        return False
    vals = col.dropna()
    if not len(vals) or not all(isinstance(v, str) for v in vals.tolist()):
        return False
    return bool(pd.to_numeric(vals, errors="coerce").notna().all())


def _example(col: Any) -> str:
    """The first value of a column that is not a number (or its first value)."""
    import pandas as pd

    vals = col.dropna()
    if not len(vals):
        return "all missing"
    if vals.dtype == object:
        bad = vals[pd.to_numeric(vals, errors="coerce").isna()]
        if len(bad):
            return f"{bad.iloc[0]!r} in row {bad.index[0]!r}"
    return repr(vals.iloc[0])


def non_numeric_message(name: str, arr: np.ndarray) -> str:
    """Why ``arr`` (not a DataFrame) is not numeric, and a fix that works for its values."""
    if arr.dtype.kind == "c":
        return (
            f"{name} must be real, got the complex dtype {arr.dtype}; pass its real part "
            f"(np.real({name.split()[0]})) or its modulus if that is what the model sees."
        )
    if arr.dtype.kind in "OUS" and arr.size:
        flat = arr.reshape(-1)
        for pos, v in enumerate(flat.tolist()):
            try:
                float(v)
            except (TypeError, ValueError):
                where = np.unravel_index(pos, arr.shape)
                at = ", ".join(f"{ax} {int(i)}" for ax, i in zip(("row", "column"), where,
                                                                     strict=False))
                col = f" (column {int(where[1])})" if arr.ndim == 2 else ""
                return (
                    f"{name} must be numeric, but it holds the non-numeric value {v!r} at {at} "
                    f"(dtype {arr.dtype}). Encode that column{col} as numbers (e.g. one-hot "
                    "with pandas.get_dummies on a DataFrame), or drop it, before calling cbdt."
                )
        return (
            f"{name} must be a real numeric array, got dtype {arr.dtype} (numbers stored as "
            "Python objects or text). Convert it with np.asarray(..., dtype=float)."
        )
    return (
        f"{name} must be a real numeric array, got dtype {arr.dtype}. Encode it as numbers "
        "(e.g. timestamps with .astype('int64') or as elapsed seconds) before calling cbdt."
    )


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


def check_action(action: Any, n_actions: int, m: int, *, names: Any = None) -> np.ndarray:
    """Action positions (m,) of an ``action`` argument.

    ``action`` is a position (int), an action name (an entry of ``names``, e.g. a returns
    DataFrame's column), or an array-like (list, ndarray, pandas Series) of either with one
    action per query. An integer is always a position.
    """
    labels = None if names is None else np.asarray(names)
    if hasattr(action, "to_numpy") and not isinstance(action, np.ndarray):
        action = action.to_numpy()
    if isinstance(action, numbers.Integral) and not isinstance(action, bool | np.bool_):
        a = int(action)
        if 0 <= a < n_actions:  # one action for all queries: no array checks needed
            return np.full(m, a, dtype=np.intp)
        acts = np.full(1, a, dtype=np.intp)
    elif np.ndim(action) == 0 and not isinstance(action, bool | np.bool_ | float | np.floating):
        return np.full(m, _action_position(action, labels, n_actions), dtype=np.intp)
    else:
        acts = np.asarray(action)
        if acts.ndim != 1 or acts.shape[0] != m or acts.dtype.kind not in "iuUSO":
            raise InputError(
                f"action must be an action position in [0, {n_actions}), an action name "
                f"{_names_hint(labels, n_actions)}, or an array with one action per query "
                f"(length {m}); got {_short(action)}."
            )
        if acts.dtype.kind in "US" or acts.dtype.kind == "O":
            acts = np.array(
                [
                    int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool)
                    else _action_position(v, labels, n_actions, query=j)
                    for j, v in enumerate(acts.tolist())
                ],
                dtype=np.intp,
            )
        acts = acts.astype(np.intp)
    bad = (acts < 0) | (acts >= n_actions)
    if bad.any():
        named = ""
        if labels is not None and not np.array_equal(labels, np.arange(n_actions)):
            named = (
                f" An integer is a position; the action names are {_list(labels)} (pass a name "
                "or its position)."
            )
        raise InputError(
            f"action index {int(acts[bad][0])} is out of range: the model has {n_actions} "
            f"action(s), indexed 0..{n_actions - 1}.{named}"
        )
    return acts


def _short(v: Any, limit: int = 80) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _list(labels: np.ndarray, limit: int = 20) -> str:
    items = [repr(v.item() if hasattr(v, "item") else v) for v in labels[:limit]]
    more = f", ... ({labels.size} in all)" if labels.size > limit else ""
    return "[" + ", ".join(items) + more + "]"


def _names_hint(labels: np.ndarray | None, n_actions: int) -> str:
    if labels is None or np.array_equal(labels, np.arange(n_actions)):
        return "(this model's actions are unnamed: fit with a returns DataFrame or action_names=)"
    return f"(one of {_list(labels)})"


def _action_position(
    value: Any, labels: np.ndarray | None, n_actions: int, query: int | None = None
) -> int:
    """Position of the action named ``value``, or an InputError listing the names."""
    if labels is not None:
        hits = np.flatnonzero(labels == value) if labels.dtype.kind != "O" else np.flatnonzero(
            [lab == value for lab in labels.tolist()]
        )
        if hits.size:
            return int(hits[0])
    where = "" if query is None else f" (query {query})"
    if labels is None or np.array_equal(labels, np.arange(n_actions)):
        raise InputError(
            f"action {shown(value)}{where} is not an action of this model: its {n_actions} actions "
            f"are unnamed, so pass a position 0..{n_actions - 1}, or fit with a returns "
            "DataFrame whose columns name the actions (or action_names=[...])."
        )
    raise InputError(
        f"action {shown(value)}{where} is not an action name of this model; the actions are "
        f"{_list(labels)} (or their positions 0..{n_actions - 1})."
    )


def check_action_names(action_names: Any, n_actions: int, returns: Any = None) -> np.ndarray:
    """Names of the ``n_actions`` actions: ``action_names``, else the columns of a returns
    DataFrame, else the positions ``0..n_actions-1``; a read-only 1-D array."""
    if action_names is None:
        cols = getattr(returns, "columns", None)
        if cols is None or not hasattr(cols, "to_numpy"):
            names = np.arange(n_actions)
        elif type(cols).__name__ == "RangeIndex" and cols.start == 0 and cols.step == 1:
            names = np.arange(n_actions)
        else:
            names = cols.to_numpy()
            what = "the columns of R"
    else:
        names = action_names.to_numpy() if hasattr(action_names, "to_numpy") else action_names
        names = np.asarray(names)
        what = "action_names"
    if action_names is not None or names.dtype.kind not in "iu" or not np.array_equal(
        names, np.arange(n_actions)
    ):
        if names.ndim != 1 or names.shape[0] != n_actions:
            raise InputError(
                f"action_names must name every action: one name per column of R (|A| = "
                f"{n_actions}), got shape {names.shape}."
            )
        if names.dtype.kind == "O" and all(isinstance(v, str) for v in names.tolist()):
            names = names.astype(str)
        uniq, counts = np.unique(names.astype(str), return_counts=True)
        if (counts > 1).any():
            raise InputError(
                f"{what} must name each action once; {uniq[counts > 1].tolist()} appear "
                "more than once. Rename the duplicated actions."
            )
        if names.dtype.kind in "bfc":
            raise InputError(
                f"{what} must be strings or integers, got dtype {names.dtype}; e.g. "
                "action_names=[str(c) for c in R.columns]."
            )
    names = names.copy()
    names.setflags(write=False)
    return names


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


def check_positive_int(name: str, value: Any) -> int:
    """``value`` as an int >= 1 (bools refused), or an InputError naming ``name``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {shown(value)}.")
    return int(value)


def check_nonnegative_scalar(name: str, value: Any) -> float:
    """Validate a finite, non-negative real scalar."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InputError(f"{name} must be a non-negative real number, got {shown(value)}.")
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
    import pandas as pd

    index = pd.Index(ids)
    if not index.is_unique:
        dup = index[index.duplicated()].unique()
        names = ", ".join(shown(v) for v in dup[:5]) + (
            f" and {len(dup) - 5} more" if len(dup) > 5 else "")
        source = "case_ids" if case_ids is not getattr(data, "index", None) else (
            "the index of Phi (its labels become the case ids)")
        raise InputError(
            f"{source} must be unique: each names one training case in top_cases, explain "
            f"and saved fits, but {len(dup)} label(s) occur more than once: {names}. Pass "
            "unique labels, or fit on Phi.reset_index(drop=True) to name cases by position."
        )
    ids = ids.copy()
    ids.setflags(write=False)
    return ids


def storable_ids(ids: np.ndarray, what: str = "case_ids_") -> np.ndarray:
    """Case ids (or action names) as an array ``np.savez`` writes without pickle (numbers,
    strings, dates)."""
    if ids.dtype != object:
        return ids
    if all(isinstance(v, str) for v in ids):
        return ids.astype(str)
    kinds = sorted({type(v).__name__ for v in ids})
    fix = (
        "action_names=[str(a) for a in R.columns]" if what == "action_names_"
        else "case_ids=frame.index.astype(str)"
    )
    raise InputError(
        f"{what} hold Python objects of types {kinds}, which an .npz file cannot store "
        f"without pickle; refit with {what[:-1]} converted to strings or integers "
        f"(e.g. {fix})."
    )


# ---------------------------------------------------------------------- labels (pandas)
def get_feature_names(X: Any) -> np.ndarray | None:
    """Column names of a pandas ``X`` when all are strings, else ``None``.

    As scikit-learn's ``_get_feature_names``: a DataFrame whose column names are all
    strings has feature names; an array, a DataFrame with integer (or mixed) column names has
    none. A pandas Series (one query row) lends its index when all its labels are strings.

    Parameters
    ----------
    X : object
        Any input; only pandas objects can carry names.

    Returns
    -------
    ndarray of dtype object, shape (H,), or None
    """
    if not _is_pandas(X):
        return None
    labels = getattr(X, "columns" if getattr(X, "ndim", 2) == 2 else "index", None)
    if labels is None or len(labels) == 0:
        return None
    values = np.asarray(labels, dtype=object)
    if not all(isinstance(v, str) for v in values.tolist()):
        return None
    return values


def check_feature_names(
    estimator: Any,
    X: Any,
    *,
    reset: bool,
    name: str = "phi",
    attr: str = "feature_names_in_",
    fix_var: str = "q",
    stacklevel: int = 4,
) -> None:
    """Set (``reset=True``, in ``fit``) or check (at a query) the feature names of ``X``.

    The one implementation of scikit-learn's ``BaseEstimator._check_feature_names`` for
    every cbdt estimator. At ``fit`` it sets ``estimator.<attr>`` (``feature_names_in_``)
    from a DataFrame whose column names are all strings and deletes it otherwise. At a
    query:

    * names at fit and in ``X``, different (missing, unexpected or reordered columns):
      :class:`~cbdt.exceptions.InputError` naming the columns. cbdt reads columns by
      position, so it refuses rather than reorders: select the columns as at fit,
      ``q[est.feature_names_in_]``;
    * names at fit, none in ``X`` (an array, a DataFrame with integer column names):
      accepted silently, read by position (scikit-learn warns here; cbdt does not, so that
      a DataFrame fit can be queried with the arrays a representation returns);
    * no names at fit, names in ``X``: a ``UserWarning`` (as scikit-learn), read by
      position.

    Parameters
    ----------
    estimator : object
        The estimator whose ``attr`` holds the names.
    X : object
        The training ``Phi`` (``reset=True``) or a query.
    reset : bool
        Whether this is ``fit`` (set the names) or a query (check them).
    name : str, default="phi"
        How ``X`` is named in messages.
    attr : str, default="feature_names_in_"
        The attribute holding the names (``input_names_in_`` for the inputs of a torch
        audit).
    fix_var : str, default="q"
        The variable the advice selects columns of.

    Raises
    ------
    InputError
        At a query, when ``X`` names other columns than the fit, or the same in another
        order.
    """
    names = get_feature_names(X)
    if reset:
        if names is None or getattr(X, "ndim", 2) != 2:  # a Series' index names rows here
            estimator.__dict__.pop(attr, None)
        else:
            names.setflags(write=False)
            setattr(estimator, attr, names)
        return
    fitted = getattr(estimator, attr, None)
    if names is None:
        return
    est = type(estimator).__name__
    if fitted is None:
        warnings.warn(
            f"{name} has feature names (the column names of a DataFrame), but {est} was fitted "
            "without feature names; its columns are read by position, as at fit.",
            UserWarning,
            stacklevel=stacklevel,
        )
        return
    fitted_list = [str(v) for v in np.asarray(fitted).tolist()]
    given = names.tolist()
    if fitted_list == given:
        return
    given_set, fitted_set = set(given), set(fitted_list)
    missing = [c for c in fitted_list if c not in given_set]
    unexpected = [c for c in given if c not in fitted_set]
    parts = []
    if missing:
        parts.append(f"missing column(s) {_list(np.asarray(missing, dtype=object))}")
    if unexpected:
        parts.append(f"unexpected column(s) {_list(np.asarray(unexpected, dtype=object))}")
    if not parts:  # the same names (or duplicates of them) in another order
        pos = next(
            (i for i, (a, b) in enumerate(zip(fitted_list, given, strict=False)) if a != b),
            min(len(given), len(fitted_list)),
        )
        parts.append(
            f"the columns are reordered: {_list(names)} (position {pos} is "
            f"{given[pos] if pos < len(given) else None!r}, at fit "
            f"{fitted_list[pos] if pos < len(fitted_list) else None!r})"
        )
    fix = f"{fix_var}[est.{attr}]"
    raise InputError(
        f"the columns of {name} do not match those {est} was fitted on ({attr} = "
        f"{_list(np.asarray(fitted_list, dtype=object))}): {'; '.join(parts)}. Columns are "
        f"read by position, so cbdt refuses to guess; select and order the columns as at "
        f"fit: {fix}" + (
            " (after adding the missing ones)." if missing else "."
        )
    )


def check_same_index(X: Any, R: Any, *, x_name: str = "Phi", r_name: str = "R") -> None:
    """Refuse pandas ``X`` and ``R`` whose row indexes differ (rows are paired by position).

    cbdt pairs row ``i`` of ``X`` with row ``i`` of ``R``, never by label; when both are
    pandas objects (DataFrame or Series) with the same number of rows, their indexes must be
    equal. An array on either side is paired by position, as in scikit-learn. (Different row
    counts are left to the caller's shape check.)

    Parameters
    ----------
    X, R : object
        The training inputs (``Phi`` or ``X``) and returns.
    x_name, r_name : str
        Their names in the message (and in the advice).

    Raises
    ------
    InputError
        Naming the first position where the labels differ, how many differ, and how to
        align: ``R.loc[Phi.index]`` or ``.reset_index(drop=True)`` on both.
    """
    if not (_is_pandas(X) and _is_pandas(R)):
        return
    xi, ri = getattr(X, "index", None), getattr(R, "index", None)
    if xi is None or ri is None or len(xi) != len(ri) or xi.equals(ri):
        return
    xa, ra = np.asarray(xi, dtype=object), np.asarray(ri, dtype=object)
    differ = np.fromiter((a != b for a, b in zip(xa.tolist(), ra.tolist(), strict=True)),
                         dtype=bool, count=len(xa))
    if not differ.any():  # equal labels, other index types (e.g. 0..n-1 as int and object)
        return
    pos = int(np.argmax(differ))
    common = xi.intersection(ri)
    if len(common) == 0:
        how = (
            f"{r_name}'s index has no label in common with {x_name}'s; if the rows already "
            f"correspond by position, drop both indexes: {x_name} = "
            f"{x_name}.reset_index(drop=True) and {r_name} = {r_name}.reset_index(drop=True)"
        )
    else:
        how = (
            f"align them: {r_name} = {r_name}.loc[{x_name}.index] (the same labels in another "
            f"order), or, if the rows already correspond by position, drop both indexes with "
            f".reset_index(drop=True)"
        )
    raise InputError(
        f"{x_name} and {r_name} are pandas objects with different row indexes: at position "
        f"{pos} {x_name} has the label {xa[pos]!r} but {r_name} has {ra[pos]!r} "
        f"({int(differ.sum())} of {len(xa)} positions differ). cbdt pairs row i of {x_name} "
        f"with row i of {r_name} by position, never by label, so it refuses rather than pair "
        f"the wrong rows; {how}."
    )


_EPS64 = float(np.finfo(np.float64).eps)


def dtype_eps(Phi: Any) -> float:
    """Machine epsilon of the dtype ``Phi`` was computed in: float32's for a float32 (or
    narrower) array, memmap, dask array, tensor or all-float32 DataFrame, float64's otherwise
    (float64 and integer data, lists). The fit converts to float64, but a rank tolerance below
    the data's own rounding would count that rounding as rank."""
    dt = getattr(Phi, "dtype", None)
    if dt is None and hasattr(Phi, "dtypes"):  # a DataFrame: its widest column
        try:
            dt = np.result_type(*list(Phi.dtypes))
        except TypeError:
            return _EPS64
    if dt is None:
        return _EPS64
    if not isinstance(dt, np.dtype):  # e.g. torch.float32, torch.bfloat16
        name = str(dt).rpartition(".")[2]
        if name == "bfloat16":
            return 2.0**-7
        try:
            dt = np.dtype(name)
        except TypeError:
            return _EPS64
    return max(float(np.finfo(dt).eps), _EPS64) if dt.kind == "f" else _EPS64
