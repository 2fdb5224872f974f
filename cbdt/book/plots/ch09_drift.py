"""Chapter 09: the risk score under distribution shift.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

from cbdt.exceptions import InputError

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
    fig, axes = plt.subplots(2, 2, figsize=(8.0, 6.6), sharex=True)
    axes = np.asarray(axes).ravel()
    return fig, axes[: len(shifts)], axes[len(shifts):]


def plot_drift_grid(summary, scores=None, shifts=("mean", "variance", "covariate")):
    """Fig. C2: incorrect-decision AUC against shift level, one panel per shift.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`cbdt.book.experiments.drift.summarize_grid` (``shift, level, score, auc_mean,
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
        :func:`cbdt.book.experiments.drift.paired_vs_margin`.
    scores, shifts : sequences of str
    alpha : float, default 0.05
        A filled marker means paired t-test :math:`p <` ``alpha``; hollow means not
        significant. Error bars are the 95% CI of the mean difference over seeds.

    Returns
    -------
    matplotlib.figure.Figure
    """
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
        :func:`cbdt.book.experiments.drift.drift_sensitivity` (index: variant; ``<shift> dAUC``).

    Returns
    -------
    matplotlib.figure.Figure
    """
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
        Output of :func:`cbdt.book.experiments.classifier.summarize_classifier` (indexed by
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
    import pandas as pd

    need = {"signal", "rank_by", "auc_mean", "auc_ci"}
    if not isinstance(summary, pd.DataFrame) or not need <= set(summary.columns):
        raise InputError(
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
                        fontsize=9.5, color="0.2", linespacing=1.1,
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
        Output of :func:`cbdt.book.experiments.pjm_drift.summarize_pjm_drift` (index
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
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    need = {"split", "auc_mean", "auc_ci", f"{caught}_mean", f"{caught}_ci", "error_rate_mean"}
    missing = need - set(summary.columns)
    if missing:
        raise InputError(f"summary lacks the columns {sorted(missing)}.")
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


