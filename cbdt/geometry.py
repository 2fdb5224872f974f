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

__all__ = [
    "reparameterize",
    "zca_whitening",
    "cotransformed_metric",
    "normalized_gram",
    "gram_mismatch",
    "gram_distance",
]


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


def normalized_gram(Phi: Any, *, intercept: bool = True) -> np.ndarray:
    """:math:`\\tilde\\Phi^\\top\\tilde\\Phi / n` with :math:`\\tilde\\Phi = [\\Phi, 1]` (or
    :math:`\\Phi` when ``intercept=False``), in float64."""
    P = np.asarray(Phi, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] == 0:
        raise InputError(f"Phi must be a non-empty (n, H) array, got shape {P.shape}.")
    if intercept:
        P = np.hstack([P, np.ones((P.shape[0], 1))])
    return P.T @ P / P.shape[0]


def gram_mismatch(Phi1: Any, Phi2: Any, *, intercept: bool = True, whiten: bool = True) -> float:
    """Gram mismatch of two sub-memories (the whitened relative Frobenius distance below).

    Parameters
    ----------
    Phi1, Phi2 : array-like of shape (n1, H), (n2, H)
        Representations of the two sub-memories' cases.
    intercept : bool, default=True
        Append the probe's constant coordinate.
    whiten : bool, default=True
        ``True``: :math:`\\lVert C_1 - C_2\\rVert_F / (\\lVert C_1\\rVert_F +
        \\lVert C_2\\rVert_F)` with :math:`C_k = \\bar G^{-1/2}\\hat G_k\\bar G^{-1/2}` and
        :math:`\\bar G = (\\hat G_1 + \\hat G_2)/2` (invariant under invertible
        reparameterisations). ``False``: the same ratio on the raw :math:`\\hat G_k`.

    Returns
    -------
    float in [0, 1]
    """
    G1 = normalized_gram(Phi1, intercept=intercept)
    G2 = normalized_gram(Phi2, intercept=intercept)
    if G1.shape != G2.shape:
        raise InputError(f"Phi1 and Phi2 have different widths: {G1.shape} vs {G2.shape}.")
    return gram_distance(G1, G2, whiten=whiten)


def gram_distance(G1: Any, G2: Any, *, whiten: bool = True) -> float:
    """Relative distance of two Gram matrices, whitened by their mean (:func:`gram_mismatch`).

    Parameters
    ----------
    G1, G2 : array-like of shape (p, p)
        Symmetric positive semi-definite, e.g. :func:`normalized_gram` of two sub-memories.
    whiten : bool, default=True
        Compare :math:`\\bar G^{-1/2} G_k \\bar G^{-1/2}` (invariant under invertible
        reparameterisations) rather than the raw :math:`G_k`.

    Returns
    -------
    float in [0, 1]
    """
    G1 = as_float_matrix("G1", G1)
    G2 = as_float_matrix("G2", G2)
    if G1.shape != G2.shape or G1.shape[0] != G1.shape[1]:
        raise InputError(f"G1 and G2 must be square of one shape, got {G1.shape}, {G2.shape}.")
    if whiten:
        w, U = linalg.eigh(0.5 * (G1 + G2))
        if w[0] <= w[-1] * 1e-12:
            raise InputError(
                "the average normalised Gram matrix is singular (condition number "
                f"{w[-1] / max(w[0], 1e-300):.3g}): the representation has (near-)constant or "
                "duplicated units; the whitened mismatch is undefined. Use whiten=False."
            )
        W = (U / np.sqrt(w)) @ U.T
        C1, C2 = W @ G1 @ W, W @ G2 @ W
    else:
        C1, C2 = G1, G2
    den = np.linalg.norm(C1) + np.linalg.norm(C2)
    return float(np.linalg.norm(C1 - C2) / den) if den > 0 else 0.0
