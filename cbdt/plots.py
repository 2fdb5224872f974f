"""Matplotlib figures of the book, one function per figure.

Every function takes the already computed data (from :mod:`cbdt.experiments` or the core
API), draws on a new or given ``Axes`` and returns the ``Figure``; none of them computes a
statistic that is not also available from a tested function.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401

# --- chapter 01: CBDT theory ---


def _ch01_action_colors(n_actions):
    """One colour per action (tab10), as an array of RGBA rows."""
    import numpy as np

    cmap = plt.get_cmap("tab10")
    return np.array([cmap(a % 10) for a in range(n_actions)])


def _ch01_action_names(n_actions, action_names):
    if action_names is None:
        return [f"a={a}" for a in range(n_actions)]
    names = [str(a) for a in action_names]
    if len(names) != n_actions:
        raise ValueError(f"action_names has {len(names)} names but the memory has {n_actions} actions.")
    return names


def _ch01_check_2d(memory):
    from .decision import Memory

    if not isinstance(memory, Memory):
        raise TypeError(f"memory must be a cbdt.Memory, got {type(memory).__name__}.")
    if memory.dim != 2:
        raise ValueError(
            f"these plots draw a 2-D problem space, but the memory's problems have dimension "
            f"{memory.dim}."
        )


def problem_extent(memory, pad=0.5):
    """Bounding box ``(xmin, xmax, ymin, ymax)`` of a 2-D memory's problems, padded by ``pad``.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory whose problems are 2-D.
    pad : float, default=0.5
        Margin added on every side.

    Returns
    -------
    tuple of 4 floats
    """
    _ch01_check_2d(memory)
    lo = memory.problems.min(axis=0) - pad
    hi = memory.problems.max(axis=0) + pad
    return (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))


def support_grid(memory, similarity=None, extent=None, grid_size=150):
    """CBDT supports :math:`U(a \\mid M, p)` (eq. 1) on a regular grid of a 2-D problem space.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory whose problems are 2-D.
    similarity : cbdt.decision.Similarity or callable, optional
        Passed to :func:`cbdt.support`; default ``GaussianSimilarity(1.0)``.
    extent : tuple (xmin, xmax, ymin, ymax), optional
        Default :func:`problem_extent` of the memory.
    grid_size : int, default=150
        Points per axis.

    Returns
    -------
    xs : ndarray of shape (grid_size,)
    ys : ndarray of shape (grid_size,)
    U : ndarray of shape (grid_size, grid_size, |A|)
        ``U[j, i, a]`` is the support of action ``a`` at the problem ``(xs[i], ys[j])``.
    """
    import numpy as np

    from .decision import support

    _ch01_check_2d(memory)
    x0, x1, y0, y1 = problem_extent(memory) if extent is None else extent
    xs = np.linspace(x0, x1, int(grid_size))
    ys = np.linspace(y0, y1, int(grid_size))
    XX, YY = np.meshgrid(xs, ys)
    U = support(np.column_stack([XX.ravel(), YY.ravel()]), memory, similarity)
    return xs, ys, U.reshape(len(ys), len(xs), memory.n_actions)


def _ch01_draw_cases(ax, memory, colors, highlight=None):
    """Cases as markers: colour = action, filled = u >= 0, hollow = u < 0, area ~ n(c, M)."""
    import numpy as np

    U = memory.supports
    act = np.argmax(np.abs(U), axis=1)
    u = U[np.arange(memory.n_cases), act]
    size = 36.0 * np.sqrt(np.maximum(memory.frequencies, 0.0))
    pos = u >= 0
    P = memory.problems
    ax.scatter(P[pos, 0], P[pos, 1], s=size[pos], c=colors[act[pos]], edgecolors="black",
               linewidths=0.7, zorder=3)
    ax.scatter(P[~pos, 0], P[~pos, 1], s=size[~pos], facecolors="white",
               edgecolors=colors[act[~pos]], linewidths=1.6, zorder=3)
    if highlight is not None and len(highlight):
        h = np.asarray(highlight, dtype=int)
        ax.scatter(P[h, 0], P[h, 1], s=size[h] * 4.0, facecolors="none", edgecolors="black",
                   linewidths=1.2, zorder=4)


def plot_cbdt_decision(
    memory,
    similarity=None,
    *,
    ax=None,
    extent=None,
    grid_size=150,
    action_names=None,
    query=None,
    highlight=None,
    legend=True,
    title=None,
):
    """Decision regions :math:`a^*(M, p)` (eq. 2) of a 2-D CBDT memory, with its cases.

    The background colour at a problem ``p`` is the action with the largest support
    :math:`U(a \\mid M, p)` (ties to the lowest index, as :func:`cbdt.decide`). Each case is a
    marker in the colour of the action it supports (the column of its largest ``|u(r_c, a)|``);
    filled when that support is ``>= 0`` (a good outcome), hollow when it is negative, with an
    area proportional to its frequency :math:`n(c, M)`.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory with 2-D problems.
    similarity : cbdt.decision.Similarity or callable, optional
        Default ``GaussianSimilarity(1.0)``.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure is made when omitted.
    extent : tuple (xmin, xmax, ymin, ymax), optional
    grid_size : int, default=150
    action_names : sequence of str, optional
    query : array-like of shape (2,), optional
        A problem to mark with a star.
    highlight : sequence of int, optional
        Case indices to ring (e.g. the cases that carry the query's support).
    legend : bool, default=True
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D

    xs, ys, U = support_grid(memory, similarity, extent, grid_size)
    A = memory.n_actions
    colors = _ch01_action_colors(A)
    names = _ch01_action_names(A, action_names)
    light = colors.copy()
    light[:, :3] = 1.0 - 0.35 * (1.0 - light[:, :3])
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.0, 4.5))
    fig = ax.figure
    decision = np.argmax(U, axis=-1)
    ax.imshow(decision, origin="lower", extent=(xs[0], xs[-1], ys[0], ys[-1]), aspect="auto",
              cmap=ListedColormap(light), vmin=-0.5, vmax=A - 0.5, interpolation="nearest")
    _ch01_draw_cases(ax, memory, colors, highlight)
    if query is not None:
        q = np.asarray(query, dtype=float)
        ax.scatter([q[0]], [q[1]], marker="*", s=260, c="gold", edgecolors="black", zorder=5)
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(ys[0], ys[-1])
    ax.set_xlabel("$p_1$")
    ax.set_ylabel("$p_2$")
    if title is not None:
        ax.set_title(title)
    if legend:
        handles = [Line2D([], [], marker="s", ls="", ms=10, mfc=light[a], mec=colors[a],
                          label=f"region {names[a]}") for a in range(A)]
        handles += [
            Line2D([], [], marker="o", ls="", mfc="grey", mec="black", label="case, $u \\geq 0$"),
            Line2D([], [], marker="o", ls="", mfc="white", mec="grey", mew=1.6,
                   label="case, $u < 0$"),
        ]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                  fontsize="small")
    return fig


