"""Chapter 02, Proposition 1 numerically: the paper beside the book.

The chapter runs its checks inline (a few lines of linear algebra each); :func:`chapter_claims`
turns what it computed into the rows of its section of the reproducibility page.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import ChapterClaims, Claim, fmt, power10, sci

__all__ = [
    "EXACT_TOL",
    "RATE_TOL",
    "chapter_claims",
]

#: Relative error below which the identity :math:`Q = \alpha R` counts as exact (rounding).
EXACT_TOL = 1e-10


#: Largest distance of a fitted log-log slope from 1 that still counts as the rate O(lambda).
RATE_TOL = 0.05


def chapter_claims(
    exact_error: float,
    alpha_norm: float,
    feasible_norms: Any,
    sparse_norm: float,
    ridge_slopes: Any,
    ridge_constant_ok: bool,
    *,
    n: int,
    H: int,
    n_queries: int,
    tol: float = EXACT_TOL,
) -> ChapterClaims:
    """The rows of chapter 02 (Proposition 1) for the reproducibility page.

    Every value and status is derived from the arguments, which the chapter has computed:

    * the identity :math:`Q = \\alpha R` (eq. 9) *agrees* when the relative error is below
      ``tol`` (rounding), else it *does not hold*; the error itself is machine-dependent
      rounding and is shown as a bound only;
    * the minimum-norm property *agrees* when every other feasible solution of
      :math:`\\Phi^\\top\\beta = \\varphi(x)` the chapter drew is strictly longer than
      :math:`\\alpha(x)`;
    * the ridge limit (eq. 11 to eq. 10) *agrees* when the distance
      :math:`\\lVert\\alpha_\\lambda - \\alpha\\rVert` shrinks with :math:`\\lambda` for every query
      (all log-log slopes positive); the reason says whether the slopes show the first-order
      rate (within :data:`RATE_TOL` of 1, with the predicted constant).

    Parameters
    ----------
    exact_error : float
        :math:`\\max|Q - \\alpha R| / \\max|Q|` over the chapter's queries and actions.
    alpha_norm : float
        :math:`\\lVert\\alpha(x)\\rVert` for the chapter's query.
    feasible_norms : array-like of shape (s,)
        Norms of the other feasible solutions :math:`\\beta = \\alpha(x) + \\eta` drawn by the
        chapter (:math:`\\Phi^\\top\\eta = 0`).
    sparse_norm : float
        Norm of the exact solution supported on the first ``H`` training cases only.
    ridge_slopes : array-like of shape (q,)
        Log-log slope of :math:`\\lVert\\alpha_\\lambda(x) - \\alpha(x)\\rVert` against
        :math:`\\lambda` for small :math:`\\lambda`, one per query.
    ridge_constant_ok : bool
        Whether :math:`\\lVert\\alpha_\\lambda - \\alpha\\rVert/\\lambda` at the smallest
        :math:`\\lambda` matches :math:`\\lVert\\Phi G^{-2}\\varphi(x)\\rVert`.
    n, H, n_queries : int
        Training cases, representation width and number of queries of the chapter.
    tol : float, default=:data:`EXACT_TOL`
        Bound on the relative error of an exact identity.

    Returns
    -------
    cbdt.book.claims.ChapterClaims
    """
    feasible = np.asarray(feasible_norms, dtype=float).ravel()
    slopes = np.asarray(ridge_slopes, dtype=float).ravel()
    tol_md = power10(tol)

    exact = float(exact_error) < tol
    identity = Claim(
        r"$Q = \alpha R$ exactly (Prop. 1)",
        "exact",
        f"relative error below ${tol_md}$ on {n_queries} queries"
        if exact else f"relative error ${sci(exact_error)}$",
        "agrees" if exact else "does not hold",
        "" if exact else f"the error exceeds rounding level (${tol_md}$)",
    )

    others = np.append(feasible, float(sparse_norm))
    shorter = int((others <= float(alpha_norm)).sum())
    ratio = float(sparse_norm) / float(alpha_norm)
    min_norm = Claim(
        r"$\alpha$ is the minimum-norm solution of $\Phi^\top\beta=\varphi(x)$",
        "proof (App. B.1)",
        (f"all {others.size} other feasible $\\beta$ are longer than "
         f"$\\lVert\\alpha(x)\\rVert = {fmt(alpha_norm)}$; the exact one on {H} cases only is "
         f"{fmt(ratio)} times longer")
        if shorter == 0 else
        f"{shorter} of {others.size} other feasible $\\beta$ are not longer than $\\alpha(x)$",
        "agrees" if shorter == 0 else "does not hold",
        "" if shorter == 0 else "a feasible solution at most as long as $\\alpha(x)$ contradicts "
        "Step 3 of the proof",
    )

    converges = bool(slopes.size) and bool((slopes > 0).all())
    first_order = converges and bool(np.abs(slopes - 1.0).max() < RATE_TOL) and ridge_constant_ok
    slope_txt = ", ".join(f"{s:.2f}" for s in slopes)
    if first_order:
        ridge_reason = (r"the paper states the limit; the chapter also finds the rate $O(\lambda)$ "
                        r"with the predicted constant $\lVert\Phi G^{-2}\varphi(x)\rVert$")
    elif converges:
        ridge_reason = (f"converges, but the log-log slopes ({slope_txt}) do not show the "
                        r"first-order rate $O(\lambda)$")
    else:
        ridge_reason = r"$\lVert\alpha_\lambda-\alpha\rVert$ does not shrink with $\lambda$"
    ridge = Claim(
        r"ridge $\alpha_\lambda \to \alpha$ as $\lambda\to0$ (eq. 11)",
        "converges",
        f"log-log slope of $\\lVert\\alpha_\\lambda-\\alpha\\rVert$ against $\\lambda$: "
        f"{slope_txt} ({slopes.size} queries)",
        "agrees" if converges else "does not hold",
        ridge_reason,
    )

    intro = [
        f"A frozen random tanh layer with $H = {H}$ units, $n = {n}$ training cases and "
        f"{n_queries} queries. The paper's statements here are exact algebra, so the book "
        "checks them to rounding error; the size of that error depends on the machine's BLAS "
        "and is shown as a bound."
    ]
    return ChapterClaims(
        chapter="02",
        title="Proposition 1: exactness, minimum norm, ridge limit",
        doc="notebooks/02_proposition1",
        claims=[identity, min_norm, ridge],
        intro=intro,
    )
