"""ipywidgets explorers used by the chapters (need the ``book`` extra: ``pip install cbdt[book]``).

The explorers only display; every number they show is computed by a tested function of the
library, and the chapters check the same numbers in plain cells.
"""

from __future__ import annotations

# --- chapter 01: CBDT theory ---


def cbdt_explorer(
    memory,
    bandwidth=1.0,
    query=(0.0, 0.0),
    *,
    action_names=None,
    extent=None,
    top=3,
    grid_size=100,
    bandwidth_range=(0.1, 10.0),
):
    """Explore a 2-D CBDT memory: move the similarity bandwidth and the query problem.

    Shows the decision map with the query and its carrying cases (:func:`cbdt.plots.plot_cbdt_query`),
    the supports :math:`U(a \\mid M, p)` of every action and the table of
    :func:`cbdt.plots.support_breakdown` (the cases that carry each support and their shares).
    The similarity is ``GaussianSimilarity(h)``.

    Parameters
    ----------
    memory : cbdt.Memory
        A memory with 2-D problems.
    bandwidth : float, default=1.0
        Initial bandwidth ``h``.
    query : array-like of shape (2,), default=(0, 0)
        Initial query problem.
    action_names : sequence of str, optional
    extent : tuple (xmin, xmax, ymin, ymax), optional
        Range of the query sliders and the map; default the padded extent of the problems.
    top : int, default=3
        Carrying cases listed per action.
    grid_size : int, default=100
    bandwidth_range : tuple (hmin, hmax), default=(0.1, 10)
        Range of the (logarithmic) bandwidth slider.

    Returns
    -------
    ipywidgets.VBox
        Sliders ``h``, ``p1``, ``p2`` and an ``Output``. The attribute ``current`` holds the
        numbers on display: ``{"bandwidth", "query", "supports", "table"}``.
    """
    import math

    import ipywidgets as widgets
    import numpy as np
    from IPython.display import HTML, display

    from .decision import GaussianSimilarity, support
    from .plots import plot_cbdt_query, problem_extent, support_breakdown

    ext = problem_extent(memory) if extent is None else tuple(float(e) for e in extent)
    lo, hi = bandwidth_range
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="min(100%, 520px)")
    h_slider = widgets.FloatLogSlider(
        value=float(bandwidth), base=10, min=math.log10(lo), max=math.log10(hi), step=0.05,
        description="bandwidth h", readout_format=".3g", continuous_update=False,
        style=style, layout=layout,
    )
    x_slider = widgets.FloatSlider(
        value=float(query[0]), min=ext[0], max=ext[1], step=0.05, description="query p1",
        continuous_update=False, style=style, layout=layout,
    )
    y_slider = widgets.FloatSlider(
        value=float(query[1]), min=ext[2], max=ext[3], step=0.05, description="query p2",
        continuous_update=False, style=style, layout=layout,
    )
    out = widgets.Output()
    box = widgets.VBox([widgets.VBox([h_slider, x_slider, y_slider]), out])

    def render(*_):
        import matplotlib.pyplot as plt

        sim = GaussianSimilarity(h_slider.value)
        q = np.array([x_slider.value, y_slider.value])
        table = support_breakdown(memory, q, sim, top=top, action_names=action_names)
        box.current = {
            "bandwidth": float(h_slider.value),
            "query": q,
            "supports": support(q, memory, sim),
            "table": table,
        }
        with out:
            out.clear_output(wait=True)
            fig = plot_cbdt_query(memory, sim, q, top=top, extent=ext, grid_size=grid_size,
                                  action_names=action_names)
            display(fig)
            plt.close(fig)
            display(HTML(table.round(4).to_html(index=False)))

    for s in (h_slider, x_slider, y_slider):
        s.observe(render, names="value")
    render()
    return box

# --- chapter 03: invariance and whitening ---
def invariance_explorer(Phi, R, queries, seed: int = 0, cond: float = 100.0,
                        lam_rel: float = 1e-2):
    """Move :math:`\\kappa(B)` and :math:`\\lambda`; see which coefficients stay invariant.

    Sliders for the condition number of a random reparameterisation ``B``
    (:func:`cbdt.experiments.invariance.random_condition_matrix`, fixed ``seed``) and for the
    relative ridge strength :math:`\\lambda / (\\mathrm{tr}(G)/H)`. The text shown is
    :func:`cbdt.experiments.invariance.invariance_report`: the max relative coefficient change
    for OLS, isotropic ridge, co-transformed ridge and isotropic ridge under the orthogonal
    factor of ``B`` (Sec. 3.2, App. B.2).

    Parameters
    ----------
    Phi : array-like of shape (n, H)
    R : array-like of shape (n, |A|)
    queries : array-like of shape (m, H)
    seed : int, default=0
    cond, lam_rel : float
        Initial slider positions.

    Returns
    -------
    ipywidgets.interactive
    """
    import ipywidgets as widgets

    from .experiments.invariance import invariance_report

    def show(cond: float, lam_rel: float) -> None:
        print(invariance_report(Phi, R, queries, cond, lam_rel, seed))

    style = {"description_width": "initial"}
    layout = widgets.Layout(width="480px")
    return widgets.interactive(
        show,
        cond=widgets.FloatLogSlider(value=cond, base=10, min=0, max=4, step=0.25,
                                    description="cond(B)", style=style, layout=layout,
                                    continuous_update=False),
        lam_rel=widgets.FloatLogSlider(value=lam_rel, base=10, min=-4, max=0, step=0.25,
                                       description="lambda / (tr G / H)", style=style,
                                       layout=layout, continuous_update=False),
    )


