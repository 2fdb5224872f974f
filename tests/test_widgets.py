"""Unit tests of the static twins of the explorers (cbdt.book.explorer, cbdt.book.widgets).

For every explorer: the static HTML has one frame per grid point, its controls list the grid's
values, and each frame's text is what the live widget shows when its controls are set to that
grid point.
"""

from __future__ import annotations

import base64
import html
import json
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import cbdt  # noqa: E402
from cbdt.book import explorer as ex  # noqa: E402

pytest.importorskip("ipywidgets")
from cbdt.book import widgets  # noqa: E402

_FRAME = re.compile(
    r'<div class="cbdt-explorer-frame" data-cbdt-frame="(?P<i>\d+)" data-state="(?P<state>[^"]*)"'
    r'(?P<hidden> hidden)?>\n(?:<img src="data:image/png;base64,(?P<png>[^"]+)" alt="[^"]*">\n)?'
    r'<div class="cbdt-explorer-text">(?P<text>.*?)</div></div>',
    re.DOTALL,
)
_CONTROL = re.compile(
    r'id="(?P<id>[^"]+)" data-cbdt-control="(?P<name>[^"]+)" data-n="(?P<n>\d+)" '
    r'data-labels="(?P<labels>[^"]*)" data-values="(?P<values>[^"]*)"'
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def parse(page: str) -> tuple[list[dict], list[dict]]:
    """(controls, frames) of a static explorer's HTML."""
    controls = [
        {"id": m["id"], "name": m["name"], "n": int(m["n"]),
         "labels": json.loads(html.unescape(m["labels"])),
         "values": json.loads(html.unescape(m["values"]))}
        for m in _CONTROL.finditer(page)
    ]
    frames = [
        {"i": int(m["i"]), "state": json.loads(html.unescape(m["state"])),
         "hidden": bool(m["hidden"]), "png": m["png"], "text": m["text"]}
        for m in _FRAME.finditer(page)
    ]
    return controls, frames


def check_static_twin(box, set_live) -> list[dict]:
    """Frame count, grid values and frame text against the live render; returns the frames."""
    page = box.static_html()
    controls, frames = parse(page)
    grid = box.static_controls
    n = int(np.prod([len(c.values) for c in grid]))
    assert len(frames) == n == len(ex.grid_points(grid))
    assert page.count("data-cbdt-frame=") == n
    assert f'data-n-frames="{n}"' in page
    assert [c["name"] for c in controls] == [c.name for c in grid]
    for parsed, control in zip(controls, grid, strict=True):
        assert parsed["values"] == pytest.approx(list(control.values))
        assert parsed["labels"] == list(control.labels)
        assert parsed["n"] == len(control.values)
    assert [f["i"] for f in frames] == list(range(n))
    for f, point in zip(frames, ex.grid_points(grid), strict=True):
        assert f["state"] == pytest.approx(point)
    # exactly one frame is visible: the starting state, which is what the live widget shows
    visible = [f for f in frames if not f["hidden"]]
    assert len(visible) == 1
    assert visible[0]["text"] == box.current["html"]
    for f in frames:
        set_live(f["state"])
        assert f["text"] == box.current["html"], f"frame {f['i']} differs from the live render"
    # unique DOM ids, and the bundle carries both views
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == page
    return frames


def png_width(b64: str) -> int:
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(raw[16:20], "big")


# ----------------------------------------------------------------------------- cbdt.book.explorer


def test_grid_points_are_row_major_and_capped():
    a = ex.Control("a", "A", (1, 2))
    b = ex.Control("b", "B", (10, 20, 30))
    pts = ex.grid_points([a, b])
    assert pts[:4] == [{"a": 1, "b": 10}, {"a": 1, "b": 20}, {"a": 1, "b": 30}, {"a": 2, "b": 10}]
    big = ex.Control("c", "C", tuple(range(ex.MAX_FRAMES + 1)))
    with pytest.raises(ValueError, match="MAX_FRAMES"):
        ex.grid_points([big])
    with pytest.raises(ValueError, match="unique"):
        ex.grid_points([a, ex.Control("a", "again", (0,))])


def test_control_rejects_bad_input():
    with pytest.raises(ValueError, match="no values"):
        ex.Control("a", "A", ())
    with pytest.raises(ValueError, match="kind"):
        ex.Control("a", "A", (1,), kind="slider")
    with pytest.raises(ValueError, match="labels"):
        ex.Control("a", "A", (1, 2), labels=("one",))
    with pytest.raises(ValueError, match="start"):
        ex.Control("a", "A", (1, 2), start=2)


def test_static_html_checks_frames_against_grid():
    c = ex.Control("a", "A", (1, 2))
    frames = [ex.Frame({"a": 1}, None, "<p>1</p>"), ex.Frame({"a": 2}, None, "<p>2</p>")]
    page = ex.static_explorer_html([c], frames, title="t")
    assert "<script>" in page and "http" not in page  # self-contained
    assert 'for="' in page and "<label" in page
    with pytest.raises(ValueError, match="frames for a grid"):
        ex.static_explorer_html([c], frames[:1], title="t")
    with pytest.raises(ValueError, match="do not match"):
        ex.static_explorer_html([c], frames[::-1], title="t")
    # different content, different ids
    other = ex.static_explorer_html(
        [c], [ex.Frame({"a": 1}, None, "x"), ex.Frame({"a": 2}, None, "y")], title="t")
    assert re.search(r'id="([^"]+)"', page)[1] != re.search(r'id="([^"]+)"', other)[1]


def test_figure_png_keeps_rare_colours():
    """The palette PNG stays within max_error of the full-colour figure, rare colours included."""
    import io

    from PIL import Image

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.imshow(np.linspace(0, 1, 400).reshape(20, 20), cmap="viridis")  # many colours
    ax.plot([3], [3], "o", color="tab:red", markersize=3)  # a few pixels of a rare colour
    full = np.asarray(Image.open(io.BytesIO(ex.figure_png(fig, dpi=50, colors=None))).convert("RGB"))
    small = ex.figure_png(fig, dpi=50, colors=8, max_error=32)
    img = Image.open(io.BytesIO(small))
    got = np.asarray(img.convert("RGB"))
    assert got.shape == full.shape == (150, 200, 3)
    assert np.abs(got.astype(int) - full.astype(int)).max() <= 32
    with pytest.raises(ValueError, match="colors"):
        ex.figure_png(fig, colors=1)


# ----------------------------------------------------------------------------- the explorers


ACTIONS = ["hold", "buy", "sell"]


@pytest.fixture(scope="module")
def memory():
    rng = np.random.default_rng(1)
    problems = rng.uniform(-3, 3, size=(30, 2)).round(2)
    actions = rng.permutation(np.repeat([0, 1, 2], 10))
    results = rng.normal(0.0, 1.0, size=30).round(2)
    cases = [cbdt.Case(problem=p, action=int(a), result=float(r))
             for p, a, r in zip(problems, actions, results, strict=True)]
    return cbdt.Memory.from_cases(cases, n_actions=3)


def test_cbdt_explorer_static_twin(memory):
    box = widgets.cbdt_explorer(memory, bandwidth=1.0, query=(0.5, 1.0), action_names=ACTIONS,
                                grid_size=10, static_bandwidths=(2.0,), static_points=2)
    h_slider, x_slider, y_slider = box.children[0].children

    def set_live(v):
        h_slider.value, x_slider.value, y_slider.value = v["bandwidth"], v["p1"], v["p2"]

    frames = check_static_twin(box, set_live)
    assert len(frames) == 2 * 2 * 2  # the start bandwidth 1.0 is added to (2,)
    assert all(f["png"] for f in frames)
    assert all(png_width(f["png"]) <= 1000 for f in frames)
    # the text is the support breakdown of the grid point
    last = frames[-1]["state"]
    sim = cbdt.GaussianSimilarity(last["bandwidth"])
    table = cbdt.book.plots.support_breakdown(memory, np.array([last["p1"], last["p2"]]), sim,
                                         action_names=ACTIONS)
    assert frames[-1]["text"] == table.round(4).to_html(index=False)
    # deterministic: a fresh explorer gives the same frames' text
    again = widgets.cbdt_explorer(memory, bandwidth=1.0, query=(0.5, 1.0), action_names=ACTIONS,
                                  grid_size=10, static_bandwidths=(2.0,), static_points=2)
    assert [f["text"] for f in parse(again.static_html())[1]] == [f["text"] for f in frames]


def test_invariance_explorer_static_twin():
    from cbdt.book.experiments.invariance import invariance_report

    rng = np.random.default_rng(0)
    Phi, R, Q = rng.normal(size=(40, 4)), rng.normal(size=(40, 2)), rng.normal(size=(5, 4))
    box = widgets.invariance_explorer(Phi, R, Q, seed=0, cond=100.0, lam_rel=1e-2)
    c_slider, l_slider = box.children[0].children

    def set_live(v):
        c_slider.value, l_slider.value = v["cond"], v["lam_rel"]

    frames = check_static_twin(box, set_live)
    assert len(frames) == 9 * 9
    assert not any(f["png"] for f in frames)
    f = frames[5]
    assert html.unescape(f["text"]) == (
        "<pre>" + invariance_report(Phi, R, Q, f["state"]["cond"], f["state"]["lam_rel"], 0)
        + "</pre>")
    assert len({f["text"] for f in frames}) == len(frames)  # every state shows other numbers


def test_attribution_explorer_static_twin():
    from cbdt.book.experiments import synthetic as syn

    small = syn.SyntheticConfig(n_train=150, n_test=40, hidden=(16, 16), epochs=120,
                                n_checkpoints=4)
    box = widgets.attribution_explorer(seed=0, query=2, k=10, config=small, resolution=11,
                                       static_queries=2, static_k=(5,))
    q_slider, a_drop, k_slider = box.children[0].children

    def set_live(v):
        q_slider.value, a_drop.value, k_slider.value = v["query"], v["action"], v["k"]

    frames = check_static_twin(box, set_live)
    assert [c.name for c in box.static_controls] == ["query", "action", "k"]
    assert box.static_controls[1].values == (-1, 0, 1, 2)
    assert box.static_controls[2].values == (5, 10)
    # the query nearest a decision boundary (smallest CBDT margin) and the start query 2
    U = syn.synthetic_run(0, small).data.U_test
    top2 = np.sort(U, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    qs = box.static_controls[0].values
    assert len(qs) == 2 and 2 in qs
    assert int(np.argmin(margin)) in qs or int(np.argmin(margin)) == 2
    assert margin[qs[0]] <= margin[qs[1]]
    assert len(frames) == 2 * 4 * 2
    assert all(png_width(f["png"]) <= 1000 for f in frames)
    # the tables name their columns and rows as the text does, not by column keys
    for f in frames:
        assert "Top-" in f["text"] and "negative in top-" in f["text"]
        assert "Pearson" in f["text"] and "ground truth" in f["text"]
        assert "_" not in f["text"].replace("&lt;", "")
    # without further values of k, k is fixed in the static twin and has no control
    fixed = widgets.attribution_explorer(seed=0, query=2, k=10, config=small, resolution=11,
                                         static_queries=2)
    assert [c.name for c in fixed.static_controls] == ["query", "action"]


def test_pjm_audit_explorer_static_twin():
    from cbdt.book.experiments import pjm
    from cbdt.datasets import pjm_bidding as pb

    rng = np.random.default_rng(7)
    n = 24 + 200 + 60
    t = np.arange(n)
    mw = 30_000 + 6_000 * np.sin(2 * np.pi * (t - 6) / 24) + 800 * rng.standard_normal(n)
    idx = pd.date_range("2017-01-01 01:00", periods=n, freq="h", name="Datetime")
    problem = pb.make_bidding_problem(pd.Series(mw, index=idx, name="load_mw"), n_train=200,
                                      n_test=60, window=24, seed=3)
    run = pjm.build_run(problem, pjm.PJMConfig(hidden=(8, 8), epochs=20, n_geometry=5, top=3),
                        seed=0)
    box = widgets.pjm_audit_explorer(run, index=5, static_hours=3)
    assert box.children[0].value == 5

    def set_live(v):
        box.children[0].value = v["index"]

    frames = check_static_twin(box, set_live)
    assert box.static_controls[0].values == (5, 30, 59)  # 5 replaces the nearest pick, 0
    assert len(frames) == 3
    assert f"test hour 59 ({problem.times_test[59]:%Y-%m-%d %H:%M})" in frames[-1]["text"]
    assert all(png_width(f["png"]) <= 1000 for f in frames)
    with pytest.raises(ValueError, match="index"):
        widgets.pjm_audit_explorer(run, index=60)


def test_static_twin_can_be_skipped_in_a_live_session(memory, monkeypatch):
    """CBDT_STATIC_TWIN=0: the live widget only, no precomputed frames rendered."""
    monkeypatch.setenv("CBDT_STATIC_TWIN", "0")
    box = widgets.cbdt_explorer(memory, bandwidth=1.0, grid_size=10,
                                static_bandwidths=(2.0,), static_points=2)
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "text/html" not in bundle and box._frames is None
    monkeypatch.setenv("CBDT_STATIC_TWIN", "1")
    assert "text/html" in box._repr_mimebundle_()
