"""Browser test of the notebooks in JupyterLab: MyST renders, solutions are folded, explorers move.

Starts a real JupyterLab (the project's venv, jupyterlab-myst from the ``book`` extra) on
127.0.0.1 with a token, ``--allow-root`` and a temporary root folder holding copies of ch. 01 and
ch. 04 (nothing is written next to the real notebooks: no ``.ipynb_checkpoints``, no saved
notebook), and drives it with Debian's Chromium through Playwright. For each chapter it

- opens the notebook, runs *Run > Run All Cells* and waits until every code cell has run and the
  kernel is idle, with no traceback in any output;
- reads every rendered Markdown cell: no raw MyST left (``{eq}`...```, ``{term}``, ``{doc}``,
  ``:label:``, ``:class:``, a directive fence), no unresolved cross-reference (an equation,
  glossary term, statement or figure of the book; citations are keys by design, see
  ``scripts/lab_markup.py``), no TeX error, and references such as ``(9)`` resolved;
- checks that the learning-objectives admonition is rendered as one and that every exercise is
  there with its solution folded (a closed ``<details>`` whose body is hidden until its summary is
  clicked; the test opens one and closes it again);
- checks that no request left 127.0.0.1 (everything JupyterLab and jupyterlab-myst need is local).

In ch. 01 it also moves the bandwidth slider of the explorer (``cbdt.book.widgets.cbdt_explorer``)
and waits for the explorer's figure (the PNG its ``Output`` shows) to change.

Run: ``make lab-browser`` (part of ``make test``) or ``pytest tests/test_lab_browser.py -m browser``.
Set ``CBDT_LAB_SCREENSHOTS=DIR`` to save 1280 px screenshots of ch. 01 after Run All
(``lab_ch01_*.png``). Skipped when Chromium, Playwright, JupyterLab or jupyterlab-myst is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("01_cbdt_theory.ipynb", "04_audit_signals.ipynb")
TOKEN = "cbdt-lab-test"
VIEWPORT = {"width": 1280, "height": 900}
# generous: ch. 01 runs in about 50 s on 2 cores; a loaded CI machine may need more
RUN_TIMEOUT_S = 420

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium); lab test skipped.",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (the book extra)")
pytest.importorskip("jupyterlab_myst", reason="jupyterlab-myst is not installed (the book extra)")
nbformat = pytest.importorskip("nbformat")

# MyST that must never reach the reader as text
RAW = re.compile(r"\{(?:eq|term|doc|ref|numref|prf:ref|cite(?::\w+)?)\}`|:label:|:class:|:name:"
                 r"|(?:`{3,}|:{3,})\{[\w:-]+\}|\$\$|\\begin\{")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(folder: Path) -> None:
    """JupyterLab user settings for the test: every cell rendered, no news, no update check."""
    notebook = folder / "@jupyterlab" / "notebook-extension"
    notebook.mkdir(parents=True)
    # render all cells (the default windowing renders cells only near the viewport)
    (notebook / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    apputils = folder / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True)
    (apputils / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[str]:
    """A running JupyterLab on copies of the chapters; yields its base URL."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    (root / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS:
        shutil.copy(REPO / "notebooks" / name, root / "notebooks" / name)
    _settings(tmp / "settings")
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),  # the notebook trust database, among others
        "CBDT_OFFLINE": "1",
        # the live widgets only: the explorers' static twins (what the HTML book shows, tested
        # by nbval and tests/test_browser.py) cost ch. 01 about 40 s to render
        "CBDT_STATIC_TWIN": "0",
        # the kernel imports cbdt from this checkout (the copies live outside it)
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                      if p),
    }
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
           "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", "--ServerApp.allow_root=True",
           f"--ServerApp.root_dir={root}", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly"]
    log = open(tmp / "lab.log", "wb")  # noqa: SIM115 - closed below
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail("JupyterLab did not start:\n"
                                + (tmp / "lab.log").read_text(errors="replace")[-3000:])
                time.sleep(0.3)
        print(f"lab test: JupyterLab up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                               args=["--no-sandbox", "--disable-gpu",
                                     "--disable-background-networking"])
        yield b
        b.close()


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"

