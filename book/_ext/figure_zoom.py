"""Click-to-zoom for the book's figures (issue 10).

Adds one inline ``<script>`` to every HTML page (no external asset: the book works offline,
and nothing goes under a source ``_static/`` folder). The script styles every image in the
article (``article.bd-article img``: notebook outputs, ``figure`` directives, widget outputs
drawn later) with a zoom-in cursor; a click opens the image enlarged to the window (at most twice, never below, its
natural size) in a full-window overlay (``#cbdt-zoom-overlay``), scrollable when the image is larger than the
window. A click anywhere on the overlay or the Escape key closes it. The overlay exists only
while it is open (an ``<img>`` without a source would count as a broken image). A click on an image that
Sphinx wrapped in a link to the image file opens the overlay instead of following the link.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

_CSS = """
article.bd-article img { cursor: zoom-in; }
#cbdt-zoom-overlay { position: fixed; inset: 0; z-index: 10000; display: none; overflow: auto;
  background: rgba(0, 0, 0, 0.82); cursor: zoom-out; padding: 2vh 2vw; box-sizing: border-box; }
#cbdt-zoom-overlay.cbdt-zoom-open { display: flex; }
#cbdt-zoom-overlay img { margin: auto; max-width: none; max-height: none; background: #fff;
  box-shadow: 0 0 24px rgba(0, 0, 0, 0.6); cursor: zoom-out; }
"""

_JS = """
(function () {
  "use strict";
  function addStyle() {
    if (document.getElementById("cbdt-zoom-style")) { return; }
    var style = document.createElement("style");
    style.id = "cbdt-zoom-style";
    style.textContent = %(css)s;
    document.head.appendChild(style);
  }
  function overlay() {
    var box = document.getElementById("cbdt-zoom-overlay");
    if (box) { return box; }
    addStyle();
    box = document.createElement("div");
    box.id = "cbdt-zoom-overlay";
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-modal", "true");
    box.setAttribute("aria-label", "figure at full size; click or press Escape to close");
    box.appendChild(document.createElement("img"));
    box.addEventListener("click", close);
    document.body.appendChild(box);
    return box;
  }
  function close() {
    var box = document.getElementById("cbdt-zoom-overlay");
    if (box) { box.remove(); }
  }
  function zoomWidth(n) {
    return Math.max(n, Math.min(2 * n, Math.floor(0.96 * window.innerWidth) - 2));
  }
  function open(img) {
    var box = overlay(), big = box.firstChild;
    big.src = img.currentSrc || img.src;
    big.alt = img.alt || "";
    // enlarge to the window (at most twice the natural size); never below the natural size
    var n = img.naturalWidth;
    big.style.width = n ? zoomWidth(n) + "px" : "auto";
    box.classList.add("cbdt-zoom-open");
  }
  document.addEventListener("click", function (event) {
    var img = event.target;
    if (!img || img.tagName !== "IMG" || !img.closest("article.bd-article")) { return; }
    if (img.closest("#cbdt-zoom-overlay")) { return; }
    event.preventDefault();
    event.stopPropagation();
    open(img);
  }, true);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { close(); }
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addStyle);
  } else {
    addStyle();
  }
})();
"""


def _script() -> str:
    """The inline script, with the CSS embedded as a JavaScript string literal."""
    import json

    return _JS % {"css": json.dumps(" ".join(_CSS.split()))}


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the inline zoom script on every HTML page.

    Parameters
    ----------
    app : sphinx.application.Sphinx
        The Sphinx application.

    Returns
    -------
    dict
        Extension metadata (parallel safe).
    """
    app.add_js_file(None, body=_script())
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
