"""Browser test of the built book: every chapter page renders offline, without errors.

Drives Debian's Chromium (``/usr/bin/chromium``) with Playwright against ``_build/html``
served by :mod:`http.server` on 127.0.0.1. For every page of ``_toc.yml`` it checks that

- the math was typeset by MathJax (``mjx-container`` elements, no TeX errors, no raw ``$$``
  or ``\\(`` left in the text),
- every ``<img>`` loaded (``naturalWidth > 0``),
- pages whose notebook stores widget views show widgets rendered by the widget manager,
- there is no JavaScript console error, no uncaught page error, no failed request and no
  HTTP error,
- no request leaves 127.0.0.1 (the book is fully offline).

It also checks that the equation labels ``eq-1`` ... ``eq-22`` carry the paper's numbers.

Run: ``make browser`` (builds the book strictly first), or
``pytest tests/test_browser.py -m browser``. Set ``CBDT_BOOK_HTML`` to test another build
folder, and ``CBDT_SCREENSHOTS=DIR`` to save a full-page PNG of every page.
The module is skipped when Chromium, Playwright or the built book is missing.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[1]
HTML = Path(os.environ.get("CBDT_BOOK_HTML", REPO / "_build" / "html")).resolve()
# the book's sources belong to the build folder <root>/_build/html
ROOT = HTML.parents[1]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
N_PAPER_EQUATIONS = 22

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is not installed (apt-get install -y chromium); browser test skipped.",
        allow_module_level=True,
    )
if not (HTML / "index.html").exists():
    pytest.skip(
        f"the built book is missing ({HTML}/index.html); run `make book-strict` first.",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
yaml = pytest.importorskip("yaml")


# ----------------------------------------------------------------------------- pages


def _toc_files() -> list[str]:
    """Document names in _toc.yml order (root first), e.g. 'book/intro', 'notebooks/01_x'."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            for key in ("chapters", "sections", "parts"):
                walk(entry.get(key, []))

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    return [str(Path(f).with_suffix("")) if Path(f).suffix else f for f in files]


def _stored_widget_views(docname: str) -> int:
    """Number of stored widget views in the page's notebook (0 for Markdown pages)."""
    nb = ROOT / f"{docname}.ipynb"
    if not nb.exists():
        return 0
    data = json.loads(nb.read_text(encoding="utf-8"))
    state = (
        data.get("metadata", {})
        .get("widgets", {})
        .get("application/vnd.jupyter.widget-state+json", {})
        .get("state")
    )
    if not state:
        return 0  # myst-nb renders views only when the notebook stores the widget state
    views = 0
    for cell in data.get("cells", []):
        for out in cell.get("outputs", []):
            if "application/vnd.jupyter.widget-view+json" in out.get("data", {}):
                views += 1
    return views


PAGES = _toc_files() if (ROOT / "_toc.yml").exists() else []


# ----------------------------------------------------------------------------- fixtures


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


# ----------------------------------------------------------------------------- helpers

_RAW_MATH_JS = r"""
() => {
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'MJX-CONTAINER', 'KBD']);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const raw = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    let el = node.parentElement, inside = false;
    while (el) { if (skip.has(el.tagName)) { inside = true; break; } el = el.parentElement; }
    if (inside) continue;
    const t = node.textContent;
    if (t.includes('$$') || t.includes('\\(') || t.includes('\\[')) raw.push(t.trim().slice(0, 80));
  }
  return raw;
}
"""

_IMAGES_JS = """
async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r);
  })));
  return imgs.map(i => ({src: i.currentSrc || i.src, w: i.naturalWidth}));
}
"""


def _is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    return parts.scheme in ("http", "https") and parts.hostname == "127.0.0.1"


# ----------------------------------------------------------------------------- tests


def test_toc_pages_are_built() -> None:
    assert PAGES, "no pages found in _toc.yml"
    missing = [d for d in PAGES if not (HTML / f"{d}.html").exists()]
    assert not missing, f"pages of _toc.yml missing from the build: {missing}"


