"""Local Sphinx extension: an accessible (WCAG 2.1 AA), phone-ready book (issue 32).

The browser test (``tests/test_browser.py``) runs axe-core on every page of both editions in the
light and the dark theme and at 390 px; this module fixes at build time what the book and its
themes write, so that the HTML is right before any script runs:

1. **Alt text.** Every image of a figure gets an ``alt``: the one its notebook cell gives
   (``mystnb: image: alt:`` in the cell metadata, ``:alt:`` of ``{glue:figure}``), else the
   figure's caption as plain text (TeX commands written as words: ``\\alpha`` -> ``alpha``).
   Without it, docutils writes the image's file path (``../_images/7adb61...png``) as alt text.
2. **The references page.** docutils writes ``role="doc-biblioentry"`` (deprecated in ARIA 1.3)
   on each citation inside a ``role="list"``, whose children must be list items: they become
   ``role="listitem"``.
3. **Hidden cell outputs.** myst-nb labels the ``<summary>`` of a hidden cell "Toggle hidden
   content" while it shows "Show code cell output": the visible text must be part of the
   accessible name (WCAG 2.5.3), so the ``aria-label`` goes and the visible text names it.
4. **The left menu.** pydata-sphinx-theme's expand toggles are ``<summary>`` elements with only
   an icon; each gets ``aria-label="Sections of <chapter>"``.
5. **Claims tables** (header ``claim | paper | book | status``) get the class ``cbdt-claims``
   and explicit table roles, so ``cbdt-a11y.css`` can reflow them into one block per claim on a
   phone (the status stays on screen) without losing their table semantics.
6. **Explorer frames** (``cbdt.book.explorer``) store every frame as a base64 PNG inside the
   page (1.1-1.3 MB on ch. 01 and 06). Each is written once to ``_images/`` (named by its
   sha256) and loaded with ``loading="lazy"``: a hidden frame is fetched only when shown.

Templates in ``templates/`` (searched before the themes' ``components/`` folders) override
three of pydata-sphinx-theme 0.17.1: the search button and the colour-mode button (their
``aria-label`` did not contain their visible text; WCAG 2.5.3), and ``webpack-macros.html``
without ``fontawesome.js`` (1.49 MB on every page; the theme's CSS already draws the same icons
from the Font Awesome web fonts it ships).
``static/cbdt-a11y.css`` holds the book's CSS for contrast and narrow screens.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config

HERE = Path(__file__).parent
STATIC = HERE / "static"
TEMPLATES = HERE / "templates"
CSS = "cbdt-a11y.css"

_TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
_TEX_NOISE = re.compile(r"[\\{}$^]")
_SPACES = re.compile(r"\s+")


def plain_text(tex_or_text: str) -> str:
    """A caption's text as a screen reader should read it: TeX commands as their names."""
    text = _TEX_COMMAND.sub(lambda m: " " + m.group(1) + " ", tex_or_text)
    text = _TEX_NOISE.sub(" ", text).replace("_", " ")
    text = re.sub(r"\s+([,.;:)])", r"\1", text)
    text = re.sub(r"\(\s+", "(", text)
    return _SPACES.sub(" ", text).strip()


