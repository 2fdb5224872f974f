"""Coordinate changes of a representation (Sec. 3.2-3.3, Appendix B.2-B.3, C.1).

A reparameterisation :math:`\\varphi_B(x) = B\\varphi(x)` with invertible ``B`` maps the training
matrix to :math:`\\Phi_B = \\Phi B^\\top` and the Gram matrix to :math:`G_B = BGB^\\top`. The
unregularised coefficient is invariant (eq. 12, 22); a ridge penalty keeps the invariance only
when its metric is co-transformed, :math:`M_B = BMB^\\top`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg

from ._validation import as_float_matrix
from .exceptions import InputError, RankDeficientError

__all__ = ["reparameterize", "zca_whitening", "cotransformed_metric"]


def _check_square_invertible(name: str, B: Any, H: int | None = None) -> np.ndarray:
    B = as_float_matrix(name, B)
    if B.shape[0] != B.shape[1]:
        raise InputError(f"{name} must be square (H, H), got shape {B.shape}.")
    if H is not None and B.shape[0] != H:
        raise InputError(
            f"{name} has shape {B.shape} but the representation has width H = {H}; "
            f"it must be ({H}, {H})."
        )
    s = linalg.svdvals(B)
    if s[-1] <= s[0] * B.shape[0] * np.finfo(float).eps:
        raise InputError(
            f"{name} must be invertible; its smallest singular value is {s[-1]:.3e} "
            f"(largest {s[0]:.3e}). A reparameterisation needs an invertible matrix."
        )
    return B


def reparameterize(Phi: Any, B: Any) -> np.ndarray:
    """Rewrite representations in another basis: rows :math:`\\varphi_B = B\\varphi` (eq. 12).

    Parameters
    ----------
    Phi : array-like of shape (n, H) or (H,)
        Representations as rows (a training matrix or queries).
    B : array-like of shape (H, H)
        Invertible change of basis.

    Returns
    -------
    ndarray of the shape of ``Phi``
        :math:`\\Phi B^\\top`.
    """
    P = as_float_matrix("Phi", Phi, allow_1d=True)
    B = _check_square_invertible("B", B, P.shape[-1])
    return P @ B.T


def zca_whitening(Phi: Any) -> tuple[np.ndarray, np.ndarray]:
    """ZCA whitening of the uncentred Gram matrix, so that :math:`G_B = nI_H` (eq. 13).

    :math:`B = \\sqrt{n}\\,G^{-1/2}` (symmetric, the ZCA choice: the whitened coordinates stay
    as close as possible to the original ones). In the whitened coordinates the coefficient is
    the scaled inner product :math:`\\alpha_i(x) = \\varphi_B(x)^\\top\\varphi_B(x_i)/n`
    (eq. 14), and it equals the original coefficient (eq. 12): whitening changes the form of
    :math:`\\alpha`, not its values (Appendix C.1).

    Parameters
    ----------
    Phi : array-like of shape (n, H)
        Training representations; must have full column rank.

    Returns
    -------
    B : ndarray of shape (H, H)
        The symmetric whitening matrix; apply it to queries with :func:`reparameterize`.
    Phi_white : ndarray of shape (n, H)
        :math:`\\Phi B^\\top`, with :math:`\\Phi_B^\\top\\Phi_B = nI_H`.
    """
    P = as_float_matrix("Phi", Phi)
    n, H = P.shape
    # thin SVD Phi = U S V^T: G^{-1/2} = V S^{-1} V^T and Phi G^{-1/2} = U V^T, which keeps
    # full float64 accuracy (an eigendecomposition of G would square the condition number)
    U, s, Vt = linalg.svd(P, full_matrices=False)
    tol = s[0] * max(n, H) * np.finfo(float).eps if s.size else 0.0
    rank = int(np.sum(s > tol))
    if rank < H:
        cond = float((s[0] / s[-1]) ** 2) if s[-1] > 0 else float("inf")
        raise RankDeficientError(
            f"ZCA whitening needs a full-rank Gram matrix, but Phi has rank {rank} of {H} "
            "(G is singular to working precision). Drop constant or duplicated units, or "
            "whiten only the column space of Phi.",
            rank=rank,
            dim=H,
            condition_number=cond,
        )
    B = np.sqrt(n) * (Vt.T / s) @ Vt
    B = 0.5 * (B + B.T)
    return B, np.sqrt(n) * (U @ Vt)


def cotransformed_metric(B: Any, metric: Any = None) -> np.ndarray:
    """Ridge metric in the coordinates :math:`\\varphi_B = B\\varphi` that keeps invariance.

    Appendix B.2: a penalty :math:`\\lambda v^\\top M v` in the original coordinates becomes
    :math:`\\lambda v_B^\\top (BMB^\\top) v_B` for the readout :math:`v_B = B^{-\\top}v`, so that
    :math:`\\Phi_B(G_B + \\lambda BMB^\\top)^{-1}B\\varphi = \\Phi(G + \\lambda M)^{-1}\\varphi`.
    Pass the result as ``CaseInfluence(ridge=lam, ridge_metric=...)``.

    Parameters
    ----------
    B : array-like of shape (H, H)
        Invertible change of basis.
    metric : array-like of shape (H, H), optional
        Metric in the original coordinates; default :math:`I_H` (isotropic ridge, eq. 11).

    Returns
    -------
    ndarray of shape (H, H)
        :math:`BMB^\\top`.
    """
    B = _check_square_invertible("B", B)
    H = B.shape[0]
    M = np.eye(H) if metric is None else as_float_matrix("metric", metric)
    if M.shape != (H, H):
        raise InputError(f"metric must have shape ({H}, {H}), got {M.shape}.")
    out = B @ M @ B.T
    return 0.5 * (out + out.T)
