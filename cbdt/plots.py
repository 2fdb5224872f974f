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


def plot_top_cases(explanation, query=0, *, action_names=None, ax=None, max_label=24):
    """Signed bars of one decision's strongest cases, readable for any number of cases.

    Shows the ``k`` cases of :meth:`cbdt.CaseInfluence.explain` for one query, strongest at
    the top, each bar its contribution :math:`\\psi_i(a_x, x)` (eq. 15) and labelled by the
    case id, the case-optimal action and :math:`\\alpha_i`; a grey bar sums the other
    ``n - k`` cases, so the bars add up to the score :math:`Q(x, a_x)` (Proposition 1,
    marked by a dashed line). The figure's size depends on ``k`` only, never on ``n``.

    Parameters
    ----------
    explanation : cbdt.Explanation
        The result of :meth:`~cbdt.CaseInfluence.explain` (``cases`` and ``signals``).
    query : int, default=0
        Which query (row of ``explanation.signals``) to draw.
    action_names : sequence of str, optional
        Names of the actions; default ``a0, a1, ...``.
    ax : matplotlib Axes, optional
    max_label : int, default=24
        Case ids longer than this are shortened with an ellipsis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.patches import Patch

    cases, signals = explanation.cases, explanation.signals
    if query not in signals.index:
        raise ValueError(
            f"query {query!r} is not in this explanation; it holds queries "
            f"{signals.index.min()}..{signals.index.max()}."
        )
    rows = cases[cases["query"] == query].sort_values("rank")
    sig = signals.loc[query]
    action, score = int(sig["action"]), float(sig["score"])
    names = list(action_names) if action_names is not None else None

    def name(a):
        return names[a] if names is not None else f"a{a}"

    def short(v):
        s = str(v)
        return s if len(s) <= max_label else s[: max_label - 1] + "\u2026"

    psi = rows["psi"].to_numpy(dtype=float)
    rest = score - float(psi.sum())
    k = len(rows)
    labels = [
        f"{short(cid)}  ({name(int(ca))}, \u03b1={al:.3g})"
        for cid, ca, al in zip(rows["case_id"], rows["case_action"], rows["alpha"], strict=True)
    ]
    labels.append("all other cases")
    values = np.append(psi, rest)
    colors = ["#1f77b4" if v >= 0 else "#d62728" for v in psi] + ["#9e9e9e"]
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.8, 1.2 + 0.32 * (k + 1)))
    else:
        fig = ax.figure
    y = np.arange(k + 1)
    ax.barh(y, values, color=colors, height=0.7)
    ax.set_yticks(y, labels, fontsize=8.5)
    ax.invert_yaxis()
    ax.axvline(0, color="k", lw=0.8)
    ax.axvline(score, color="k", lw=1.0, ls="--")
    ax.set_xlabel("contribution $\\psi_i(a_x, x) = \\alpha_i(x)\\, r_i(a_x)$")
    ax.set_title(
        f"Query {query}: top {k} cases of $Q(x, {name(action)})$ = {score:.4g}", fontsize=10
    )
    handles = [
        Patch(color="#1f77b4", label="raises the score"),
        Patch(color="#d62728", label="lowers the score"),
        Patch(color="#9e9e9e", label=f"sum of the other cases ({rest:.3g})"),
        plt.Line2D([], [], color="k", ls="--", label="$Q(x, a_x)$ = sum of all bars"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="best")
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

_CH0506_METHOD_COLORS = {
    "Ours (alpha)": "C0",
    "Representer Point": "C1",
    "TracIn": "C2",
    "Influence Functions": "C3",
    "Inner product": "C4",
}
_CH0506_GT_COLOR = "0.45"


def _ch0506_listed_cmap(n_actions):
    from matplotlib.colors import ListedColormap

    return ListedColormap([f"C{b}" for b in range(n_actions)])


def _ch0506_ax(ax, figsize):
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
        return fig, ax
    return ax.figure, ax


def plot_decision_regions(regions, kind="cbdt", ax=None, memory=True, boundaries=None,
                          title=None):
    """Decision regions of the synthetic task on a grid (Fig. 1a-b).

    Parameters
    ----------
    regions : cbdt.experiments.synthetic.DecisionRegions
        Output of :func:`cbdt.experiments.synthetic.decision_regions`.
    kind : {"cbdt", "network", "readout"}, default="cbdt"
        Which decision to shade: the CBDT-optimal action :math:`a^*(x)` (eq. 2), the trained
        network's :math:`\\arg\\max_a Q_{nn}(x, a)` or the OLS readout's
        :math:`\\arg\\max_a \\hat Q(x, a)`.
    ax : matplotlib Axes, optional
    memory : bool, default=True
        Draw the 20 generating memory cases (marker colour: the action the case took; marker
        size: its result :math:`r_c`).
    boundaries : {"cbdt", "network", "readout"}, optional
        Overlay the boundaries of another decision as black lines.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    kinds = {"cbdt": "CBDT decision $a^*(x)$", "network": "network decision",
             "readout": "OLS readout decision"}
    if kind not in kinds or (boundaries is not None and boundaries not in kinds):
        raise ValueError(f"kind and boundaries must be one of {sorted(kinds)}, got "
                         f"{kind!r}, {boundaries!r}.")
    fig, ax = _ch0506_ax(ax, (4.2, 4.0))
    n_actions = regions.support.shape[-1]
    cmap = _ch0506_listed_cmap(n_actions)
    Z = getattr(regions, kind)
    ax.pcolormesh(regions.xs, regions.ys, Z, cmap=cmap, vmin=-0.5, vmax=n_actions - 0.5,
                  alpha=0.35, shading="auto")
    if boundaries is not None:
        ax.contour(regions.xs, regions.ys, getattr(regions, boundaries),
                   levels=np.arange(n_actions) + 0.5, colors="k", linewidths=0.9)
    if memory:
        mem = regions.run.data.memory
        acts = np.argmax(mem.supports, axis=1)
        res = np.max(mem.supports, axis=1)
        ax.scatter(mem.problems[:, 0], mem.problems[:, 1], c=[f"C{a}" for a in acts],
                   s=40 * res, edgecolor="k", linewidth=0.8, zorder=3)
    ax.set_xlim(regions.xs[0], regions.xs[-1])
    ax.set_ylim(regions.ys[0], regions.ys[-1])
    ax.set_aspect("equal")
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.set_title(kinds[kind] if title is None else title, fontsize=10)
    return fig


def plot_support_reconstruction(recon, score="probe_score", ax=None):
    """True CBDT support against the reconstructed score, one dot per test query and action
    (Fig. 1c).

    Parameters
    ----------
    recon : pandas.DataFrame
        Output of :func:`cbdt.experiments.synthetic.support_reconstruction` (columns
        ``action``, ``true_support`` and ``score``).
    score : {"probe_score", "network_score"}, default="probe_score"
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    from .metrics import pearson

    fig, ax = _ch0506_ax(ax, (4.2, 4.0))
    for a, g in recon.groupby("action", sort=True):
        r = pearson(g["true_support"], g[score])
        ax.scatter(g["true_support"], g[score], s=7, alpha=0.6, color=f"C{a}",
                   label=f"$a_{a}$: r = {r:.3f}")
    lo = float(np.min(recon[["true_support", score]].to_numpy()))
    hi = float(np.max(recon[["true_support", score]].to_numpy()))
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    ax.set_xlabel("true support $U(a \\mid M, x)$")
    ax.set_ylabel("readout $\\hat Q(x, a)$" if score == "probe_score"
                  else "network $Q_{nn}(x, a)$")
    ax.set_title("support reconstruction (test set)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_synthetic_recovery(regions, recon):
    """Fig. 1: CBDT regions, network regions (CBDT boundaries overlaid), support scatter.

    Parameters
    ----------
    regions : cbdt.experiments.synthetic.DecisionRegions
    recon : pandas.DataFrame
        :func:`cbdt.experiments.synthetic.support_reconstruction` of the same seed.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 4.2))
    plot_decision_regions(regions, "cbdt", ax=axes[0], title="(a) CBDT decision $a^*(x)$")
    plot_decision_regions(regions, "network", ax=axes[1], boundaries="cbdt",
                          title="(b) network decision; black: CBDT boundaries")
    plot_support_reconstruction(recon, ax=axes[2])
    axes[2].set_title("(c) support reconstruction, OLS readout", fontsize=10)
    fig.tight_layout()
    return fig