def _image_alt(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Give every image of a figure an alt text (explicit, else from the caption)."""
    for image in doctree.findall(nodes.image):
        alt = image.get("alt", "")
        uri = image.get("uri", "")
        if alt and alt != uri and not alt.endswith(Path(uri).name):
            continue
        figure = image.parent
        while figure is not None and not isinstance(figure, nodes.figure):
            figure = figure.parent
        if figure is None:
            continue
        captions = list(figure.findall(nodes.caption))
        if captions:
            image["alt"] = plain_text(captions[0].astext())


_BIBLIOENTRY = 'role="doc-biblioentry"'
_HIDDEN_SUMMARY = '<summary aria-label="Toggle hidden content">'
_TABLE = re.compile(r"<table(?P<attrs>[^>]*)>(?P<inner>.*?)</table>", re.S)
_TAG = re.compile(r"<[^>]+>")
_HEADER_CELL = re.compile(r"<th[^>]*>(.*?)</th>", re.S)
CLAIMS_HEADER = ("claim", "paper", "book", "status")
_FRAME_IMG = re.compile(
    r'(<div class="cbdt-explorer-frame"[^>]*>\s*<img )src="data:image/(png|jpeg);base64,'
    r'([A-Za-z0-9+/=]+)"'
)


def _claims_table(match: re.Match[str]) -> str:
    inner = match.group("inner")
    thead = inner.split("</thead>", 1)[0] if "</thead>" in inner else ""
    heads = [
        html.unescape(_TAG.sub("", h)).strip().lower() for h in _HEADER_CELL.findall(thead)
    ]
    if tuple(heads[-4:]) != CLAIMS_HEADER:
        return match.group(0)
    attrs = match.group("attrs")
    if 'class="' in attrs:
        attrs = attrs.replace('class="', 'class="cbdt-claims ', 1)
    else:
        attrs += ' class="cbdt-claims"'
    inner = (
        inner.replace("<thead>", '<thead role="rowgroup">')
        .replace("<tbody>", '<tbody role="rowgroup">')
        .replace("<tr ", '<tr role="row" ')
        .replace("<tr>", '<tr role="row">')
        .replace("<th ", '<th role="columnheader" ')
        .replace("<td>", '<td role="cell">')
        .replace("<td ", '<td role="cell" ')
    )
    return f'<table role="table"{attrs}>{inner}</table>'


def _frames_to_files(app: Sphinx, pagename: str, body: str, pathto: Any) -> str:
    """Explorer frames out of the page into _images/, loaded lazily."""
    images = Path(app.builder.outdir) / "_images"

    def write(match: re.Match[str]) -> str:
        kind, data = match.group(2), match.group(3)
        raw = base64.b64decode(data)
        name = f"{hashlib.sha256(raw).hexdigest()}.{'png' if kind == 'png' else 'jpg'}"
        target = images / name
        if not target.exists():
            images.mkdir(parents=True, exist_ok=True)
            target.write_bytes(raw)
        return f'{match.group(1)}loading="lazy" src="{pathto("_images/" + name, 1)}"'

    return _FRAME_IMG.sub(write, body)


def _label_nav_toggles(toctree: Any) -> Any:
    """``aria-label="Sections of <title>"`` on each expand toggle of the left menu."""
    if isinstance(toctree, str):
        return toctree
    for summary in toctree.select("li > details > summary"):
        link = summary.parent.parent.find("a", recursive=False)
        if link is not None and not summary.get("aria-label"):
            summary["aria-label"] = "Sections of " + " ".join(link.get_text().split())
    return toctree


def _page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    body = context.get("body")
    if isinstance(body, str) and body:
        body = body.replace(_BIBLIOENTRY, 'role="listitem"')
        body = body.replace(_HIDDEN_SUMMARY, "<summary>")
        body = _TABLE.sub(_claims_table, body)
        if "cbdt-explorer-frame" in body and "pathto" in context:
            body = _frames_to_files(app, pagename, body, context["pathto"])
        context["body"] = body
    generate = context.get("generate_toctree_html")
    if callable(generate) and not getattr(generate, "_cbdt_labelled", False):

        def labelled(*args: Any, **kwargs: Any) -> Any:
            return _label_nav_toggles(generate(*args, **kwargs))

        labelled._cbdt_labelled = True  # type: ignore[attr-defined]
        context["generate_toctree_html"] = labelled


def _config_inited(app: Sphinx, config: Config) -> None:
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.insert(0, str(TEMPLATES))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", _config_inited)
    app.add_css_file(CSS, priority=900)
    app.connect("doctree-resolved", _image_alt)
    # after pydata-sphinx-theme (adds generate_toctree_html) and myst-nb
    app.connect("html-page-context", _page_context, priority=1000)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
