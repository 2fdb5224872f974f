"""Chapter 01, CBDT theory: decision maps, supports and the cases that carry them.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

from cbdt.exceptions import InputError


def _ch01_action_colors(n_actions):
    """One colour per action (tab10), as an array of RGBA rows."""
    cmap = plt.get_cmap("tab10")
    return np.array([cmap(a % 10) for a in range(n_actions)])


def _ch01_action_names(n_actions, action_names):
    if action_names is None:
        return [f"a={a}" for a in range(n_actions)]
    names = [str(a) for a in action_names]
    if len(names) != n_actions:
        raise InputError(f"action_names has {len(names)} names but the memory has {n_actions} actions.")
    return names


def _ch01_light(colors):
    """The pale shades of ``colors`` used for the decision-region backgrounds."""
    light = colors.copy()
    light[:, :3] = 1.0 - 0.35 * (1.0 - light[:, :3])
    return light


def _ch01_legend_handles(names, colors, regions=True):
    """Legend entries: one region shade per action (optional) and the two case markers."""
    from matplotlib.lines import Line2D

    light = _ch01_light(colors)
    handles = []
    if regions:
        handles += [Line2D([], [], marker="s", ls="", ms=10, mfc=light[a], mec=colors[a],
                           label=f"region {names[a]}") for a in range(len(names))]
    handles += [
        Line2D([], [], marker="o", ls="", mfc="grey", mec="black", label="case, $u \\geq 0$"),
        Line2D([], [], marker="o", ls="", mfc="white", mec="grey", mew=1.6,
               label="case, $u < 0$"),
    ]
    return handles


def _ch01_check_2d(memory):
    from cbdt.decision import Memory

    if not isinstance(memory, Memory):
        raise InputError(f"memory must be a cbdt.Memory, got {type(memory).__name__}.")
    if memory.dim != 2:
        raise InputError(
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
    from cbdt.decision import support

    _ch01_check_2d(memory)
    x0, x1, y0, y1 = problem_extent(memory) if extent is None else extent
    xs = np.linspace(x0, x1, int(grid_size))
    ys = np.linspace(y0, y1, int(grid_size))
    XX, YY = np.meshgrid(xs, ys)
    U = support(np.column_stack([XX.ravel(), YY.ravel()]), memory, similarity)
    return xs, ys, U.reshape(len(ys), len(xs), memory.n_actions)


def _ch01_draw_cases(ax, memory, colors, highlight=None):
    """Cases as markers: colour = action, filled = u >= 0, hollow = u < 0, area ~ n(c, M)."""
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
    from matplotlib.colors import ListedColormap

    xs, ys, U = support_grid(memory, similarity, extent, grid_size)
    A = memory.n_actions
    colors = _ch01_action_colors(A)
    names = _ch01_action_names(A, action_names)
    light = _ch01_light(colors)
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
        ax.legend(handles=_ch01_legend_handles(names, colors), loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                  fontsize="small")
    return fig


def plot_cbdt_supports(
    memory, similarity=None, *, extent=None, grid_size=150, action_names=None, query=None
):
    """One heat map of :math:`U(a \\mid M, p)` per action (eq. 1), then the decision map (eq. 2).

    The panels fill a grid two panels wide, with the legend of the region colours and the case
    markers below it. The support maps share one symmetric diverging colour scale (red: support for the action,
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
    xs, ys, U = support_grid(memory, similarity, extent, grid_size)
    A = memory.n_actions
    names = _ch01_action_names(A, action_names)
    colors = _ch01_action_colors(A)
    vmax = float(np.abs(U).max()) or 1.0
    nrows = (A + 2) // 2
    fig, grid = plt.subplots(nrows, 2, figsize=(6.6, 2.9 * nrows + 0.7), layout="constrained",
                             squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[A + 1:]:
        fig.delaxes(ax)
    axes = axes[: A + 1]
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
        ax.set_ylabel("$p_2$")
    fig.colorbar(im, ax=axes[:A], shrink=0.85,
                 label="support (red: for the action, blue: against)")
    plot_cbdt_decision(memory, similarity, ax=axes[A], extent=ext, grid_size=grid_size,
                       action_names=action_names, legend=False, title="$a^*(M, p)$")
    handles = _ch01_legend_handles(names, colors)
    if query is not None:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], marker="*", ls="", ms=12, mfc="gold", mec="black",
                              label="query $p$"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False,
               fontsize="small")
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
    """Decision maps of one memory for several similarity bandwidths, two per row.

    The legend below the maps names the region colour of every action and the case markers.

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
    from cbdt.decision import GaussianSimilarity

    kernel = GaussianSimilarity if kernel is None else kernel
    bws = list(bandwidths)
    if not bws:
        raise InputError("bandwidths is empty.")
    ncols = min(2, len(bws))
    nrows = (len(bws) + ncols - 1) // ncols
    fig, grid = plt.subplots(nrows, ncols, figsize=(6.6 if ncols == 2 else 4.0, 2.9 * nrows + 0.6),
                             layout="constrained", squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[len(bws):]:
        fig.delaxes(ax)
    for ax, h in zip(axes, bws, strict=False):
        plot_cbdt_decision(memory, kernel(h), ax=ax, extent=extent, grid_size=grid_size,
                           action_names=action_names, legend=False, title=f"$\\omega = {h:g}$")
    for ax in axes[1 : len(bws) : 2]:
        ax.set_ylabel("")
    names = _ch01_action_names(memory.n_actions, action_names)
    fig.legend(handles=_ch01_legend_handles(names, _ch01_action_colors(memory.n_actions)),
               loc="outside lower center", ncol=3, frameon=False, fontsize="small")
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
    from cbdt.decision import support

    q = np.asarray(query, dtype=float)
    A = memory.n_actions
    names = _ch01_action_names(A, action_names)
    colors = _ch01_action_colors(A)
    C = case_contributions(memory, q, similarity)
    ring = np.unique(np.concatenate([top_carrying_cases(C[:, a], top) for a in range(A)]))
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(6.6, 3.3), layout="constrained",
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
    from cbdt.decision import case_contributions as _case_contributions

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
    import pandas as pd

    from cbdt.decision import GaussianSimilarity

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

