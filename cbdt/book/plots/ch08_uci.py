"""Chapter 08: the UCI (Adult, Default Credit) audits.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np


def _ch08_colors(n):
    cmap = plt.get_cmap("tab10")
    return [cmap(a % 10) for a in range(n)]


def plot_uci_behaviour(panel, ax=None, title=None):
    """Network margin against CBDT margin, one dot per test record (Fig. 4a/4c analogue).

    ``panel`` is :func:`cbdt.book.experiments.uci.figure4_panel` of one run: x is the normalised
    CBDT margin of the CBDT action (>= 0, in units of return), y the network's score of that
    action minus its best other score; dots above the dashed line are agreements. Colour:
    the CBDT action.
    """
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
    ax.set_xlabel("CBDT margin $\\bar U(a^*) - \\max_{b\\neq a^*}\\bar U(b)$", fontsize=9)
    ax.set_ylabel("network: $Q(a^*) - \\max_{b\\neq a^*} Q(b)$", fontsize=9)
    ax.tick_params(labelsize=8.5)
    handles = [Line2D([], [], marker="o", ls="", color=colors[k], label=f"CBDT: {lab}")
               for k, lab in enumerate(labels) if (a == k).any()]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_title(title or f"agreement {panel['agreement']:.3f}", fontsize=9.5)
    return ax.figure


def plot_uci_reconstruction(panel, ax=None, title=None):
    """OLS-probe scores against network scores on the test inputs (Fig. 4b/4d analogue)."""
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
    ax.set_xlabel("OLS probe score $\\varphi(x)^\\top \\hat v_a$", fontsize=9)
    ax.set_ylabel("network score $Q_{nn}(x, a)$", fontsize=9)
    ax.tick_params(labelsize=8.5)
    handles = [Line2D([], [], marker="o", ls="", color=colors[k],
                      label=f"{lab}: $\\rho$ = {panel['rho_recon'][k]:.3f}")
               for k, lab in enumerate(labels)]
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    ax.set_title(title or "reconstruction", fontsize=9.5)
    return ax.figure


def plot_uci_figure4(panels):
    """The four panels of Fig. 4: behaviour and reconstruction for each data set.

    ``panels`` maps a data-set name to :func:`cbdt.book.experiments.uci.figure4_panel`. One row per
    data set (behaviour left, reconstruction right), 6.6 inches wide: legible in the book's
    column without scaling.
    """
    # one row per data set, two panels per row: legible in a 700 px column
    fig, axes = plt.subplots(len(panels), 2, figsize=(6.6, 3.5 * len(panels)),
                             layout="constrained", squeeze=False)
    letters = "abcdefgh"
    for j, (name, panel) in enumerate(panels.items()):
        plot_uci_behaviour(panel, axes[j, 0], title=(
            f"({letters[2 * j]}) {name} behaviour:\nagreement {panel['agreement']:.3f}"))
        plot_uci_reconstruction(panel, axes[j, 1],
                                title=f"({letters[2 * j + 1]}) {name} reconstruction")
    return fig


def plot_uci_vs_paper(rows, ax=None):
    """Per-seed values, mean and 95% CI, and the paper's value, one line per quantity.

    ``rows`` is a list of ``(label, values_per_seed, paper_mean, paper_ci)``; ``paper_mean``
    may be None (not reported) and ``paper_ci`` None (no interval).
    """
    from cbdt.metrics import mean_ci

    if ax is None:
        _, ax = plt.subplots(figsize=(6.8, 0.45 * len(rows) + 1.2))
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
    counts = sorted({int(np.size(r[1])) for r in rows})
    seeds = (f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}") if counts else "0"
    ax.set_title(f"Book ({seeds} seed{'' if counts == [1] else 's'}) beside the paper",
                 fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def plot_uci_bandwidth(sensitivities, ax=None, paper=None):
    """Network-CBDT agreement against the bandwidth multiple (mean and 95% CI over seeds).

    ``sensitivities`` maps a data-set name to the ``sensitivity`` table of
    :class:`cbdt.book.experiments.uci.UCIAudit`; ``paper`` optionally maps the same names to the
    paper's agreement (drawn as a dotted line). Open circles mark how often each multiple was
    chosen by the validation rule (right axis: number of seeds).
    """
    from cbdt.metrics import mean_ci

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
                            fontsize=8, color=f"C{j}")
        if paper and name in paper and paper[name] is not None:
            ax.axhline(paper[name], color=f"C{j}", ls=":", lw=1, label=f"{name}: paper")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(r"bandwidth multiple $\nu = \omega\,/\,d_{med}$ (1 = median heuristic)")
    ax.set_ylabel("NN-CBDT agreement")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title("How the agreement depends on the CBDT bandwidth", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def plot_uci_submemory(sub, paper_mismatch=None):
    """Gram mismatch and A2 satisfaction per split (mean and 95% CI over seeds).

    ``sub`` is the ``submemory`` table of :class:`cbdt.book.experiments.uci.UCIAudit` (one row per
    seed and split). ``paper_mismatch`` optionally maps a split to the paper's value.
    """
    from cbdt.metrics import mean_ci

    splits = list(dict.fromkeys(sub["split"]))
    x = np.arange(len(splits))
    # stacked: each panel and its legend over the column width
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(6.6, 6.4), layout="constrained")

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
    ax1.set_ylabel("Gram mismatch $\\Delta$")
    ax1.legend(fontsize=8)
    ax1.set_title("(a) Gram mismatch of the two sub-memories", fontsize=10)

    for k, (col, lab) in enumerate([("a2_cbdt", "CBDT supports (eq. 1)"),
                                    ("a2_ols", "OLS probes per sub-memory")]):
        m, h = series(col)
        ax2.errorbar(x + (k - 0.5) * 0.15, m, yerr=h, fmt="o", capsize=3, color=f"C{k + 2}",
                     label=lab)
    ax2.set_xticks(x)
    ax2.set_xticklabels(splits)
    ax2.set_ylabel("A2 satisfaction")
    ax2.legend(fontsize=8, loc="lower left")
    ax2.set_title("(b) Combination axiom A2 under the union", fontsize=10)
    return fig


def plot_uci_loss_curves(curves):
    """Training loss per epoch, one line per seed; ``curves`` maps a name to a list of arrays."""
    ncols = min(2, len(curves))  # at most two panels side by side
    nrows = -(-len(curves) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.2 * nrows), squeeze=False)
    for ax in np.ravel(axes)[len(curves):]:
        ax.axis("off")
    axes = list(np.ravel(axes))[: len(curves)]
    for ax, (name, cs) in zip(axes, curves.items(), strict=True):
        for s, c in enumerate(cs):
            ax.plot(range(1, len(c) + 1), c, lw=1, label=f"seed {s}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("training MSE")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


