"""scikit-learn style constructor parameters (``get_params``/``set_params``, ``clone``)."""

from __future__ import annotations

from typing import Any

from .exceptions import InputError

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params``/``set_params`` over the names in ``_PARAMS`` (scikit-learn convention)."""

    _PARAMS: tuple[str, ...] = ()

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
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params: Any) -> Any:
        """Set constructor parameters (scikit-learn convention); refit to apply them.

        Returns
        -------
        self
        """
        bad = sorted(set(params) - set(self._PARAMS))
        if bad:
            raise InputError(
                f"unknown parameter(s) {bad} for {type(self).__name__}; valid: "
                f"{list(self._PARAMS)}."
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
