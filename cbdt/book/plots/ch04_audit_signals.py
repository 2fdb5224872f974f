"""Chapter 04, audit signals: the risk map and risk against margin.

The chapter's contribution and top-case bars are :mod:`cbdt.plotting`'s (a user draws them
on their own audit).

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np


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
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shape = grid_x.shape
    act = np.asarray(action).reshape(shape)
    rsk = np.asarray(risk, dtype=float).reshape(shape)
    n_actions = int(max(act.max(), -1 if case_actions is None else np.max(case_actions))) + 1
    cmap = ListedColormap([f"C{b}" for b in range(n_actions)])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(6.6, 3.6), layout="constrained")
    ax1.pcolormesh(grid_x, grid_y, act, cmap=cmap, vmin=-0.5, vmax=n_actions - 0.5,
                   alpha=0.35, shading="auto")
    if X_train is not None:
        ax1.scatter(X_train[:, 0], X_train[:, 1], c=np.asarray(case_actions), cmap=cmap,
                    vmin=-0.5, vmax=n_actions - 0.5, s=8, edgecolor="k", linewidth=0.3)
    ax1.set_title("selected $a_x$ (shade),\ncase-optimal $a_i^*$ (dots)", fontsize=10)
    im = ax2.pcolormesh(grid_x, grid_y, rsk, cmap="magma", shading="auto")
    ax2.contour(grid_x, grid_y, act, levels=np.arange(n_actions) + 0.5, colors="w",
                linewidths=1.0)
    fig.colorbar(im, ax=ax2, label="$O_\\alpha(x) = H_\\alpha + D_{Gini}$", shrink=0.8)
    ax2.set_title("risk $O_\\alpha(x)$;\nwhite: decision boundaries", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
        ax.set_aspect("equal")
    handles = [Patch(facecolor=f"C{b}", alpha=0.6, label=f"action $a_{b}$")
               for b in range(n_actions)]
    if X_train is not None:
        handles.append(Line2D([], [], marker="o", ls="", ms=5, mfc="0.6", mec="k", mew=0.3,
                              label="training case (colour: $a_i^*$)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8,
               frameon=False)
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