@pytest.mark.parametrize("docname", PAGES)
def test_page_renders_offline(browser, base_url: str, docname: str) -> None:
    html_file = HTML / f"{docname}.html"
    if not html_file.exists():
        pytest.fail(f"{html_file} was not built")
    source_html = html_file.read_text(encoding="utf-8")
    expects_math = 'class="math' in source_html
    n_views = _stored_widget_views(docname)

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    console_errors: list[str] = []
    page_errors: list[str] = []
    failed: list[str] = []
    http_errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})"))
    page.on(
        "response",
        lambda r: http_errors.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    try:
        page.goto(base_url + f"{docname}.html", wait_until="load")
        page.wait_for_load_state("networkidle")

        # --- math
        if expects_math:
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=20_000,
            )
            page.evaluate("() => MathJax.startup.promise.then(() => true)")
            n_math = page.locator(".math").count()
            n_mjx = page.locator("mjx-container").count()
            untypeset = page.evaluate(
                "() => Array.from(document.querySelectorAll('.math'))"
                ".filter(e => !e.querySelector('mjx-container')).length"
            )
            assert n_mjx > 0, f"{docname}: MathJax rendered no math"
            assert untypeset == 0, f"{docname}: {untypeset} of {n_math} math elements not typeset"
            n_err = page.locator("mjx-merror").count()
            assert n_err == 0, f"{docname}: {n_err} MathJax TeX errors"
        raw = page.evaluate(_RAW_MATH_JS)
        assert not raw, f"{docname}: unrendered TeX in the page text: {raw[:5]}"

        # --- images
        images = page.evaluate(_IMAGES_JS)
        broken = [i["src"] for i in images if i["w"] == 0]
        assert not broken, f"{docname}: images that did not load: {broken}"

        # --- widgets
        if n_views:
            page.wait_for_selector(".jupyter-widgets", state="attached", timeout=20_000)
            page.wait_for_load_state("networkidle")
            rendered = page.evaluate(
                "() => Array.from(document.querySelectorAll("
                "'script[type=\"application/vnd.jupyter.widget-view+json\"]'))"
                ".filter(s => { const v = s.previousElementSibling;"  # html-manager inserts
                " return v && v.classList.contains('widget-subarea')"  # <div class=widget-subarea>
                " && v.querySelector('.jupyter-widgets') !== null; }).length"
            )
            assert rendered >= n_views, (
                f"{docname}: {rendered} of {n_views} stored widget views were rendered"
            )
            raw_labels = page.evaluate(
                "() => Array.from(document.querySelectorAll('.jupyter-widgets .widget-label'))"
                ".map(l => l.textContent).filter(t => t.includes('$'))"
            )
            assert not raw_labels, f"{docname}: untypeset LaTeX in widget labels: {raw_labels}"
            n_error_widgets = page.locator(".jupyter-widgets.widget-error, .widget-error").count()
            assert n_error_widgets == 0, f"{docname}: {n_error_widgets} widgets failed to load"
            assert (
                page.locator(".widget-slider, .widget-hslider").count() > 0
                or page.locator(
                    ".jupyter-widgets .widget-label, .jupyter-widgets input, .jupyter-widgets button"
                ).count()
                > 0
            ), f"{docname}: widget views are empty"

        if os.environ.get("CBDT_SCREENSHOTS"):
            out = Path(os.environ["CBDT_SCREENSHOTS"])
            out.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out / (docname.replace("/", "__") + ".png")), full_page=True)
    finally:
        context.close()

    # --- errors and network
    assert not page_errors, f"{docname}: uncaught page errors: {page_errors}"
    assert not console_errors, f"{docname}: console errors: {console_errors}"
    assert not failed, f"{docname}: failed requests: {failed}"
    assert not http_errors, f"{docname}: HTTP errors: {http_errors}"
    external = sorted({u for u in requests if not _is_local(u)})
    assert not external, f"{docname}: requests left 127.0.0.1: {external}"


def test_equation_labels_carry_the_papers_numbers() -> None:
    """eq-1 ... eq-22 are defined once, on one page, and numbered (1) ... (22)."""
    found: dict[str, list[tuple[str, str]]] = {}
    pattern = re.compile(r'id="equation-(eq-\d+)">\s*<span class="eqno">\(([^)<]*)\)')
    for docname in PAGES:
        path = HTML / f"{docname}.html"
        if path.exists():
            for label, number in pattern.findall(path.read_text(encoding="utf-8")):
                found.setdefault(label, []).append((docname, number))
    for n in range(1, N_PAPER_EQUATIONS + 1):
        where = found.get(f"eq-{n}", [])
        assert len(where) == 1, f"eq-{n} is defined {len(where)} times: {where}"
        assert where[0][1] == str(n), f"eq-{n} is numbered ({where[0][1]}) on {where[0][0]}"
