"""nbval with a comparison that rounding cannot break, figures compared, and exercises run.

A pytest plugin on top of `nbval <https://github.com/computationalmodelling/nbval>`_ (it reuses
nbval's kernel, cell execution, sanitize file and cell tags). Enable it with ``-p nbcheck``
(``tests/`` on ``PYTHONPATH``) and ``--nbcheck`` instead of ``--nbval``; ``make nbval`` does.

Why not plain nbval
-------------------
nbval compares every stored output *as text*. A printed float is a rounding of a number that
differs in its last bits from one CPU to the next (torch, MKL, oneDNN, OpenBLAS, numpy and libm
each pick kernels for the vector unit they find). However small that spread, a printed digit
flips whenever the true value sits that close to a rounding boundary, and with hundreds of
printed numbers some always do (ch. 07 printed 6.2890 here and 6.2889 on an AVX-512 machine, a
spread of 1e-8). Pinning kernels did not reproduce the stored bits (TESTING.md). So:

**Numbers.** Every text output (streams, ``text/plain``, ``text/markdown``, ``text/html``,
``text/latex``) is split into number tokens and the text between them. A token with a decimal
point or an exponent is a *printed float*; it equals the stored one when they differ by at most
``units`` units of the last printed digit (default 1; a notebook or cell may state more with
the metadata ``{"nbcheck": {"units": N}}``, where the chapter states a wider spread). This is
pytest-doctestplus's ``FLOAT_CMP`` made to respect the printed precision: a stored 6.2890 accepts
6.2889 and 6.2891, not 6.2887. Integers (counts, indices, seeds, years) compare exactly.

**Everything else exactly.** The text between numbers must be equal, word for word (runs of
whitespace count as one, so the padding of a table column that widens by a digit does not
matter); the number of tokens must be equal; an integer may not become a float.

**Figures.** nbval skips ``image/png`` unless it runs with nbdime, so a stored figure could go
stale unseen. Here every stored PNG is compared with the one drawn now by
``matplotlib.testing.compare.compare_images`` (the RMS of the pixel difference, as pytest-mpl
does), under the pinned matplotlib and its bundled DejaVu fonts: ``FIGURE_RMS_TOLERANCE``. A
different CPU moves lines by far less than a pixel; a changed curve does not (TESTING.md gives
the measured values).

**Exercises.** After a notebook's last cell, every code block inside an ``{exercise}`` or
``{solution}`` directive of its markdown runs in the same kernel (the chapter's context), in
order, followed by the code of the instructor page's problems that name this chapter (a
``% nbcheck: runs after notebooks/NN_x.ipynb`` comment under their session heading). What each
block prints (stdout and results; warnings name local paths) is compared, as above, with
``book/_exercises/<notebook>.json``;
``--nbcheck-write-exercises`` rewrites that file from the run (after an intended change).
"""

from __future__ import annotations

import base64
import json
import math
import os
import pathlib
import re
import tempfile
import textwrap
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import nbformat
import pytest
from nbval import plugin as nbval_plugin

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXERCISES_DIR = ROOT / "book" / "_exercises"
INSTRUCTOR_PAGE = ROOT / "book" / "instructor.md"

#: RMS (0-255 scale) above which a figure counts as changed (pytest-mpl's default). Measured
#: (TESTING.md): a re-run on the same kernels gives 0; one bar label of ch. 09 printed 0.91 on an
#: Intel AVX-512 machine where the AMD machine that stored it printed 0.92 (its value sits at a
#: rounding boundary, as text numbers can): 1.655; ch. 03's rounding-level curves from another
#: CPU: 15.3; another seed's network (scripts/nbcheck_mutations.py): far above.
FIGURE_RMS_TOLERANCE = 2.0

# A number: optional sign, digits with an optional fraction, optional exponent. Not inside a
# word or after a decimal point (``ch02``, ``H64``, ``7adb61`` stay text).
NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?(?:\d+\.\d+|\.\d+|\d+)(?:[eE][-+]?\d+)?")
TEXT_MIMES = ("text/plain", "text/markdown", "text/html", "text/latex", "stream")