# every rendered markdown cell: its text and what needs a closer look
_READ_MARKDOWN = r"""
panel => Array.from(panel.querySelectorAll('.jp-MarkdownCell .myst')).map(m => ({
  text: m.innerText,
  unresolved: Array.from(m.querySelectorAll('[title$="Not Found"]'))
                .filter(e => e.getAttribute('title') !== 'Citation Not Found')
                .map(e => e.getAttribute('title') + ': ' + e.textContent),
  katexErrors: Array.from(m.querySelectorAll('.katex-error')).map(e => e.textContent),
  eqRefs: Array.from(m.querySelectorAll('a[href^="#eq-"]')).map(a => a.textContent),
  admonitions: Array.from(m.querySelectorAll('.myst-admonition'))
                 .map(a => a.innerText.split('\n')[0]),
  exercises: Array.from(m.querySelectorAll('.myst-exercise')).length,
}))
"""

# the exercise and solution boxes: jupyterlab-myst renders both as <details>
_READ_SOLUTIONS = r"""
panel => Array.from(panel.querySelectorAll('.jp-MarkdownCell .myst details')).map(d => {
  const s = d.querySelector('summary');
  const body = Array.from(d.children).filter(c => c.tagName !== 'SUMMARY');
  return {summary: s ? s.innerText : '', open: d.open,
          bodyVisible: body.some(c => c.checkVisibility()), bodyText: d.innerText};
})
"""


def _open(browser, base: str, name: str, requests: list[str]):
    """A new browser context on the notebook (JupyterLab loads while the caller goes on)."""
    context = browser.new_context(viewport=VIEWPORT)

    def route(r):
        requests.append(r.request.url)
        if urlsplit(r.request.url).hostname != "127.0.0.1":
            r.abort()
        else:
            r.continue_()

    context.route("**/*", route)
    page = context.new_page()
    page.goto(f"{base}/lab/tree/notebooks/{name}?reset&token={TOKEN}", wait_until="commit")
    return page


def _wait_until_open(page) -> None:
    """The notebook's Markdown rendered by jupyterlab-myst and its kernel idle."""
    page.wait_for_selector(f"{PANEL} .jp-MarkdownCell .myst", timeout=120_000)
    page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=120_000)


def _run_all(page) -> None:
    """Run > Run All Cells (the menu a student uses)."""
    page.click("#jp-MainMenu .lm-MenuBar-item:has-text('Run')")
    page.click(".lm-Menu-item[data-command='runmenu:run-all']")


def _wait_until_run(page, n_code: int) -> None:
    """Wait until every code cell has run (a number in its prompt) and the kernel is idle."""
    page.wait_for_function(
        """([panel, n]) => {
             const p = document.querySelector(panel);
             const prompts = Array.from(p.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
               .map(e => e.textContent.trim());
             const status = p.querySelector('.jp-Notebook-ExecutionIndicator')
               .getAttribute('data-status');
             return prompts.length === n && prompts.every(t => /^\\[\\d+\\]:$/.test(t))
               && status === 'idle';
           }""",
        arg=[PANEL, n_code], timeout=RUN_TIMEOUT_S * 1000, polling=500)
    outputs = page.eval_on_selector(PANEL, "p => p.querySelector('.jp-Notebook').innerText")
    assert "Traceback (most recent call last)" not in outputs


def _check_markdown(page, name: str, n_exercises: int) -> None:
    cells = page.eval_on_selector(PANEL, _READ_MARKDOWN)
    assert cells, f"{name}: no rendered Markdown cell"
    raw = [m.group(0) + " in: " + c["text"][max(0, m.start() - 40):m.end() + 40]
           for c in cells for m in RAW.finditer(c["text"])]
    assert not raw, f"{name}: raw MyST in the rendered cells: {raw[:5]}"
    unresolved = [u for c in cells for u in c["unresolved"]]
    assert not unresolved, f"{name}: unresolved references: {unresolved}"
    errors = [e for c in cells for e in c["katexErrors"]]
    assert not errors, f"{name}: TeX errors: {errors}"
    eq_refs = [r for c in cells for r in c["eqRefs"]]
    assert eq_refs and all(re.fullmatch(r"\(\d+\)", r) for r in eq_refs), eq_refs
    admonitions = [a for c in cells for a in c["admonitions"]]
    assert "Learning objectives" in admonitions, admonitions

    boxes = page.eval_on_selector(PANEL, _READ_SOLUTIONS)
    solutions = [b for b in boxes if b["summary"].startswith("Solution")]
    exercises = sum(c["exercises"] for c in cells) - len(solutions)
    assert exercises == n_exercises and len(solutions) == n_exercises, (exercises, solutions)
    shown = [b["summary"] for b in solutions if b["open"] or b["bodyVisible"]]
    assert not shown, f"{name}: solutions not folded: {shown}"
    # a click unfolds a solution (and a second click folds it again)
    summary = page.locator(f"{PANEL} .jp-MarkdownCell .myst details summary",
                           has_text="Solution").first
    summary.click()
    page.wait_for_function(
        """panel => Array.from(document.querySelector(panel).querySelectorAll(
             '.jp-MarkdownCell .myst details')).some(d => d.open
             && d.querySelector('summary').innerText.startsWith('Solution'))""", arg=PANEL)
    summary.click()


