"""scikit-learn style constructor parameters (``get_params``/``set_params``, ``clone``)."""

from __future__ import annotations

import inspect
from typing import Any

from .exceptions import InputError

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params``/``set_params`` over the constructor's parameters (scikit-learn
    convention): the names and defaults are read from the ``__init__`` signatures, so the
    constructor is the one place that lists them.

    A subclass whose ``__init__`` passes ``**params`` on to its parent's has the parent's
    parameters too.
    """

    @classmethod
    def _param_signature(cls) -> dict[str, inspect.Parameter]:
        out: dict[str, inspect.Parameter] = {}
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            params = inspect.signature(init).parameters.values()
            for p in params:
                if (p.name != "self" and p.name not in out
                        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)):
                    out[p.name] = p
            if not any(p.kind == p.VAR_KEYWORD for p in params):
                break
        return out

    @classmethod
    def _param_names(cls) -> tuple[str, ...]:
        """The constructor's parameter names, in signature order."""
        return tuple(cls._param_signature())

    @classmethod
    def _param_defaults(cls) -> dict[str, Any]:
        """The constructor's defaults, by name."""
        return {k: p.default for k, p in cls._param_signature().items()
                if p.default is not p.empty}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters, as scikit-learn's ``get_params`` (``clone`` works).

        Parameters
        ----------
        deep : bool, default=True
            Accepted for compatibility; there are no nested estimators.

        Returns
        -------
        dict
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Any:
        """Set constructor parameters (scikit-learn convention); refit to apply them.

        Returns
        -------
        self
        """
        bad = sorted(set(params) - set(self._param_names()))
        if bad:
            raise InputError(
                f"unknown parameter(s) {bad} for {type(self).__name__}; valid: "
                f"{list(self._param_names())}."
            )
        for name, value in params.items():
            setattr(self, name, value)
        return self


def read_saved_params(f: Any, path: Any, known: tuple[str, ...], bad: Any) -> dict:
    """The constructor parameters stored (as JSON) in the ``"params"`` entry of a saved
    estimator file ``f``; ``bad(what)`` builds the error for a damaged file. Parameters this
    version does not know (a newer cbdt wrote the file) are an InputError."""
    import json

    try:
        params = json.loads(str(f["params"]))
    except ValueError as err:
        raise bad(f"its 'params' entry is not JSON ({err})") from None
    if not isinstance(params, dict):
        raise bad("its 'params' entry is not a mapping of parameter names")
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise InputError(
            f"{path!s} sets parameter(s) {unknown} that this version of cbdt does not "
            "know: it was written by a newer cbdt. Upgrade cbdt (pip install -U cbdt) or "
            "refit and save it with this version."
        )
    return params
