"""Chapters 05 and 06: synthetic recovery and attribution baselines.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

from cbdt.exceptions import InputError

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


def _ch0506_region_handles(n_actions, memory=True, boundaries=False):
    """Legend entries for the decision-region figures: one shade per action, the markers."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=f"C{b}", alpha=0.35, edgecolor="none",
                     label=f"region of action $a_{b}$") for b in range(n_actions)]
    if memory:
        handles.append(Line2D([], [], marker="o", ls="", ms=7, mfc="0.6", mec="k",
                              label="memory case (colour: its action,\nsize: its result $r_c$)"))
    if boundaries:
        handles.append(Line2D([], [], color="k", lw=0.9, label="CBDT decision boundary"))
    return handles


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
    regions : cbdt.book.experiments.synthetic.DecisionRegions
        Output of :func:`cbdt.book.experiments.synthetic.decision_regions`.
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
    kinds = {"cbdt": "CBDT decision $a^*(x)$", "network": "network decision",
             "readout": "OLS readout decision"}
    if kind not in kinds or (boundaries is not None and boundaries not in kinds):
        raise InputError(f"kind and boundaries must be one of {sorted(kinds)}, got "
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
        Output of :func:`cbdt.book.experiments.synthetic.support_reconstruction` (columns
        ``action``, ``true_support`` and ``score``).
    score : {"probe_score", "network_score"}, default="probe_score"
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from cbdt.metrics import pearson

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

    Panels (a) and (b) side by side, (c) below (a), and the legend of the region colours and
    markers below (b).

    Parameters
    ----------
    regions : cbdt.book.experiments.synthetic.DecisionRegions
    recon : pandas.DataFrame
        :func:`cbdt.book.experiments.synthetic.support_reconstruction` of the same seed.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = plt.figure(figsize=(6.8, 6.6))
    grid = fig.add_gridspec(2, 2)
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]),
            fig.add_subplot(grid[1, 0])]
    plot_decision_regions(regions, "cbdt", ax=axes[0], title="(a) CBDT decision $a^*(x)$")
    plot_decision_regions(regions, "network", ax=axes[1], boundaries="cbdt",
                          title="(b) network decision;\nblack: CBDT boundaries")
    plot_support_reconstruction(recon, ax=axes[2])
    axes[2].set_title("(c) support reconstruction,\nOLS readout", fontsize=10)
    fig.tight_layout()
    box = grid[1, 1].get_position(fig)
    fig.legend(handles=_ch0506_region_handles(regions.support.shape[-1], boundaries=True),
               loc="center", bbox_to_anchor=(box.x0 + box.width / 2, box.y0 + box.height / 2),
               fontsize=8, frameon=False, title="(a), (b)", title_fontsize=9)
    return fig


def _seeds_text(summary):
    """``"5 seeds, "`` from a :func:`~cbdt.metrics.summarize_seeds` table's ``n`` column
    (``""`` when it has none, or its groups have different numbers of seeds)."""
    if "n" not in getattr(summary, "columns", ()):
        return ""
    n = {int(v) for v in summary["n"]}
    if len(n) != 1:
        return ""
    k = n.pop()
    return f"{k} seed{'' if k == 1 else 's'}, "


def _fit_limits(mean, half, lo, hi, pad=0.05):
    """Axis limits ``(lo, hi)``, widened with a margin ``pad`` where ``mean ± half`` would
    reach past them (a 95% interval over 2 seeds is wide); unchanged otherwise."""
    m = np.asarray(mean, dtype=float)
    h = np.nan_to_num(np.asarray(half, dtype=float), nan=0.0)
    ends = np.r_[m - h, m + h]
    ends = ends[np.isfinite(ends)]
    if ends.size:
        if ends.min() < lo:
            lo = float(ends.min()) - pad
        if ends.max() > hi:
            hi = float(ends.max()) + pad
    return lo, hi