# --- chapter 06: attribution baselines ---

def attribution_explorer(seed: int = 0, query: int = 0, k: int = 30, config=None,
                         resolution: int = 81):
    """Pick a test query of the synthetic task; see each method's top-k cases on the plane.

    Shows :func:`cbdt.plots.plot_query_attributions` (the CBDT decision regions in the
    background) and the table of :func:`cbdt.plots.query_attribution_summary` for the
    contributions of :func:`cbdt.experiments.synthetic.query_attributions`. The run (data
    and trained network of ``seed``) comes from the in-process cache of
    :func:`cbdt.experiments.synthetic.synthetic_run`, so the explorer retrains nothing that
    the chapter has already trained.

    Parameters
    ----------
    seed : int, default=0
    query : int, default=0
        Initial test query index.
    k : int, default=30
        Initial number of top cases.
    config : cbdt.experiments.synthetic.SyntheticConfig, optional
    resolution : int, default=81
        Grid points per axis of the background decision regions.

    Returns
    -------
    ipywidgets.VBox
        A query slider, an action dropdown (default: the query's CBDT-optimal action), a
        ``k`` slider and an ``Output``. The attribute ``current`` holds the numbers on
        display: ``{"query", "action", "k", "table"}``.
    """
    import ipywidgets as widgets
    from IPython.display import HTML, display

    from .experiments import synthetic as syn
    from .plots import plot_query_attributions, query_attribution_summary

    regions = syn.decision_regions(seed, resolution=resolution, config=config)
    data = regions.run.data
    m, n = data.X_test.shape[0], data.X_train.shape[0]
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="min(100%, 520px)")
    q_slider = widgets.IntSlider(value=int(query), min=0, max=m - 1, description="test query",
                                 continuous_update=False, style=style, layout=layout)
    options = [("CBDT-optimal a*(x)", -1)] + [(f"a{a}", a) for a in range(data.n_actions)]
    a_drop = widgets.Dropdown(options=options, value=-1, description="explained action",
                              style=style, layout=layout)
    k_slider = widgets.IntSlider(value=int(k), min=1, max=min(100, n), description="top k",
                                 continuous_update=False, style=style, layout=layout)
    out = widgets.Output()
    box = widgets.VBox([widgets.VBox([q_slider, a_drop, k_slider]), out])

    def render(*_):
        import matplotlib.pyplot as plt

        action = None if a_drop.value < 0 else int(a_drop.value)
        df = syn.query_attributions(seed, q_slider.value, action, k=k_slider.value,
                                    config=config)
        table = query_attribution_summary(df, k_slider.value)
        box.current = {"query": int(q_slider.value), "action": int(df.attrs["action"]),
                       "k": int(k_slider.value), "table": table}
        with out:
            out.clear_output(wait=True)
            fig = plot_query_attributions(df, k=k_slider.value, regions=regions)
            display(fig)
            plt.close(fig)
            display(HTML(table.round(3).to_html()))

    for w in (q_slider, a_drop, k_slider):
        w.observe(render, names="value")
    render()
    return box


# --- chapter 07: PJM audit ---


def show_pjm_audit(run, index):
    """Display the single-decision audit of one PJM test hour (what the explorer shows).

    Prints the hour and both decisions, displays the scores table and the ranked cases
    (:func:`cbdt.experiments.pjm.audit_query`, rounded to 4 decimals) and draws
    :func:`cbdt.plots.plot_case_audit`.

    Returns
    -------
    cbdt.experiments.pjm.QueryAudit
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    from .datasets.pjm_bidding import ACTIONS
    from .experiments.pjm import audit_query
    from .plots import plot_case_audit

    audit = audit_query(run, index)
    print(f"test hour {audit.index} ({audit.time:%Y-%m-%d %H:%M}): network selects "
          f"{ACTIONS[audit.selected]}, CBDT selects {ACTIONS[audit.cbdt_selected]}")
    display(audit.scores_table().round(4))
    shown = audit.cases.drop(columns="rank").rename(
        columns={"alpha": "α", "a_star": "a*", "contribution": "ψ = α r"}
    )
    display(shown.round(4))  # readable headers, narrow enough for the book's column
    plot_case_audit(audit)
    plt.show()
    return audit


def pjm_audit_explorer(run, index=None):
    """Pick any PJM test hour and get its case audit (ch. 07, Sec. 5.5, App. C.3).

    A slider over the test positions ``0 .. n_test - 1``; each move shows
    :func:`show_pjm_audit` for that hour: network scores, selected action, the ranked
    positive and negative coefficient cases (index, hour, alpha, case-optimal action,
    return of the selected action, standardised distance, contribution) and the cases in a
    2-D PCA projection of the representation.

    Parameters
    ----------
    run : cbdt.experiments.pjm.PJMRun
    index : int, optional
        Initial test position; default :func:`cbdt.experiments.pjm.default_audit_index`.

    Returns
    -------
    ipywidgets.interactive
    """
    import ipywidgets as widgets

    from .experiments.pjm import default_audit_index

    start = default_audit_index(run) if index is None else int(index)

    def show(index: int) -> None:
        show_pjm_audit(run, index)

    return widgets.interactive(
        show,
        index=widgets.IntSlider(value=start, min=0, max=run.problem.n_test - 1, step=1,
                                description="test hour", continuous_update=False,
                                layout=widgets.Layout(width="600px")),
    )

