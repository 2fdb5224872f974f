"""Build the student edition of the book: every exercise kept, every solution removed.

``make student`` runs both halves:

- ``python scripts/student_edition.py notebooks --out _build/student/notebooks`` copies
  ``notebooks/`` with every sphinx-exercise solution removed from the chapters' markdown cells;
  everything else (code cells and their stored outputs, cell ids, metadata, widget state, the
  other files of the folder) stays as it is.
- ``python scripts/student_edition.py html --config CFG --out _build/student/html`` builds the
  HTML book without solutions, with the configuration ``make book`` uses.

**How solutions are found.** The markdown is tokenised by MyST's own parser
(:func:`myst_parser.parsers.mdit.create_md_parser`, with the book's extensions), so a
directive's extent is exactly the one the book sees: backtick, tilde and colon fences of any
length, nested code fences inside (a fence closes only at a fence of the same character and at
least its length), fences inside lists or block quotes. Removed are ``{solution}`` directives
(with a ``(label)=`` target right in front of one) and everything from a ``{solution-start}``
to its ``{solution-end}`` (gated solutions, which may span cells: code cells in between go
too). The content of other directives is searched recursively (an exercise inside an
admonition keeps its place, a solution inside one goes); literal directives (``{code-cell}``,
``{math}``...) and code fences are not. Markup that cannot be stripped unambiguously (a
solution fence that is never closed, a gate that is never closed or closed twice) raises
:class:`StripError` instead of guessing.

**How the HTML is built.** Solutions are removed from each page's resolved doctree
(``doctree-resolved``), so the page, its search-index entry and its section of the site are
built without them, and the downloadable sources in ``_sources/`` are replaced by their
stripped versions. Nothing about how pages are *read* changes, so the build shares the
instructor build's environment (``_build/.doctrees``, ``_build/jupyter_execute``): after
``make book`` (or ``make book-strict``) it only writes pages (no notebook is parsed again);
without a current environment it reads the sources first, exactly as ``make book`` would
(and ``make book`` then finds them read). Do not run it at the same time as ``make book``.
The build sets the Sphinx tag ``student`` (for ```{only} student``` text).
Exercise numbers come from that shared environment, so they are the instructor edition's by
construction (``tests/test_student_edition.py`` checks them against ``_build/html``).

usage::

    python scripts/student_edition.py notebooks [--src notebooks] [--out _build/student/notebooks]
    python scripts/student_edition.py html --config _config.yml [--out _build/student/html] [--strict]
    python scripts/student_edition.py strip FILE.md|FILE.ipynb   # print the stripped text/JSON
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import pathlib
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
STUDENT = ROOT / "_build" / "student"
STUDENT_NOTEBOOKS = STUDENT / "notebooks"
STUDENT_HTML = STUDENT / "html"
# the instructor build's folder: its environment (.doctrees) and notebook outputs
# (jupyter_execute) are shared with the student build
BUILD = ROOT / "_build"

# the MyST extensions of _config.yml that change where blocks begin and end
MYST_EXTENSIONS = frozenset({"amsmath", "colon_fence", "deflist", "dollarmath"})
SOLUTION = "solution"
GATE_START = "solution-start"
GATE_END = "solution-end"
# directives whose content is literal text (never parsed as MyST): not searched for solutions
LITERAL_DIRECTIVES = frozenset({
    "code", "code-block", "sourcecode", "code-cell", "literalinclude", "math", "raw",
    "eval-rst", "csv-table", "list-table-raw", "mermaid", "graphviz", "bibliography",
})
# the Sphinx tag the student build sets: a page can say something to students only with
# ```{only} student``` (and to the instructor edition only with ```{only} not student```);
# tags are evaluated when pages are written, so they do not change the shared environment
STUDENT_TAG = "student"
# files of the notebooks folder that are not copied to the student edition
SKIP_NAMES = frozenset({".ipynb_checkpoints", "__pycache__", ".DS_Store", "Thumbs.db"})

STUDENT_README = """\
# cbdt: student edition of the notebooks