# ---------------------------------------------------------------------------------------------
# the comparison of one text
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Printed:
    """One number token: its text, value, and the unit of its last printed digit (0 for ints)."""

    text: str
    value: Decimal  # exact: the check's arithmetic adds no rounding of its own
    unit: Decimal

    @property
    def is_float(self) -> bool:
        return self.unit > 0


def parse_number(tok: str) -> Printed:
    """The value of a number token and the unit of its last printed digit.

    ``"6.2890"`` has unit 1e-4, ``"1.5e-07"`` 1e-8, ``"3e5"`` 1e5; an integer has unit 0
    (compared exactly).
    """
    t = tok.replace("\u2212", "-")
    mantissa, _, exponent = t.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exp = int(exponent) if exponent else 0
    is_float = "." in mantissa or bool(exponent)
    unit = Decimal(10) ** (exp - decimals) if is_float else Decimal(0)
    return Printed(tok, Decimal(t), unit)


def tokens(s: str) -> tuple[list[str], list[Printed]]:
    """Split ``s`` into the texts between numbers (whitespace runs as one space, stripped) and
    the numbers; ``len(texts) == len(numbers) + 1``."""
    texts, numbers, pos = [], [], 0
    for m in NUMBER.finditer(s):
        texts.append(s[pos : m.start()])
        numbers.append(parse_number(m.group()))
        pos = m.end()
    texts.append(s[pos:])
    return [" ".join(t.split()) for t in texts], numbers


def _context(texts: list[str], numbers: list[Printed], i: int, width: int = 3) -> str:
    lo = max(0, i - width)
    parts = []
    for j in range(lo, min(len(numbers), i + width + 1)):
        parts.append(texts[j])
        parts.append(f"[{numbers[j].text}]" if j == i else numbers[j].text)
    return " ".join(p for p in parts if p)


def compare_text(ref: str, got: str, units: float = 1.0) -> str | None:
    """``None`` when ``got`` equals the stored ``ref`` (words exactly, integers exactly, printed
    floats within ``units`` units of their last printed digit); otherwise why not."""
    if ref == got:
        return None
    rt, rn = tokens(ref)
    gt, gn = tokens(got)
    for i, (a, b) in enumerate(zip(rt, gt, strict=False)):
        if a != b:
            return (f"the text differs after {i} numbers: stored {a[:200]!r}, "
                    f"now {b[:200]!r}")
    if len(rn) != len(gn):
        return f"{len(rn)} numbers stored, {len(gn)} printed now"
    for i, (a, b) in enumerate(zip(rn, gn, strict=True)):
        if a.is_float != b.is_float:
            return f"number {i}: stored {a.text!r}, now {b.text!r} (one is an integer)"
        if not a.is_float:
            if a.value != b.value:
                return (f"integer {i} differs: stored {a.text}, now {b.text} "
                        f"(integers compare exactly): ... {_context(rt, rn, i)} ...")
            continue
        unit = max(a.unit, b.unit)
        if abs(a.value - b.value) > Decimal(str(units)) * unit:
            return (f"number {i} moved: stored {a.text}, now {b.text}; allowed "
                    f"{units:g} unit(s) of the last printed digit ({unit:g}): "
                    f"... {_context(rt, rn, i)} ...")
    return None


def compare_png(ref_b64: str, got_b64: str, tol: float = FIGURE_RMS_TOLERANCE,
                save_as: pathlib.Path | None = None) -> str | None:
    """``None`` when two base64 PNGs differ by an RMS of at most ``tol`` (0-255 scale).

    On a failure, ``save_as`` (a path without suffix) receives ``-stored.png`` and
    ``-now.png`` to look at."""
    if ref_b64 == got_b64:
        return None
    why = _compare_png(ref_b64, got_b64, tol)
    if why is not None and save_as is not None:
        save_as.parent.mkdir(parents=True, exist_ok=True)
        for name, data in (("stored", ref_b64), ("now", got_b64)):
            pathlib.Path(f"{save_as}-{name}.png").write_bytes(base64.b64decode(data))
        why += f" (both saved: {save_as}-stored.png, -now.png)"
    return why