def plot_attribution_comparison(summary, paper=True):
    """Fig. 2 / Fig. C4: Top-30 consistency and Pearson per method, mean and 95% CI.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`cbdt.book.experiments.synthetic.summarize_comparison` (index: method;
        columns ``top30_mean``, ``top30_ci``, ``pearson_mean``, ``pearson_ci`` and, with
        ``paper=True``, ``paper_top30``, ``paper_pearson``). A ground-truth row (a method
        not in the paper) is drawn in grey as the reference.
    paper : bool, default=True
        Mark the paper's Table 1 values with black diamonds.

    Returns
    -------
    matplotlib.figure.Figure
    """
    topcol = next(c[:-5] for c in summary.columns if c.startswith("top") and c.endswith("_mean"))
    names = list(summary.index)
    y = np.arange(len(names))[::-1]
    colors = [_CH0506_METHOD_COLORS.get(m, _CH0506_GT_COLOR) for m in names]
    fig, axes = plt.subplots(2, 1, figsize=(6.8, 0.8 * len(names) + 2.2), sharey=True)
    panels = [(topcol, f"(b) Top-{topcol[3:]} action consistency"),
              ("pearson", "(a) Pearson $r$ with ground-truth contributions")]
    label = f"this book ({_seeds_text(summary)}95% CI)"
    for ax, (col, title) in zip(axes, panels[::-1], strict=True):
        ax.barh(y, summary[f"{col}_mean"], xerr=summary[f"{col}_ci"], color=colors,
                alpha=0.8, capsize=3, height=0.6, label=label)
        pcol = f"paper_{col}"
        if paper and pcol in summary:
            ok = summary[pcol].notna().to_numpy()
            ax.scatter(summary[pcol].to_numpy()[ok], y[ok], marker="D", color="k", s=28,
                       zorder=3, label="paper, Table 1")
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    # the book's limits, widened only where an interval would run past them (few seeds)
    pearson_lo = min(0.0, float(summary["pearson_mean"].min()) - 0.05)
    for ax, col, lo in ((axes[0], "pearson", pearson_lo), (axes[1], topcol, 0.0)):
        ax.set_xlim(*_fit_limits(summary[f"{col}_mean"], summary[f"{col}_ci"], lo, 1.05))
    axes[0].set_yticks(y, names)
    axes[1].tick_params(labelleft=True)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_weight_profiles(distance, weights, ax=None, max_abs=True):
    """Per-case weights of one query against the distance of the case in the problem space.

    Parameters
    ----------
    distance : array-like of shape (n,)
        :math:`\\lVert x - x_i\\rVert` of every training case.
    weights : dict of str to array-like of shape (n,)
        E.g. ``{"alpha": ..., "inner product": ..., "true similarity": ...}``; one panel each,
        stacked in one column with a shared distance axis.
    ax : sequence of Axes, optional
        One per entry of ``weights``.
    max_abs : bool, default=True
        Divide each weight vector by its largest absolute value (the panels share a scale).

    Returns
    -------
    matplotlib.figure.Figure
    """
    d = np.asarray(distance, dtype=float)
    if ax is None:
        fig, axes = plt.subplots(len(weights), 1, figsize=(6.6, 2.2 * len(weights) + 0.4),
                                 sharey=max_abs, sharex=True)
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
        a.legend(fontsize=8, loc="upper right")
        a.set_ylabel("weight / max |weight|" if max_abs else "weight")
    axes[-1].set_xlabel("distance $\\|x - x_i\\|$")
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
        Output of :func:`cbdt.book.experiments.synthetic.query_attributions` (one row per
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
    import pandas as pd

    from cbdt._ranking import top_k_indices
    from cbdt.metrics import pearson, topk_action_consistency

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


def readable_attribution_summary(summary, k=30):
    """:func:`query_attribution_summary` with the column and row labels a reader sees.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`query_attribution_summary` for the same ``k``.
    k : int, default=30

    Returns
    -------
    pandas.DataFrame
        Rounded to 3 digits; columns ``Top-k``, ``negative in top-k``, ``Pearson``; the row
        ``ground_truth`` named ``ground truth``.
    """
    return summary.round(3).rename(
        columns={f"top{k}": f"Top-{k}", f"negative_in_top{k}": f"negative in top-{k}",
                 "pearson": "Pearson"},
        index={"ground_truth": "ground truth"},
    )


def plot_query_attributions(df, k=30, methods=None, regions=None, ncols=2):
    """Each method's top-k training cases for one query on the 2-D problem plane.

    One panel per method (and one for the ground truth :math:`s(x, x_i) r_i(a)`): all
    training cases as small grey dots; the ``k`` cases with the largest absolute
    contribution coloured by their case-optimal action, filled when the contribution is
    positive and hollow when it is negative, with area proportional to the absolute
    contribution; the query as a black star.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`cbdt.book.experiments.synthetic.query_attributions`.
    k : int, default=30
    methods : sequence of str, optional
        Default: the ground truth and every method column of ``df``.
    regions : cbdt.book.experiments.synthetic.DecisionRegions, optional
        Shade the CBDT decision regions in the background.
    ncols : int, default=2
        Panels per row (at most two keep the panels legible at the book's column width).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from cbdt._ranking import top_k_indices

    names = ["ground_truth", *_ch0506_query_methods(df)] if methods is None else list(methods)
    summary = query_attribution_summary(df, k)
    nrows = int(np.ceil(len(names) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.5 * nrows + 1.2),
                             squeeze=False, layout="constrained")
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
                 f"$Q(x, a_{a})$,\nCBDT-optimal $a^* = a_{df.attrs['cbdt_action']}$", fontsize=10)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], marker="o", ls="", ms=7, mfc=f"C{b}", mec="k", mew=0.5,
                      label=f"top-{k} case, $a_i^* = a_{b}$") for b in range(n_actions)]
    handles += [
        Line2D([], [], marker="o", ls="", ms=7, mfc="none", mec="0.3", mew=1.5,
               label="hollow: lowers the score"),
        Line2D([], [], marker="*", ls="", ms=12, mfc="k", mec="w", label="query $x$"),
        Line2D([], [], marker="o", ls="", ms=3, mfc="0.7", mec="0.7", label="other case"),
    ]
    if regions is not None:
        handles.append(Patch(facecolor="0.6", alpha=0.3, label="shade: CBDT region of the action"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    return fig