These are the book's chapters with every exercise and no solutions (built by `make student`
from `notebooks/`; the stored outputs are the book's). Open them in JupyterLab with the
checkout's environment, from the repository root:

    .venv/bin/jupyter lab _build/student/notebooks

(`make book` or `make test` creates `.venv`; cbdt is importable there, so each chapter's first
cell prints nothing and installs nothing.) The HTML book without solutions is
`_build/student/html/index.html`.
"""


class StripError(ValueError):
    """The markup does not say unambiguously where a solution ends."""


@dataclasses.dataclass(frozen=True)
class Block:
    """A directive found in a markdown text.

    Attributes
    ----------
    name : str
        The directive's name (``solution``, ``exercise``, ``solution-start``...).
    argument : str
        The rest of its first line (for a solution, the exercise label).
    start, stop : int
        Its lines, ``text.splitlines()[start:stop]`` (the opening fence to the closing fence).
    options : dict
        The ``:key: value`` options at the top of its content (``label``, ``class``...).
    """

    name: str
    argument: str
    start: int
    stop: int
    options: dict[str, str]


def _parser() -> Any:
    """Return MyST's markdown-it parser with the book's extensions (cached)."""
    global _PARSER
    if _PARSER is None:
        from markdown_it.renderer import RendererHTML
        from myst_parser.config.main import MdParserConfig
        from myst_parser.parsers.mdit import create_md_parser

        _PARSER = create_md_parser(MdParserConfig(enable_extensions=set(MYST_EXTENSIONS)),
                                   RendererHTML)
    return _PARSER


_PARSER: Any = None


def _directive_name(info: str) -> tuple[str, str] | None:
    """Split a fence's info string ``{name} argument`` into name and argument (None: code).

    The rule of MyST's renderer: the first word of the info string, when it is wrapped in
    braces, names the directive.
    """
    parts = info.strip().split(maxsplit=1)
    if not parts or not (parts[0].startswith("{") and parts[0].endswith("}")):
        return None
    return parts[0][1:-1], (parts[1].strip() if len(parts) > 1 else "")


def _options(content: str) -> dict[str, str]:
    """The ``:key: value`` lines at the top of a directive's content."""
    options = {}
    for line in content.splitlines():
        stripped = line.strip()
        if not stripped.startswith(":") or stripped.count(":") < 2:
            break
        key, _, value = stripped[1:].partition(":")
        options[key.strip()] = value.strip()
    return options


def _is_closed(lines: Sequence[str], token: Any) -> bool:
    """Whether a fence token ends at a closing fence (markdown-it runs an unclosed one to EOF)."""
    last = token.map[1] - 1
    if last <= token.map[0] or last >= len(lines):
        return False
    marker = token.markup[0]
    closing = lines[last].lstrip(" \t>").strip()  # inside a list item or a block quote too
    return (len(closing) >= len(token.markup) and set(closing) == {marker})


def find_blocks(text: str) -> list[Block]:
    """Return every directive in ``text``, nested ones included, in the order of their lines.

    Parameters
    ----------
    text : str
        MyST markdown (a page, or one markdown cell).

    Returns
    -------
    list of Block
        The directives (not the code fences); a directive nested in another's content is
        listed after it, with lines counted in ``text``.

    Raises
    ------
    StripError
        If a ``{solution}`` fence is never closed (it would swallow the rest of the text).
    """
    return list(_analyse(text)[0])


@functools.lru_cache(maxsize=1024)
def _analyse(text: str) -> tuple[tuple[Block, ...], tuple[tuple[int, int], ...]]:
    """Parse ``text`` once: its directives (see :func:`find_blocks`) and its targets."""
    tokens = _parser().parse(text)
    targets = tuple((t.map[0], t.map[1]) for t in tokens
                    if t.type == "myst_target" and t.map is not None)
    return tuple(_blocks(text, tokens, 0)), targets