def plot_attribution_comparison(summary, paper=True):
    """Fig. 2 / Fig. C4: Top-30 consistency and Pearson per method, mean and 95% CI.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`cbdt.experiments.synthetic.summarize_comparison` (index: method;
        columns ``top30_mean``, ``top30_ci``, ``pearson_mean``, ``pearson_ci`` and, with
        ``paper=True``, ``paper_top30``, ``paper_pearson``). A ground-truth row (a method
        not in the paper) is drawn in grey as the reference.
    paper : bool, default=True
        Mark the paper's Table 1 values with black diamonds.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    topcol = next(c[:-5] for c in summary.columns if c.startswith("top") and c.endswith("_mean"))
    names = list(summary.index)
    y = np.arange(len(names))[::-1]
    colors = [_CH0506_METHOD_COLORS.get(m, _CH0506_GT_COLOR) for m in names]
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 0.45 * len(names) + 1.6), sharey=True)
    panels = [(topcol, f"(b) Top-{topcol[3:]} action consistency"),
              ("pearson", "(a) Pearson $r$ with ground-truth contributions")]
    for ax, (col, title) in zip(axes, panels[::-1], strict=True):
        ax.barh(y, summary[f"{col}_mean"], xerr=summary[f"{col}_ci"], color=colors,
                alpha=0.8, capsize=3, height=0.6, label="this book (5 seeds, 95% CI)")
        pcol = f"paper_{col}"
        if paper and pcol in summary:
            ok = summary[pcol].notna().to_numpy()
            ax.scatter(summary[pcol].to_numpy()[ok], y[ok], marker="D", color="k", s=28,
                       zorder=3, label="paper, Table 1")
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_xlim(min(0.0, float(summary["pearson_mean"].min()) - 0.05), 1.05)
    axes[1].set_xlim(0, 1.05)
    axes[0].set_yticks(y, names)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def plot_weight_profiles(distance, weights, ax=None, max_abs=True):
    """Per-case weights of one query against the distance of the case in the problem space.

    Parameters
    ----------
    distance : array-like of shape (n,)
        :math:`\\lVert x - x_i\\rVert` of every training case.
    weights : dict of str to array-like of shape (n,)
        E.g. ``{"alpha": ..., "inner product": ..., "true similarity": ...}``; one panel each.
    ax : sequence of Axes, optional
        One per entry of ``weights``.
    max_abs : bool, default=True
        Divide each weight vector by its largest absolute value (the panels share a scale).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    d = np.asarray(distance, dtype=float)
    if ax is None:
        fig, axes = plt.subplots(1, len(weights), figsize=(3.6 * len(weights), 3.4),
                                 sharey=max_abs)
        axes = np.atleast_1d(axes)
    else:
        axes = np.atleast_1d(ax)
        fig = axes[0].figure
    for a, (name, w) in zip(axes, weights.items(), strict=True):
        w = np.asarray(w, dtype=float)
        if max_abs:
            w = w / np.max(np.abs(w))
        neg = w < 0
        a.scatter(d[~neg], w[~neg], s=6, color="C0", alpha=0.6, label=f"$\\geq 0$ ({(~neg).sum()})")
        a.scatter(d[neg], w[neg], s=6, color="C3", alpha=0.6, label=f"$< 0$ ({neg.sum()})")
        a.axhline(0, color="k", lw=0.6)
        a.set_title(name, fontsize=10)
        a.set_xlabel("distance $\\|x - x_i\\|$")
        a.legend(fontsize=8, loc="upper right")
    axes[0].set_ylabel("weight / max |weight|" if max_abs else "weight")
    fig.tight_layout()
    return fig


def _ch0506_query_methods(df):
    fixed = {"x1", "x2", "case_action", "ground_truth"}
    return [c for c in df.columns if c not in fixed and not c.startswith("top_")]


def query_attribution_summary(df, k=30):
    """Per-method numbers for one query of the attribution explorer.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`cbdt.experiments.synthetic.query_attributions` (one row per
        training case, one column of contributions per method, ``ground_truth``, and
        ``attrs`` with the query's ``action`` and ``cbdt_action``).
    k : int, default=30

    Returns
    -------
    pandas.DataFrame
        Index: ``ground_truth`` and the methods. Columns: ``top{k}`` (share of the ``k``
        cases with the largest absolute contribution whose case-optimal action equals the
        CBDT-optimal action of the query, :func:`cbdt.metrics.topk_action_consistency`),
        ``negative_in_top{k}`` (how many of them have a negative contribution) and
        ``pearson`` (correlation over all training cases with the ground-truth contribution
        of the explained action, :func:`cbdt.metrics.pearson`).
    """
    import numpy as np
    import pandas as pd

    from ._ranking import top_k_indices
    from .metrics import pearson, topk_action_consistency

    acts = df["case_action"].to_numpy()
    target = int(df.attrs["cbdt_action"])
    gt = df["ground_truth"].to_numpy()
    rows = []
    for name in ["ground_truth", *_ch0506_query_methods(df)]:
        c = df[name].to_numpy()
        top = top_k_indices(np.abs(c)[None, :], k)[0]
        rows.append({
            "method": name,
            f"top{k}": topk_action_consistency(c, acts, target, k),
            f"negative_in_top{k}": int(np.sum(c[top] < 0)),
            "pearson": pearson(c, gt),
        })
    return pd.DataFrame(rows).set_index("method")


