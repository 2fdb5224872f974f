"""ipywidgets explorers used by the chapters (need the ``book`` extra: ``pip install cbdt[book]``).

The explorers only display; every number they show is computed by a tested function of the
library, and the chapters check the same numbers in plain cells.

Each explorer is an :class:`ipywidgets.VBox` (controls and an ``Output``) that is fully live in
Jupyter. Displayed, it also carries a static twin (:mod:`cbdt.book.explorer`): the states of a small
grid of control values, precomputed when the notebook runs, with plain HTML controls that switch
between them. The built book shows the static twin (no kernel there); Jupyter shows the widget.

Set the environment variable ``CBDT_STATIC_TWIN=0`` in a live session that never feeds the book
(a test of JupyterLab, a quick look) to skip the static twin: the widget is the same, only the
precomputed frames (tens of seconds for the larger explorers) are not rendered. The chapters'
stored outputs are made without it (``scripts/execute_notebooks.py``).
"""

from __future__ import annotations

import functools
import html as _html
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cbdt.exceptions import InputError

from .explorer import Control, build_frames, static_explorer_html

# resolution of the static frames: the inline backend's 100 dpi, so a frame looks like the live
# figure (lowered for figures wider than 1000 px, see cbdt.book.explorer.build_frames); a 128-colour
# palette (checked pixel by pixel against the full-colour figure, cbdt.book.explorer.figure_png)
# keeps each PNG at ~10-50 kB
FRAME_DPI = 100.0
FRAME_COLORS = 128


@functools.lru_cache(maxsize=1)
def _explorer_class() -> type:
    import ipywidgets as widgets

    class Explorer(widgets.VBox):
        """A live explorer (a ``VBox``) that also displays a static twin as ``text/html``.

        Attributes
        ----------
        current : dict
            The numbers on display (explorer-specific keys) and ``"html"``: the text/table HTML
            the output shows below the figure.
        static_controls : list of cbdt.book.explorer.Control
            The grid of the static twin; its start values are the live starting values.
        """

        def __init__(
            self,
            children: Sequence[Any],
            *,
            out: Any,
            inputs: dict[str, tuple[Any, Callable[[Any], Any]]],
            frame: Callable[[dict[str, Any]], tuple[Any, str, dict[str, Any]]],
            static_controls: Sequence[Control],
            title: str,
        ) -> None:
            super().__init__(list(children))
            self._out = out
            self._inputs = dict(inputs)  # name -> (widget, type of its value)
            self._frame = frame
            self.static_controls = list(static_controls)
            self.title = title
            self.current: dict[str, Any] = {}
            self._static: str | None = None
            self._frames: list[Any] | None = None
            for w, _ in self._inputs.values():
                w.observe(self._render, names="value")
            self._render()

        def _read(self) -> dict[str, Any]:
            """The live control values, by the names the frame function reads."""
            return {name: cast(w.value) for name, (w, cast) in self._inputs.items()}

        def _render(self, *_: Any) -> None:
            import matplotlib.pyplot as plt
            from IPython.display import HTML, display

            fig, text, current = self._frame(self._read())
            self.current = {**current, "html": text}
            with self._out:
                self._out.clear_output(wait=True)
                if fig is not None:
                    display(fig)
                    plt.close(fig)
                display(HTML(text))

        def static_frames(self) -> list[Any]:
            """The precomputed frames (:class:`cbdt.book.explorer.Frame`), rendered once."""
            if self._frames is None:
                self._frames = build_frames(
                    self.static_controls, lambda v: self._frame(v)[:2], dpi=FRAME_DPI,
                    colors=FRAME_COLORS,
                )
            return self._frames

        def static_html(self) -> str:
            """The static twin: self-contained HTML (:func:`cbdt.book.explorer.static_explorer_html`)."""
            if self._static is None:
                self._static = static_explorer_html(
                    self.static_controls, self.static_frames(), title=self.title
                )
            return self._static

        def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            if os.environ.get("CBDT_STATIC_TWIN", "1") != "0":
                bundle["text/html"] = self.static_html()
            return bundle

    return Explorer


