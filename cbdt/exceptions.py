"""Exceptions raised by :mod:`cbdt`.

Every error names what is wrong and how to fix it. The classes also derive from the builtin
exception a caller would naturally catch (``ValueError``, ``AttributeError``, ...), so generic
handlers keep working.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CBDTError",
    "NotFittedError",
    "RankDeficientError",
    "InputError",
    "MissingExtraError",
    "DegenerateAuditWarning",
    "ReturnsWarning",
    "SolverFallbackWarning",
    "LayerWarning",
    "ScoreUnitsWarning",
]


class CBDTError(Exception):
    """Base class of every error raised on purpose by :mod:`cbdt`."""


class InputError(CBDTError, ValueError):
    """An argument has the wrong shape, type, range or contains NaN/inf."""


class MissingExtraError(CBDTError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it
    (``pip install 'cbdt[plot]'``, ...)."""


class NotFittedError(CBDTError, ValueError, AttributeError):
    """A query method was called before ``fit``."""


class RankDeficientError(CBDTError, np.linalg.LinAlgError, ValueError):
    """The (regularised) Gram matrix is singular or too ill-conditioned to factor exactly.

    Attributes
    ----------
    rank : int
        Numerical rank of the feature matrix (number of Gram eigenvalues above tolerance).
    dim : int
        Number of feature columns (``H``, plus one with an intercept).
    condition_number : float
        Condition number of the Gram matrix (``inf`` when it is exactly singular).
    """

    def __init__(self, message: str, *, rank: int, dim: int, condition_number: float):
        super().__init__(message)
        self.rank = rank
        self.dim = dim
        self.condition_number = condition_number


class DegenerateAuditWarning(UserWarning):
    """An audit signal is constant by construction for the returns it was given.

    Raised (as a warning) by :func:`cbdt.audit.audit_signals` when the returns are label-like
    (e.g. one-hot class labels) or have a single action, so that influence entropy and Gini
    disagreement ranked by contribution carry no information.
    """


class ReturnsWarning(UserWarning):
    """The returns passed to a fit look like something else, e.g. class labels.

    :meth:`cbdt.influence.CaseInfluence.fit` warns when ``R`` is one column of integer labels:
    it would be treated as the returns of a single action.
    """


class SolverFallbackWarning(UserWarning):
    """A fit could not use the exact solver it was asked for and used another, announced.

    :func:`cbdt.torch.from_torch` with ``solver="auto"`` warns when the representation is rank
    deficient (dead or constant units) and it falls back to the minimum-norm ``"lstsq"``
    solution; the fitted object's ``solver_`` records the solver that ran.
    """


class LayerWarning(UserWarning):
    """The layer chosen as the representation is probably not the one meant.

    For example a pre-activation ``nn.Linear`` whose output goes through a nonlinearity before
    the head: the probe on it is not the network's last hidden representation.
    """


class ScoreUnitsWarning(UserWarning):
    """Two sets of scores compared with each other are on different scales.

    For example a cross-entropy classifier's logits against a probe fitted to one-hot returns:
    absolute differences between them mean nothing; read the scale-free measures instead.
    """
