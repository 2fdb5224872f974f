"""Chapter 11: audit your own network.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

from cbdt.exceptions import InputError


def plot_case_gallery(query_image, gallery, images, *, title=None, image_shape=(8, 8),
                      action_names=None):
    """One decision's strongest supporting and opposing training cases, as images.

    Parameters
    ----------
    query_image : array-like of shape (h * w,)
        The audited input, drawn at the left.
    gallery : pandas.DataFrame
        :func:`cbdt.book.experiments.own_network.case_gallery` output (``group``, ``action``,
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
    import pandas as pd
    from matplotlib.gridspec import GridSpec

    need = {"group", "action", "rank", "position", "case_id", "label", "alpha", "psi"}
    if not isinstance(gallery, pd.DataFrame) or not need <= set(gallery.columns):
        raise InputError(f"gallery must be the DataFrame of case_gallery (columns {sorted(need)}).")
    imgs = np.asarray(images, dtype=float)
    groups = list(dict.fromkeys(gallery["group"]))
    if not groups:
        raise InputError("gallery holds no case to draw.")
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
        :func:`cbdt.book.experiments.own_network.review_curve` output (``score``, ``budget``,
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
    import pandas as pd

    need = {"score", "budget", "caught_share"}
    if not isinstance(curve, pd.DataFrame) or not need <= set(curve.columns):
        raise InputError(f"curve must be the DataFrame of review_curve (columns {sorted(need)}).")
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