def _compare_png(ref_b64: str, got_b64: str, tol: float) -> str | None:
    from matplotlib.testing.compare import calculate_rms
    from matplotlib.testing.exceptions import ImageComparisonFailure
    from PIL import Image

    with tempfile.TemporaryDirectory() as d:
        images = []
        for name, data in (("stored", ref_b64), ("now", got_b64)):
            path = pathlib.Path(d) / f"{name}.png"
            path.write_bytes(base64.b64decode(data))
            with Image.open(path) as im:
                images.append(im.convert("RGB"))
    import numpy as np

    a, b = (np.asarray(im, dtype=np.int16) for im in images)
    if a.shape != b.shape:
        return f"figure size changed: stored {a.shape[1]}x{a.shape[0]} px, now {b.shape[1]}x{b.shape[0]} px"
    try:
        rms = calculate_rms(a, b)
    except ImageComparisonFailure as e:  # pragma: no cover - shapes were checked
        return str(e)
    if not rms <= tol:
        return f"figure changed: RMS {rms:.3f} of the pixel difference > {tol:g}"
    return None


# ---------------------------------------------------------------------------------------------
# exercises and solutions in markdown
# ---------------------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"^(\s*)(`{3,}|~{3,})\{(exercise|solution)(?:-start)?\}\s*(.*?)\s*$")
# a code fence, also one that opens a list item (``2. ~~~python``)
_CODE = re.compile(r"^(\s*(?:(?:[-*+]|\d+[.)])\s+)?)(`{3,}|~{3,})\s*(python3?|ipython3?)\s*$")
_LABEL = re.compile(r"^\s*:label:\s*(\S+)")
_RUNS_AFTER = re.compile(r"^%\s*nbcheck:\s*runs after\s+(\S+)")


@dataclass(frozen=True)
class CodeBlock:
    """A code block of an exercise or solution: ``key`` names it in ``book/_exercises``."""

    key: str
    source: str
    origin: str  # where it is written, for messages


def exercise_blocks(markdown: str, origin: str) -> list[CodeBlock]:
    """Every python code block inside an ``{exercise}``/``{solution}`` directive, in order.

    Keys: ``<label>#<i>`` in an exercise, ``<label>/solution#<i>`` in its solution.
    """
    blocks: list[CodeBlock] = []
    lines = markdown.splitlines()
    i = 0
    counters: dict[str, int] = defaultdict(int)
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, kind, arg = m.groups()
        close = re.compile(rf"^{re.escape(indent)}{re.escape(fence)}\s*$")
        j = i + 1
        label = arg.split()[0] if (kind == "solution" and arg) else None
        body: list[str] = []
        while j < len(lines) and not close.match(lines[j]):
            body.append(lines[j])
            j += 1
        if kind == "exercise":
            for line in body:
                lm = _LABEL.match(line)
                if lm:
                    label = lm.group(1)
                    break
        if label is None:
            label = f"line{i + 1}"
        name = label if kind == "exercise" else f"{label}/solution"
        k = 0
        while k < len(body):
            cm = _CODE.match(body[k])
            if not cm:
                k += 1
                continue
            cfence = cm.group(2)
            cclose = re.compile(rf"^\s*{re.escape(cfence)}\s*$")
            code: list[str] = []
            k += 1
            while k < len(body) and not cclose.match(body[k]):
                code.append(body[k])
                k += 1
            k += 1
            src = textwrap.dedent("\n".join(code))
            blocks.append(CodeBlock(f"{name}#{counters[name]}", src, f"{origin}, {name}"))
            counters[name] += 1
        i = j + 1
    return blocks