def plot_cbdt_supports(
    memory, similarity=None, *, extent=None, grid_size=150, action_names=None, query=None
):
    """One heat map of :math:`U(a \\mid M, p)` per action (eq. 1), then the decision map (eq. 2).

    The support maps share one symmetric diverging colour scale (red: support for the action,
    blue: evidence against it, white: no evidence). The markers on each map are the cases with a
    non-zero support for that action, filled when :math:`u(r_c, a) > 0`, hollow when it is
    negative.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory with 2-D problems.
    similarity : cbdt.decision.Similarity or callable, optional
    extent : tuple (xmin, xmax, ymin, ymax), optional
    grid_size : int, default=150
    action_names : sequence of str, optional
    query : array-like of shape (2,), optional
        A problem to mark with a star on every panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    xs, ys, U = support_grid(memory, similarity, extent, grid_size)
    A = memory.n_actions
    names = _ch01_action_names(A, action_names)
    colors = _ch01_action_colors(A)
    vmax = float(np.abs(U).max()) or 1.0
    fig, axes = plt.subplots(1, A + 1, figsize=(3.3 * (A + 1) + 1.2, 3.4), layout="constrained")
    ext = (xs[0], xs[-1], ys[0], ys[-1])
    for a in range(A):
        ax = axes[a]
        im = ax.imshow(U[:, :, a], origin="lower", extent=ext, aspect="auto", cmap="RdBu_r",
                       vmin=-vmax, vmax=vmax)
        u = memory.supports[:, a]
        good, bad = memory.problems[u > 0], memory.problems[u < 0]
        ax.scatter(good[:, 0], good[:, 1], s=16, c=[colors[a]], edgecolors="black",
                   linewidths=0.5)
        ax.scatter(bad[:, 0], bad[:, 1], s=16, facecolors="white", edgecolors=[colors[a]],
                   linewidths=1.3)
        ax.set_title(f"$U({names[a]} \\mid M, p)$")
        ax.set_xlabel("$p_1$")
    axes[0].set_ylabel("$p_2$")
    fig.colorbar(im, ax=axes[:A], shrink=0.85, label="support")
    plot_cbdt_decision(memory, similarity, ax=axes[A], extent=ext, grid_size=grid_size,
                       action_names=action_names, legend=False, title="$a^*(M, p)$")
    if query is not None:
        q = np.asarray(query, dtype=float)
        for ax in axes[:A]:
            ax.scatter([q[0]], [q[1]], marker="*", s=200, c="gold", edgecolors="black", zorder=5)
        axes[A].scatter([q[0]], [q[1]], marker="*", s=200, c="gold", edgecolors="black",
                        zorder=5)
    return fig


def plot_bandwidth_grid(
    memory, bandwidths, *, extent=None, grid_size=120, action_names=None, kernel=None
):
    """Decision maps of one memory for several similarity bandwidths, side by side.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory with 2-D problems.
    bandwidths : sequence of float
        Bandwidths ``h`` of the similarity.
    extent : tuple (xmin, xmax, ymin, ymax), optional
    grid_size : int, default=120
    action_names : sequence of str, optional
    kernel : type, optional
        Similarity class taking ``bandwidth``; default :class:`cbdt.GaussianSimilarity`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .decision import GaussianSimilarity

    kernel = GaussianSimilarity if kernel is None else kernel
    bws = list(bandwidths)
    fig, axes = plt.subplots(1, len(bws), figsize=(3.2 * len(bws), 3.3), layout="constrained",
                             squeeze=False)
    for ax, h in zip(axes[0], bws, strict=True):
        plot_cbdt_decision(memory, kernel(h), ax=ax, extent=extent, grid_size=grid_size,
                           action_names=action_names, legend=False, title=f"$h = {h:g}$")
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    return fig