def _counts(name: str) -> tuple[int, int]:
    """Code cells and exercises of the stored notebook."""
    nb = nbformat.read(REPO / "notebooks" / name, as_version=4)
    code = sum(c.cell_type == "code" for c in nb.cells)
    exercises = sum(len(re.findall(r"^(?:`{3,}|:{3,})\{exercise\}", c.source, re.M))
                    for c in nb.cells if c.cell_type == "markdown")
    return code, exercises


def _shoot(page, locator, path: Path) -> None:
    """A 1280 px screenshot of the JupyterLab window with ``locator`` scrolled to the top."""
    locator.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(400)
    page.screenshot(path=str(path))


@pytest.fixture(scope="module")
def ran(lab: str, browser) -> Iterator[dict[str, tuple[object, list[str]]]]:
    """Both chapters opened and run at once (two kernels: ch. 04 runs while ch. 01 does)."""
    t0 = time.monotonic()
    opened = {}
    for name in NOTEBOOKS:
        requests: list[str] = []
        opened[name] = (_open(browser, lab, name, requests), requests)
    for page, _ in opened.values():
        _wait_until_open(page)
    t1 = time.monotonic()
    for page, _ in opened.values():
        _run_all(page)
    for name, (page, _) in opened.items():
        _wait_until_run(page, _counts(name)[0])
    print(f"lab test: notebooks opened in {t1 - t0:.1f} s, run in {time.monotonic() - t1:.1f} s",
          file=sys.stderr)
    yield opened
    for page, _ in opened.values():
        page.context.close()


def _no_external(requests: list[str]) -> None:
    external = sorted({u for u in requests if urlsplit(u).hostname != "127.0.0.1"})
    assert not external, f"requests left 127.0.0.1: {external}"


def test_ch04_renders_runs_and_folds_solutions(ran) -> None:
    name = "04_audit_signals.ipynb"
    page, requests = ran[name]
    _check_markdown(page, name, _counts(name)[1])
    _no_external(requests)


def test_ch01_renders_runs_and_the_explorer_moves(ran) -> None:
    name = "01_cbdt_theory.ipynb"
    page, requests = ran[name]
    _check_markdown(page, name, _counts(name)[1])

    # the explorer: its sliders and the PNG of its Output widget
    explorer = page.locator(f"{PANEL} .jp-OutputArea-output .widget-vbox").filter(
        has=page.locator(".widget-output img")).first
    explorer.wait_for(timeout=60_000)
    image = explorer.locator(".widget-output img").first
    before = image.get_attribute("src")
    assert before and before.startswith("data:image/png")
    shots = os.environ.get("CBDT_LAB_SCREENSHOTS")
    if shots:
        folder = Path(shots)
        folder.mkdir(parents=True, exist_ok=True)
        panel = page.locator(PANEL)
        _shoot(page, panel.locator(".jp-MarkdownCell .myst-admonition").first,
               folder / "lab_ch01_objectives.png")
        _shoot(page, panel.locator(".jp-MarkdownCell", has_text="The support of action").first,
               folder / "lab_ch01_equation.png")
        _shoot(page, panel.locator(".jp-MarkdownCell .myst-exercise").first,
               folder / "lab_ch01_exercise.png")
        _shoot(page, explorer, folder / "lab_ch01_explorer.png")
        _shoot(page, panel.locator(".jp-MarkdownCell", has_text="Cited from other pages").first,
               folder / "lab_ch01_cited.png")
    slider = explorer.locator(".widget-slider .noUi-handle").first
    slider.focus()
    for _ in range(3):
        slider.press("ArrowRight")
    # the Output widget replaces its image: the locator finds the new one
    sync_api.expect(image).not_to_have_attribute("src", before, timeout=60_000)
    # each key press re-renders: wait until the figure has settled on the last one
    after, deadline = image.get_attribute("src"), time.monotonic() + 60
    while time.monotonic() < deadline:
        page.wait_for_timeout(1500)
        now = image.get_attribute("src")
        if now == after:
            break
        after = now
    assert after.startswith("data:image/png") and after != before
    if shots:
        _shoot(page, explorer, Path(shots) / "lab_ch01_explorer_moved.png")
    _no_external(requests)
