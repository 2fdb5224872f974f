"""Local Sphinx extension: make the per-page <script> list of the offline book error-free.

1. Drop duplicate script entries. With Sphinx 7.4, sphinx-thebe's inline configuration
   (``const THEBE_JS_URL = ...``) can reach a page twice, and the second copy raises
   ``SyntaxError: Identifier 'THEBE_JS_URL' has already been declared``. Two entries are
   duplicates when they load the same file, or are inline scripts with the same body; the
   first one (in the order Sphinx emits them) is kept.

On pages that embed Jupyter widgets (myst-nb adds ``widgets/require.js`` and
``widgets/embed-amd.js``, see ``nb_ipywidgets_js`` in _config.yml):

2. Tell require.js where the widget manager lives. ``embed-amd.js`` defines the AMD modules
   ``@jupyter-widgets/html-manager`` (+ ``/dist/libembed-amd``), ``/base`` and ``/controls``,
   and each loads its fonts (Font Awesome, Lato) relative to its module URL, which require.js
   would resolve against the *page's* folder (``notebooks/@jupyter-widgets/...``, a 404). An
   inline ``require.config`` maps these modules into ``_static/widgets/``, where
   scripts/vendor_assets.sh put the fonts.

3. Point the widget manager's module "CDN" at the book. The standard widget modules
   (@jupyter-widgets/base, controls, output) are bundled in ``embed-amd.js``; any other widget
   library would be loaded from ``<data-jupyter-widgets-cdn><package>@<version>/dist/index.js``.
   The attribute is a fixed string in _config.yml, so it is rewritten to the page-relative path
   of ``_static/widgets/cdn/``. No page ever asks a public CDN for code.

4. Load ``cbdt-widgets-mathjax-shim.js`` (deferred, right after MathJax): the widget manager
   typesets labels with the MathJax 2 API ``MathJax.Hub.Queue``, which MathJax 3 lacks.

5. A page whose notebook stores widget state but renders no widget view (every explorer shows
   its static twin, ``nb_mime_priority_overrides`` in _config.yml) gets none of the above: no
   ``require.js``, ``embed-amd.js`` (4.4 MB), widget state or shim (issue 32).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.builders.html._assets import _JavaScript
from sphinx.config import Config

WIDGET_MANAGER = "widgets/embed-amd.js"
CDN_ATTR = "data-jupyter-widgets-cdn"
CDN_DIR = "_static/widgets/cdn/"
WIDGETS_DIR = "_static/widgets"
AMD_MODULE_DIR = "@jupyter-widgets/html-manager/dist"
# named AMD modules defined in embed-amd.js; webpack derives each one's public path (where it
# loads fonts from) from the module's require.js URL
AMD_MODULES = (
    "@jupyter-widgets/html-manager",
    "@jupyter-widgets/base",
    "@jupyter-widgets/controls",
)
SHIM = "cbdt-widgets-mathjax-shim.js"
WIDGET_FILES = (WIDGET_MANAGER, "widgets/require.js")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC = Path(__file__).parent / "static"


def _key(js: Any) -> tuple[str, str]:
    if isinstance(js, _JavaScript):
        if js.filename:
            return ("file", str(js.filename))
        return ("inline", js.attributes.get("body", ""))
    return ("file", str(js))  # plain strings (very old extensions)


def _is(js: Any, suffix: str) -> bool:
    return (
        isinstance(js, _JavaScript)
        and bool(js.filename)
        and str(js.filename).split("?")[0].endswith(suffix)
    )


def _is_widget_asset(js: Any) -> bool:
    if any(_is(js, name) for name in WIDGET_FILES):
        return True
    return isinstance(js, _JavaScript) and js.attributes.get("type") == WIDGET_STATE


def _clean_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    files = context.get("script_files")
    if not files:
        return
    pathto = context.get("pathto")
    mathjax_path = str(app.config.mathjax_path or "")
    has_widgets = any(_is(js, WIDGET_MANAGER) for js in files)
    if has_widgets and WIDGET_VIEW not in str(context.get("body", "")):
        # 5. the notebook stores widget state, but the page renders no widget view (the
        # explorers show their static twin): no widget manager, require.js, state or shim
        files[:] = [js for js in files if not _is_widget_asset(js)]
        has_widgets = False

    seen: set[tuple[str, str]] = set()
    cleaned: list[Any] = []
    # Sphinx emits scripts sorted by priority (a stable sort); dedupe in that order
    for js in sorted(files, key=lambda j: getattr(j, "priority", 500)):
        key = _key(js)
        if key in seen:
            continue
        seen.add(key)
        if has_widgets and pathto is not None and _is(js, WIDGET_MANAGER):
            widgets = pathto(WIDGETS_DIR, 1)
            # every AMD module of embed-amd.js resolves into _static/widgets/
            paths = {name: f"{widgets}/{name.rsplit('/', 1)[1]}" for name in AMD_MODULES}
            paths[AMD_MODULE_DIR] = widgets
            cleaned.append(
                _JavaScript(
                    None,
                    priority=js.priority,
                    body=f"require.config({{paths: {json.dumps(paths)}}});",
                )
            )
            if CDN_ATTR in js.attributes:
                attrs = dict(js.attributes)
                attrs[CDN_ATTR] = pathto(CDN_DIR, 1)
                js = _JavaScript(js.filename, priority=js.priority, **attrs)
            cleaned.append(js)
            continue
        cleaned.append(js)
        if has_widgets and mathjax_path and _is(js, mathjax_path):
            cleaned.append(_JavaScript(f"_static/{SHIM}", priority=js.priority, defer="defer"))
    files[:] = cleaned


def _add_static_path(app: Sphinx, config: Config) -> None:
    path = str(STATIC)
    if path not in config.html_static_path:
        config.html_static_path.append(path)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", _add_static_path)
    # run after every other html-page-context handler (myst-nb adds widget scripts there)
    app.connect("html-page-context", _clean_scripts, priority=999)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