def plot_query_attributions(df, k=30, methods=None, regions=None, ncols=3):
    """Each method's top-k training cases for one query on the 2-D problem plane.

    One panel per method (and one for the ground truth :math:`s(x, x_i) r_i(a)`): all
    training cases as small grey dots; the ``k`` cases with the largest absolute
    contribution coloured by their case-optimal action, filled when the contribution is
    positive and hollow when it is negative, with area proportional to the absolute
    contribution; the query as a black star.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`cbdt.experiments.synthetic.query_attributions`.
    k : int, default=30
    methods : sequence of str, optional
        Default: the ground truth and every method column of ``df``.
    regions : cbdt.experiments.synthetic.DecisionRegions, optional
        Shade the CBDT decision regions in the background.
    ncols : int, default=3

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    from ._ranking import top_k_indices

    names = ["ground_truth", *_ch0506_query_methods(df)] if methods is None else list(methods)
    summary = query_attribution_summary(df, k)
    nrows = int(np.ceil(len(names) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.9 * ncols, 3.9 * nrows), squeeze=False)
    X = df[["x1", "x2"]].to_numpy()
    acts = df["case_action"].to_numpy()
    xq = df.attrs["x"]
    n_actions = int(max(acts.max(), df.attrs["cbdt_action"])) + 1
    for ax, name in zip(axes.ravel(), names, strict=False):
        if regions is not None:
            ax.pcolormesh(regions.xs, regions.ys, regions.cbdt, cmap=_ch0506_listed_cmap(n_actions),
                          vmin=-0.5, vmax=n_actions - 0.5, alpha=0.15, shading="auto")
        ax.scatter(X[:, 0], X[:, 1], s=3, color="0.7")
        c = df[name].to_numpy()
        top = top_k_indices(np.abs(c)[None, :], k)[0]
        size = 10 + 110 * np.abs(c[top]) / max(np.max(np.abs(c[top])), 1e-300)
        pos = c[top] >= 0
        cols = np.array([f"C{a}" for a in acts[top]])
        ax.scatter(X[top[pos], 0], X[top[pos], 1], s=size[pos], c=cols[pos], edgecolor="k",
                   linewidth=0.5, zorder=3)
        ax.scatter(X[top[~pos], 0], X[top[~pos], 1], s=size[~pos], facecolor="none",
                   edgecolor=cols[~pos], linewidth=1.5, zorder=3)
        ax.scatter([xq[0]], [xq[1]], marker="*", s=220, color="k", edgecolor="w", zorder=4)
        s = summary.loc[name]
        label = "ground truth $s(x, x_i)\\,r_i(a)$" if name == "ground_truth" else name
        ax.set_title(f"{label}\nTop-{k} share {s[f'top{k}']:.2f}, "
                     f"{int(s[f'negative_in_top{k}'])} negative, r = {s['pearson']:.2f}",
                     fontsize=9)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes.ravel()[len(names):]:
        ax.set_axis_off()
    a = df.attrs["action"]
    fig.suptitle(f"query {df.attrs['query']} at ({xq[0]:.2f}, {xq[1]:.2f}): contributions to "
                 f"$Q(x, a_{a})$, CBDT-optimal $a^* = a_{df.attrs['cbdt_action']}$; "
                 f"filled: raises the score, hollow: lowers it", fontsize=10)
    fig.tight_layout()
    return fig


# --- chapter 07: PJM audit ---


_PJM_NAMES = ("conservative", "moderate", "aggressive")


def plot_pjm_problem(problem):
    """The bidding problem (ch. 07): load and split, the market model, the strategies' returns.

    Parameters
    ----------
    problem : cbdt.datasets.pjm_bidding.BiddingProblem

    Returns
    -------
    matplotlib.figure.Figure
        (a) PJME load of the decision hours with the chronological split; (b) synthetic price
        against load, the expected price :math:`P_0 e^{\\gamma z}` and the offer prices
        :math:`b_0, b_1, b_2`; (c) the return of each strategy as a function of the price.
    """
    import numpy as np

    h = problem.hours
    m = problem.market
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 3.6))
    ax = axes[0]
    daily = h["load_mw"].resample("D").agg(["mean", "min", "max"]) / 1e3
    ax.fill_between(daily.index, daily["min"], daily["max"], color="0.75", lw=0,
                    label="daily min-max")
    ax.plot(daily.index, daily["mean"], lw=0.8, color="k", label="daily mean")
    split = problem.times_test[0]
    ax.axvspan(split, h.index[-1], color="C1", alpha=0.12, label="test hours")
    ax.set_ylabel("PJME load (GW)")
    ax.set_title("(a) real load, chronological split")
    ax.legend(fontsize=7, loc="upper left")
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)

    ax = axes[1]
    rng = np.random.default_rng(0)
    sub = rng.choice(len(h), size=min(4000, len(h)), replace=False)
    ax.scatter(h["load_mw"].to_numpy()[sub] / 1e3, h["price"].to_numpy()[sub], s=2,
               color="0.5", alpha=0.4, rasterized=True, label="hours (sample)")
    grid = np.linspace(h["load_mw"].min(), h["load_mw"].max(), 200)
    z = (grid - problem.load_mean) / problem.load_sd
    ax.plot(grid / 1e3, m.base_price * np.exp(m.load_slope * z), color="k",
            label="$E[p \\mid L] = P_0 e^{\\gamma z}$")
    for k, b in enumerate(problem.offer_prices):
        ax.axhline(b, color=f"C{k}", lw=1, ls="--", label=f"$b_{k}$ = {b:.1f} ({_PJM_NAMES[k]})")
    ax.set_yscale("log")
    ax.set_xlabel("load $L_t$ (GW)")
    ax.set_ylabel("price $p_t$ (\\$/MWh, log scale)")
    ax.set_title("(b) synthetic market, convex in load")
    ax.legend(fontsize=7, loc="upper left")

    ax = axes[2]
    from .datasets.pjm_bidding import strategy_returns

    ps = np.linspace(0, float(np.quantile(h["price"], 0.99)), 400)
    r = strategy_returns(ps, problem.cost, problem.offer_prices, m)
    for k in range(3):
        ax.plot(ps, r[:, k], color=f"C{k}", label=_PJM_NAMES[k])
    for b in problem.offer_prices[1:]:
        ax.axvline(b, color="0.5", lw=0.8, ls=":")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("price $p_t$ (\\$/MWh)")
    ax.set_ylabel("return $r_t(a)$ (\\$10k)")
    ax.set_title("(c) strategies: break-evens at $b_1, b_2$")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_pjm_agreement(profile, transition_loads=None):
    """Fig. 3a: where network and CBDT disagree, against the CBDT margin and the load.

    Parameters
    ----------
    profile : pandas.DataFrame
        :func:`cbdt.experiments.pjm.disagreement_profile` of one run.
    transition_loads : array-like, optional
        Loads (MW) where the expected price crosses :math:`b_1, b_2`
        (:func:`cbdt.experiments.pjm.transition_loads`), drawn as vertical lines.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    agree = profile["agree"].to_numpy()
    load = profile["prev_load_mw"].to_numpy() / 1e3
    margin = profile["cbdt_margin"].to_numpy()
    floor = max(float(margin[margin > 0].min()), 1e-6) if (margin > 0).any() else 1e-6
    margin = np.maximum(margin, floor)
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 3.9), gridspec_kw={"width_ratios": [1.6, 1]})
    ax = axes[0]
    ax.scatter(load[agree], margin[agree], s=3, color="0.65", alpha=0.5, rasterized=True,
               label=f"agree ({agree.sum()})")
    ax.scatter(load[~agree], margin[~agree], s=9, color="C3",
               label=f"disagree ({(~agree).sum()})")
    if transition_loads is not None:
        for k, L in enumerate(np.atleast_1d(transition_loads)):
            ax.axvline(L / 1e3, color="k", ls="--", lw=0.9,
                       label="expected price = $b_1$, $b_2$" if k == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("latest observed load $L_{t-1}$ (GW)")
    ax.set_ylabel("CBDT margin (\\$10k, log scale)")
    ax.set_title("(a) disagreements vs load and decision margin")
    ax.legend(fontsize=7, loc="lower right")
    ax = axes[1]
    bins = np.logspace(np.log10(margin.min()), np.log10(margin.max()), 40)
    for sel, color, label in ((agree, "0.6", "agree"), (~agree, "C3", "disagree")):
        if sel.any():
            ax.hist(margin[sel], bins=bins, color=color, alpha=0.7,
                    weights=np.full(sel.sum(), 1.0 / sel.sum()), label=label)
    ax.set_xscale("log")
    ax.set_xlabel("CBDT margin (\\$10k, log scale)")
    ax.set_ylabel("share of the group's hours")
    ax.set_title("(b) margin distribution")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_pjm_support_alignment(probe_scores, cbdt_average, rho=None, max_points=2000):
    """Fig. 3b: case-weighted support :math:`\\sum_i\\alpha_i r_i(a)` against CBDT support.

    Parameters
    ----------
    probe_scores, cbdt_average : ndarray of shape (m, 3)
        Probe scores (= case-weighted support) and normalised CBDT support of the test hours.
    rho : array-like of shape (3,), optional
        :math:`\\rho_{support}` per action, shown in the titles.
    max_points : int, default 2000
        Points drawn per panel (an evenly spaced subset).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    P = np.asarray(probe_scores)
    U = np.asarray(cbdt_average)
    idx = np.linspace(0, P.shape[0] - 1, min(max_points, P.shape[0])).astype(int)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.7))
    for a, ax in enumerate(axes):
        ax.scatter(U[idx, a], P[idx, a], s=3, color=f"C{a}", alpha=0.5, rasterized=True)
        lo = min(U[:, a].min(), P[:, a].min())
        hi = max(U[:, a].max(), P[:, a].max())
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8, ls="--", label="y = x")
        title = _PJM_NAMES[a]
        if rho is not None:
            title += f": $\\rho_{{support}}$ = {float(rho[a]):.4f}"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("CBDT avg. support $\\bar U(a \\mid M, x)$")
        if a == 0:
            ax.set_ylabel("$\\sum_i \\alpha_i(x) r_i(a)$ (probe)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def plot_signed_geometry(cases):
    """Fig. 5a-b: distances and coefficients of the top-5 positive vs negative cases.

    Parameters
    ----------
    cases : pandas.DataFrame
        ``SignedGeometry.cases`` (one or several seeds stacked).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    pos = cases[cases["group"] == "positive"]
    neg = cases[cases["group"] == "negative"]
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.6))
    ax = axes[0]
    d = cases["distance"].to_numpy()
    bins = np.linspace(0, float(d.max()) * 1.02, 40)
    ax.hist(pos["distance"], bins=bins, color="C2", alpha=0.7,
            label=f"top-5 positive $\\alpha$ (mean {pos['distance'].mean():.3g})")
    ax.hist(neg["distance"], bins=bins, color="C3", alpha=0.7,
            label=f"top-5 negative $\\alpha$ (mean {neg['distance'].mean():.3g})")
    ax.set_xlabel("standardised representation distance $d(x, x_i)$")
    ax.set_ylabel("cases")
    ax.set_title("(a) distance distribution")
    ax.legend(fontsize=8)
    ax = axes[1]
    a = cases["alpha"].to_numpy()
    bins = np.linspace(float(a.min()), float(a.max()), 40)
    ax.hist(pos["alpha"], bins=bins, color="C2", alpha=0.7, label="top-5 positive")
    ax.hist(neg["alpha"], bins=bins, color="C3", alpha=0.7, label="top-5 negative")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("coefficient $\\alpha_i(x)$")
    ax.set_ylabel("cases")
    ax.set_title("(b) coefficient distribution")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_alpha_distance(alpha, distance, cases=None):
    """Fig. C1: coefficient against standardised distance, all cases of the audited queries.

    Parameters
    ----------
    alpha, distance : ndarray of shape (q, n)
        ``SignedGeometry.alpha`` and ``SignedGeometry.distance``.
    cases : pandas.DataFrame, optional
        ``SignedGeometry.cases``: the top-5 positive/negative cases are overlaid.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.colors import LogNorm

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    hb = ax.hexbin(np.ravel(distance), np.ravel(alpha), gridsize=70, norm=LogNorm(),
                   cmap="Greys", mincnt=1, linewidths=0)
    fig.colorbar(hb, ax=ax, label="(query, case) pairs")
    if cases is not None:
        pos = cases[cases["group"] == "positive"]
        neg = cases[cases["group"] == "negative"]
        ax.scatter(pos["distance"], pos["alpha"], s=10, color="C2", label="top-5 positive")
        ax.scatter(neg["distance"], neg["alpha"], s=10, color="C3", label="top-5 negative")
        ax.legend(fontsize=8)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("standardised representation distance $d(x, x_i)$")
    ax.set_ylabel("$\\alpha_i(x)$")
    ax.set_title(f"Coefficient vs distance ({alpha.shape[0]} queries x {alpha.shape[1]} cases)")
    fig.tight_layout()
    return fig


def plot_case_audit(audit, max_background=3000):
    """Fig. 5: one test hour's ranked cases in a 2-D PCA projection of :math:`\\varphi`.

    Parameters
    ----------
    audit : cbdt.experiments.pjm.QueryAudit
    max_background : int, default 3000
        Training cases drawn as background (evenly spaced subset).

    Returns
    -------
    matplotlib.figure.Figure
        (a) projection: training cases (grey), the query (star), the top positive (circles)
        and negative (triangles) coefficient cases, filled when their case-optimal action
        equals the selected action; (b) the same, zoomed on the query; (c) network score,
        probe score and normalised CBDT support of each action.
    """
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    xy = audit.xy_train
    idx = np.linspace(0, xy.shape[0] - 1, min(max_background, xy.shape[0])).astype(int)
    cases = audit.cases
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [1, 1, 0.9]})

    def draw(ax):
        ax.scatter(xy[idx, 0], xy[idx, 1], s=2, color="0.8", rasterized=True)
        for g, marker, color in (("positive", "o", "C2"), ("negative", "^", "C3")):
            sel = (cases["group"] == g).to_numpy()
            for (x, y), match in zip(audit.xy_cases[sel], cases["match"].to_numpy()[sel],
                                     strict=True):
                ax.scatter(x, y, s=60, marker=marker, edgecolor=color, linewidth=1.5,
                           facecolor=color if match else "white", zorder=3)
        ax.scatter(*audit.xy_query, s=220, marker="*", color="k", zorder=4)
        ax.set_xlabel(f"PC 1 ({100 * audit.explained[0]:.0f} %)")
        ax.set_ylabel(f"PC 2 ({100 * audit.explained[1]:.0f} %)")

    draw(axes[0])
    axes[0].set_title(f"(a) test hour {audit.time:%Y-%m-%d %H:%M}: representation (PCA)",
                      fontsize=10)
    draw(axes[1])
    pos = audit.xy_cases[(cases["group"] == "positive").to_numpy()]
    pts = np.vstack([pos, audit.xy_query[None, :]])
    span = float(np.ptp(xy[idx], axis=0).max())
    half = max(float(np.abs(pts - audit.xy_query).max()) * 1.3, 0.02 * span)
    axes[1].set_xlim(audit.xy_query[0] - half, audit.xy_query[0] + half)
    axes[1].set_ylim(audit.xy_query[1] - half, audit.xy_query[1] + half)
    axes[1].set_title("(b) zoom on the query", fontsize=10)
    handles = [
        Line2D([], [], marker="*", color="k", ls="", markersize=12, label="query"),
        Line2D([], [], marker="o", color="C2", ls="", label="top positive $\\alpha$"),
        Line2D([], [], marker="^", color="C3", ls="", label="top negative $\\alpha$"),
        Line2D([], [], marker="o", markerfacecolor="white", markeredgecolor="0.3", ls="",
               label="open: $a_i^*$ differs from selected"),
    ]
    axes[0].legend(handles=handles, fontsize=7, loc="lower left")

    ax = axes[2]
    width = 0.27
    x = np.arange(3)
    bars = []
    for k, (vals, label, hatch) in enumerate(
        ((audit.network_scores, "network $Q_{nn}$", ""),
         (audit.probe_scores, "probe $\\sum_i\\alpha_i r_i(a)$", "//"),
         (audit.cbdt_average, "CBDT $\\bar U$", ".."))
    ):
        ax.bar(x + (k - 1) * width, vals, width, color=[f"C{a}" for a in range(3)],
               hatch=hatch, edgecolor="k", linewidth=0.5)
        bars.append(Patch(facecolor="white", edgecolor="k", hatch=hatch, label=label))
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(x, [n + (" *" if a == audit.selected else "") for a, n in enumerate(_PJM_NAMES)])
    ax.set_ylabel("score / support (\\$10k)")
    ax.set_title("(c) scores (* = network's choice)", fontsize=10)
    ax.legend(handles=bars, fontsize=7)
    fig.tight_layout()
    return fig


# --- chapter 08: UCI audits ---


def _ch08_colors(n):
    cmap = plt.get_cmap("tab10")
    return [cmap(a % 10) for a in range(n)]


def plot_uci_behaviour(panel, ax=None, title=None):
    """Network margin against CBDT margin, one dot per test record (Fig. 4a/4c analogue).

    ``panel`` is :func:`cbdt.experiments.uci.figure4_panel` of one run: x is the normalised
    CBDT margin of the CBDT action (>= 0, in units of return), y the network's score of that
    action minus its best other score; dots above the dashed line are agreements. Colour:
    the CBDT action.
    """
    import numpy as np
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 3.8))
    labels = list(panel["action_labels"])
    colors = _ch08_colors(len(labels))
    x, y, a = (np.asarray(panel[k]) for k in ("cbdt_margin", "network_margin", "cbdt_action"))
    order = np.random.default_rng(0).permutation(x.size)  # no action hides another
    ax.scatter(x[order], y[order], s=3, alpha=0.35, c=np.asarray(colors)[a[order]],
               rasterized=True)
    ax.axhline(0.0, color="black", ls="--", lw=0.8)
    ax.set_xlabel("CBDT margin $\\bar U(a^*) - \\max_{b\\neq a^*}\\bar U(b)$")
    ax.set_ylabel("network: $Q(a^*) - \\max_{b\\neq a^*} Q(b)$")
    handles = [Line2D([], [], marker="o", ls="", color=colors[k], label=f"CBDT: {lab}")
               for k, lab in enumerate(labels) if (a == k).any()]
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(title or f"agreement {panel['agreement']:.3f}", fontsize=10)
    return ax.figure


def plot_uci_reconstruction(panel, ax=None, title=None):
    """OLS-probe scores against network scores on the test inputs (Fig. 4b/4d analogue)."""
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 3.8))
    labels = list(panel["action_labels"])
    colors = _ch08_colors(len(labels))
    from matplotlib.lines import Line2D

    P, N = np.asarray(panel["probe_scores"]), np.asarray(panel["network_scores"])
    A = P.shape[1]
    act = np.repeat(np.arange(A)[None, :], P.shape[0], axis=0).ravel()
    order = np.random.default_rng(0).permutation(act.size)  # interleave the actions
    ax.scatter(P.ravel()[order], N.ravel()[order], s=3, alpha=0.3,
               c=np.asarray(colors)[act[order]], rasterized=True)
    lo, hi = float(min(P.min(), N.min())), float(max(P.max(), N.max()))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls="--")
    ax.set_xlabel("OLS probe score $\\varphi(x)^\\top \\hat v_a$")
    ax.set_ylabel("network score $Q_{nn}(x, a)$")
    handles = [Line2D([], [], marker="o", ls="", color=colors[k],
                      label=f"{lab}: $\\rho$ = {panel['rho_recon'][k]:.3f}")
               for k, lab in enumerate(labels)]
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    ax.set_title(title or "reconstruction", fontsize=10)
    return ax.figure


def plot_uci_figure4(panels):
    """The four panels of Fig. 4: behaviour and reconstruction for each data set.

    ``panels`` maps a data-set name to :func:`cbdt.experiments.uci.figure4_panel`.
    """
    fig, axes = plt.subplots(1, 2 * len(panels), figsize=(4.2 * 2 * len(panels), 4.0))
    letters = "abcdefgh"
    for j, (name, panel) in enumerate(panels.items()):
        plot_uci_behaviour(panel, axes[2 * j], title=(
            f"({letters[2 * j]}) {name} behaviour: agreement {panel['agreement']:.3f}"))
        plot_uci_reconstruction(panel, axes[2 * j + 1],
                                title=f"({letters[2 * j + 1]}) {name} reconstruction")
    fig.tight_layout()
    return fig


def plot_uci_vs_paper(rows, ax=None):
    """Per-seed values, mean and 95% CI, and the paper's value, one line per quantity.

    ``rows`` is a list of ``(label, values_per_seed, paper_mean, paper_ci)``; ``paper_mean``
    may be None (not reported) and ``paper_ci`` None (no interval).
    """
    import numpy as np

    from .metrics import mean_ci

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.2))
    for i, (_label, values, pm, pc) in enumerate(rows):
        v = np.asarray(values, dtype=float)
        y = len(rows) - 1 - i
        ax.scatter(v, np.full(v.size, y + 0.12), s=12, color="C0", alpha=0.6,
                   label="book, one seed" if i == 0 else None)
        m, h = mean_ci(v)
        ax.errorbar(m, y + 0.12, xerr=h, fmt="o", color="C0", ms=6, capsize=3,
                    label="book, mean $\\pm$ 95% CI" if i == 0 else None)
        if pm is not None and np.isfinite(pm):
            ax.errorbar(pm, y - 0.18, xerr=0 if pc is None or not np.isfinite(pc) else pc,
                        fmt="*", color="C3", ms=10, capsize=3,
                        label="paper" if not any(
                            r[2] is not None and np.isfinite(r[2]) for r in rows[:i]) else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows][::-1], fontsize=8)
    ax.set_xlabel("value")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("Book (5 seeds) beside the paper", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def plot_uci_bandwidth(sensitivities, ax=None, paper=None):
    """Network-CBDT agreement against the bandwidth multiple (mean and 95% CI over seeds).

    ``sensitivities`` maps a data-set name to the ``sensitivity`` table of
    :class:`cbdt.experiments.uci.UCIAudit`; ``paper`` optionally maps the same names to the
    paper's agreement (drawn as a dotted line). Open circles mark how often each multiple was
    chosen by the validation rule (right axis: number of seeds).
    """
    import numpy as np

    from .metrics import mean_ci

    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 3.8))
    for j, (name, df) in enumerate(sensitivities.items()):
        mults = np.sort(df["multiple"].unique())
        stats = [mean_ci(df.loc[df["multiple"] == c, "agreement"].to_numpy()) for c in mults]
        m = np.array([s[0] for s in stats])
        h = np.array([s[1] for s in stats])
        ax.errorbar(mults, m, yerr=h, marker="o", capsize=3, color=f"C{j}", label=name)
        chosen = [int(df.loc[df["multiple"] == c, "chosen"].sum()) for c in mults]
        for c, mm, k in zip(mults, m, chosen, strict=True):
            if k:
                ax.annotate(f"chosen {k}x", (c, mm), textcoords="offset points", xytext=(4, 6),
                            fontsize=7, color=f"C{j}")
        if paper and name in paper and paper[name] is not None:
            ax.axhline(paper[name], color=f"C{j}", ls=":", lw=1, label=f"{name}: paper")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bandwidth $h$ / median training distance (1 = median heuristic)")
    ax.set_ylabel("NN-CBDT agreement")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title("How the agreement depends on the CBDT bandwidth", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def plot_uci_submemory(sub, paper_mismatch=None):
    """Gram mismatch and A2 satisfaction per split (mean and 95% CI over seeds).

    ``sub`` is the ``submemory`` table of :class:`cbdt.experiments.uci.UCIAudit` (one row per
    seed and split). ``paper_mismatch`` optionally maps a split to the paper's value.
    """
    import numpy as np

    from .metrics import mean_ci

    splits = list(dict.fromkeys(sub["split"]))
    x = np.arange(len(splits))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.5, 3.8))

    def series(col):
        st = []
        for s in splits:
            v = sub.loc[sub["split"] == s, col].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            st.append(mean_ci(v) if v.size > 1 else (v.mean() if v.size else np.nan, 0.0))
        return np.array([a for a, _ in st]), np.array([b for _, b in st])

    for k, (col, lab) in enumerate([("gram_mismatch", "whitened (book's definition)"),
                                    ("gram_mismatch_raw", "raw Frobenius (not invariant)")]):
        m, h = series(col)
        ax1.errorbar(x + (k - 0.5) * 0.15, m, yerr=h, fmt="o", capsize=3, color=f"C{k}",
                     label=lab)
    if paper_mismatch:
        for s, v in paper_mismatch.items():
            if s in splits:
                ax1.scatter([splits.index(s) + 0.25], [v], marker="*", s=120, color="C3",
                            label=f"paper ({s}, about {v})", zorder=5)
    ax1.set_xticks(x)
    ax1.set_xticklabels(splits)
    ax1.set_ylim(0, 1)
    ax1.set_ylabel("Gram mismatch $D$")
    ax1.legend(fontsize=7)
    ax1.set_title("Gram mismatch of the two sub-memories", fontsize=10)

    for k, (col, lab) in enumerate([("a2_cbdt", "CBDT supports (eq. 1)"),
                                    ("a2_ols", "OLS probes per sub-memory")]):
        m, h = series(col)
        ax2.errorbar(x + (k - 0.5) * 0.15, m, yerr=h, fmt="o", capsize=3, color=f"C{k + 2}",
                     label=lab)
    ax2.set_xticks(x)
    ax2.set_xticklabels(splits)
    ax2.set_ylabel("A2 satisfaction")
    ax2.legend(fontsize=7, loc="lower left")
    ax2.set_title("Combination axiom A2 under the union", fontsize=10)
    fig.tight_layout()
    return fig


def plot_uci_loss_curves(curves):
    """Training loss per epoch, one line per seed; ``curves`` maps a name to a list of arrays."""
    fig, axes = plt.subplots(1, len(curves), figsize=(4.6 * len(curves), 3.2))
    axes = [axes] if len(curves) == 1 else list(axes)
    for ax, (name, cs) in zip(axes, curves.items(), strict=True):
        for s, c in enumerate(cs):
            ax.plot(range(1, len(c) + 1), c, lw=1, label=f"seed {s}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("training MSE")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


# --- chapter 09: the risk score under distribution shift ---

_CH09_SCORES = {
    "risk": ("risk $O_\\alpha$ (eq. 20)", "C0", "-"),
    "entropy": ("entropy $H_\\alpha$ (eq. 17)", "C2", "--"),
    "gini": ("Gini $D_{Gini}$ (eq. 19)", "C4", ":"),
    "margin": ("network margin", "C3", "-"),
    "leverage": ("leverage $\\|\\alpha\\|^2$", "C1", "-."),
    "knn": ("$k$-NN distance in $\\varphi$", "C7", (0, (3, 1, 1, 1))),
}
_CH09_SHIFT_TITLES = {
    "mean": "(a) mean shift",
    "variance": "(b) variance shift",
    "covariate": "(c) covariate shift",
}


def _ch09_panels(shifts):
    import numpy as np

    fig, axes = plt.subplots(2, 2, figsize=(8.0, 6.6), sharex=True)
    axes = np.asarray(axes).ravel()
    return fig, axes[: len(shifts)], axes[len(shifts):]


def plot_drift_grid(summary, scores=None, shifts=("mean", "variance", "covariate")):
    """Fig. C2: incorrect-decision AUC against shift level, one panel per shift.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`cbdt.experiments.drift.summarize_grid` (``shift, level, score, auc_mean,
        auc_ci, error_rate``).
    scores : sequence of str, optional
        Which scores to draw; default all in the frame.
    shifts : sequence of str
        Panel order; at most three (the fourth panel shows the error rate).

    Returns
    -------
    matplotlib.figure.Figure
        2 x 2 panels: one per shift (mean AUC over seeds, 95% CI band), and the error rate of
        the audited decisions per shift. A shared legend sits below the panels.
    """
    import numpy as np

    scores = list(dict.fromkeys(summary["score"])) if scores is None else list(scores)
    fig, axes, rest = _ch09_panels(shifts)
    for ax, shift in zip(axes, shifts, strict=True):
        sub = summary[summary["shift"] == shift]
        for score in scores:
            s = sub[sub["score"] == score].sort_values("level")
            label, color, ls = _CH09_SCORES.get(score, (score, None, "-"))
            lw = 2.2 if score in ("risk", "margin") else 1.4
            x, y = s["level"].to_numpy(), s["auc_mean"].to_numpy()
            ci = np.nan_to_num(s["auc_ci"].to_numpy())
            ax.plot(x, y, color=color, ls=ls, lw=lw, marker="o", ms=3, label=label)
            ax.fill_between(x, y - ci, y + ci, color=color, alpha=0.12, lw=0)
        ax.axhline(0.5, color="0.5", lw=0.8, ls=":")
        ax.set_ylim(0.3, 1.02)
        ax.set_title(_CH09_SHIFT_TITLES.get(shift, shift), fontsize=12)
        ax.set_ylabel("AUC, wrong decisions", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.grid(alpha=0.3)
    if rest.size:
        ax = rest[0]
        for shift, marker in zip(shifts, ("o", "s", "^"), strict=False):
            s = summary[(summary["shift"] == shift) & (summary["score"] == scores[0])]
            s = s.sort_values("level")
            ax.plot(s["level"], 100 * s["error_rate"], marker=marker, ms=4, color="0.25",
                    ls="-", lw=1.2, label=_CH09_SHIFT_TITLES.get(shift, shift)[4:])
        ax.set_title("(d) share of wrong decisions", fontsize=12)
        ax.set_ylabel("wrong decisions, %", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.legend(fontsize=10, frameon=False)
        ax.grid(alpha=0.3)
    for ax in list(axes[-2:]) + list(rest):
        ax.set_xlabel("shift level $L$ (training s.d.)", fontsize=11)
        ax.tick_params(labelbottom=True)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def plot_drift_paired(paired, scores=("risk", "entropy", "gini", "leverage", "knn"),
                      shifts=("mean", "variance", "covariate"), alpha=0.05):
    """Fig. C3: paired AUC differences (score minus network margin) with significance marks.

    Parameters
    ----------
    paired : pandas.DataFrame
        :func:`cbdt.experiments.drift.paired_vs_margin`.
    scores, shifts : sequences of str
    alpha : float, default 0.05
        A filled marker means paired t-test :math:`p <` ``alpha``; hollow means not
        significant. Error bars are the 95% CI of the mean difference over seeds.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.lines import Line2D

    fig, axes, rest = _ch09_panels(shifts)
    offsets = np.linspace(-0.15, 0.15, len(scores))
    for ax, shift in zip(axes, shifts, strict=True):
        sub = paired[paired["shift"] == shift]
        for off, score in zip(offsets, scores, strict=True):
            s = sub[sub["score"] == score].sort_values("level")
            label, color, _ = _CH09_SCORES.get(score, (score, None, "-"))
            x = s["level"].to_numpy() + off
            y = s["mean_diff"].to_numpy()
            ci = np.nan_to_num(s["ci"].to_numpy())
            sig = (s["t_pvalue"] < alpha).to_numpy()
            ax.errorbar(x, y, yerr=ci, fmt="none", ecolor=color, elinewidth=0.9, alpha=0.7)
            ax.plot(x[sig], y[sig], "o", color=color, ms=5, label=label)
            ax.plot(x[~sig], y[~sig], "o", mfc="white", mec=color, ms=5)
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_title(_CH09_SHIFT_TITLES.get(shift, shift), fontsize=12)
        ax.set_ylabel("AUC(score) - AUC(margin)", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.grid(alpha=0.3)
    for ax in list(axes[-2:]) + list(rest):
        ax.set_xlabel("shift level $L$ (training s.d.)", fontsize=11)
        ax.tick_params(labelbottom=True)
    handles = [Line2D([], [], marker="o", ls="none", color=_CH09_SCORES[s][1], ms=6,
                      label=_CH09_SCORES[s][0]) for s in scores if s in _CH09_SCORES]
    handles += [
        Line2D([], [], marker="o", ls="none", color="0.3", ms=6,
               label=f"filled: paired t, p < {alpha:g}"),
        Line2D([], [], marker="o", ls="none", mfc="white", mec="0.3", ms=6,
               label="hollow: not significant"),
    ]
    if rest.size:
        rest[0].axis("off")
        rest[0].legend(handles=handles, loc="center", fontsize=10.5, frameon=False,
                       title="above 0: score beats the margin", title_fontsize=10.5)
    else:
        fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=10, frameon=False)
    fig.tight_layout()
    return fig


