"""Unit tests of the chapter 05/06 figures (cbdt.book.plots) and the attribution explorer (cbdt.book.widgets)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from cbdt.baselines import METHODS, ExactCoefficient, InnerProduct
from cbdt.book import plots
from cbdt.book.experiments import synthetic as ex
from cbdt.metrics import pearson, topk_action_consistency

# the small configuration of tests/test_synthetic.py (the book uses the defaults)
SMALL = ex.SyntheticConfig(n_train=150, n_test=40, hidden=(16, 16), epochs=120, n_checkpoints=4)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def regions():
    return ex.decision_regions(0, resolution=21, config=SMALL)


@pytest.fixture(scope="module")
def query_df():
    return ex.query_attributions(0, query=5, k=10, config=SMALL)


# ----------------------------------------------------------------------------- chapter 05
def test_decision_regions_figure(regions):
    fig = plots.plot_decision_regions(regions, "network", boundaries="cbdt")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    mesh = ax.collections[0]
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).ravel(), regions.network.ravel())
    # the 20 memory cases are drawn
    assert any(len(c.get_offsets()) == 20 for c in ax.collections[1:])
    with pytest.raises(ValueError, match="kind"):
        plots.plot_decision_regions(regions, "oracle")
    with pytest.raises(ValueError, match="kind"):
        plots.plot_decision_regions(regions, boundaries="oracle")


def test_support_reconstruction_figure_reports_pearson():
    recon = ex.support_reconstruction(0, SMALL)
    fig = plots.plot_support_reconstruction(recon)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == 3
    g = recon[recon["action"] == 2]
    assert labels[2].endswith(f"{pearson(g['true_support'], g['probe_score']):.3f}")


def test_synthetic_recovery_figure_has_three_panels(regions):
    recon = ex.support_reconstruction(0, SMALL)
    fig = plots.plot_synthetic_recovery(regions, recon)
    assert len(fig.axes) == 3
    assert fig.axes[0].get_title().startswith("(a)")
    assert fig.axes[2].get_title().startswith("(c)")


# ----------------------------------------------------------------------------- chapter 06
def test_attribution_comparison_figure():
    df = ex.attribution_comparison((0, 1), config=SMALL)
    summary = ex.summarize_comparison(df)
    fig = plots.plot_attribution_comparison(summary)
    ax_pearson, ax_top = fig.axes
    assert len(ax_top.patches) == len(summary) == len(METHODS) + 1
    widths = sorted(p.get_width() for p in ax_top.patches)
    np.testing.assert_allclose(widths, sorted(summary["top30_mean"]))
    # the paper's values: one diamond per method of Table 1, none for the ground truth
    diamonds = [c for c in ax_pearson.collections if len(c.get_offsets()) == len(METHODS)]
    assert diamonds
    fig2 = plots.plot_attribution_comparison(ex.summarize_comparison(df, with_paper=False))
    assert all(len(c.get_offsets()) != len(METHODS) for c in fig2.axes[0].collections
               if hasattr(c, "get_offsets"))


def test_weight_profiles_normalise_and_count_signs():
    d = np.linspace(0, 2, 7)
    w = np.array([4.0, 2.0, -1.0, 0.5, -2.0, 0.0, 1.0])
    fig = plots.plot_weight_profiles(d, {"w": w, "2w": 2 * w})
    assert len(fig.axes) == 2
    pos, neg = fig.axes[0].collections[:2]
    np.testing.assert_allclose(np.asarray(pos.get_offsets())[:, 1], [1.0, 0.5, 0.125, 0.0, 0.25])
    np.testing.assert_allclose(np.asarray(neg.get_offsets())[:, 1], [-0.25, -0.5])
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels[0].endswith("(5)") and labels[1].endswith("(2)")


def test_query_summary_matches_library_metrics(query_df):
    run = ex.synthetic_run(0, SMALL)
    d = run.data
    j, a = query_df.attrs["query"], query_df.attrs["action"]
    assert a == d.a_test[j]
    s = plots.query_attribution_summary(query_df, k=10)
    assert list(s.index) == ["ground_truth", *METHODS]
    psi = ExactCoefficient().fit(run.Phi_train, d.R_train).contributions(run.Phi_test[j], a)
    np.testing.assert_allclose(psi, query_df["Ours (alpha)"], rtol=1e-10, atol=1e-12)
    assert s.loc["Ours (alpha)", "top10"] == pytest.approx(
        topk_action_consistency(psi, d.case_actions, a, 10)
    )
    assert s.loc["Ours (alpha)", "pearson"] == pytest.approx(
        pearson(psi, run.ground_truth[a, j])
    )
    top = np.argsort(-np.abs(psi), kind="stable")[:10]
    assert s.loc["Ours (alpha)", "negative_in_top10"] == int(np.sum(psi[top] < 0))
    assert s.loc["ground_truth", "pearson"] == pytest.approx(1.0)
    assert s.loc["ground_truth", "negative_in_top10"] == 0  # s >= 0 and r > 0 near the query
    ip = InnerProduct().fit(run.Phi_train, d.R_train).contributions(run.Phi_test[j], a)
    assert s.loc["Inner product", "pearson"] == pytest.approx(pearson(ip, run.ground_truth[a, j]))
    # another k recomputes the ranking
    s3 = plots.query_attribution_summary(query_df, k=3)
    assert s3.loc["Ours (alpha)", "top3"] == pytest.approx(
        topk_action_consistency(psi, d.case_actions, a, 3)
    )


def test_query_attributions_figure(query_df, regions):
    fig = plots.plot_query_attributions(query_df, k=10, regions=regions)
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    assert len(titles) == 1 + len(METHODS)
    assert titles[0].startswith("ground truth")
    assert all("Top-10 share" in t for t in titles)
    fig2 = plots.plot_query_attributions(query_df, k=5, methods=["TracIn"], ncols=1)
    assert len(fig2.axes) == 1
    # top-k markers: filled (positive) + hollow (negative) = k
    ax = fig2.axes[0]
    n_marked = sum(len(c.get_offsets()) for c in ax.collections[1:3])
    assert n_marked == 5


def _panels_per_row(fig):
    """Largest number of panels (colour bars left out) that share a row of the figure."""
    rows: dict[float, int] = {}
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>" or not ax.axison:
            continue
        key = round(ax.get_position().y0, 2)
        rows[key] = rows.get(key, 0) + 1
    return max(rows.values())


def test_chapter_05_06_figures_fit_the_book_column(regions, query_df):
    """At most two panels side by side and at most 6.9 in wide; the region colours
    of Fig. 1a-b and the action colours of the query panels have a legend."""
    recon = ex.support_reconstruction(0, SMALL)
    df = ex.attribution_comparison((0, 1), config=SMALL)
    figs = {
        "recovery": plots.plot_synthetic_recovery(regions, recon),
        "comparison": plots.plot_attribution_comparison(ex.summarize_comparison(df)),
        "weights": plots.plot_weight_profiles(np.arange(3.0), {"a": [1.0, -1, 2], "b": [1.0, 2, 3],
                                                                "c": [3.0, 2, 1]}),
        "query": plots.plot_query_attributions(query_df, k=10, regions=regions),
    }
    for name, fig in figs.items():
        assert fig.get_figwidth() <= 6.9, name
        assert _panels_per_row(fig) <= 2, name
    n_actions = regions.support.shape[-1]
    (legend,) = figs["recovery"].legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:n_actions] == [f"region of action $a_{b}$" for b in range(n_actions)]
    (legend,) = figs["query"].legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert [f"top-10 case, $a_i^* = a_{b}$" for b in range(n_actions)] == labels[:n_actions]


def test_attribution_explorer_updates():
    pytest.importorskip("ipywidgets")
    from cbdt.book.widgets import attribution_explorer

    box = attribution_explorer(seed=0, query=2, k=10, config=SMALL, resolution=11)
    q_slider, a_drop, k_slider = box.children[0].children
    cur = box.current
    assert cur["query"] == 2 and cur["k"] == 10
    expect = plots.query_attribution_summary(ex.query_attributions(0, 2, config=SMALL), 10)
    np.testing.assert_allclose(cur["table"].to_numpy(float), expect.to_numpy(float))
    q_slider.value = 7
    assert box.current["query"] == 7
    a_drop.value = (box.current["action"] + 1) % 3
    assert box.current["action"] == a_drop.value
    k_slider.value = 4
    assert "top4" in box.current["table"].columns
