"""Chapter 10: Nyström and scaling.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

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
                label = meth.replace("Nystrom", "Nyström")  # the benchmark's key, spelt out
                if exponents is not None and (sweep, meth) in exponents.index:
                    e = exponents.loc[(sweep, meth), "fit" if i == 0 else "query"]
                    label = f"{label} (slope {e:.2f})"
                ax.plot(g[sweep], g[col], label=label, ms=4, lw=1.2,
                        **_CH10_STYLE.get(meth, {}))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="major", alpha=0.3)
            # head room above the data (half its log range) for the legend, so the legend
            # never covers a line: times grow with n and H, so the upper left stays empty
            lo, hi = float(sub[col].min()), float(sub[col].max())
            ax.set_ylim(lo / 1.5, hi * (hi / lo) ** 0.5)
            ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
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
        :func:`cbdt.book.experiments.nystrom.summarize_nystrom` output (indexed by method, H).
    k : int, default=30

    Returns
    -------
    matplotlib.figure.Figure
    """
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