def plot_cbdt_query(
    memory,
    similarity=None,
    query=(0.0, 0.0),
    *,
    top=3,
    extent=None,
    grid_size=120,
    action_names=None,
):
    """One query: the decision map with the carrying cases ringed, and the supports as bars.

    Left: :func:`plot_cbdt_decision` with the query as a star and the ``top`` cases of largest
    ``|n(c, M) s(p, p_c) u(r_c, a)|`` of every action ringed. Right: :math:`U(a \\mid M, p)`
    for every action, the chosen action :math:`a^*` outlined.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory with 2-D problems.
    similarity : cbdt.decision.Similarity or callable, optional
    query : array-like of shape (2,)
    top : int, default=3
    extent : tuple (xmin, xmax, ymin, ymax), optional
    grid_size : int, default=120
    action_names : sequence of str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    from .decision import support

    q = np.asarray(query, dtype=float)
    A = memory.n_actions
    names = _ch01_action_names(A, action_names)
    colors = _ch01_action_colors(A)
    C = case_contributions(memory, q, similarity)
    ring = np.unique(np.concatenate([top_carrying_cases(C[:, a], top) for a in range(A)]))
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9.5, 4.0), layout="constrained",
                                   width_ratios=[1.35, 1.0])
    plot_cbdt_decision(memory, similarity, ax=ax0, extent=extent, grid_size=grid_size,
                       action_names=action_names, query=q, highlight=ring, legend=False)
    ax0.set_title(f"query $p = ({q[0]:.2f}, {q[1]:.2f})$")
    U = support(q, memory, similarity)
    best = int(np.argmax(U))
    bars = ax1.bar(names, U, color=colors[:A], edgecolor="black",
                   linewidth=[2.5 if a == best else 0.5 for a in range(A)])
    ax1.bar_label(bars, fmt="%.3g")
    ax1.axhline(0.0, color="black", lw=0.8)
    ax1.set_ylabel("$U(a \\mid M, p)$")
    ax1.set_title(f"supports; $a^* = $ {names[best]}")
    return fig


def case_contributions(memory, query, similarity=None):
    """Per-case terms :math:`n(c, M)\\, s(p, p_c)\\, u(r_c, a)` of the CBDT support (eq. 1).

    Column ``a`` sums to :math:`U(a \\mid M, p)` (:func:`cbdt.support`), so it says which cases
    carry an action's support and by how much.

    Parameters
    ----------
    memory : cbdt.Memory
    query : array-like of shape (d,)
        One problem ``p``.
    similarity : cbdt.decision.Similarity or callable, optional
        Default ``GaussianSimilarity(1.0)``.

    Returns
    -------
    ndarray of shape (N, |A|)
    """
    from .decision import case_contributions as _case_contributions

    return _case_contributions(query, memory, similarity)


def top_carrying_cases(contributions, top=3):
    """Indices of the ``top`` largest ``|contribution|`` among the non-zero ones.

    Ties go to the lower case index.

    Parameters
    ----------
    contributions : array-like of shape (N,)
        One column of :func:`case_contributions`.
    top : int, default=3

    Returns
    -------
    ndarray of int of shape (<= top,)
    """
    import numpy as np

    c = np.asarray(contributions, dtype=float)
    order = np.argsort(-np.abs(c), kind="stable")
    order = order[c[order] != 0]
    return order[: int(top)]


def support_breakdown(memory, query, similarity=None, *, top=3, action_names=None):
    """Supports of every action at one problem and the cases that carry them, as a table.

    One row per action and carrying case (the ``top`` cases of largest ``|contribution|``
    with a non-zero term, strongest first). ``share`` is the case's signed part of the
    action's total absolute case mass, ``contribution / sum_c |contribution_c|``: the shares of
    an action whose cases all have ``u >= 0`` are its fractions of :math:`U(a \\mid M, p)`.

    Parameters
    ----------
    memory : cbdt.Memory
    query : array-like of shape (d,)
    similarity : cbdt.decision.Similarity or callable, optional
        Default ``GaussianSimilarity(1.0)``.
    top : int, default=3
    action_names : sequence of str, optional

    Returns
    -------
    pandas.DataFrame
        Columns ``action``, ``U(a|M,p)``, ``case``, ``s(p,p_c)``, ``n(c,M)``, ``u(r_c,a)``,
        ``contribution``, ``share``.
    """
    import numpy as np
    import pandas as pd

    from .decision import GaussianSimilarity

    sim = GaussianSimilarity() if similarity is None else similarity
    C = case_contributions(memory, query, sim)
    q = np.asarray(query, dtype=float).reshape(1, -1)
    s = np.asarray(sim(q, memory.problems), dtype=float)[0]
    names = _ch01_action_names(memory.n_actions, action_names)
    rows = []
    for a in range(memory.n_actions):
        col = C[:, a]
        mass = float(np.abs(col).sum())
        for c in top_carrying_cases(col, top):
            rows.append({
                "action": names[a],
                "U(a|M,p)": float(col.sum()),
                "case": int(c),
                "s(p,p_c)": float(s[c]),
                "n(c,M)": float(memory.frequencies[c]),
                "u(r_c,a)": float(memory.supports[c, a]),
                "contribution": float(col[c]),
                "share": float(col[c] / mass),
            })
    cols = ["action", "U(a|M,p)", "case", "s(p,p_c)", "n(c,M)", "u(r_c,a)", "contribution",
            "share"]
    return pd.DataFrame(rows, columns=cols)

# --- chapter 02: Proposition 1 ---


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
    import numpy as np

    X = np.asarray(X, dtype=float)
    a = np.asarray(alpha, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2 or a.shape != (X.shape[0],):
        raise ValueError(
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
    import numpy as np

    d = np.asarray(distances, dtype=float)
    nb = np.asarray(norms, dtype=float)
    if d.shape != nb.shape or d.ndim != 1:
        raise ValueError(f"distances and norms must be 1-D of one length; got {d.shape}, {nb.shape}.")
    if (d <= 0).any():
        raise ValueError("distances must be > 0 (the axes are logarithmic; alpha is the dashed line).")
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
    import numpy as np

    lam = np.asarray(lams, dtype=float)
    E = np.asarray(errors, dtype=float)
    E = E[:, None] if E.ndim == 1 else E
    if E.shape[0] != lam.shape[0] or (lam <= 0).any():
        raise ValueError("lams must be positive and errors must have one row per lambda.")
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

# --- chapter 03: invariance and whitening ---
_CH03_STYLE = {
    "ols": ("OLS ($\\lambda = 0$)", "C0", "o", "-"),
    "ridge_isotropic": ("isotropic ridge $\\lambda I$", "C3", "s", "-"),
    "ridge_cotransformed": ("co-transformed ridge $\\lambda BB^\\top$", "C2", "^", "--"),
    "ridge_orthogonal": ("isotropic ridge, orthogonal $B$", "C7", "D", ":"),
}


def plot_invariance_vs_condition(df, ax=None, rounding_guide: bool = True):
    """Max relative coefficient change against :math:`\\kappa(B)` (Sec. 3.2, App. B.2).

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`cbdt.experiments.invariance.invariance_vs_condition`.
    ax : matplotlib Axes, optional
    rounding_guide : bool, default=True
        Draw the rounding scale :math:`\\varepsilon_{\\mathrm{mach}}\\,\\kappa(B)^2` (the
        condition number of :math:`G_B` grows like :math:`\\kappa(B)^2`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    if ax is None:
        fig, ax = plt.subplots(figsize=(8.8, 4.0))
    else:
        fig = ax.figure
    cond = df["cond"].to_numpy()
    floor = 1e-17  # exact zeros cannot be drawn on a log axis
    for col, (label, color, marker, ls) in _CH03_STYLE.items():
        if col in df:
            ax.plot(cond, np.maximum(df[col].to_numpy(), floor), ls=ls, marker=marker,
                    color=color, label=label)
    if rounding_guide:
        ax.plot(cond, np.finfo(float).eps * cond**2, color="0.6", lw=1, ls="-.",
                label="$\\varepsilon_{mach}\\,\\kappa(B)^2$ (rounding scale)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("condition number $\\kappa(B)$ of the reparameterisation")
    ax.set_ylabel("max relative change of $\\alpha(x)$")
    ax.set_title("Coefficients after $\\varphi \\mapsto B\\varphi$")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    return fig


def plot_whitened_coefficients(alpha, alpha_inner, max_points: int = 4000):
    """ZCA sufficient regime (eq. 13-14): coefficients against the scaled inner product.

    Left: :math:`\\alpha_i(x)` from :class:`cbdt.CaseInfluence` (original coordinates) against
    :math:`\\varphi_B(x)^\\top\\varphi_B(x_i)/n` (whitened coordinates); the points lie on the
    diagonal. Right: histogram of the coefficients, negative ones in red.

    Parameters
    ----------
    alpha, alpha_inner : array-like of shape (m, n)
    max_points : int, default=4000
        Scatter at most this many (evenly strided) points.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    a = np.asarray(alpha, dtype=float).ravel()
    b = np.asarray(alpha_inner, dtype=float).ravel()
    step = max(1, a.size // max_points)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    ax1.scatter(b[::step], a[::step], s=4, alpha=0.4, color="C0")
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    pad = 0.05 * (hi - lo)
    ax1.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="k", lw=0.8)
    ax1.axhline(0, color="0.7", lw=0.6)
    ax1.axvline(0, color="0.7", lw=0.6)
    ax1.set_xlabel("$\\varphi_B(x)^\\top\\varphi_B(x_i)/n$ (whitened, eq. 14)")
    ax1.set_ylabel("$\\alpha_i(x) = \\varphi(x)^\\top G^{-1}\\varphi(x_i)$ (eq. 10)")
    ax1.set_title("Same numbers, two formulas")
    bins = np.linspace(lo - pad, hi + pad, 61)
    ax2.hist(a[a < 0], bins=bins, color="C3", label=f"$\\alpha < 0$: {np.mean(a < 0):.1%}")
    ax2.hist(a[a >= 0], bins=bins, color="C0", label=f"$\\alpha \\geq 0$: {np.mean(a >= 0):.1%}")
    ax2.set_xlabel("$\\alpha_i(x)$")
    ax2.set_ylabel("count (queries $\\times$ cases)")
    ax2.set_title("Signed coefficients survive whitening")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --- chapter 04: audit signals ---
def plot_contributions(psi, case_actions, top_idx=None, action_names=None, ax=None):
    """Bar chart of the contributions :math:`\\psi_i(a, x)` of one query (eq. 15).

    Bars are coloured by the case-optimal action :math:`a_i^*`; the cases of the top-k set
    ``top_idx`` (e.g. from :meth:`cbdt.CaseInfluence.top_cases`) get a black edge.

    Parameters
    ----------
    psi : array-like of shape (n,)
    case_actions : array-like of int of shape (n,)
    top_idx : array-like of int, optional
    action_names : sequence of str, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.patches import Patch

    psi = np.asarray(psi, dtype=float)
    acts = np.asarray(case_actions)
    n_actions = int(acts.max()) + 1
    names = action_names or [f"$a_{b}$" for b in range(n_actions)]
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
    else:
        fig = ax.figure
    top = set() if top_idx is None else {int(i) for i in np.atleast_1d(top_idx)}
    for i, v in enumerate(psi):
        ax.bar(i, v, color=f"C{acts[i]}", edgecolor="k" if i in top else "none",
               linewidth=2.0 if i in top else 0)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(psi)), [f"$c_{i}$" for i in range(len(psi))])
    ax.set_ylabel("$\\psi_i(a_x, x) = \\alpha_i(x)\\, r_{i,a_x}$")
    handles = [Patch(color=f"C{b}", label=f"$a_i^* =$ {names[b]}") for b in range(n_actions)]
    if top:
        handles.append(Patch(facecolor="white", edgecolor="k", linewidth=2,
                             label=f"top-{len(top)} by $|\\psi|$"))
    ax.legend(handles=handles, fontsize=8)
    ax.set_title("Case contributions to the selected action")
    fig.tight_layout()
    return fig


