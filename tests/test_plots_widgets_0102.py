"""Unit tests of the chapter 01/02 figures (cbdt.book.plots) and the CBDT explorer (cbdt.book.widgets)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

import cbdt
from cbdt.book import plots

ACTIONS = ["hold", "buy", "sell"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def memory() -> cbdt.Memory:
    rng = np.random.default_rng(5)
    P = rng.uniform(-2, 2, size=(12, 2))
    acts = np.repeat([0, 1, 2], 4)
    res = rng.normal(size=12)
    cases = [
        cbdt.Case(problem=p, action=int(a), result=float(r), frequency=1.0 + (i % 3))
        for i, (p, a, r) in enumerate(zip(P, acts, res, strict=True))
    ]
    return cbdt.Memory.from_cases(cases, n_actions=3)


# ----------------------------------------------------------------------------- chapter 01 data
def test_problem_extent_pads_the_bounding_box(memory):
    x0, x1, y0, y1 = plots.problem_extent(memory, pad=0.25)
    P = memory.problems
    assert (x0, y0) == pytest.approx(tuple(P.min(axis=0) - 0.25))
    assert (x1, y1) == pytest.approx(tuple(P.max(axis=0) + 0.25))


def test_support_grid_matches_cbdt_support(memory):
    sim = cbdt.GaussianSimilarity(0.8)
    xs, ys, U = plots.support_grid(memory, sim, extent=(-1, 1, -2, 2), grid_size=7)
    assert xs.shape == (7,) and ys.shape == (7,) and U.shape == (7, 7, 3)
    assert xs[0] == -1 and xs[-1] == 1 and ys[0] == -2 and ys[-1] == 2
    for i, j in [(0, 0), (6, 1), (3, 5)]:
        expected = cbdt.support(np.array([xs[i], ys[j]]), memory, sim)
        np.testing.assert_allclose(U[j, i], expected, rtol=1e-12, atol=1e-12)


def test_case_contributions_sum_to_the_support(memory):
    sim = cbdt.GaussianSimilarity(1.3)
    p = np.array([0.3, -0.4])
    C = plots.case_contributions(memory, p, sim)
    assert C.shape == (memory.n_cases, memory.n_actions)
    np.testing.assert_allclose(C.sum(axis=0), cbdt.support(p, memory, sim), rtol=1e-12)
    # a classical case only contributes to the action it took, scaled by its frequency
    s = sim(p[None, :], memory.problems)[0]
    np.testing.assert_allclose(C, (memory.frequencies * s)[:, None] * memory.supports)
    assert ((C != 0).sum(axis=1) <= 1).all()


def test_case_contributions_default_similarity_and_errors(memory):
    p = np.zeros(2)
    np.testing.assert_allclose(
        plots.case_contributions(memory, p).sum(axis=0), cbdt.support(p, memory)
    )
    with pytest.raises(ValueError, match="dimension"):
        plots.case_contributions(memory, np.zeros(3))
    with pytest.raises(cbdt.InputError, match="Memory"):
        plots.case_contributions(np.zeros((3, 2)), p)


def test_top_carrying_cases_orders_by_magnitude_and_skips_zeros():
    c = np.array([0.0, -3.0, 1.0, 3.0, 0.0, 2.0])
    np.testing.assert_array_equal(plots.top_carrying_cases(c, 3), [1, 3, 5])  # tie: lower index
    np.testing.assert_array_equal(plots.top_carrying_cases(c, 10), [1, 3, 5, 2])
    assert plots.top_carrying_cases(np.zeros(4), 3).size == 0


def test_support_breakdown_table(memory):
    sim = cbdt.GaussianSimilarity(1.0)
    p = np.array([0.5, 0.5])
    tab = plots.support_breakdown(memory, p, sim, top=2, action_names=ACTIONS)
    assert list(tab.columns) == [
        "action", "U(a|M,p)", "case", "s(p,p_c)", "n(c,M)", "u(r_c,a)", "contribution", "share"
    ]
    assert len(tab) == 6 and list(tab.action) == ["hold"] * 2 + ["buy"] * 2 + ["sell"] * 2
    U = cbdt.support(p, memory, sim)
    for a, name in enumerate(ACTIONS):
        rows = tab[tab.action == name]
        assert rows["U(a|M,p)"].to_numpy() == pytest.approx([U[a]] * 2)
        mags = rows.contribution.abs().to_numpy()
        assert mags[0] >= mags[1]
    np.testing.assert_allclose(
        tab.contribution, tab["s(p,p_c)"] * tab["n(c,M)"] * tab["u(r_c,a)"], rtol=1e-12
    )
    # with every case listed, |share| sums to one per action
    full = plots.support_breakdown(memory, p, sim, top=memory.n_cases)
    for _, rows in full.groupby("action"):
        assert rows.share.abs().sum() == pytest.approx(1.0)
        assert np.sign(rows.share).tolist() == np.sign(rows.contribution).tolist()


def test_action_names_must_match(memory):
    with pytest.raises(ValueError, match="3 actions"):
        plots.support_breakdown(memory, np.zeros(2), action_names=["a", "b"])


# ---------------------------------------------------------------------------- chapter 01 plots
def test_plot_cbdt_decision(memory):
    fig = plots.plot_cbdt_decision(
        memory, cbdt.GaussianSimilarity(1.0), action_names=ACTIONS, query=(0, 0),
        highlight=[0, 1], grid_size=20,
    )
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert len(ax.images) == 1
    decision = ax.images[0].get_array()
    xs, ys, U = plots.support_grid(memory, cbdt.GaussianSimilarity(1.0), grid_size=20)
    np.testing.assert_array_equal(np.asarray(decision), U.argmax(axis=-1))
    assert ax.get_legend() is not None


def test_plot_cbdt_decision_on_given_axes(memory):
    fig, ax = plt.subplots()
    out = plots.plot_cbdt_decision(memory, ax=ax, legend=False, title="t", grid_size=10)
    assert out is fig and ax.get_title() == "t" and ax.get_legend() is None


def test_plots_reject_a_memory_that_is_not_2d():
    m = cbdt.Memory(np.zeros((3, 3)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="2-D"):
        plots.plot_cbdt_decision(m)
    with pytest.raises(ValueError, match="2-D"):
        plots.support_grid(m)


def test_plot_cbdt_supports_has_one_panel_per_action_and_the_map(memory):
    fig = plots.plot_cbdt_supports(memory, action_names=ACTIONS, query=(0, 0), grid_size=15)
    # |A| support maps + decision map + colour bar
    assert len(fig.axes) == memory.n_actions + 2
    assert fig.axes[0].get_title() == "$U(hold \\mid M, p)$"


def test_plot_bandwidth_grid(memory):
    fig = plots.plot_bandwidth_grid(memory, [0.5, 2.0], grid_size=12)
    assert [ax.get_title() for ax in fig.axes] == ["$\\omega = 0.5$", "$\\omega = 2$"]


def test_plot_cbdt_query(memory):
    sim = cbdt.GaussianSimilarity(1.0)
    fig = plots.plot_cbdt_query(memory, sim, (0.2, 0.1), top=1, action_names=ACTIONS,
                                grid_size=15)
    ax_map, ax_bar = fig.axes
    heights = [patch.get_height() for patch in ax_bar.patches]
    np.testing.assert_allclose(heights, cbdt.support(np.array([0.2, 0.1]), memory, sim))
    assert ACTIONS[int(np.argmax(heights))] in ax_bar.get_title()


def _panels_per_row(fig):
    """Largest number of panels (colour bars left out) that share a row of the figure."""
    rows: dict[float, int] = {}
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        key = round(ax.get_position().y0, 2)
        rows[key] = rows.get(key, 0) + 1
    return max(rows.values())


def test_chapter_01_figures_fit_the_book_column(memory):
    """At most two panels side by side, at most 6.9 in wide (the column is 688 px at
    the inline backend's 100 dpi), and a legend that names the region colour of every action."""
    sim = cbdt.GaussianSimilarity(1.0)
    supports = plots.plot_cbdt_supports(memory, sim, action_names=ACTIONS, query=(0, 0),
                                        grid_size=12)
    bandwidths = plots.plot_bandwidth_grid(memory, [0.3, 0.7, 1.5, 4.0], grid_size=12,
                                           action_names=ACTIONS)
    for fig in (supports, bandwidths,
                plots.plot_cbdt_decision(memory, sim, grid_size=12),
                plots.plot_cbdt_query(memory, sim, (0.2, 0.1), grid_size=12)):
        assert fig.get_figwidth() <= 6.9
        assert _panels_per_row(fig) <= 2
    for fig in (supports, bandwidths):
        (legend,) = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert [f"region {a}" for a in ACTIONS] == labels[:3]
        assert "case, $u < 0$" in labels
    assert len(bandwidths.axes) == 4
    assert len(plots.plot_bandwidth_grid(memory, [0.5, 1.0, 2.0], grid_size=8).axes) == 3
    with pytest.raises(ValueError, match="empty"):
        plots.plot_bandwidth_grid(memory, [])


# ---------------------------------------------------------------------------- chapter 02 plots
def test_plot_coefficient_map():
    rng = np.random.default_rng(0)
    X, alpha = rng.normal(size=(20, 2)), rng.normal(size=20)
    fig = plots.plot_coefficient_map(X, alpha, query=(0, 0), title="a")
    assert len(fig.axes) == 2  # map + colour bar
    coll = fig.axes[0].collections[0]
    assert coll.norm.vmin == pytest.approx(-np.abs(alpha).max())
    assert coll.norm.vmax == pytest.approx(np.abs(alpha).max())
    with pytest.raises(ValueError, match="shape"):
        plots.plot_coefficient_map(X, alpha[:5])


def test_plot_min_norm():
    d = np.geomspace(1e-2, 10, 5)
    fig = plots.plot_min_norm(d, np.sqrt(0.25 + d**2), min_norm=0.5,
                              highlight={"other": (3.0, np.sqrt(9.25))})
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "other" in labels
    with pytest.raises(ValueError):
        plots.plot_min_norm(d, d[:3], min_norm=0.5)
    with pytest.raises(ValueError, match="> 0"):
        plots.plot_min_norm(np.array([0.0, 1.0]), np.array([0.5, 1.1]), min_norm=0.5)


def test_plot_ridge_convergence():
    lams = np.logspace(-4, 1, 6)
    errs = np.column_stack([lams / (1 + lams), 2 * lams / (1 + lams)])
    fig = plots.plot_ridge_convergence(lams, errs, eig_min=1.0)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    ref = [ln for ln in ax.lines if ln.get_label().startswith("slope 1")][0]
    assert ref.get_ydata().max() <= 3 * errs.max()
    np.testing.assert_allclose(ref.get_ydata()[0], errs[0, 0])
    with pytest.raises(ValueError):
        plots.plot_ridge_convergence(np.array([0.0, 1.0]), np.ones(2))


# ----------------------------------------------------------------------------- chapter 01 widget
def test_cbdt_explorer_shows_the_numbers_of_support_breakdown(memory):
    pytest.importorskip("ipywidgets")
    from cbdt.book.widgets import cbdt_explorer

    box = cbdt_explorer(memory, bandwidth=0.7, query=(0.5, -0.5), action_names=ACTIONS,
                        grid_size=10)
    h_slider, x_slider, y_slider = box.children[0].children
    cur = box.current
    sim = cbdt.GaussianSimilarity(0.7)
    q = np.array([0.5, -0.5])
    np.testing.assert_allclose(cur["supports"], cbdt.support(q, memory, sim))
    assert cur["table"].equals(plots.support_breakdown(memory, q, sim, action_names=ACTIONS))

    # moving a slider re-renders with the new values
    h_slider.value = 2.0
    x_slider.value = -1.0
    cur = box.current
    assert cur["bandwidth"] == pytest.approx(2.0)
    q2 = np.array([-1.0, -0.5])
    np.testing.assert_allclose(
        cur["supports"], cbdt.support(q2, memory, cbdt.GaussianSimilarity(h_slider.value))
    )
