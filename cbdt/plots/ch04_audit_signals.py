"""Chapter 04, audit signals: contributions, top cases, risk maps.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

from ..exceptions import InputError


def escape_mathtext(text) -> str:
    """``text`` (an action name, a case id) as literal matplotlib text.

    Matplotlib parses the text between two ``$`` as mathtext, so a name like ``cost $5``
    paired with another ``$`` would render as a formula (``treat_A`` inside a formula as a
    subscript). Every ``$`` is escaped (``\\$`` is drawn as ``$``); outside ``$`` pairs
    ``_`` and ``^`` are literal. Use it for user-supplied strings and keep them outside
    the ``$...$`` parts of a label.
    """
    return str(text).replace("$", r"\$")


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
    from matplotlib.patches import Patch

    psi = np.asarray(psi, dtype=float)
    acts = np.asarray(case_actions)
    n_actions = int(acts.max()) + 1
    names = ([escape_mathtext(v) for v in action_names] if action_names is not None
             else [f"$a_{b}$" for b in range(n_actions)])
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
        Names of the actions by position. Default: the names the explanation carries (an
        estimator fitted with a returns DataFrame or ``action_names=``), else ``a0, a1, ...``.
        Names are drawn literally (``$``, ``_``, ``^`` are not mathtext).
    ax : matplotlib Axes, optional
    max_label : int, default=24
        Case ids longer than this are shortened with an ellipsis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.patches import Patch

    cases, signals = explanation.cases, explanation.signals
    if query not in signals.index:
        raise InputError(
            f"query {query!r} is not in this explanation; it holds queries "
            f"{signals.index.min()}..{signals.index.max()}."
        )
    rows = cases[cases["query"] == query].sort_values("rank")
    sig = signals.loc[query]
    action, score = signals.loc[query, "action"], float(sig["score"])
    names = list(action_names) if action_names is not None else None
    named = getattr(explanation, "action_names", None) is not None  # frames hold the names

    def name(a):
        """An action of the frames (its name, or its position when unnamed), literal text."""
        if not named:
            a = names[int(a)] if names is not None else f"a{int(a)}"
        return escape_mathtext(a)

    def short(v):
        s = str(v)
        return escape_mathtext(s if len(s) <= max_label else s[: max_label - 1] + "\u2026")

    psi = rows["psi"].to_numpy(dtype=float)
    rest = score - float(psi.sum())
    k = len(rows)
    labels = [
        f"{short(cid)}  ({name(ca)}, \u03b1={al:.3g})"
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
        f"Query {query}: top {k} cases of Q(x, {name(action)}) = {score:.4g}", fontsize=10
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


