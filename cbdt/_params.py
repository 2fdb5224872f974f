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
