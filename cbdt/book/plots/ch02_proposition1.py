"""Chapter 02, Proposition 1: coefficient maps, minimum-norm and ridge limits.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

from cbdt.exceptions import InputError


def plot_coefficient_map(X, alpha, query=None, *, ax=None, title=None, vmax=None):
    """Case-influence coefficients :math:`\\alpha_i(x)` (eq. 10) drawn at the training inputs.

    Each training input :math:`x_i` (2-D) is a dot coloured by :math:`\\alpha_i(x)` on a
    symmetric diverging scale (red positive, blue negative); the query ``x`` is a star.

    Parameters
    ----------
    X : array-like of shape (n, 2)
        Training inputs.
    alpha : array-like of shape (n,)
        Coefficients of one query, e.g. ``CaseInfluence.coefficients(phi(x))``.
    query : array-like of shape (2,), optional
    ax : matplotlib.axes.Axes, optional
    title : str, optional
    vmax : float, optional
        Half-range of the colour scale; default ``max |alpha|``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    X = np.asarray(X, dtype=float)
    a = np.asarray(alpha, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2 or a.shape != (X.shape[0],):
        raise InputError(
            f"X must have shape (n, 2) and alpha shape (n,); got {X.shape} and {a.shape}."
        )
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.2, 4.3))
    fig = ax.figure
    v = float(np.abs(a).max()) if vmax is None else float(vmax)
    order = np.argsort(np.abs(a), kind="stable")  # strongest on top
    sc = ax.scatter(X[order, 0], X[order, 1], c=a[order], cmap="RdBu_r", vmin=-v, vmax=v,
                    s=22, edgecolors="0.3", linewidths=0.3)
    fig.colorbar(sc, ax=ax, label="$\\alpha_i(x)$")
    if query is not None:
        q = np.asarray(query, dtype=float)
        ax.scatter([q[0]], [q[1]], marker="*", s=260, c="gold", edgecolors="black", zorder=5)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.set_aspect("equal", adjustable="box")
    if title is not None:
        ax.set_title(title)
    return fig


def plot_min_norm(distances, norms, *, min_norm, ax=None, highlight=None):
    """Norms of feasible coefficient vectors against their distance to the OLS coefficient.

    Every :math:`\\beta` with :math:`\\Phi^\\top\\beta = \\varphi(x)` differs from
    :math:`\\alpha(x)` by a null-space vector of :math:`\\Phi^\\top`, which is orthogonal to
    :math:`\\alpha(x) \\in \\operatorname{col}(\\Phi)`; hence (Pythagoras)
    :math:`\\lVert\\beta\\rVert^2 = \\lVert\\alpha\\rVert^2 + \\lVert\\beta - \\alpha\\rVert^2`,
    the solid curve, and the minimum is at :math:`\\beta = \\alpha` (Proposition 1). Both axes
    are logarithmic; :math:`\\lVert\\alpha(x)\\rVert_2` is the dashed horizontal line.

    Parameters
    ----------
    distances : array-like of shape (k,)
        :math:`\\lVert\\beta - \\alpha\\rVert_2` of each feasible solution.
    norms : array-like of shape (k,)
        :math:`\\lVert\\beta\\rVert_2` of each feasible solution.
    min_norm : float
        :math:`\\lVert\\alpha(x)\\rVert_2`.
    ax : matplotlib.axes.Axes, optional
    highlight : dict of str to (float, float), optional
        Named solutions ``{label: (distance, norm)}`` drawn as larger labelled markers.

    Returns
    -------
    matplotlib.figure.Figure
    """
    d = np.asarray(distances, dtype=float)
    nb = np.asarray(norms, dtype=float)
    if d.shape != nb.shape or d.ndim != 1:
        raise InputError(f"distances and norms must be 1-D of one length; got {d.shape}, {nb.shape}.")
    if (d <= 0).any():
        raise InputError("distances must be > 0 (the axes are logarithmic; alpha is the dashed line).")
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.4, 3.9))
    fig = ax.figure
    pts = [float(d.min()), float(d.max())] + [v[0] for v in (highlight or {}).values()]
    grid = np.geomspace(min(pts) / 2.0, max(pts) * 2.0, 200)
    ax.loglog(grid, np.sqrt(min_norm**2 + grid**2), color="black", lw=1,
              label="$\\sqrt{\\|\\alpha\\|^2 + \\|\\beta-\\alpha\\|^2}$")
    ax.axhline(float(min_norm), color="goldenrod", ls="--", lw=1.5,
               label="$\\|\\alpha(x)\\|_2$ (OLS, the minimum)")
    ax.scatter(d, nb, s=12, color="tab:blue", alpha=0.7, zorder=3,
               label="random feasible $\\beta = \\alpha + \\eta$")
    for (label, (dx, nx)), m in zip((highlight or {}).items(), "sDP^v", strict=False):
        ax.scatter([dx], [nx], marker=m, s=70, color="tab:red", edgecolors="black", zorder=5,
                   label=label)
    ax.set_xlabel("$\\|\\beta - \\alpha(x)\\|_2$")
    ax.set_ylabel("$\\|\\beta\\|_2$")
    ax.legend(frameon=False, fontsize="small")
    return fig


def plot_ridge_convergence(lams, errors, *, ax=None, reference=True, eig_min=None):
    """Log-log plot of :math:`\\lVert\\alpha_\\lambda(x) - \\alpha(x)\\rVert` against
    :math:`\\lambda` (eq. 11 -> eq. 10), with a slope-1 guide.

    Parameters
    ----------
    lams : array-like of shape (k,)
        Ridge strengths :math:`\\lambda > 0`.
    errors : array-like of shape (k,) or (k, m)
        Distances to the OLS coefficient (one column per query).
    ax : matplotlib.axes.Axes, optional
    reference : bool, default=True
        Draw the line :math:`c\\,\\lambda` through the smallest-``lambda`` point of the
        first column (up to three times the largest error).
    eig_min : float, optional
        Smallest eigenvalue of :math:`G`, drawn as a dotted vertical line: the slope is 1
        while :math:`\\lambda` is well below it,
        :math:`\\alpha_\\lambda - \\alpha = -\\lambda\\,\\Phi G^{-1}(G + \\lambda I)^{-1}\\varphi(x)`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    lam = np.asarray(lams, dtype=float)
    E = np.asarray(errors, dtype=float)
    E = E[:, None] if E.ndim == 1 else E
    if E.shape[0] != lam.shape[0] or (lam <= 0).any():
        raise InputError("lams must be positive and errors must have one row per lambda.")
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.0, 3.8))
    fig = ax.figure
    for j in range(E.shape[1]):
        ax.loglog(lam, E[:, j], marker="o", ms=3, lw=1.2,
                  label="$\\|\\alpha_\\lambda - \\alpha\\|_2$" if E.shape[1] == 1
                  else f"query {j + 1}")
    if reference:
        i = int(np.argmin(lam))
        line = E[i, 0] * lam / lam[i]
        keep = line <= 3.0 * float(E.max())
        ax.loglog(lam[keep], line[keep], color="black", ls="--", lw=1,
                  label="slope 1: $O(\\lambda)$")
    if eig_min is not None:
        ax.axvline(float(eig_min), color="grey", ls=":", lw=1.2,
                   label="smallest eigenvalue of $G$")
    ax.set_xlabel("ridge $\\lambda$")
    ax.set_ylabel("distance to the OLS coefficient")
    ax.legend(frameon=False, fontsize="small")
    return fig

