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

# --- chapter 07: PJM audit ---