def notebook_blocks(nb: nbformat.NotebookNode, origin: str) -> list[CodeBlock]:
    """The exercise and solution code blocks of a notebook's shown markdown cells."""
    out: list[CodeBlock] = []
    for cell in nb.cells:
        if cell.cell_type != "markdown" or "remove-cell" in cell.metadata.get("tags", []):
            continue
        src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        out.extend(exercise_blocks(src, origin))
    return out


def instructor_blocks(notebook: str) -> list[CodeBlock]:
    """The instructor page's problem code that runs after ``notebook`` (its path from the
    root, e.g. ``notebooks/02_proposition1.ipynb``): the sessions whose heading is followed by
    ``% nbcheck: runs after <notebook>``."""
    if not INSTRUCTOR_PAGE.exists():
        return []
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in INSTRUCTOR_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            sections.append((None, [line]))
            continue
        m = _RUNS_AFTER.match(line)
        if m:
            sections[-1] = (m.group(1), sections[-1][1])
        sections[-1][1].append(line)
    out: list[CodeBlock] = []
    for target, lines in sections:
        if target == notebook:
            out.extend(exercise_blocks("\n".join(lines), "book/instructor.md"))
    return out


#: Exercise blocks whose printed output is not compared (they still run and must not fail),
#: with the reason: the counterpart of the ``nbval-ignore-output`` tag, which a code block in
#: markdown cannot carry. Timings only, as for the chapters' cells (TESTING.md, rule 3).
IGNORE_OUTPUT = {
    "ex-10-3/solution#0": "prints the wall time of a query against a bare product",
}


def exercises_path(notebook: pathlib.Path) -> pathlib.Path:
    return EXERCISES_DIR / f"{notebook.stem}.json"


def read_exercises(notebook: pathlib.Path) -> dict[str, str]:
    p = exercises_path(notebook)
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


# ---------------------------------------------------------------------------------------------
# the kernels a run uses (printed in the header of every test run)
# ---------------------------------------------------------------------------------------------

KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES",
              "MKL_CBWR", "OMP_NUM_THREADS")


def kernel_report() -> list[str]:
    """Which kernels this process computes with: the variables that pin them, torch's ATen
    capability, numpy's dispatched SIMD targets, and each BLAS/OpenMP library's core type."""
    lines = []
    env = " ".join(f"{k}={os.environ[k]}" for k in KERNEL_ENV if k in os.environ)
    lines.append(f"kernels: {env or 'native (no kernel variables set)'}")
    try:
        import numpy as np
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        on = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
        lines.append(f"  numpy {np.__version__}: dispatched SIMD targets enabled: "
                     f"{', '.join(on) or 'none (baseline only)'}")
    except ImportError:  # pragma: no cover
        pass
    try:
        import scipy.linalg  # noqa: F401 - loads scipy's own OpenBLAS
        import threadpoolctl
        import torch

        lines.append(f"  torch {torch.__version__}: ATen CPU capability "
                     f"{torch.backends.cpu.get_cpu_capability()}, "
                     f"MKL {'on' if torch.backends.mkl.is_available() else 'off'}, "
                     f"oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'}")
        for lib in threadpoolctl.threadpool_info():
            arch = lib.get("architecture") or lib.get("threading_layer") or ""
            name = " ".join(x for x in (lib["internal_api"], lib.get("version")) if x)
            lines.append(f"  {name} ({pathlib.Path(lib['filepath']).name})"
                         + (f": {arch}" if arch else ""))
    except ImportError:  # pragma: no cover - the lean install
        pass
    return lines


# ---------------------------------------------------------------------------------------------
# the plugin: nbval's collector and cells with this comparison
# ---------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nbcheck")
    group.addoption("--nbcheck", action="store_true",
                    help="run notebooks like nbval, comparing printed floats within a unit of "
                         "their last digit, figures by RMS, and run the exercises' code")
    group.addoption("--nbcheck-write-exercises", action="store_true",
                    help="rewrite book/_exercises/<notebook>.json from this run")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if config.getoption("nbcheck", default=False):
        return kernel_report()
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if config.getoption("nbcheck", default=False) and config.get_verbosity() < 0:
        for line in kernel_report():  # -q hides the header
            terminalreporter.write_line(line)


