"""Static "frame explorers": precomputed states of an explorer, switched by plain HTML controls.

A live explorer (:mod:`cbdt.book.widgets`) needs a Python kernel: every move of a slider re-runs
Python. The built HTML book has no kernel, so each explorer also carries a *static* twin built
here: a small grid of control values (a few values per control), one rendered frame per grid
point (the figure as an inline PNG and the HTML text the live explorer shows there) and native
``<input type="range">`` / ``<select>`` controls with a tiny inline script that shows the frame
of the chosen grid point. The page needs no external JavaScript and works offline.

The explorer object displays both: the live widget view (what Jupyter shows) and this static
HTML (``text/html``, what the book shows; see ``nb_mime_priority_overrides`` in ``_config.yml``).

Nothing here needs ipywidgets; :func:`static_explorer_html` only formats what it is given.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cbdt.exceptions import InputError

__all__ = [
    "Control",
    "Frame",
    "MAX_FRAMES",
    "build_frames",
    "figure_png",
    "grid_points",
    "static_explorer_html",
]

#: Upper bound on the number of grid points (frames) of one static explorer.
MAX_FRAMES = 160


@dataclass(frozen=True)
class Control:
    """One control of a static explorer: a name, a label and its grid of values.

    Parameters
    ----------
    name : str
        Key of the value in the dict passed to the frame function.
    label : str
        Visible label of the control.
    values : sequence
        Grid values, in the order the control steps through them (at least one).
    labels : sequence of str, optional
        Readout text of each value; default ``format(v, fmt)``.
    kind : {"range", "select"}, default="range"
        ``<input type="range">`` with a readout, or a ``<select>`` listing ``labels``.
    start : int, default=0
        Index of the value shown first.
    fmt : str, default="g"
        Format spec of the default labels.
    """

    name: str
    label: str
    values: tuple[Any, ...]
    labels: tuple[str, ...] = ()
    kind: str = "range"
    start: int = 0
    fmt: str = "g"

    def __post_init__(self) -> None:
        values = tuple(self.values)
        if not values:
            raise InputError(f"control {self.name!r} has no values")
        if self.kind not in ("range", "select"):
            raise InputError(f"control {self.name!r}: kind must be 'range' or 'select'")
        labels = tuple(self.labels) or tuple(format(v, self.fmt) for v in values)
        if len(labels) != len(values):
            raise InputError(f"control {self.name!r}: {len(labels)} labels for {len(values)} values")
        if not 0 <= self.start < len(values):
            raise InputError(f"control {self.name!r}: start {self.start} out of range")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "labels", tuple(str(s) for s in labels))


@dataclass(frozen=True)
class Frame:
    """One precomputed state: the control values, an optional PNG and the HTML text shown."""

    values: dict[str, Any]
    png: bytes | None
    html: str
    extra: dict[str, Any] = field(default_factory=dict)


def grid_points(controls: Sequence[Control]) -> list[dict[str, Any]]:
    """All grid points, row-major (the last control varies fastest).

    Raises
    ------
    ValueError
        If the grid has more than :data:`MAX_FRAMES` points or two controls share a name.
    """
    names = [c.name for c in controls]
    if len(set(names)) != len(names):
        raise InputError(f"control names must be unique: {names}")
    n = 1
    for c in controls:
        n *= len(c.values)
    if n > MAX_FRAMES:
        raise InputError(f"{n} grid points exceed MAX_FRAMES = {MAX_FRAMES}; use fewer values")
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(c.values for c in controls))
    ]


def figure_png(
    fig: Any, dpi: float = 80.0, colors: int | None = 128, max_error: int = 32
) -> bytes:
    """PNG bytes of a Matplotlib figure, quantised to a palette of ``colors`` entries if faithful.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    dpi : float, default=80
        Resolution; the natural width in pixels is ``fig width (in) * dpi``.
    colors : int or None, default=128
        Palette size (Pillow's maximum-coverage quantisation, no dithering); ``None`` keeps the
        full-colour image. A palette PNG of a plot is several times smaller.
    max_error : int, default=32
        Largest allowed per-channel difference (0-255) between any pixel of the palette image
        and the full-colour one. If ``colors`` entries exceed it (a rare colour, such as one
        marker class, would be merged into another), 256 entries are tried, then full colour.

    Returns
    -------
    bytes
    """
    if colors is not None and not 2 <= int(colors) <= 256:
        raise InputError(f"colors must lie in 2 .. 256 or be None, got {colors}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    if colors is None:
        return buf.getvalue()
    from PIL import Image

    buf.seek(0)
    img = Image.open(buf).convert("RGB")
    rgb = np.asarray(img, dtype=np.int16)
    for n in dict.fromkeys((int(colors), 256)):
        pal = img.quantize(colors=n, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
        err = np.abs(np.asarray(pal.convert("RGB"), dtype=np.int16) - rgb).max()
        if err <= max_error:
            out = io.BytesIO()
            pal.save(out, format="PNG", optimize=True)
            return out.getvalue()
    return buf.getvalue()


def build_frames(
    controls: Sequence[Control],
    frame: Callable[[dict[str, Any]], tuple[Any, str]],
    *,
    dpi: float = 80.0,
    colors: int | None = 128,
    max_width_px: float | None = 1000.0,
) -> list[Frame]:
    """Render every grid point with ``frame(values) -> (figure or None, html)``.

    Each figure is converted with :func:`figure_png` and closed. ``dpi`` is lowered for a
    figure wider than ``max_width_px`` pixels at ``dpi``, so that the book's article column
    (688 CSS px at a 1280 px window) shows it at no less than 1/1.5 of its natural size.
    """
    import matplotlib.pyplot as plt

    frames = []
    for values in grid_points(controls):
        fig, text = frame(dict(values))
        png = None
        if fig is not None:
            res = float(dpi)
            if max_width_px is not None:
                res = min(res, float(max_width_px) / float(fig.get_figwidth()))
            png = figure_png(fig, dpi=res, colors=colors)
            plt.close(fig)
        frames.append(Frame(values=values, png=png, html=str(text)))
    return frames


_SCRIPT = """<script>(function(){
var r=document.getElementById(%(uid)s);if(!r)return;
var c=r.querySelectorAll("[data-cbdt-control]"),f=r.querySelectorAll("[data-cbdt-frame]");
function u(){var i=0;for(var k=0;k<c.length;k++){var e=c[k],n=+e.getAttribute("data-n"),
j=e.tagName==="SELECT"?e.selectedIndex:Math.round(+e.value);j=Math.max(0,Math.min(n-1,j));
i=i*n+j;var t=JSON.parse(e.getAttribute("data-labels"))[j],
o=r.querySelector('output[for="'+e.id+'"]');if(o)o.textContent=t;
if(e.tagName!=="SELECT")e.setAttribute("aria-valuetext",t);}
for(var k=0;k<f.length;k++){f[k].hidden=(k!==i);}r.setAttribute("data-frame",i);}
for(var k=0;k<c.length;k++){c[k].addEventListener("input",u);c[k].addEventListener("change",u);}
u();})();</script>"""

_STYLE = (
    "<style>.cbdt-explorer{margin:.5em 0}.cbdt-explorer-controls{display:grid;"
    "grid-template-columns:max-content minmax(8em,22em) max-content;gap:.3em .8em;"
    "align-items:center;margin-bottom:.6em}.cbdt-explorer-controls output{"
    "font-variant-numeric:tabular-nums;min-width:6ch}.cbdt-explorer-frame img{"
    "max-width:100%;height:auto;display:block}.cbdt-explorer-note{font-size:.85em;"
    "opacity:.8;margin:.2em 0 .5em}</style>"
)


def static_explorer_html(
    controls: Sequence[Control],
    frames: Sequence[Frame],
    *,
    title: str,
    uid: str | None = None,
    note: str | None = None,
) -> str:
    """Self-contained HTML of a static explorer (no external resources).

    Parameters
    ----------
    controls : sequence of Control
    frames : sequence of Frame
        One per grid point, in the order of :func:`grid_points`.
    title : str
        Accessible name of the explorer (``aria-label`` of its group).
    uid : str, optional
        DOM id prefix; default a hash of the title, the grid and the frames' text, so the
        same explorer gives the same ids run after run and different explorers differ.
    note : str, optional
        A line shown above the controls (none by default: the chapter says what the static
        explorer holds, in a sentence that also reads right beside the live widget).

    Returns
    -------
    str
    """
    points = grid_points(controls)
    if len(frames) != len(points):
        raise InputError(f"{len(frames)} frames for a grid of {len(points)} points")
    for fr, pt in zip(frames, points, strict=True):
        if fr.values != pt:
            raise InputError(f"frame values {fr.values} do not match grid point {pt}")
    if uid is None:
        h = hashlib.sha1(title.encode())
        for c in controls:
            h.update(repr((c.name, c.labels)).encode())
        for fr in frames:
            h.update(fr.html.encode())
        uid = "cbdt-explorer-" + h.hexdigest()[:10]
    start = 0
    for c in controls:
        start = start * len(c.values) + c.start
    parts = [
        _STYLE,
        f'<div class="cbdt-explorer" id="{uid}" role="group" aria-label="{html.escape(title)}" '
        f'data-frame="{start}" data-n-frames="{len(frames)}">',
    ]
    if note:
        parts.append(f'<p class="cbdt-explorer-note">{html.escape(note)}</p>')
    parts.append('<div class="cbdt-explorer-controls">')
    for k, c in enumerate(controls):
        cid = f"{uid}-c{k}"
        labels = html.escape(json.dumps(list(c.labels), ensure_ascii=False))
        values = html.escape(json.dumps([_jsonable(v) for v in c.values], ensure_ascii=False))
        common = (f'id="{cid}" data-cbdt-control="{html.escape(c.name)}" data-n="{len(c.values)}" '
                  f'data-labels="{labels}" data-values="{values}"')
        parts.append(f'<label for="{cid}">{html.escape(c.label)}</label>')
        if c.kind == "range":
            parts.append(
                f'<input type="range" {common} min="0" max="{len(c.values) - 1}" step="1" '
                f'value="{c.start}" aria-valuetext="{html.escape(c.labels[c.start])}">'
            )
            parts.append(f'<output for="{cid}" aria-live="polite">'
                         f"{html.escape(c.labels[c.start])}</output>")
        else:
            opts = "".join(
                f'<option value="{j}"{" selected" if j == c.start else ""}>'
                f"{html.escape(lab)}</option>"
                for j, lab in enumerate(c.labels)
            )
            parts.append(f"<select {common}>{opts}</select><span></span>")
    parts.append("</div>")
    for i, fr in enumerate(frames):
        state = html.escape(json.dumps({k: _jsonable(v) for k, v in fr.values.items()}))
        hidden = "" if i == start else " hidden"
        parts.append(f'<div class="cbdt-explorer-frame" data-cbdt-frame="{i}" '
                     f'data-state="{state}"{hidden}>')
        if fr.png is not None:
            src = "data:image/png;base64," + base64.b64encode(fr.png).decode("ascii")
            alt = html.escape(f"{title}: " + ", ".join(
                f"{c.label} = {c.labels[c.values.index(fr.values[c.name])]}" for c in controls))
            parts.append(f'<img src="{src}" alt="{alt}">')
        parts.append(f'<div class="cbdt-explorer-text">{fr.html}</div></div>')
    parts.append("</div>")
    parts.append(_SCRIPT % {"uid": json.dumps(uid)})
    return "\n".join(parts)


def _jsonable(v: Any) -> Any:
    """Plain Python value of a grid value (NumPy scalars to int/float)."""
    if hasattr(v, "item"):
        return v.item()
    return v