def _grid(values: Sequence[float], start: float, rel: float = 1e-9) -> tuple[tuple, int]:
    """``values`` (sorted) with ``start`` added if no value equals it; and the index of start."""
    vals = sorted(float(v) for v in values)
    for i, v in enumerate(vals):
        if abs(v - start) <= rel * max(1.0, abs(start)):
            return tuple(vals), i
    vals = sorted([*vals, float(start)])
    return tuple(vals), vals.index(float(start))


def _int_grid(n_max: int, start: int, n: int) -> tuple[tuple, int]:
    """``n`` evenly spread integers of ``0 .. n_max`` with the one nearest ``start`` set to it."""
    picks = sorted({int(round(x)) for x in np.linspace(0, n_max, n)})
    j = int(np.argmin([abs(p - start) for p in picks]))
    picks[j] = int(start)
    picks = sorted(set(picks))
    return tuple(picks), picks.index(int(start))


def _margin_queries(U, start: int, n: int) -> tuple[tuple, int]:
    """``n`` query indices at evenly spaced ranks of the margin ``top1 - top2`` of ``U`` rows
    (smallest margin first); the pick nearest ``start`` in rank is replaced by ``start``."""
    U = np.asarray(U, dtype=float)
    if not 0 <= start < U.shape[0]:
        raise InputError(f"query must lie in 0 .. {U.shape[0] - 1}, got {start}")
    top2 = np.sort(U, axis=1)[:, -2:]
    order = np.argsort(top2[:, 1] - top2[:, 0], kind="stable")
    rank = {int(q): r for r, q in enumerate(order)}
    ranks = sorted({int(round(x)) for x in np.linspace(0, U.shape[0] - 1, n)})
    j = int(np.argmin([abs(r - rank[start]) for r in ranks]))
    ranks[j] = rank[start]
    picks = [int(order[r]) for r in sorted(set(ranks))]
    return tuple(picks), picks.index(start)