def pytest_collect_file(file_path: pathlib.Path, parent: pytest.Collector):
    if parent.config.getoption("nbcheck") and file_path.suffix == ".ipynb":
        return NbCheckFile.from_parent(parent, path=file_path)
    return None


def _units(*metadatas) -> float:
    for md in metadatas:
        units = (md or {}).get("nbcheck", {}).get("units")
        if units is not None:
            return float(units)
    return 1.0


def is_image(mime: str) -> bool:
    """``image/png`` and the like, also myst-nb's glue of one
    (``application/papermill.record/image/png``)."""
    return mime.startswith("image/") or "/image/" in mime


def figure_tolerance(cell_metadata) -> float:
    """The RMS a cell's figures may move: ``FIGURE_RMS_TOLERANCE``, or ``inf`` for a figure
    whose curves are rounding errors (``{"nbcheck": {"figure": "rounding-level", "reason":
    ...}}``): those move with the CPU by construction, so, as rule 1 of TESTING.md says of
    such numbers, the figure is not compared and the verdict it illustrates is (a text cell)."""
    md = (cell_metadata or {}).get("nbcheck", {})
    if md.get("figure") == "rounding-level":
        if not md.get("reason"):
            raise ValueError("a rounding-level figure needs a 'reason' in its nbcheck metadata")
        return math.inf
    return float(md.get("figure_rms", FIGURE_RMS_TOLERANCE))