def plot_drift_sensitivity(sens, shifts=("mean", "variance", "covariate")):
    """AUC difference risk - margin (levels >= 2) for every variant of the sensitivity table.

    Parameters
    ----------
    sens : pandas.DataFrame
        :func:`cbdt.experiments.drift.drift_sensitivity` (index: variant; ``<shift> dAUC``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    n = len(sens)
    fig, ax = plt.subplots(figsize=(8.0, 0.36 * n + 1.4))
    y = np.arange(n)
    for j, (shift, marker) in enumerate(zip(shifts, ("o", "s", "^"), strict=False)):
        ax.plot(sens[f"{shift} dAUC"].to_numpy(), y + (j - 1) * 0.18, marker, ls="none",
                color=f"C{j}", ms=6, label=f"{shift} shift")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y, sens.index, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel("mean AUC(risk) - AUC(margin), levels 2-4", fontsize=11)
    ax.tick_params(axis="x", labelsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=10, loc="lower right")
    fig.tight_layout()
    return fig


_CH09_CLF_GROUPS = (
    ("contribution", "ranked by |ψ| (eq. 16)"),
    ("coefficient", "ranked by |α|"),
    ("none", "baselines"),
)
_CH09_CLF_COLORS = {
    "risk": "C0",
    "entropy": "C1",
    "gini": "C2",
    "margin": "C7",
    "leverage": "C4",
}


def plot_classifier_audit(summary, ax=None):
    """Bar chart of the error-detection AUC of every audit score, grouped by ``rank_by``.

    Parameters
    ----------
    summary : DataFrame
        Output of :func:`cbdt.experiments.classifier.summarize_classifier` (indexed by
        ``score``, with ``signal``, ``rank_by``, ``auc_mean``, ``auc_ci``, ``n_defined``).
    ax : matplotlib Axes, optional
        Draw here; default a new figure of size (8, 3.5).

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Bars show the mean AUC over seeds with the 95% Student-t interval as error bars; a dashed
    line marks chance (0.5). A score whose AUC is undefined on every seed (a constant score,
    e.g. contribution-ranked entropy and Gini with one-hot returns) gets an empty hatched
    bar up to 0.5, labelled "AUC undefined (constant)", instead of a number.
    """
    import numpy as np
    import pandas as pd

    need = {"signal", "rank_by", "auc_mean", "auc_ci"}
    if not isinstance(summary, pd.DataFrame) or not need <= set(summary.columns):
        raise ValueError(
            f"summary must be the DataFrame of summarize_classifier (columns {sorted(need)})."
        )
    if ax is None:
        fig, ax = plt.subplots(figsize=(8.0, 3.5), layout="constrained")
    else:
        fig = ax.figure
    x = 0.0
    ticks = []
    labels = []
    group_spans = []
    for key, title in _CH09_CLF_GROUPS:
        rows = summary[summary["rank_by"] == key]
        if rows.empty:
            continue
        start = x
        for _, r in rows.iterrows():
            color = _CH09_CLF_COLORS.get(str(r["signal"]), "C9")
            mean, ci = float(r["auc_mean"]), float(r["auc_ci"])
            if np.isfinite(mean):
                ax.bar(x, mean, width=0.75, color=color,
                       yerr=ci if np.isfinite(ci) else None, capsize=3,
                       error_kw={"lw": 1.0, "ecolor": "0.2"})
                ax.text(x, min(mean + (ci if np.isfinite(ci) else 0) + 0.015, 1.02),
                        f"{mean:.2f}", ha="center", va="bottom", fontsize=10)
            else:
                ax.bar(x, 0.5, width=0.75, facecolor="none", edgecolor=color, hatch="///",
                       lw=1.0)
                ax.text(x, 0.25, "AUC\nundefined\n(constant)", ha="center", va="center",
                        fontsize=8, color="0.2", linespacing=1.1,
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
            ticks.append(x)
            labels.append(str(r["signal"]))
            x += 1.0
        group_spans.append((start, x - 1.0, title))
        x += 0.6
    ax.axhline(0.5, color="0.3", ls="--", lw=1.0, label="chance (0.5)")
    ax.set_xticks(ticks, labels, fontsize=10)
    ax.set_ylim(0.0, 1.1)
    ax.set_xlim(-0.6, x - 1.0)
    ax.set_ylabel("AUC for a wrong decision", fontsize=10)
    for lo, hi, title in group_spans:
        ax.annotate(title, xy=((lo + hi) / 2, 0), xycoords=("data", "axes fraction"),
                    xytext=(0, -30), textcoords="offset points", ha="center", va="top",
                    fontsize=10, fontweight="bold")
    ax.legend(loc="upper left", fontsize=10, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


_CH09_PJM_COLORS = {"risk": "tab:red", "risk_alpha": "tab:purple", "margin": "tab:blue",
                     "leverage": "tab:green"}
_CH09_PJM_LABELS = {
    "risk": r"risk $O_\alpha$, top-10 by $|\psi|$",
    "risk_alpha": r"risk $O_\alpha$, top-10 by $|\alpha|$",
    "margin": "network margin (low = risky)",
    "leverage": r"leverage $\|\alpha(x)\|^2$",
}


def _ch09_band(ax, x, m, h, color, label):
    import numpy as np

    ax.plot(x, m, "-o", color=color, ms=3.5, lw=1.6, label=label)
    ok = np.isfinite(h)
    if ok.any():
        ax.fill_between(x, m - np.where(ok, h, 0), m + np.where(ok, h, 0), color=color,
                        alpha=0.18, lw=0, where=ok)


def plot_pjm_drift(summary, *, budget=None, caught="caught_ties",
                   scores=("risk", "risk_alpha", "margin", "leverage")):
    """Per-year AUC and errors caught at the review budget of the PJM drift audit.

    Two panels stacked (``figsize=(8, 8)``, text of 10.5-12 pt, so it stays legible in a
    700 px column): (a) ROC AUC of each score for the network's wrong decisions, mean
    and 95 % CI band over seeds, chance level dotted, and the network's error rate as grey
    bars on the right axis; (b) share of the year's wrong decisions among the top ``budget``
    share of the ranked decisions, with the random-review baseline (= ``budget``) dashed.
    The training years (in-sample) are shaded grey in both panels; one legend below both.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`cbdt.experiments.pjm_drift.summarize_pjm_drift` (index
        ``(year, score)``; columns ``split``, ``auc_mean``, ``auc_ci``,
        ``<caught>_mean``, ``<caught>_ci``, ``error_rate_mean``, ``error_rate_ci``).
    budget : float, optional
        Review budget; default ``summary.attrs["budget"]``, else 0.10.
    caught : str, default "caught_ties"
        Column family of panel (b): ``"caught_ties"`` (tied scores ordered at random, exact
        expectation) or ``"caught"`` (ties in time order).
    scores : tuple of str
        Scores drawn, in legend order.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    need = {"split", "auc_mean", "auc_ci", f"{caught}_mean", f"{caught}_ci", "error_rate_mean"}
    missing = need - set(summary.columns)
    if missing:
        raise ValueError(f"summary lacks the columns {sorted(missing)}.")
    if budget is None:
        budget = float(summary.attrs.get("budget", 0.10))
    df = summary.reset_index()
    years = np.sort(df["year"].unique())
    train_years = np.sort(df.loc[df["split"] == "train", "year"].unique())

    with plt.rc_context({"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11,
                         "xtick.labelsize": 10.5, "ytick.labelsize": 10.5,
                         "legend.fontsize": 10.5}):
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 8), layout="constrained")
        axr = ax1.twinx()  # error rate of panel (a), drawn below the AUC lines
        ax1.set_zorder(axr.get_zorder() + 1)
        ax1.patch.set_visible(False)
        for ax in (axr, ax2):  # shading below everything (on axr for panel a)
            if train_years.size:
                ax.axvspan(train_years.min() - 0.5, train_years.max() + 0.5, color="0.9",
                           lw=0, zorder=-1)
        for ax in (ax1, ax2):
            ax.set_xlim(years.min() - 0.5, years.max() + 0.5)
            ax.set_xticks(years[:: 2 if years.size > 8 else 1])
            ax.set_xlabel("year")
            ax.grid(axis="y", color="0.85", lw=0.6)

        for s in scores:
            g = df[df["score"] == s].sort_values("year")
            x = g["year"].to_numpy(dtype=float)
            _ch09_band(ax1, x, g["auc_mean"].to_numpy(), g["auc_ci"].to_numpy(), _CH09_PJM_COLORS[s],
                  _CH09_PJM_LABELS[s])
            _ch09_band(ax2, x, g[f"{caught}_mean"].to_numpy(), g[f"{caught}_ci"].to_numpy(),
                  _CH09_PJM_COLORS[s], _CH09_PJM_LABELS[s])
        ax1.axhline(0.5, color="0.4", ls=":", lw=1.2)
        lo = np.nanmin(df.loc[df["score"].isin(scores), "auc_mean"].to_numpy())
        ax1.set_ylim(min(0.2, lo - 0.05), 1.0)
        ax1.set_ylabel("ROC AUC for wrong decisions")
        ax1.set_title("(a) which score flags the wrong decisions")

        # error rate as light bars on a right axis scaled so they stay in the lower quarter
        er = df[df["score"] == scores[0]].sort_values("year")
        axr.bar(er["year"], er["error_rate_mean"], width=0.6, color="0.55", alpha=0.45,
                zorder=0)
        axr.set_ylim(0, 4 * float(np.nanmax(er["error_rate_mean"])))
        axr.set_ylabel("network error rate (bars)")

        ax2.axhline(budget, color="0.3", ls="--", lw=1.4)
        ax2.set_ylim(0, 1)
        ax2.set_ylabel(f"share of wrong decisions caught\n(review budget {budget:.0%})")
        ax2.set_title(f"(b) errors caught when {budget:.0%} are reviewed")

        handles = [
            *(Line2D([], [], color=_CH09_PJM_COLORS[s], marker="o", ms=3.5, label=_CH09_PJM_LABELS[s])
              for s in scores),
            Line2D([], [], color="0.4", ls=":", label="chance (AUC 0.5), panel a"),
            Patch(color="0.55", alpha=0.45, label="error rate (right axis), panel a"),
            Line2D([], [], color="0.3", ls="--", label=f"random review (= {budget:.0%}), panel b"),
            Patch(color="0.9", label="training years (in-sample)"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False)
    return fig


# --- chapter 10: Nyström and scaling ---

_CH10_STYLE = {
    "exact": dict(color="C0", marker="o"),
    "Nystrom features": dict(color="C1", marker="s"),
    "Nystrom cases": dict(color="C2", marker="^"),
    "floor (GEMM)": dict(color="0.35", marker="", linestyle="--"),
}


def plot_scaling(df, exponents=None):
    """Log-log fit and per-query time against ``n`` and ``H``, with the GEMM floor (C.7).

    Parameters
    ----------
    df : pandas.DataFrame
        ``benchmarks/results/scaling.csv``: columns ``sweep`` ("n" or "H"), ``n``, ``H``,
        ``method``, ``fit_s``, ``query_s``.
    exponents : pandas.DataFrame, optional
        Fitted exponents indexed by ``(sweep, method)`` with columns ``fit`` and ``query``;
        shown in the legends.

    Returns
    -------
    matplotlib.figure.Figure
        2 x 2 panels: fit time and per-query time (rows) against n at H = 64 and against H
        at fixed n (columns).
    """
    fig, axes = plt.subplots(2, 2, figsize=(7.0, 6.0), sharex="col")
    for j, sweep in enumerate(("n", "H")):
        sub = df[df["sweep"] == sweep]
        for i, (col, what) in enumerate((("fit_s", "fit (s)"), ("query_s", "per query (s)"))):
            ax = axes[i, j]
            for meth, g in sub.groupby("method", sort=False):
                g = g.sort_values(sweep)
                label = meth
                if exponents is not None and (sweep, meth) in exponents.index:
                    e = exponents.loc[(sweep, meth), "fit" if i == 0 else "query"]
                    label = f"{meth} (slope {e:.2f})"
                ax.plot(g[sweep], g[col], label=label, ms=4, lw=1.2,
                        **_CH10_STYLE.get(meth, {}))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
            if j == 0:
                ax.set_ylabel(what)
            if i == 1:
                ax.set_xlabel("training cases n (H = 64)" if sweep == "n"
                              else f"representation width H (n = {int(sub['n'].iloc[0]):,})")
    axes[0, 0].set_title("growing n", fontsize=10)
    axes[0, 1].set_title("growing H", fontsize=10)
    fig.tight_layout()
    return fig


def plot_nystrom_agreement(summary, k=30):
    """Top-k overlap and Pearson r of Nyström vs exact per width, beside Table C2.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`cbdt.experiments.nystrom.summarize_nystrom` output (indexed by method, H).
    k : int, default=30

    Returns
    -------
    matplotlib.figure.Figure
    """
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(7.0, 2.9), sharey=True)
    for ax, col, title in ((axes[0], f"top{k}", f"Top-{k} overlap"),
                           (axes[1], "pearson", "Pearson r")):
        for off, (meth, g) in zip((-0.08, 0.08), summary.groupby(level="method", sort=False),
                                  strict=False):
            H = g.index.get_level_values("H").to_numpy()
            x = np.log2(H) + off
            ax.errorbar(x, g[f"{col}_mean"], yerr=g[f"{col}_ci"], fmt="o", capsize=3, ms=4,
                        label=f"measured, {meth}")
        if f"paper_{col}" in summary.columns:
            g = summary.xs(summary.index.get_level_values("method")[0], level="method")
            H = g.index.to_numpy()
            ax.errorbar(np.log2(H), g[f"paper_{col}"], yerr=g[f"paper_{col}_ci"], fmt="x",
                        color="k", capsize=3, ms=5, label="paper (Table C2)")
        ticks = sorted(set(summary.index.get_level_values("H")))
        ax.set_xticks(np.log2(ticks), [str(t) for t in ticks])
        ax.set_xlabel("H (rank H/2)")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1.05)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


