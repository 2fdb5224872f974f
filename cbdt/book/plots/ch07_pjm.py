"""Chapter 07: the PJM bidding audit.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

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
        against load, the expected price :math:`P_0 e^{\\zeta z}` and the offer prices
        :math:`\\mathrm{bid}_0, \\mathrm{bid}_1, \\mathrm{bid}_2`; (c) the return of each
        strategy as a function of the price.
    """
    h = problem.hours
    m = problem.market
    # (a) over the full column width, (b) and (c) side by side below: legible at 700 px
    fig = plt.figure(figsize=(6.6, 7.4), layout="constrained")
    gs = fig.add_gridspec(2, 2, height_ratios=[1, 1.35])
    axes = [fig.add_subplot(gs[0, :]), fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])]
    ax = axes[0]
    daily = h["load_mw"].resample("D").agg(["mean", "min", "max"]) / 1e3
    ax.fill_between(daily.index, daily["min"], daily["max"], color="0.75", lw=0,
                    label="daily min-max")
    ax.plot(daily.index, daily["mean"], lw=0.8, color="k", label="daily mean")
    split = problem.times_test[0]
    ax.axvspan(split, h.index[-1], color="C1", alpha=0.12, label="test hours")
    ax.set_ylabel("PJME load (GW)")
    ax.set_title("(a) real load, chronological split", fontsize=10)
    ax.set_ylim(top=float(daily["max"].max()) * 1.2)  # head room for the legend
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    ax.tick_params(axis="x", labelsize=9)

    ax = axes[1]
    rng = np.random.default_rng(0)
    sub = rng.choice(len(h), size=min(4000, len(h)), replace=False)
    ax.scatter(h["load_mw"].to_numpy()[sub] / 1e3, h["price"].to_numpy()[sub], s=2,
               color="0.5", alpha=0.4, rasterized=True, label="hours (sample)")
    grid = np.linspace(h["load_mw"].min(), h["load_mw"].max(), 200)
    z = (grid - problem.load_mean) / problem.load_sd
    ax.plot(grid / 1e3, m.base_price * np.exp(m.load_slope * z), color="k",
            label="$E[\\mathrm{pr} \\mid \\mathrm{load}] = P_0 e^{\\zeta z}$")
    for k, b in enumerate(problem.offer_prices):
        ax.axhline(b, color=f"C{k}", lw=1, ls="--", label=f"$\\mathrm{{bid}}_{k}$ = {b:.1f} ({_PJM_NAMES[k]})")
    ax.set_yscale("log")
    ax.set_xlabel("load $\\mathrm{load}_t$ (GW)")
    ax.set_ylabel("price $\\mathrm{pr}_t$ (\\$/MWh, log scale)")
    ax.set_title("(b) synthetic market,\nconvex in load", fontsize=10)
    # four entries: below the panel, so no dot is hidden
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)

    ax = axes[2]
    from cbdt.datasets.pjm_bidding import strategy_returns

    ps = np.linspace(0, float(np.quantile(h["price"], 0.99)), 400)
    r = strategy_returns(ps, problem.cost, problem.offer_prices, m)
    for k in range(3):
        ax.plot(ps, r[:, k], color=f"C{k}", label=_PJM_NAMES[k])
    for b in problem.offer_prices[1:]:
        ax.axvline(b, color="0.5", lw=0.8, ls=":")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("price $\\mathrm{pr}_t$ (\\$/MWh)")
    ax.set_ylabel("return $r_t(a)$ (\\$10k)")
    ax.set_title("(c) strategies: break-evens\nat $\\mathrm{bid}_1, \\mathrm{bid}_2$ (dotted)", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    return fig


def plot_pjm_agreement(profile, transition_loads=None):
    """Fig. 3a: where network and CBDT disagree, against the CBDT margin and the load.

    Parameters
    ----------
    profile : pandas.DataFrame
        :func:`cbdt.book.experiments.pjm.disagreement_profile` of one run.
    transition_loads : array-like, optional
        Loads (MW) where the expected price crosses :math:`\\mathrm{bid}_1, \\mathrm{bid}_2`
        (:func:`cbdt.book.experiments.pjm.transition_loads`), drawn as vertical lines.

    Returns
    -------
    matplotlib.figure.Figure
    """
    agree = profile["agree"].to_numpy()
    load = profile["prev_load_mw"].to_numpy() / 1e3
    margin = profile["cbdt_margin"].to_numpy()
    floor = max(float(margin[margin > 0].min()), 1e-6) if (margin > 0).any() else 1e-6
    margin = np.maximum(margin, floor)
    # stacked: each panel spans the column (700 px)
    fig, axes = plt.subplots(2, 1, figsize=(6.6, 6.6), layout="constrained")
    ax = axes[0]
    ax.scatter(load[agree], margin[agree], s=3, color="0.65", alpha=0.5, rasterized=True,
               label=f"agree ({agree.sum()})")
    ax.scatter(load[~agree], margin[~agree], s=9, color="C3",
               label=f"disagree ({(~agree).sum()})")
    if transition_loads is not None:
        for k, L in enumerate(np.atleast_1d(transition_loads)):
            ax.axvline(L / 1e3, color="k", ls="--", lw=0.9,
                       label="expected price = $\\mathrm{bid}_1$, $\\mathrm{bid}_2$" if k == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("latest observed load $\\mathrm{load}_{t-1}$ (GW)")
    ax.set_ylabel("CBDT margin (\\$10k, log scale)")
    ax.set_title("(a) disagreements vs load and decision margin", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax = axes[1]
    bins = np.logspace(np.log10(margin.min()), np.log10(margin.max()), 40)
    for sel, color, label in ((agree, "0.6", "agree"), (~agree, "C3", "disagree")):
        if sel.any():
            ax.hist(margin[sel], bins=bins, color=color, alpha=0.7,
                    weights=np.full(sel.sum(), 1.0 / sel.sum()), label=label)
    ax.set_xscale("log")
    ax.set_xlabel("CBDT margin (\\$10k, log scale)")
    ax.set_ylabel("share of the group's hours")
    ax.set_title("(b) margin distribution", fontsize=10)
    ax.legend(fontsize=8)
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
    P = np.asarray(probe_scores)
    U = np.asarray(cbdt_average)
    idx = np.linspace(0, P.shape[0] - 1, min(max_points, P.shape[0])).astype(int)
    # at most two panels side by side: 2 x 2, the fourth cell holds the key
    fig, grid = plt.subplots(2, 2, figsize=(6.6, 6.4), layout="constrained")
    axes = grid.ravel()[:3]
    for a, ax in enumerate(axes):
        ax.scatter(U[idx, a], P[idx, a], s=3, color=f"C{a}", alpha=0.5, rasterized=True)
        lo = min(U[:, a].min(), P[:, a].min())
        hi = max(U[:, a].max(), P[:, a].max())
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8, ls="--", label="y = x")
        title = _PJM_NAMES[a]
        if rho is not None:
            title += f": $\\rho_{{support}}$ = {float(rho[a]):.4f}"
        ax.set_title(f"({'abc'[a]}) {title}", fontsize=9.5)
        ax.set_xlabel("CBDT avg. support $\\bar U(a \\mid M, x)$", fontsize=9)
        ax.set_ylabel("$\\sum_i \\alpha_i(x) r_i(a)$ (probe)", fontsize=9)
        ax.tick_params(labelsize=8.5)
    from matplotlib.lines import Line2D

    key = grid[1, 1]
    key.axis("off")
    handles = [Line2D([], [], marker="o", ls="", color=f"C{a}", alpha=0.7,
                      label=f"({'abc'[a]}) support of {_PJM_NAMES[a]}") for a in range(3)]
    handles.append(Line2D([], [], color="k", lw=0.8, ls="--", label="$y = x$ (perfect alignment)"))
    key.legend(handles=handles, loc="center", fontsize=8.5, frameon=False,
               title=f"dots: test hours ({idx.size} of {P.shape[0]} drawn)",
               title_fontsize=8.5)
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
    pos = cases[cases["group"] == "positive"]
    neg = cases[cases["group"] == "negative"]
    from matplotlib.ticker import MaxNLocator

    # stacked, each panel over the column width, so the tick labels never collide
    fig, axes = plt.subplots(2, 1, figsize=(6.6, 6.0), layout="constrained")
    ax = axes[0]
    d = cases["distance"].to_numpy()
    bins = np.linspace(0, float(d.max()) * 1.02, 40)
    ax.hist(pos["distance"], bins=bins, color="C2", alpha=0.7,
            label=f"top-5 positive $\\alpha$ (mean {pos['distance'].mean():.3g})")
    ax.hist(neg["distance"], bins=bins, color="C3", alpha=0.7,
            label=f"top-5 negative $\\alpha$ (mean {neg['distance'].mean():.3g})")
    ax.set_xlabel("standardised representation distance $d(x, x_i)$")
    ax.set_ylabel("cases")
    ax.set_title("(a) distance distribution", fontsize=10)
    ax.legend(fontsize=8.5)
    ax = axes[1]
    a = cases["alpha"].to_numpy()
    bins = np.linspace(float(a.min()), float(a.max()), 40)
    ax.hist(pos["alpha"], bins=bins, color="C2", alpha=0.7, label="top-5 positive")
    ax.hist(neg["alpha"], bins=bins, color="C3", alpha=0.7, label="top-5 negative")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("coefficient $\\alpha_i(x)$")
    ax.set_ylabel("cases")
    ax.set_title("(b) coefficient distribution", fontsize=10)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=7))
    ax.legend(fontsize=8.5)
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
    from matplotlib.colors import LogNorm

    fig, ax = plt.subplots(figsize=(6.8, 4.2))
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
    ax.set_title(f"Coefficient vs distance ({alpha.shape[0]} queries x {alpha.shape[1]} cases)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def plot_case_audit(audit, max_background=3000):
    """Fig. 5: one test hour's ranked cases in a 2-D PCA projection of :math:`\\varphi`.

    Parameters
    ----------
    audit : cbdt.book.experiments.pjm.QueryAudit
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
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    xy = audit.xy_train
    idx = np.linspace(0, xy.shape[0] - 1, min(max_background, xy.shape[0])).astype(int)
    cases = audit.cases
    # (a) and (b) side by side, (c) below with the key beside it: two panels per row at most
    fig, grid = plt.subplots(2, 2, figsize=(6.6, 6.8), layout="constrained")
    axes = [grid[0, 0], grid[0, 1], grid[1, 0]]
    key = grid[1, 1]

    def draw(ax):
        ax.scatter(xy[idx, 0], xy[idx, 1], s=2, color="0.8", rasterized=True)
        for g, marker, color in (("positive", "o", "C2"), ("negative", "^", "C3")):
            sel = (cases["group"] == g).to_numpy()
            for (x, y), match in zip(audit.xy_cases[sel], cases["match"].to_numpy()[sel],
                                     strict=True):
                ax.scatter(x, y, s=60, marker=marker, edgecolor=color, linewidth=1.5,
                           facecolor=color if match else "white", zorder=3)
        ax.scatter(*audit.xy_query, s=220, marker="*", color="k", zorder=4)
        ax.set_xlabel(f"PC 1 ({100 * audit.explained[0]:.0f} %)", fontsize=9)
        ax.set_ylabel(f"PC 2 ({100 * audit.explained[1]:.0f} %)", fontsize=9)
        ax.tick_params(labelsize=8.5)

    draw(axes[0])
    axes[0].set_title(f"(a) test hour {audit.time:%Y-%m-%d %H:%M}\nrepresentation (PCA)",
                      fontsize=9.5)
    draw(axes[1])
    pos = audit.xy_cases[(cases["group"] == "positive").to_numpy()]
    pts = np.vstack([pos, audit.xy_query[None, :]])
    span = float(np.ptp(xy[idx], axis=0).max())
    half = max(float(np.abs(pts - audit.xy_query).max()) * 1.3, 0.02 * span)
    axes[1].set_xlim(audit.xy_query[0] - half, audit.xy_query[0] + half)
    axes[1].set_ylim(audit.xy_query[1] - half, audit.xy_query[1] + half)
    axes[1].set_title("(b) zoom on the query", fontsize=9.5)
    handles = [
        Line2D([], [], marker="*", color="k", ls="", markersize=12, label="query"),
        Line2D([], [], marker="o", color="C2", ls="", label="top positive $\\alpha$"),
        Line2D([], [], marker="^", color="C3", ls="", label="top negative $\\alpha$"),
        Line2D([], [], marker="o", markerfacecolor="white", markeredgecolor="0.3", ls="",
               label="open: $a_i^*$ differs from selected"),
    ]
    handles.insert(0, Line2D([], [], marker="o", color="0.8", ls="", markersize=4,
                             label="training case"))

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
    ax.set_xticks(x, [n + (" *" if a == audit.selected else "") for a, n in enumerate(_PJM_NAMES)],
                  fontsize=8.5)
    ax.tick_params(axis="y", labelsize=8.5)
    ax.set_ylabel("score / support (\\$10k)", fontsize=9)
    ax.set_title("(c) scores (* = network's choice)", fontsize=9.5)
    key.axis("off")
    leg = key.legend(handles=handles, fontsize=8, loc="upper left", frameon=False,
                     title="(a), (b)", title_fontsize=8.5, alignment="left")
    key.add_artist(leg)
    key.legend(handles=bars, fontsize=8, loc="lower left", frameon=False,
               title="(c): bar colour = action", title_fontsize=8.5, alignment="left")
    return fig