def plot_risk_map(grid_x, grid_y, action, risk, X_train=None, case_actions=None):
    """Selected action and risk score :math:`O_\\alpha` over a 2-D query grid (eq. 20).

    Parameters
    ----------
    grid_x, grid_y : ndarray of shape (g, g)
        Query inputs (``numpy.meshgrid``).
    action : array-like of int of shape (g*g,)
        Selected action :math:`a_x` (row-major over the grid).
    risk : array-like of shape (g*g,)
        :math:`O_\\alpha(x)`.
    X_train : ndarray of shape (n, 2), optional
        Training inputs, drawn as dots coloured by ``case_actions``.
    case_actions : array-like of int of shape (n,), optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.colors import ListedColormap

    shape = grid_x.shape
    act = np.asarray(action).reshape(shape)
    rsk = np.asarray(risk, dtype=float).reshape(shape)
    n_actions = int(max(act.max(), -1 if case_actions is None else np.max(case_actions))) + 1
    cmap = ListedColormap([f"C{b}" for b in range(n_actions)])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.0, 4.2))
    ax1.pcolormesh(grid_x, grid_y, act, cmap=cmap, vmin=-0.5, vmax=n_actions - 0.5,
                   alpha=0.35, shading="auto")
    if X_train is not None:
        ax1.scatter(X_train[:, 0], X_train[:, 1], c=np.asarray(case_actions), cmap=cmap,
                    vmin=-0.5, vmax=n_actions - 0.5, s=8, edgecolor="k", linewidth=0.3)
    ax1.set_title("selected $a_x$ (shade), case-optimal $a_i^*$ (dots)", fontsize=10)
    im = ax2.pcolormesh(grid_x, grid_y, rsk, cmap="magma", shading="auto")
    ax2.contour(grid_x, grid_y, act, levels=np.arange(n_actions) + 0.5, colors="w",
                linewidths=1.0)
    fig.colorbar(im, ax=ax2, label="$O_\\alpha(x) = H_\\alpha + D_{Gini}$")
    ax2.set_title("risk $O_\\alpha(x)$; white: decision boundaries", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
        ax.set_aspect("equal")
    fig.tight_layout()
    return fig


def plot_risk_vs_margin(signals, wrong=None, ax=None):
    """Risk score against the readout margin, one dot per query.

    Parameters
    ----------
    signals : pandas.DataFrame
        Output of :func:`cbdt.audit_signals` (columns ``margin`` and ``risk``).
    wrong : array-like of bool of shape (m,), optional
        Queries whose selected action is not the best action; drawn in red.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.0, 3.8))
    else:
        fig = ax.figure
    m = signals["margin"].to_numpy()
    r = signals["risk"].to_numpy()
    if wrong is None:
        ax.scatter(m, r, s=5, alpha=0.4, color="C0")
    else:
        w = np.asarray(wrong, dtype=bool)
        ax.scatter(m[~w], r[~w], s=5, alpha=0.3, color="C0", label="selected = best action")
        ax.scatter(m[w], r[w], s=8, alpha=0.8, color="C3", label="selected $\\neq$ best action")
        ax.legend(fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("readout margin $Q(x, a_x) - \\max_{b \\neq a_x} Q(x, b)$")
    ax.set_ylabel("risk $O_\\alpha(x)$")
    ax.set_title("Risk score against readout margin, one dot per query")
    fig.tight_layout()
    return fig


# --- chapter 05/06: synthetic recovery and attribution baselines ---

# --- chapter 07: PJM audit ---

# --- chapter 08: UCI audits ---