def _blocks(text: str, tokens: Sequence[Any], offset: int) -> list[Block]:
    """The directives among ``tokens`` (parsed from ``text``), lines counted from ``offset``."""
    lines = text.splitlines()
    blocks: list[Block] = []
    for token in tokens:
        if token.type not in ("fence", "colon_fence") or token.map is None:
            continue
        parsed = _directive_name(token.info)
        if parsed is None:
            continue
        name, argument = parsed
        start, stop = token.map[0] + offset, token.map[1] + offset
        if name == SOLUTION and not _is_closed(lines, token):
            raise StripError(
                f"line {start + 1}: the {token.markup}{{solution}} {argument} fence is never "
                "closed (a closing fence needs the same character and at least the same length)")
        blocks.append(Block(name, argument, start, stop, _options(token.content)))
        if name not in LITERAL_DIRECTIVES and name != SOLUTION:
            # the content is parsed as MyST by the directive: look inside. Its lines are the
            # fence's lines minus the first and (when closed) the last, in the same order.
            inner = "\n".join(lines[token.map[0] + 1: token.map[1]])
            if _is_closed(lines, token):
                inner = "\n".join(lines[token.map[0] + 1: token.map[1] - 1])
            blocks.extend(_blocks(inner, _parser().parse(inner), start + 1))
    return blocks