# ---- chapter 11: audit your own network


def plot_case_gallery(query_image, gallery, images, *, title=None, image_shape=(8, 8),
                      action_names=None):
    """One decision's strongest supporting and opposing training cases, as images.

    Parameters
    ----------
    query_image : array-like of shape (h * w,)
        The audited input, drawn at the left.
    gallery : pandas.DataFrame
        :func:`cbdt.experiments.own_network.case_gallery` output (``group``, ``action``,
        ``rank``, ``position``, ``case_id``, ``label``, ``alpha``, ``psi``); one row of
        images per group, in the order the groups first appear.
    images : array-like of shape (n, h * w)
        Training inputs by position.
    title : str, optional
        Drawn above the query image (e.g. its id, label, decision, risk).
    image_shape : tuple of int, default=(8, 8)
    action_names : sequence of str, optional
        Names of the actions in the row labels; default the action index.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Every case is titled with its id, its label ``y``, its coefficient :math:`\\alpha_i(x)`
    and its contribution :math:`\\psi_i` to the row's action score (eq. 15). The figure is
    7 inches wide for up to five cases per row.
    """
    import numpy as np
    import pandas as pd
    from matplotlib.gridspec import GridSpec

    need = {"group", "action", "rank", "position", "case_id", "label", "alpha", "psi"}
    if not isinstance(gallery, pd.DataFrame) or not need <= set(gallery.columns):
        raise ValueError(f"gallery must be the DataFrame of case_gallery (columns {sorted(need)}).")
    imgs = np.asarray(images, dtype=float)
    groups = list(dict.fromkeys(gallery["group"]))
    if not groups:
        raise ValueError("gallery holds no case to draw.")
    n_cols = max(5, int(gallery.groupby("group").size().max()))
    n_rows = len(groups)
    vmax = float(max(np.max(imgs), np.max(query_image)))

    def name(a):
        return str(action_names[a]) if action_names is not None else str(a)

    fig = plt.figure(figsize=(7.0, 0.3 + 1.6 * n_rows))
    gs = GridSpec(n_rows, n_cols + 2, figure=fig,
                  width_ratios=[1.7, 1.05] + [1.0] * n_cols,
                  wspace=0.22, hspace=1.0, left=0.01, right=0.99,
                  top=1 - 0.62 / (0.3 + 1.6 * n_rows), bottom=0.02)
    axq = fig.add_subplot(gs[:, 0])  # the query, spanning every row
    axq.imshow(np.asarray(query_image, dtype=float).reshape(image_shape), cmap="gray_r",
               vmin=0, vmax=vmax, interpolation="nearest")
    axq.set_xticks([])
    axq.set_yticks([])
    for s in axq.spines.values():
        s.set_color("tab:orange")
        s.set_linewidth(2.5)
    if title:
        axq.set_title(title, fontsize=9.5, linespacing=1.15, loc="left")
    row_text = {
        "raises Q(x, a)": "raise $Q(x, {a})$\n($\\psi_i > 0$)",
        "lowers Q(x, a)": "lower $Q(x, {a})$\n($\\psi_i < 0$)",
        "raises Q(x, b)": "raise the\nrunner-up\n$Q(x, {a})$",
    }
    for r, group in enumerate(groups):
        rows = gallery[gallery["group"] == group].sort_values("rank")
        act = int(rows["action"].iloc[0])
        axl = fig.add_subplot(gs[r, 1])
        axl.axis("off")
        axl.text(1.0, 0.5, row_text.get(group, group).format(a=name(act)), fontsize=9.5,
                 ha="right", va="center", transform=axl.transAxes, linespacing=1.2)
        for c in range(n_cols):
            ax = fig.add_subplot(gs[r, c + 2])
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(rows):
                row = rows.iloc[c]
                ax.imshow(imgs[int(row["position"])].reshape(image_shape), cmap="gray_r",
                          vmin=0, vmax=vmax, interpolation="nearest")
                color = "tab:blue" if row["psi"] > 0 else "tab:red"
                for s in ax.spines.values():
                    s.set_color(color)
                    s.set_linewidth(1.8)
                ax.set_title(f"#{row['case_id']} y={row['label']}\n"
                             f"\u03b1={row['alpha']:+.3g}\n\u03c8={row['psi']:+.3g}",
                             fontsize=9, linespacing=1.05)
            else:
                ax.axis("off")
                if c == len(rows):
                    ax.text(0.5, 0.5, "no further\ncase", ha="center", va="center",
                            fontsize=9, transform=ax.transAxes, color="0.4")
    return fig


