"""The one estimator base of cbdt: parameters declared once, one validation of the fit data.

Every case-influence estimator (:class:`~cbdt.CaseInfluence`,
:class:`~cbdt.NystromCaseInfluence`, :class:`~cbdt.torch.TorchCaseInfluence` and the
attribution baselines of :mod:`cbdt.baselines`) derives from :class:`CaseEstimator`, in the
manner of scikit-learn's ``BaseEstimator`` + ``validate_data``:

- ``get_params``/``set_params`` read the constructor (:class:`~cbdt._params.ParamsMixin`);
- ``_parameter_constraints`` declares each parameter's valid values once; ``fit`` calls
  :meth:`CaseEstimator._validate_params`, which raises one :class:`~cbdt.exceptions.InputError`
  naming the parameter, what it must be and what it got;
- :meth:`CaseEstimator._validate_data` validates ``(Phi, R, case_ids, action_names)`` the same
  way for every estimator (:func:`validate_fit_data`): pandas rows paired by equal indexes,
  ``R`` as an owned, read-only float64 ``(n, |A|)`` matrix with finite entries, the
  :class:`~cbdt.exceptions.ReturnsWarning` for one column of integer labels, case ids and
  action names; :meth:`CaseEstimator._finish_fit` keeps ``case_ids_``, ``action_names_`` and
  ``feature_names_in_``.
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._params import ParamsMixin
from ._validation import (
    as_float_matrix,
    check_action_names,
    check_case_ids,
    check_feature_names,
    check_finite,
    check_same_index,
    dtype_eps,
)
from .exceptions import InputError, ReturnsWarning

inspect_empty = inspect.Parameter.empty

__all__ = [
    "Constraint",
    "Options",
    "Boolean",
    "PositiveInteger",
    "Real",
    "Checked",
    "FitData",
    "validate_fit_data",
    "CaseEstimator",
]


# ---------------------------------------------------------------------- parameter constraints
class Constraint:
    """What one constructor parameter may be; :meth:`check` raises ``InputError`` otherwise."""

    #: Appended to the message (how to fix it, what the parameter means).
    hint: str = ""

    def allows(self, value: Any) -> bool:  # pragma: no cover - every constraint overrides it
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - every constraint overrides it
        raise NotImplementedError

    def check(self, name: str, value: Any) -> None:
        if not self.allows(value):
            hint = f" {self.hint}" if self.hint else ""
            raise InputError(f"{name} must be {self.describe()}, got {value!r}.{hint}")


class Options(Constraint):
    """One of a fixed set of values (strings or None)."""

    def __init__(self, *options: Any, hint: str = "") -> None:
        self.options, self.hint = options, hint

    def allows(self, value: Any) -> bool:
        return any(value is o or (isinstance(value, str) and value == o) for o in self.options)

    def describe(self) -> str:
        shown = [repr(o) for o in self.options]
        return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


class Boolean(Constraint):
    """``True`` or ``False`` (a numpy bool too; never an integer)."""

    def __init__(self, hint: str = "") -> None:
        self.hint = hint

    def allows(self, value: Any) -> bool:
        return isinstance(value, bool | np.bool_)

    def describe(self) -> str:
        return "True or False"


class PositiveInteger(Constraint):
    """An integer >= 1 (never a bool)."""

    def __init__(self, none: bool = False, hint: str = "") -> None:
        self.none, self.hint = none, hint

    def allows(self, value: Any) -> bool:
        if value is None:
            return self.none
        return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1

    def describe(self) -> str:
        return "a positive integer" + (" or None" if self.none else "")


class Real(Constraint):
    """A finite real number (never a bool) with a lower bound, inclusive or strict."""

    def __init__(self, low: float = 0.0, *, strict: bool = False, none: bool = False,
                 finite: bool = True, hint: str = "") -> None:
        self.low, self.strict, self.none, self.hint = low, strict, none, hint
        self.finite = finite

    def allows(self, value: Any) -> bool:
        if value is None:
            return self.none
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            return False
        v = float(value)
        if np.isnan(v) or (self.finite and not np.isfinite(v)):
            return False
        return v > self.low if self.strict else v >= self.low

    def describe(self) -> str:
        low = f"{self.low:g}"
        what = f"a {'finite ' if self.finite else ''}number {'>' if self.strict else '>='} {low}"
        return what + (" or None" if self.none else "")


class Checked(Constraint):
    """A parameter checked by a validation function ``fn(name, value)`` that raises."""

    def __init__(self, fn: Callable[[str, Any], Any]) -> None:
        self.fn = fn

    def check(self, name: str, value: Any) -> None:
        self.fn(name, value)


# ---------------------------------------------------------------------- fit data
@dataclass(frozen=True)
class FitData:
    """The validated training data of one ``fit``.

    Attributes
    ----------
    Phi : ndarray, numpy.memmap or dask.array.Array of shape (n, H)
        As the estimator's ``check_phi`` returned it (float64 for an in-memory array).
    kind : {"array", "memmap", "reference", "dask"}
        ``"reference"``: an in-memory ``Phi`` kept by reference (``copy=False``), read like a
        memmap.
    R : ndarray of shape (n, |A|)
        Float64, C-ordered, finite, read-only, never a view of the caller's array.
    case_ids : ndarray of shape (n,) or None
    action_names : ndarray of shape (|A|,)
    frame : object
        ``Phi`` as passed (a DataFrame gives ``feature_names_in_``).
    eps : float
        Machine epsilon of the precision ``Phi`` was computed in (rank decisions).
    """

    Phi: Any
    kind: str
    R: np.ndarray
    case_ids: np.ndarray | None
    action_names: np.ndarray
    frame: Any
    eps: float

    @property
    def n(self) -> int:
        return int(self.Phi.shape[0])

    @property
    def H(self) -> int:
        return int(self.Phi.shape[1])


def _float_phi(Phi: Any) -> tuple[np.ndarray, str]:
    return as_float_matrix("Phi", Phi), "array"


def check_returns(R: Any, n: int, *, stacklevel: int = 3) -> np.ndarray:
    """Returns ``R`` as an owned, read-only, finite float64 ``(n, |A|)`` matrix (eq. 5).

    One column of three or more distinct integer values warns
    :class:`~cbdt.exceptions.ReturnsWarning`: it is fitted as the returns of one action,
    which is almost never what class labels mean.
    """
    R_in = R
    R = as_float_matrix("R", R, allow_1d=True, finite=False)
    if R.ndim == 1:
        labels = np.unique(R[np.isfinite(R)])
        if labels.size >= 3 and np.all(labels == np.round(labels)):
            warnings.warn(
                f"R is one column of {labels.size} distinct integer values: it is fitted as "
                "the returns of ONE action, not as class labels. For a classifier pass "
                "cbdt.returns_from_labels(y), one action per class.",
                ReturnsWarning,
                stacklevel=stacklevel,
            )
        R = R[:, None]
    if R is R_in or not R.flags.owndata or not R.flags.c_contiguous:
        # an owned copy: editing the caller's R later (an array, a DataFrame or a tensor,
        # whose numpy view shares its memory) must not break Prop. 1
        R = np.array(R, dtype=np.float64, order="C")
    R.setflags(write=False)
    check_finite("R", R, hint="returns r_i(a) must be finite for every case and action")
    if R.shape[0] != n:
        raise InputError(
            f"Phi has {n} rows (training cases) but R has {R.shape[0]}; row i of both must "
            "belong to training case i."
        )
    return R


def validate_fit_data(
    Phi: Any,
    R: Any,
    *,
    case_ids: Any = None,
    action_names: Any = None,
    check_phi: Callable[[Any], tuple[Any, str]] | None = None,
    eps: float | None = None,
    stacklevel: int = 4,
) -> FitData:
    """One validation of ``(Phi, R, case_ids, action_names)`` for every estimator's ``fit``.

    Parameters
    ----------
    Phi : array-like of shape (n, H)
        Training representations (eq. 4). ``check_phi`` validates it (default: a finite
        float64 matrix).
    R : array-like of shape (n, |A|) or (n,)
        Returns (eq. 5), paired with ``Phi`` by position: as pandas objects both must have
        equal indexes.
    case_ids, action_names : optional
        See :meth:`cbdt.CaseInfluence.fit`.
    check_phi : callable, optional
        ``Phi -> (validated Phi, kind)``.
    eps : float, optional
        Precision in which ``Phi`` was computed (default: its dtype's).

    Returns
    -------
    FitData
    """
    check_same_index(Phi, R)  # pandas Phi and R: rows are paired by position
    frame = Phi
    data_eps = eps or dtype_eps(Phi)
    Phi, kind = (check_phi or _float_phi)(Phi)
    n = int(Phi.shape[0])
    ids = check_case_ids(case_ids, n, frame)
    R_checked = check_returns(R, n, stacklevel=stacklevel)
    names = check_action_names(action_names, R_checked.shape[1], R)
    return FitData(Phi, kind, R_checked, ids, names, frame, data_eps)


# ---------------------------------------------------------------------- the base
class CaseEstimator(ParamsMixin):
    """Base of every cbdt estimator: parameters, their checks and the fit data's validation.

    Subclasses declare ``_parameter_constraints`` (parameter name -> :class:`Constraint`)
    and call, in ``fit``, :meth:`_validate_params`, :meth:`_validate_data` and, once fitted,
    :meth:`_finish_fit`.
    """

    _parameter_constraints: ClassVar[Mapping[str, Constraint]] = {}

    def __repr__(self) -> str:
        """``Name(p=v, ...)`` with the parameters that differ from their defaults."""
        defaults = self._param_defaults()
        shown = []
        for name in self._param_names():
            value = getattr(self, name, None)
            default = defaults.get(name, inspect_empty)
            same = False
            try:
                same = default is not inspect_empty and bool(value == default)
            except (TypeError, ValueError):  # arrays and the like: always shown, briefly
                same = False
            if not same:
                text = repr(value) if np.ndim(value) == 0 else f"<{type(value).__name__}>"
                shown.append(f"{name}={text}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _validate_params(self) -> None:
        """Check every declared parameter (one ``InputError`` naming the first bad one)."""
        for name, constraint in self._parameter_constraints.items():
            constraint.check(name, getattr(self, name))

    def _validate_data(
        self,
        Phi: Any,
        R: Any,
        *,
        case_ids: Any = None,
        action_names: Any = None,
        check_phi: Callable[[Any], tuple[Any, str]] | None = None,
        eps: float | None = None,
    ) -> FitData:
        """:func:`validate_fit_data` (warnings point at the caller of ``fit``)."""
        return validate_fit_data(Phi, R, case_ids=case_ids, action_names=action_names,
                                 check_phi=check_phi, eps=eps, stacklevel=5)

    def _finish_fit(self, data: FitData) -> None:
        """Keep what every fitted estimator names its cases, actions and features by."""
        self.case_ids_ = data.case_ids
        self.action_names_ = data.action_names
        check_feature_names(self, data.frame, reset=True, name="Phi")