def solution_ranges(text: str) -> tuple[list[tuple[int, int]], list[tuple[str, int, int]]]:
    """Return the lines of ``text`` that belong to solutions, and its gate markers.

    Parameters
    ----------
    text : str
        MyST markdown.

    Returns
    -------
    ranges : list of (int, int)
        ``[start, stop)`` line ranges of ``{solution}`` directives (each with a ``(label)=``
        target on the line right before it).
    gates : list of (str, int, int)
        ``("solution-start" | "solution-end", start, stop)`` for the gated form, in order.
    """
    if "{" + SOLUTION not in text:  # no solution directive can start without this
        return [], []
    blocks, target_lines = _analyse(text)
    targets = {stop: start for start, stop in target_lines}
    ranges: list[tuple[int, int]] = []
    gates: list[tuple[str, int, int]] = []
    for block in blocks:
        if block.name == SOLUTION:
            # a ``(label)=`` target on the line right before the solution names it: it goes too
            ranges.append((targets.get(block.start, block.start), block.stop))
        elif block.name in (GATE_START, GATE_END):
            gates.append((block.name, block.start, block.stop))
    return _merge(ranges), sorted(gates, key=lambda g: g[1])


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort and merge overlapping line ranges."""
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def _drop_lines(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """Remove line ranges from ``text``; a blank line left doubled by a removal goes too."""
    if not ranges:
        return text
    lines = text.splitlines(keepends=True)
    keep = [True] * len(lines)
    for start, stop in ranges:
        for i in range(start, min(stop, len(lines))):
            keep[i] = False
        # the removed block sat between two blank lines (or a blank line and the end): one goes
        after = next((j for j in range(stop, len(lines)) if keep[j]), None)
        before = next((j for j in range(start - 1, -1, -1) if keep[j]), None)
        if after is not None and not lines[after].strip() and (before is None
                                                               or not lines[before].strip()):
            keep[after] = False
        elif after is None and before is not None and not lines[before].strip():
            keep[before] = False
    out = "".join(line for line, k in zip(lines, keep, strict=True) if k)
    if not text.endswith("\n"):
        out = out.rstrip("\n")
    return out


def _gate_segments(texts: Sequence[str | None]) -> list[list[tuple[int, int]]]:
    """Per text, the line ranges a gated solution covers (gates may span several texts).

    ``None`` stands for a code cell: it has no lines of its own, and the caller drops it when
    its whole range is inside a gate (reported as the range ``(0, 1)``).
    """
    inside = False
    opened_at = ""
    per_text: list[list[tuple[int, int]]] = []
    for k, text in enumerate(texts):
        ranges: list[tuple[int, int]] = []
        if text is None:
            per_text.append([(0, 1)] if inside else [])
            continue
        n = len(text.splitlines())
        start = 0 if inside else None
        for kind, g_start, g_stop in solution_ranges(text)[1]:
            if kind == GATE_START:
                if inside:
                    raise StripError(f"{opened_at}: {{solution-start}} opened again at cell/text "
                                     f"{k}, line {g_start + 1} before {{solution-end}}")
                inside, start, opened_at = True, g_start, f"cell/text {k}, line {g_start + 1}"
            else:
                if not inside:
                    raise StripError(f"cell/text {k}, line {g_start + 1}: {{solution-end}} "
                                     "without {solution-start}")
                ranges.append((start, g_stop))
                inside, start = False, None
        if inside:
            ranges.append((start, n))
        per_text.append(ranges)
    if inside:
        raise StripError(f"{opened_at}: {{solution-start}} is never closed by {{solution-end}}")
    return per_text


def strip_markdown(text: str) -> str:
    """Return MyST markdown with every solution removed and everything else unchanged.

    Parameters
    ----------
    text : str
        A page (or one markdown cell without gated solutions spanning cells).

    Returns
    -------
    str
        The text without ``{solution}`` directives and gated solutions.

    Raises
    ------
    StripError
        If the markup is ambiguous (see the module docstring).
    """
    ranges, _ = solution_ranges(text)
    gated = _gate_segments([text])[0]
    return _drop_lines(text, _merge([*ranges, *gated]))


def _source(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat keeps it as a string, the file as a list)."""
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def strip_notebook(nb: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of a notebook with every solution removed.

    Markdown cells lose their ``{solution}`` directives; gated solutions (``{solution-start}``
    ... ``{solution-end}``, possibly over several cells) lose everything in between, code cells
    included. A cell left empty by the removal is dropped. All other cells (code cells with
    their outputs, raw cells), ids and metadata are unchanged.

    Parameters
    ----------
    nb : dict
        A version-4 notebook: an ``nbformat.NotebookNode`` or the parsed JSON of the file (a
        cell's source a string or a list of lines: the copy keeps the form); not modified.

    Returns
    -------
    dict
        The student version, of the same type.
    """
    out = copy.deepcopy(nb)
    texts = [_source(c) if c["cell_type"] == "markdown" else None for c in out["cells"]]
    gated = _gate_segments(texts)
    cells = []
    for cell, text, gate in zip(out["cells"], texts, gated, strict=True):
        if text is None:
            if not gate:
                cells.append(cell)
            continue
        ranges, _ = solution_ranges(text)
        new = _drop_lines(text, _merge([*ranges, *gate]))
        if new == text:
            cells.append(cell)
            continue
        if not new.strip():
            continue
        cell["source"] = new if isinstance(cell["source"], str) else new.splitlines(keepends=True)
        cells.append(cell)
    out["cells"] = cells
    return out


def count_directives(source: str | dict[str, Any], name: str) -> list[Block]:
    """Return the directives called ``name`` in a page's text or a notebook's markdown cells."""
    if isinstance(source, str):
        texts = [source]
    else:
        texts = [_source(c) for c in source["cells"] if c["cell_type"] == "markdown"]
    return [b for t in texts for b in find_blocks(t) if b.name == name]


def dumps_notebook(nb: dict[str, Any]) -> str:
    """Serialise a notebook exactly as ``nbformat.write`` does (sorted keys, indent 1)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def strip_text(text: str, suffix: str) -> str:
    """Return the student version of a page (``.md``) or a notebook's JSON (``.ipynb``).

    A notebook is edited as JSON, so the file is byte for byte the original except for the
    cells that held solutions.
    """
    if suffix == ".ipynb":
        nb = json.loads(text)
        student = strip_notebook(nb)
        return text if student == nb else dumps_notebook(student)
    return strip_markdown(text)


def strip_file(path: pathlib.Path) -> str:
    """Return the student version of a ``.md`` page or an ``.ipynb`` notebook, as text."""
    return strip_text(path.read_text(encoding="utf-8"), path.suffix)


def write_student_notebooks(src: pathlib.Path = NOTEBOOKS,
                            out: pathlib.Path = STUDENT_NOTEBOOKS,
                            validate: bool = True) -> dict[str, int]:
    """Write the student edition of a notebooks folder.

    Parameters
    ----------
    src : pathlib.Path
        The folder of chapter notebooks (and any helper files beside them: copied as they are).
    out : pathlib.Path
        The student folder; it is replaced. A ``README.md`` there says how to open it.
    validate : bool
        Check every student notebook against the notebook format's schema (nbformat).

    Returns
    -------
    dict
        Notebook name -> number of solutions removed.
    """
    removed = {}
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=lambda _d, names: [n for n in names if n in SKIP_NAMES])
    for path in sorted(tmp.rglob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        removed[str(path.relative_to(tmp))] = len(count_directives(json.loads(text), SOLUTION))
        student = strip_text(text, ".ipynb")
        if validate:
            import nbformat

            nbformat.validate(nbformat.reads(student, as_version=nbformat.NO_CONVERT))
        if student != text:
            path.write_text(student, encoding="utf-8")
    (tmp / "README.md").write_text(STUDENT_README, encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return removed


# ---------------------------------------------------------------------------------------------
# HTML


def _remove_solution_nodes(app: Any, doctree: Any, docname: str) -> None:
    """``doctree-resolved``: drop the solutions, and warn on a link that pointed to one."""
    from sphinx.util import logging
    from sphinx_exercise.nodes import solution_end_node, solution_node, solution_start_node

    logger = logging.getLogger(__name__)
    solution_ids = _solution_labels(app.env)
    for cls in (solution_node, solution_start_node, solution_end_node):
        for node in list(doctree.findall(cls)):
            solution_ids.update(node.get("ids", []))
            node.parent.remove(node)
    from docutils import nodes

    for ref in doctree.findall(nodes.reference):
        target = ref.get("refid") or ref.get("refuri", "").rpartition("#")[2]
        if target and target in solution_ids:
            logger.warning("student edition: %s links to the removed solution %s",
                           docname, target, location=ref)


def _solution_labels(env: Any) -> set[str]:
    """The labels (given or generated) of every solution in the environment."""
    registry = getattr(env, "sphinx_exercise_registry", {})
    return {label for label, entry in registry.items() if entry.get("type") == SOLUTION}


def _hide_solution_labels(env: Any) -> None:
    """Leave the solutions' labels out of what the standard domain lists (``objects.inv``).

    Only this process's domain object changes (domains are not pickled with the environment).
    """
    std = env.get_domain("std")
    objects = std.get_objects

    def get_objects() -> Iterable[tuple[Any, ...]]:
        hidden = _solution_labels(env)
        return (obj for obj in objects() if obj[0] not in hidden)

    std.get_objects = get_objects


def _replace_sources(html: pathlib.Path) -> list[pathlib.Path]:
    """Replace the copied sources under ``html/_sources`` (the download button) by their
    student versions; returns the files changed."""
    changed = []
    for path in sorted((html / "_sources").rglob("*")):
        if path.suffix not in (".ipynb", ".md") or not path.is_file():
            continue
        student = strip_file(path)
        if student != path.read_text(encoding="utf-8"):
            path.write_text(student, encoding="utf-8")
            changed.append(path)
    return changed


def build_student_html(config: pathlib.Path, out: pathlib.Path = STUDENT_HTML,
                       strict: bool = False, build: pathlib.Path = BUILD) -> int:
    """Build the HTML book without solutions into ``out``.

    Parameters
    ----------
    config : pathlib.Path
        The configuration ``make book`` uses (``_config.yml``, or the derived publishing one).
    out : pathlib.Path
        The HTML folder; it is replaced.
    strict : bool
        Warnings are errors and references are checked (``make book-strict``'s ``-W -n``).
    build : pathlib.Path
        The instructor build folder whose ``.doctrees`` and ``jupyter_execute`` are shared.

    Returns
    -------
    int
        Sphinx's status code (0: success).
    """
    from jupyter_book import sphinx as jb_sphinx
    from jupyter_book.cli.main import build as jb_build

    base = jb_sphinx.Sphinx

    class StudentSphinx(base):  # type: ignore[misc, valid-type]
        """Sphinx, plus the removal of solutions; the environment stays the instructor's."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # myst-nb puts notebook outputs beside the output folder; keep them where the
            # instructor build has them, so the shared environment's image paths hold
            cfg = self.env.mystnb_config
            self.env.mystnb_config = cfg.copy(
                output_folder=str((build / "jupyter_execute").resolve()),
                execution_cache_path=str((build / ".jupyter_cache").resolve()))
            self.connect("doctree-resolved", _remove_solution_nodes)
            _hide_solution_labels(self.env)

    # the same arguments `jupyter-book build . --config CFG --keep-going [-W -n]` computes
    path_config, src, overrides = jb_build.callback(
        path_source=str(ROOT), path_output=None, config=str(config), toc=None,
        warningiserror=strict, nitpick=strict, keep_going=True, freshenv=False,
        builder="html", custom_builder=None, verbose=0, quiet=0, individualpages=False,
        get_config_only=True)
    # a real build passes the table of contents as an absolute path (get_config_only gives a
    # relative one); it is an environment setting, so it must match to share the environment
    overrides["external_toc_path"] = (pathlib.Path(src) / "_toc.yml").as_posix()
    # always a fresh folder: an incremental write would keep pages written by an older rule
    shutil.rmtree(out, ignore_errors=True)
    jb_sphinx.Sphinx = StudentSphinx
    try:
        result = jb_sphinx.build_sphinx(
            src, out, use_external_toc=True, noconfig=True, path_config=path_config,
            confoverrides=overrides, doctreedir=build / ".doctrees", builder="html",
            warningiserror=strict, keep_going=True, tags=[STUDENT_TAG])
    finally:
        jb_sphinx.Sphinx = base
    if isinstance(result, Exception):
        raise RuntimeError("the student HTML build failed; see above") from result
    # whatever the status, no copied source may keep its solutions
    if (out / "_sources").is_dir():
        for path in _replace_sources(out):
            print(f"student edition: stripped {path.relative_to(out)}")
    return int(result)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_nb = sub.add_parser("notebooks", help="write the student notebooks")
    p_nb.add_argument("--src", type=pathlib.Path, default=NOTEBOOKS)
    p_nb.add_argument("--out", type=pathlib.Path, default=STUDENT_NOTEBOOKS)
    p_html = sub.add_parser("html", help="build the HTML book without solutions")
    p_html.add_argument("--config", type=pathlib.Path, default=ROOT / "_config.yml")
    p_html.add_argument("--out", type=pathlib.Path, default=STUDENT_HTML)
    p_html.add_argument("--strict", action="store_true", help="-W -n, as make book-strict")
    p_strip = sub.add_parser("strip", help="print the student version of one file")
    p_strip.add_argument("file", type=pathlib.Path)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if args.command == "notebooks":
        removed = write_student_notebooks(args.src, args.out)
        print(f"student notebooks: {sum(removed.values())} solutions removed from "
              f"{len(removed)} notebooks in {time.perf_counter() - t0:.1f} s -> {args.out}")
        return 0
    if args.command == "strip":
        sys.stdout.write(strip_file(args.file))
        return 0
    config = args.config if args.config.is_absolute() else (pathlib.Path.cwd() / args.config)
    status = build_student_html(config.resolve(), args.out.resolve(), strict=args.strict)
    print(f"student HTML: built in {time.perf_counter() - t0:.1f} s -> "
          f"{args.out / 'index.html'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