class NbCheckFile(nbval_plugin.IPyNbFile):
    """nbval's notebook collector; its cells compare numbers as printed, and figures."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.skip_compare = tuple(k for k in self.skip_compare if k != "image/png")
        self.exercise_outputs: dict[str, str] = {}

    def collect(self) -> Iterator[pytest.Item]:
        self.nb = nbformat.read(str(self.fspath), as_version=4)
        cell_num = 0
        for cell in self.nb.cells:
            if cell.cell_type != "code":
                continue
            options = defaultdict(bool, nbval_plugin.find_metadata_tags(cell.metadata))
            options.update(dict(nbval_plugin.find_comment_markers(cell.source)))
            options.setdefault("check", True)
            yield NbCheckCell.from_parent(self, name=f"Cell {cell_num}", cell_num=cell_num,
                                          cell=cell, options=options)
            cell_num += 1
        path = pathlib.Path(str(self.fspath))
        rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(
            ROOT) else path.name
        blocks = notebook_blocks(self.nb, rel) + instructor_blocks(rel)
        stored = read_exercises(path)
        for block in blocks:
            cell = nbformat.v4.new_code_cell(block.source)
            cell.execution_count = 1
            text = stored.get(block.key)
            cell.outputs = [] if not text else [
                nbformat.v4.new_output("stream", name="stdout", text=text)]
            options = defaultdict(bool, check=True)
            yield ExerciseCell.from_parent(self, name=f"Exercise {block.key}",
                                           cell_num=cell_num, cell=cell, options=options,
                                           block=block, stored=block.key in stored)
            cell_num += 1

    def teardown(self) -> None:
        super().teardown()
        if self.config.getoption("nbcheck_write_exercises"):
            path = exercises_path(pathlib.Path(str(self.fspath)))
            if self.exercise_outputs:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(self.exercise_outputs, indent=1, ensure_ascii=False)
                                + "\n", encoding="utf-8")
            elif path.exists():
                path.unlink()


class NbCheckCell(nbval_plugin.IPyNbCell):
    """A notebook cell compared as the module docstring says."""

    def units(self) -> float:
        return _units(self.cell.metadata, self.parent.nb.metadata)

    def figure_tolerance(self) -> float:
        return figure_tolerance(self.cell.metadata)

    def compare_outputs(self, test, ref, skip_compare=None) -> bool:
        skip = skip_compare or self.parent.skip_compare
        test = nbval_plugin.transform_streams_for_comparison(test)
        ref = nbval_plugin.transform_streams_for_comparison(ref)
        cc = self.colors

        def flatten(outputs) -> dict[str, list]:
            flat: dict[str, list] = defaultdict(list)
            for out in outputs:
                for key, value in out.items():
                    if key in skip:
                        continue
                    if key == "data":
                        for mime, v in value.items():
                            if mime not in skip:
                                flat[mime].append(self.sanitize(v))
                    else:
                        flat[key].append(self.sanitize(value))
            return flat

        got, stored = flatten(test), flatten(ref)
        self.comparison_traceback = []
        if set(stored) != set(got):
            missing, extra = set(stored) - set(got), set(got) - set(stored)
            self.comparison_traceback.append(
                cc.FAIL + f"output kinds differ: missing now {sorted(missing)}, new "
                f"{sorted(extra)}" + cc.ENDC)
            return False
        units = self.units()
        for key, ref_values in stored.items():
            test_values = got[key]
            if len(ref_values) != len(test_values):
                self.comparison_traceback.append(
                    cc.FAIL + f"{len(ref_values)} outputs of kind {key!r} stored, "
                    f"{len(test_values)} now" + cc.ENDC)
                return False
            for r, t in zip(ref_values, test_values, strict=True):
                if is_image(key):  # also myst-nb's glued figures (application/papermill...)
                    save = (ROOT / "_build" / "nbcheck"
                            / f"{self.fspath.purebasename}-cell{self.cell_num}")
                    why = (compare_png(r, t, self.figure_tolerance(), save)
                           if key.endswith("image/png") else (None if r == t else "image differs"))
                elif isinstance(r, str) and isinstance(t, str):
                    why = compare_text(r, t, units)
                else:
                    why = None if r == t else "differs"
                if why is not None:
                    self.comparison_traceback.append(
                        cc.OKBLUE + f" mismatch {key!r}: " + cc.FAIL + why + cc.ENDC)
                    if not is_image(key):
                        self.format_output_compare(key, r, t)
                    return False
        return True


class ExerciseCell(NbCheckCell):
    """A code block of an exercise or solution, run after the chapter's cells; its printed
    text is compared with ``book/_exercises``."""

    def __init__(self, *args, block: CodeBlock, stored: bool, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.block = block
        self.stored = stored

    def reportinfo(self):
        return self.fspath, 0, f"{self.fspath.relto(self.config.rootdir)}::{self.name}"

    def runtest(self) -> None:
        write = self.config.getoption("nbcheck_write_exercises")
        if write:
            self.options["check"] = False
        super().runtest()
        # stdout and results only: warnings (stderr) name files on this machine
        text = "".join(o.get("text", "") for o in (self.test_outputs or [])
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")
        text += "".join(o.get("data", {}).get("text/plain", "") + "\n"
                        for o in (self.test_outputs or [])
                        if o.get("output_type") in ("execute_result", "display_data")
                        and "image/png" not in o.get("data", {}))
        if write:
            self.parent.exercise_outputs[self.block.key] = self.sanitize(text)
            return
        if not self.stored:
            self.raise_cell_error(
                f"{self.block.origin}: no stored output for {self.block.key!r} in "
                f"{exercises_path(pathlib.Path(str(self.fspath))).relative_to(ROOT)}; run "
                "make exercises (pytest --nbcheck --nbcheck-write-exercises) after checking "
                "what it prints")
        if self.block.key in IGNORE_OUTPUT:
            return
        why = compare_text(self.cell.outputs[0].text if self.cell.outputs else "",
                           self.sanitize(text), self.units())
        if why is not None:
            self.raise_cell_error(f"{self.block.origin} prints something else now: {why}",
                                  f"stored:\n{self.cell.outputs[0].text if self.cell.outputs else ''}"
                                  f"\nnow:\n{text}")

    def compare_outputs(self, test, ref, skip_compare=None) -> bool:
        return True  # compared in runtest, as text only (exercise figures are not stored)
