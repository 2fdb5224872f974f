"""Equality up to rounding: the one assertion for two *different* computations of a number.

The rule of the unit tests: two floating-point results are compared bit for bit
only when they come from the same computation, i.e.

* the same call repeated (determinism: a seed, a refit, a copy, a save/load round trip that
  reads back the very arrays and runs the very code path of the original);
* integers, indices, decisions, booleans and text;
* a guarantee the library documents and that holds by construction on every CPU, e.g. the
  batch invariance of ``top_cases`` (every returned value is the one evaluation
  ``cbdt._ranking._psi`` of its (query, case) pair), the thread invariance of the fit (fixed
  accumulation lanes, ``cbdt._tsqr``), or an exact power-of-two rescaling.

Everything else is a *different* computation of the same quantity: GEMM against GEMV, a
batch against one query, another blocking or chunking, threads against none, float32
against float64, a memmap or dask array against an in-memory one, torch against numpy.
Those agree bit for bit on one CPU and differ in the last bits on another (AVX-512, AVX2,
SSE only and NEON add in other orders, fused or not), so they are compared with
:func:`assert_rounding_equal`, a bound of the size of the rounding error itself, never a
looser one that would hide a real mistake.

The bound. A sum of ``n`` products evaluated in floating point errs by at most
``gamma_n * sum |terms|`` with ``gamma_n ~ n u`` and ``u = eps / 2`` (Higham, *Accuracy and
Stability of Numerical Algorithms*, Sec. 3.1), whatever the order of the additions and
whether they are fused. Two evaluations therefore differ by at most ``n * eps * sum |terms|``:
pass ``ulps=n`` and, as ``scale``, the sum of the magnitudes of the terms of each entry (an
array broadcast against the values) or a scalar that bounds it. The default scale, the
largest ``|desired|``, is right for well-conditioned entries of one size; where the terms
cancel (a coefficient near zero, a support of signed returns) the sum of magnitudes must be
given, since a relative bound per entry (``rtol``) has no rounding-level justification there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Machine epsilon of float64 and float32 (the spacing of the numbers just above 1).
EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)


def rounding_bound(desired: Any, *, ulps: float = 4, scale: Any = None,
                   eps: float = EPS64) -> np.ndarray:
    """``ulps * eps * scale`` (``scale`` defaults to ``max |desired|``): the largest
    difference two evaluations of ``desired`` may show from rounding alone."""
    if scale is None:
        d = np.abs(np.asarray(desired, dtype=np.float64))
        scale = float(d.max()) if d.size else 0.0
    return ulps * eps * np.asarray(scale, dtype=np.float64)


def assert_rounding_equal(actual: Any, desired: Any, *, ulps: float = 4, scale: Any = None,
                          eps: float = EPS64, err_msg: str = "") -> None:
    """Assert ``|actual - desired| <= ulps * eps * scale`` entry by entry.

    Parameters
    ----------
    actual, desired : array-like
        Two different computations of the same quantity (equal shapes).
    ulps : float, default=4
        Multiples of ``eps``: the number of terms ``n`` of the longest sum behind an entry
        (plus a few for the operations after it) when ``scale`` is the sum of the magnitudes
        of those terms; a small constant when ``scale`` is the size of well-conditioned
        entries.
    scale : float or array-like, optional
        Broadcast against the values; default ``max |desired|``.
    eps : float, default=float64's
        :data:`EPS32` for float32 computations.
    err_msg : str
        Added to the failure message.
    """
    a = np.asarray(actual, dtype=np.float64)
    d = np.asarray(desired, dtype=np.float64)
    assert a.shape == d.shape, f"shapes differ: {a.shape} and {d.shape}. {err_msg}"
    bound = rounding_bound(d, ulps=ulps, scale=scale, eps=eps)
    diff = np.abs(a - d)
    bad = ~(diff <= bound)  # NaN differences fail too
    if bad.any():
        worst = np.unravel_index(int(np.argmax(np.where(bad, diff - bound, -np.inf))),
                                 bad.shape) if bad.ndim else ()
        raise AssertionError(
            f"not equal up to rounding ({ulps} x eps = {ulps * eps:.3g} of the scale): "
            f"{int(bad.sum())} of {bad.size} entries differ by more; worst at {worst}: "
            f"{a[worst]!r} vs {d[worst]!r}, difference {diff[worst]:.3g} > bound "
            f"{np.broadcast_to(bound, bad.shape)[worst]:.3g}. {err_msg}"
        )
