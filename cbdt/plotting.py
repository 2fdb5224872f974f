"""Plots of the exact audit's results: a decision's top cases, a query's contributions.

These draw what the core API returns (:meth:`cbdt.CaseInfluence.explain`,
:meth:`~cbdt.CaseInfluence.contributions`), so a user calls them on their own audit; the
book's own chapter figures are drawn by its notebooks. Needs matplotlib
(``pip install 'cbdt[plot]'``); each function returns the ``Figure``.
"""

from __future__ import annotations

from ._optional import require

require("matplotlib", "cbdt.plotting")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .exceptions import InputError  # noqa: E402

__all__ = ["escape_mathtext", "plot_contributions", "plot_top_cases"]


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