def _axis_grid(lo: float, hi: float, start: float, n: int, step: float = 0.05) -> tuple[tuple, int]:
    """The centres of ``n`` equal bins of ``[lo, hi]`` rounded to multiples of ``step`` (inside
    the range, away from its edges), the one nearest ``start`` replaced by ``start``."""
    centres = lo + (np.arange(n) + 0.5) * (hi - lo) / n
    pts = [round(round(x / step) * step, 10) for x in centres]
    j = int(np.argmin([abs(p - start) for p in pts]))
    pts[j] = float(start)
    pts = sorted(set(pts))
    return tuple(pts), pts.index(float(start))


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
    static_bandwidths=(0.25, 0.5, 1.0, 2.0, 4.0),
    static_points=4,
):
    """Explore a 2-D CBDT memory: move the similarity bandwidth and the query problem.

    Shows the decision map with the query and its carrying cases (:func:`cbdt.book.plots.plot_cbdt_query`),
    the supports :math:`U(a \\mid M, p)` of every action and the table of
    :func:`cbdt.book.plots.support_breakdown` (the cases that carry each support and their shares).
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
    static_bandwidths : sequence of float, default=(0.25, 0.5, 1, 2, 4)
        Bandwidths of the static twin (the initial one is added if missing).
    static_points : int, default=4
        Query positions per axis in the static twin, spread over the extent (one of them is the
        initial query coordinate).

    Returns
    -------
    ipywidgets.VBox
        Sliders ``h``, ``p1``, ``p2`` and an ``Output``. The attribute ``current`` holds the
        numbers on display: ``{"bandwidth", "query", "supports", "table", "html"}``; displayed,
        the box also gives the static twin as ``text/html`` (``static_html()``).
    """
    import math

    import ipywidgets as widgets

    from cbdt.decision import GaussianSimilarity, support

    from .plots import plot_cbdt_query, problem_extent, support_breakdown

    ext = problem_extent(memory) if extent is None else tuple(float(e) for e in extent)
    lo, hi = bandwidth_range
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="min(100%, 520px)")
    h_slider = widgets.FloatLogSlider(
        value=float(bandwidth), base=10, min=math.log10(lo), max=math.log10(hi), step=0.05,
        description="bandwidth ω", readout_format=".3g", continuous_update=False,
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

    def frame(v):
        sim = GaussianSimilarity(v["bandwidth"])
        q = np.array([v["p1"], v["p2"]], dtype=float)
        table = support_breakdown(memory, q, sim, top=top, action_names=action_names)
        fig = plot_cbdt_query(memory, sim, q, top=top, extent=ext, grid_size=grid_size,
                              action_names=action_names)
        current = {"bandwidth": float(v["bandwidth"]), "query": q,
                   "supports": support(q, memory, sim), "table": table}
        return fig, table.round(4).to_html(index=False), current

    hs, h0 = _grid([h for h in static_bandwidths if lo <= h <= hi], float(bandwidth))
    xs, x0 = _axis_grid(ext[0], ext[1], float(query[0]), static_points)
    ys, y0 = _axis_grid(ext[2], ext[3], float(query[1]), static_points)
    controls = [
        Control("bandwidth", "bandwidth ω", hs, start=h0, fmt=".3g"),
        Control("p1", "query p1", xs, start=x0, fmt=".2f"),
        Control("p2", "query p2", ys, start=y0, fmt=".2f"),
    ]
    return _explorer_class()(
        [widgets.VBox([h_slider, x_slider, y_slider]), out],
        out=out,
        inputs={"bandwidth": (h_slider, float), "p1": (x_slider, float), "p2": (y_slider, float)},
        frame=frame,
        static_controls=controls,
        title="CBDT explorer: bandwidth and query problem",
    )


# --- chapter 03: invariance and whitening ---
def invariance_explorer(Phi, R, queries, seed: int = 0, cond: float = 100.0,
                        lam_rel: float = 1e-2):
    """Move :math:`\\kappa(B)` and :math:`\\lambda`; see which coefficients stay invariant.

    Sliders for the condition number of a random reparameterisation ``B``
    (:func:`cbdt.book.experiments.invariance.random_condition_matrix`, fixed ``seed``) and for the
    relative ridge strength :math:`\\lambda / (\\mathrm{tr}(G)/H)`. The text shown is
    :func:`cbdt.book.experiments.invariance.invariance_report`: the max relative coefficient change
    for OLS, isotropic ridge, co-transformed ridge and isotropic ridge under the orthogonal
    factor of ``B`` (Sec. 3.2, App. B.2). The static twin holds the 9 x 9 grid
    :math:`\\kappa(B) \\in \\{10^0, 10^{0.5}, \\dots, 10^4\\}`,
    :math:`\\lambda/(\\mathrm{tr}(G)/H) \\in \\{10^{-4}, \\dots, 10^0\\}` (plus the initial values).

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
    ipywidgets.VBox
        Two sliders and an ``Output``; ``current`` holds ``{"cond", "lam_rel", "report",
        "html"}``.
    """
    import ipywidgets as widgets

    from .experiments.invariance import invariance_report

    style = {"description_width": "initial"}
    layout = widgets.Layout(width="480px")
    c_slider = widgets.FloatLogSlider(value=cond, base=10, min=0, max=4, step=0.25,
                                      description="cond(B)", style=style, layout=layout,
                                      continuous_update=False)
    l_slider = widgets.FloatLogSlider(value=lam_rel, base=10, min=-4, max=0, step=0.25,
                                      description="lambda / (tr G / H)", style=style,
                                      layout=layout, continuous_update=False)
    out = widgets.Output()

    def frame(v):
        report = invariance_report(Phi, R, queries, v["cond"], v["lam_rel"], seed)
        current = {"cond": float(v["cond"]), "lam_rel": float(v["lam_rel"]), "report": report}
        return None, f"<pre>{_html.escape(report)}</pre>", current

    cs, c0 = _grid([10.0**e for e in np.arange(0, 4.01, 0.5)], float(cond))
    ls, l0 = _grid([10.0**e for e in np.arange(-4, 0.01, 0.5)], float(lam_rel))
    controls = [
        Control("cond", "cond(B)", cs, start=c0, fmt=".3g"),
        Control("lam_rel", "lambda / (tr G / H)", ls, start=l0, fmt=".3g"),
    ]
    return _explorer_class()(
        [widgets.VBox([c_slider, l_slider]), out],
        out=out,
        inputs={"cond": (c_slider, float), "lam_rel": (l_slider, float)},
        frame=frame,
        static_controls=controls,
        title="Invariance explorer: condition number and ridge strength",
    )


# --- chapter 06: attribution baselines ---

def attribution_explorer(seed: int = 0, query: int = 0, k: int = 30, config=None,
                         resolution: int = 81, static_queries: int = 5,
                         static_k: Sequence[int] = ()):
    """Pick a test query of the synthetic task; see each method's top-k cases on the plane.

    Shows :func:`cbdt.book.plots.plot_query_attributions` (the CBDT decision regions in the
    background) and the table of :func:`cbdt.book.plots.query_attribution_summary` for the
    contributions of :func:`cbdt.book.experiments.synthetic.query_attributions`. The run (data
    and trained network of ``seed``) comes from the in-process cache of
    :func:`cbdt.book.experiments.synthetic.synthetic_run`, so the explorer retrains nothing that
    the chapter has already trained.

    Parameters
    ----------
    seed : int, default=0
    query : int, default=0
        Initial test query index.
    k : int, default=30
        Initial number of top cases.
    config : cbdt.book.experiments.synthetic.SyntheticConfig, optional
    resolution : int, default=81
        Grid points per axis of the background decision regions.
    static_queries : int, default=5
        Test queries in the static twin: the test queries at evenly spaced ranks of the CBDT
        margin (largest minus second-largest true support, ``data.U_test``), from the one
        nearest a decision boundary to the farthest; the pick nearest ``query`` in rank is
        replaced by ``query``. The slider steps through them in that order.
    static_k : sequence of int, default=()
        Further values of ``k`` in the static twin besides ``k``; with none, ``k`` is fixed
        there and has no control. Every action is offered.

    Returns
    -------
    ipywidgets.VBox
        A query slider, an action dropdown (default: the query's CBDT-optimal action), a
        ``k`` slider and an ``Output``. The attribute ``current`` holds the numbers on
        display: ``{"query", "action", "k", "table", "html"}``.
    """
    import ipywidgets as widgets

    from .experiments import synthetic as syn
    from .plots import (
        plot_query_attributions,
        query_attribution_summary,
        readable_attribution_summary,
    )

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
    k_max = min(100, n)
    k_slider = widgets.IntSlider(value=int(k), min=1, max=k_max, description="top k",
                                 continuous_update=False, style=style, layout=layout)
    out = widgets.Output()

    def frame(v):
        action = None if v["action"] < 0 else int(v["action"])
        kk = int(v.get("k", k))
        df = syn.query_attributions(seed, int(v["query"]), action, k=kk, config=config)
        table = query_attribution_summary(df, kk)
        current = {"query": int(v["query"]), "action": int(df.attrs["action"]), "k": kk,
                   "table": table}
        fig = plot_query_attributions(df, k=kk, regions=regions)
        return fig, readable_attribution_summary(table, kk).to_html(), current

    qs, q0 = _margin_queries(data.U_test, int(query), static_queries)
    ks, k0 = _grid([kk for kk in static_k if 1 <= kk <= k_max], int(k))
    controls = [
        Control("query", "test query (small to large CBDT margin)", qs, start=q0, fmt="d"),
        Control("action", "explained action", tuple(val for _, val in options),
                labels=tuple(lab for lab, _ in options), kind="select"),
    ]
    if len(ks) > 1:
        controls.append(Control("k", "top k", tuple(int(x) for x in ks), start=k0, fmt="d"))
    return _explorer_class()(
        [widgets.VBox([q_slider, a_drop, k_slider]), out],
        out=out,
        inputs={"query": (q_slider, int), "action": (a_drop, int), "k": (k_slider, int)},
        frame=frame,
        static_controls=controls,
        title="Attribution explorer: test query, explained action and k",
    )


# --- chapter 07: PJM audit ---


def _pjm_headline(audit) -> str:
    from cbdt.datasets.pjm_bidding import ACTIONS

    return (f"test hour {audit.index} ({audit.time:%Y-%m-%d %H:%M}): network selects "
            f"{ACTIONS[audit.selected]}, CBDT selects {ACTIONS[audit.cbdt_selected]}")


def _pjm_tables(audit):
    shown = audit.cases.drop(columns="rank").rename(
        columns={"alpha": "α", "a_star": "a*", "contribution": "ψ = α r"}
    )
    return audit.scores_table().round(4), shown.round(4)


def pjm_audit_explorer(run, index=None, static_hours: int = 7):
    """Pick any PJM test hour and get its case audit (ch. 07, Sec. 5.5, App. C.3).

    A slider over the test positions ``0 .. n_test - 1``; each move shows that hour's
    single-decision audit (:func:`cbdt.book.experiments.pjm.audit_query`): network scores,
    selected action, the ranked
    positive and negative coefficient cases (index, hour, alpha, case-optimal action,
    return of the selected action, standardised distance, contribution) and the cases in a
    2-D PCA projection of the representation.

    Parameters
    ----------
    run : cbdt.book.experiments.pjm.PJMRun
    index : int, optional
        Initial test position; default :func:`cbdt.book.experiments.pjm.default_audit_index`.
    static_hours : int, default=7
        Test hours in the static twin, spread evenly over the test period (one is ``index``).

    Returns
    -------
    ipywidgets.VBox
        The slider (``children[0]``) and an ``Output``; ``current`` holds ``{"index",
        "audit", "html"}``.
    """
    import ipywidgets as widgets

    from .experiments.pjm import audit_query, default_audit_index
    from .plots import plot_case_audit

    start = default_audit_index(run) if index is None else int(index)
    n_test = run.problem.n_test
    if not 0 <= start < n_test:
        raise InputError(f"index must lie in 0 .. {n_test - 1}, got {start}")
    slider = widgets.IntSlider(value=start, min=0, max=n_test - 1, step=1,
                               description="test hour", continuous_update=False,
                               layout=widgets.Layout(width="min(100%, 600px)"))
    out = widgets.Output()

    def frame(v):
        audit = audit_query(run, int(v["index"]))
        scores, shown = _pjm_tables(audit)
        text = (f"<p>{_html.escape(_pjm_headline(audit))}</p>\n{scores.to_html()}\n"
                f"{shown.to_html()}")
        return plot_case_audit(audit), text, {"index": int(v["index"]), "audit": audit}

    hours, h0 = _int_grid(n_test - 1, start, static_hours)
    times = run.problem.times_test
    controls = [Control("index", "test hour", hours, start=h0,
                        labels=tuple(f"{h} ({times[h]:%Y-%m-%d %H:%M})" for h in hours))]
    return _explorer_class()(
        [slider, out],
        out=out,
        inputs={"index": (slider, int)},
        frame=frame,
        static_controls=controls,
        title="PJM audit explorer: test hour",
    )