_CH11_COLORS = {"margin": "tab:blue", "random review": "0.45"}


def plot_review_triage(curve, margin, risk, wrong, *, budget=0.1, risk_name=None):
    """The risk score as triage: errors caught against decisions reviewed, and the two scores.

    Parameters
    ----------
    curve : pandas.DataFrame
        :func:`cbdt.experiments.own_network.review_curve` output (``score``, ``budget``,
        ``caught_share``).
    margin, risk : array-like of shape (m,)
        The network's margin (small = review first) and the risk score (large = review
        first) of every decision, for the right panel.
    wrong : array-like of bool of shape (m,)
    budget : float, default=0.1
        The review budget marked in both panels.
    risk_name : str, optional
        The curve's name of the risk score plotted on the right; default the first score
        whose name starts with "risk".

    Returns
    -------
    matplotlib.figure.Figure
        (a) share of the errors caught against the share of decisions reviewed, one line per
        score and the random review's diagonal; (b) margin against risk, wrong decisions
        marked, with the cut of a ``budget`` review by each score.
    """
    import numpy as np
    import pandas as pd

    need = {"score", "budget", "caught_share"}
    if not isinstance(curve, pd.DataFrame) or not need <= set(curve.columns):
        raise ValueError(f"curve must be the DataFrame of review_curve (columns {sorted(need)}).")
    mg = np.asarray(margin, dtype=float)
    rk = np.asarray(risk, dtype=float)
    w = np.asarray(wrong, dtype=bool)
    names = list(dict.fromkeys(curve["score"]))
    if risk_name is None:
        risk_name = next((s for s in names if s.startswith("risk")), names[0])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 4.4), layout="constrained")
    styles = ["-", "--", "-.", ":"]
    k = 0
    for name in names:
        g = curve[curve["score"] == name]
        if name == "random review":
            ax1.plot(100 * g["budget"], 100 * g["caught_share"], color="0.45", ls=":", lw=1.5,
                     label="random review (expected)")
            continue
        color = _CH11_COLORS.get(name, f"C{3 + k}")
        ax1.plot(100 * g["budget"], 100 * g["caught_share"], color=color, ls=styles[k % 4],
                 lw=1.6, label=name)
        k += 1
    ax1.axvline(100 * budget, color="k", lw=0.9, label=f"budget: {100 * budget:.0f} % reviewed")
    ax1.set_xlim(0, 50)
    ax1.set_ylim(0, 102)
    ax1.set_xlabel("decisions reviewed (%)", fontsize=9.5)
    ax1.set_ylabel("errors caught (%)", fontsize=9.5)
    ax1.set_title("(a) review in score order", fontsize=10)
    ax1.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
               frameon=False)
    ax1.grid(True, alpha=0.3)
    ax1.tick_params(labelsize=9)
    ax2.scatter(mg[~w], rk[~w], s=8, color="0.65", alpha=0.7, lw=0, label="correct")
    ax2.scatter(mg[w], rk[w], s=28, marker="x", color="tab:red", lw=1.3, label="wrong")
    n_rev = int(np.ceil(round(budget * mg.size, 9)))
    if 0 < n_rev < mg.size:
        r_cut = np.sort(rk)[::-1][n_rev - 1]
        m_cut = np.sort(mg)[n_rev - 1]
        ax2.axhline(r_cut, color="C3", lw=1.0, ls="--",
                    label=f"top {100 * budget:.0f} % by risk")
        ax2.axvline(m_cut, color="tab:blue", lw=1.0, ls="-",
                    label=f"lowest {100 * budget:.0f} % by margin")
    ax2.set_xlabel("network margin (best minus second)", fontsize=9.5)
    ax2.set_ylabel("risk score $O_\\alpha$", fontsize=9.5)
    ax2.set_title("(b) margin against risk", fontsize=10)
    ax2.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
               frameon=False, markerscale=1.2)
    ax2.tick_params(labelsize=9)
    ax2.grid(True, alpha=0.3)
    return fig
