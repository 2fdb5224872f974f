"""The student edition (``make student``, ``scripts/student_edition.py``): no solutions, every
exercise.

Two parts:

- **the stripping** (always, a few seconds): the MyST parsing on hand-made markup (nested
  fences of every kind, gated solutions over cells, literal directives, unclosed fences), and on
  the book's real sources, all chapter notebooks and every page of ``book/``: no solution left,
  no line that only a solution had, every exercise kept word for word and in order, every other
  cell (code and outputs) unchanged, and a valid notebook;
- **the student HTML** (``TestStudentHTML``; only when ``CBDT_STUDENT_HTML`` names the built
  folder, as ``make test`` does right after the strict instructor build): compared with the
  instructor book in ``_build/html`` (``CBDT_BOOK_HTML``): no solution on any page, in the
  search index, the inventory or the downloadable sources, no link to a removed solution, and
  every exercise present with the instructor edition's label and number ("Exercise 5.2").
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import re
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("student_edition",
                                              REPO / "scripts" / "student_edition.py")
se = importlib.util.module_from_spec(SPEC)
sys.modules["student_edition"] = se
SPEC.loader.exec_module(se)

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAGES = sorted((REPO / "book").glob("*.md"))
SOURCES = NOTEBOOKS + PAGES
# a solution's line this long that occurs nowhere else in its document must be gone
MIN_LINE = 20


def _ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(REPO).as_posix() for p in paths]


# ---------------------------------------------------------------------------------------------
# the parser on hand-made markup


def _nb(*cells: tuple[str, str]) -> dict[str, Any]:
    import nbformat  # here, not at the top: the HTML checks of `make test` do not need it

    nb = nbformat.v4.new_notebook()
    for kind, source in cells:
        cell = (nbformat.v4.new_markdown_cell(source) if kind == "markdown"
                else nbformat.v4.new_code_cell(source))
        nb.cells.append(cell)
    return nb


def test_backtick_solution_with_nested_code_fences_of_both_kinds() -> None:
    text = (
        "## Exercises\n\n"
        "```{exercise}\n:label: ex-1\n\nCompute $x$.\n```\n\n"
        "````{solution} ex-1\n:class: dropdown\n\nFirst:\n\n```python\nprint(1)\n```\n\n"
        "~~~python\nprint(2)\n~~~\n\nDone.\n````\n\n"
        "```{exercise}\n:label: ex-2\n\nAgain.\n```\n\n"
        "```{solution} ex-2\n:class: dropdown\n\n~~~python\nx = '```'\n~~~\n```\n"
    )
    out = se.strip_markdown(text)
    assert out == ("## Exercises\n\n"
                   "```{exercise}\n:label: ex-1\n\nCompute $x$.\n```\n\n"
                   "```{exercise}\n:label: ex-2\n\nAgain.\n```\n")


def test_colon_fences_of_any_length_and_longer_backtick_fences() -> None:
    text = (
        ":::{exercise}\n:label: ex-a\nQ\n:::\n\n"
        "::::{solution} ex-a\n:::{note}\ninside\n:::\nA colon answer.\n::::\n\n"
        "`````{solution} ex-a\n````{admonition} x\n```python\n1\n```\n````\n`````\n"
        "tail\n"
    )
    out = se.strip_markdown(text)
    assert out == ":::{exercise}\n:label: ex-a\nQ\n:::\n\ntail\n"


def test_solution_inside_another_directive_goes_exercise_inside_one_stays() -> None:
    text = (
        "`````{admonition} Problems\n"
        "```{exercise}\n:label: ex-n\nNested.\n```\n\n"
        "````{solution} ex-n\n```python\nsecret = 1\n```\n````\n"
        "`````\n"
    )
    out = se.strip_markdown(text)
    assert "secret" not in out and "{solution}" not in out
    assert [b.options["label"] for b in se.count_directives(out, "exercise")] == ["ex-n"]
    assert out.endswith("Nested.\n```\n\n`````\n")


def test_solutions_in_a_list_item_and_in_a_block_quote() -> None:
    text = "1. Item\n\n   ```{solution} e\n   A\n   ```\n\n2. Next\n"
    assert se.strip_markdown(text) == "1. Item\n\n2. Next\n"
    text = "> Quote\n>\n> ````{solution} e\n> ```python\n> 1\n> ```\n> ````\n\nAfter\n"
    assert se.strip_markdown(text) == "> Quote\n>\n\nAfter\n"


def test_literal_directives_code_fences_and_code_cells_are_not_touched() -> None:
    text = ("````{code-block} markdown\n```{solution} ex-1\nshown as markup\n```\n````\n\n"
            "````markdown\n```{solution} ex-1\nalso literal\n```\n````\n")
    assert se.strip_markdown(text) == text
    nb = _nb(("code", "print('```{solution} ex-1')"))
    assert se.strip_notebook(nb) == nb


def test_inline_mentions_and_other_directives_stay() -> None:
    text = "The `{solution}` directive is hidden.\n\n```{note}\nA note.\n```\n"
    assert se.strip_markdown(text) == text


def test_label_target_before_a_solution_goes_with_it() -> None:
    text = "Intro.\n\n(sol-1)=\n```{solution} ex-1\nA.\n```\n\nAfter.\n"
    assert se.strip_markdown(text) == "Intro.\n\nAfter.\n"


def test_blank_lines_are_not_doubled_and_the_end_is_clean() -> None:
    text = "```{exercise}\n:label: e\nQ\n```\n\n```{solution} e\nA\n```"
    assert se.strip_markdown(text) == "```{exercise}\n:label: e\nQ\n```"
    text = "A\n\n```{solution} e\nS\n```\n\nB\n"
    assert se.strip_markdown(text) == "A\n\nB\n"


def test_unclosed_solution_fence_is_an_error_not_a_guess() -> None:
    with pytest.raises(se.StripError, match="never closed"):
        se.strip_markdown("````{solution} ex-1\nA\n```\n")
    with pytest.raises(se.StripError, match="never closed"):
        se.strip_markdown("```{solution} ex-1\nA\n")


def test_gated_solution_spanning_cells_drops_the_code_cells_in_between() -> None:
    nb = _nb(
        ("markdown", "```{exercise-start}\n:label: ex-g\n```\nQ\n```{exercise-end}\n```"),
        ("markdown", "Text before.\n\n```{solution-start} ex-g\n:class: dropdown\n```\nStart."),
        ("code", "answer = 42"),
        ("markdown", "Middle."),
        ("code", "print(answer)"),
        ("markdown", "```{solution-end}\n```\n\nText after."),
        ("code", "kept = True"),
    )
    import nbformat

    out = se.strip_notebook(nb)
    assert [c.source for c in out.cells] == [
        nb.cells[0].source, "Text before.", "Text after.", "kept = True"]
    assert [c.id for c in out.cells] == [nb.cells[i].id for i in (0, 1, 5, 6)]
    nbformat.validate(out)


def test_unbalanced_gates_are_errors() -> None:
    with pytest.raises(se.StripError, match="never closed"):
        se.strip_notebook(_nb(("markdown", "```{solution-start} e\n```\nA")))
    with pytest.raises(se.StripError, match="without"):
        se.strip_notebook(_nb(("markdown", "A\n```{solution-end}\n```")))


def test_a_cell_that_was_only_a_solution_is_dropped_and_json_lists_stay_lists() -> None:
    import nbformat

    raw = json.loads(nbformat.writes(_nb(("markdown", "Q\n"),
                                         ("markdown", "```{solution} e\nA\n```\n"),
                                         ("markdown", "R\n\n```{solution} e\nA\n```\n"))))
    out = se.strip_notebook(raw)
    assert [c["source"] for c in out["cells"]] == [["Q\n"], ["R\n"]]


# ---------------------------------------------------------------------------------------------
# the book's own sources


@functools.cache
def _load(path: Path) -> tuple[str, str]:
    """(instructor text, student text) of a source file."""
    text = path.read_text(encoding="utf-8")
    return text, se.strip_text(text, path.suffix)


def _markdown_texts(path: Path, text: str) -> list[str]:
    if path.suffix == ".ipynb":
        return [se._source(c) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown"]
    return [text]


def _solution_only_lines(path: Path, text: str) -> set[str]:
    """Lines of solutions (stripped, long enough) that occur nowhere else in the document."""
    inside, outside = set(), []
    for md in _markdown_texts(path, text):
        lines = md.splitlines()
        ranges, _ = se.solution_ranges(md)
        covered = set()
        for start, stop in ranges:
            covered.update(range(start, stop))
            inside.update(line.strip() for line in lines[start + 1: stop - 1])
        outside.extend(line for i, line in enumerate(lines) if i not in covered)
    if path.suffix == ".ipynb":
        outside.extend(se._source(c) for c in json.loads(text)["cells"]
                       if c["cell_type"] != "markdown")
    rest = "\n".join(outside)
    return {line for line in inside
            if len(line) >= MIN_LINE and not line.startswith(":") and line not in rest}


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_source_student_version_has_no_solution_and_every_exercise(path: Path) -> None:
    text, student = _load(path)
    before = se.count_directives(_doc(path, text), "exercise")
    after = se.count_directives(_doc(path, student), "exercise")
    assert se.count_directives(_doc(path, student), "solution") == []
    # the same exercises in the same order, each word for word
    assert [b.options.get("label") for b in after] == [b.options.get("label") for b in before]
    student_md = "\n".join(_markdown_texts(path, student))
    for block in before:
        assert _block_text(path, text, block) in student_md
    leaked = [line for line in _solution_only_lines(path, text) if line in student]
    assert leaked == [], f"{path.name}: solution text left in the student version"


def _doc(path: Path, text: str) -> str | dict[str, Any]:
    return json.loads(text) if path.suffix == ".ipynb" else text


def _block_text(path: Path, text: str, block: se.Block) -> str:
    """The exercise's lines as they appear in the document (found in whichever cell)."""
    for md in _markdown_texts(path, text):
        lines = md.splitlines()
        for b in se.find_blocks(md):
            if b == block:
                return "\n".join(lines[b.start:b.stop])
    raise AssertionError(f"exercise {block} not found")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_student_version_is_the_notebook_minus_solutions(path: Path) -> None:
    import nbformat

    text, student_text = _load(path)
    nb, student = json.loads(text), json.loads(student_text)
    nbformat.validate(nbformat.reads(student_text, as_version=nbformat.NO_CONVERT))
    assert {k: v for k, v in student.items() if k != "cells"} == \
        {k: v for k, v in nb.items() if k != "cells"}
    # every cell is the same except the markdown that held solutions; none is dropped here
    assert [c.get("id") for c in student["cells"]] == [c.get("id") for c in nb["cells"]]
    for old, new in zip(nb["cells"], student["cells"], strict=True):
        src = se._source(old)
        if old["cell_type"] != "markdown" or "{solution" not in src:
            assert new == old
            continue
        assert {k: v for k, v in new.items() if k != "source"} == \
            {k: v for k, v in old.items() if k != "source"}
        ranges, _ = se.solution_ranges(src)
        lines = src.splitlines()
        covered = {i for start, stop in ranges for i in range(start, stop)}
        kept = [ln for i, ln in enumerate(lines) if i not in covered and ln.strip()]
        assert [ln for ln in se._source(new).splitlines() if ln.strip()] == kept
    # the file is the original byte for byte except for those cells
    assert student_text == se.dumps_notebook(student)


def test_book_sources_hold_the_expected_solutions() -> None:
    """Every chapter has exercises, every solution names an exercise of its document."""
    total = 0
    for path in SOURCES:
        text, _ = _load(path)
        doc = _doc(path, text)
        labels = {b.options.get("label") for b in se.count_directives(doc, "exercise")}
        solutions = se.count_directives(doc, "solution")
        assert {b.argument for b in solutions} <= labels, path.name
        total += len(solutions)
        if path in NOTEBOOKS:
            assert labels, f"{path.name} has no exercise"
    assert total >= 42


def test_write_student_notebooks(tmp_path: Path) -> None:
    src = tmp_path / "nb"
    src.mkdir()
    for path in NOTEBOOKS[:2]:
        (src / path.name).write_bytes(path.read_bytes())
    (src / "helper.py").write_text("X = 1\n", encoding="utf-8")
    (src / ".ipynb_checkpoints").mkdir()
    out = tmp_path / "student" / "notebooks"
    removed = se.write_student_notebooks(src, out)
    assert set(removed) == {p.name for p in NOTEBOOKS[:2]} and all(removed.values())
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [p.name for p in NOTEBOOKS[:2]] + ["helper.py", "README.md"])
    for path in NOTEBOOKS[:2]:
        assert (out / path.name).read_text(encoding="utf-8") == _load(path)[1]
    assert "jupyter lab _build/student/notebooks" in (out / "README.md").read_text()


# ---------------------------------------------------------------------------------------------
# the student HTML against the instructor HTML

STUDENT_HTML = os.environ.get("CBDT_STUDENT_HTML")
BOOK_HTML = Path(os.environ.get("CBDT_BOOK_HTML", REPO / "_build" / "html")).resolve()
# the numbered pages: chapter NN, and the proof page, a section of chapter 2 (_toc.yml)
CHAPTER_OF_PAGE = {f"notebooks/{p.stem}.html": int(p.name[:2]) for p in NOTEBOOKS}
CHAPTER_OF_PAGE["book/proof_proposition1.html"] = 2
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr", "param"}
_DIV = re.compile(r"<(/?)div\b([^>]*)>", re.IGNORECASE)
_CLASS = re.compile(r"""\bclass\s*=\s*["']([^"']*)["']""")
_SCRIPT = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_ALPHA = re.compile(r"[^\W\d_]+")


class _Box(HTMLParser):
    """The id, the title ("Exercise 5.2", "Exercise (1.1 Two cases)"), the caption number
    ("Exercise 5.2", empty on an unnumbered page) and the text of one exercise or solution."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.id: str | None = None
        self.title = ""
        self.number = ""
        self.text: list[str] = []
        self._open: list[tuple[str, str]] = []  # (tag, "title" | "number" | "")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if self.id is None:
            self.id = a.get("id", "")
        if tag in VOID:
            return
        classes = a.get("class", "").split()
        role = ("title" if "admonition-title" in classes
                else "number" if "caption-number" in classes else "")
        self._open.append((tag, role))

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        roles = {role for _, role in self._open}
        if "title" in roles:
            self.title += data
        if "number" in roles:
            self.number += data


@dataclasses.dataclass
class _Page:
    """A built page: its exercises (id -> number), solutions (id -> text), links, ids, and its
    text with the solutions cut out."""

    exercises: dict[str, tuple[str, str]]
    solutions: dict[str, str]
    hrefs: list[str]
    ids: set[str]
    outside: str
    html: str


def _text(html: str) -> str:
    """The page's text: scripts and styles dropped, tags removed, entities decoded."""
    return " ".join(unescape(_TAG.sub(" ", _SCRIPT.sub(" ", html))).split())


@functools.cache
def _page(path: Path) -> _Page:
    html = path.read_text(encoding="utf-8")
    exercises: dict[str, tuple[str, str]] = {}
    solutions: dict[str, str] = {}
    cut: list[tuple[int, int]] = []
    scan = 0
    for match in _DIV.finditer(html):
        if match.start() < scan or match.group(1):
            continue
        classes = set((_CLASS.search(match.group(2)) or [None, ""])[1].split())
        kind = "exercise" if "exercise" in classes else "solution" if "solution" in classes else ""
        if not kind:
            continue
        depth, end = 0, len(html)
        for div in _DIV.finditer(html, match.start()):  # the matching </div>
            depth += -1 if div.group(1) else 1
            if depth == 0:
                end = div.end()
                break
        box = _Box()
        box.feed(html[match.start():end])
        box.close()
        if kind == "exercise":
            exercises[box.id or ""] = (" ".join(box.title.split()), " ".join(box.number.split()))
        else:
            solutions[box.id or ""] = "".join(box.text)
            cut.append((match.start(), end))
        scan = end
    outside, last = [], 0
    for start, end in cut:
        outside.append(html[last:start])
        last = end
    outside.append(html[last:])
    ids = set(re.findall(r"""\bid\s*=\s*["']([^"']*)["']""", html))
    hrefs = re.findall(r"""\bhref\s*=\s*["']([^"']*)["']""", html)
    return _Page(exercises, solutions, hrefs, ids, _text("".join(outside)), html)


def _pages(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.html")
                  if not p.relative_to(root).parts[0].startswith("_"))


def _search_index(root: Path) -> dict[str, Any]:
    text = (root / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1: text.rindex(")")])


def _docs_of(entry: int | list[int]) -> set[int]:
    return {entry} if isinstance(entry, int) else set(entry)


@pytest.fixture(scope="module")
def roots() -> tuple[Path, Path]:
    """(instructor HTML, student HTML)."""
    student = Path(STUDENT_HTML or "").resolve()
    for root in (student, BOOK_HTML):
        if not (root / "index.html").exists():
            pytest.fail(f"{root} is not a built book")
    return BOOK_HTML, student


@pytest.mark.skipif(not STUDENT_HTML, reason="set CBDT_STUDENT_HTML (make test builds it)")
class TestStudentHTML:
    """The student book (``CBDT_STUDENT_HTML``) against the instructor book (``_build/html``)."""

    def test_same_pages(self, roots: tuple[Path, Path]) -> None:
        book, student = roots
        assert [p.relative_to(student) for p in _pages(student)] == \
            [p.relative_to(book) for p in _pages(book)]

    def test_no_solution_and_every_exercise_numbered_as_in_the_instructor_book(
            self, roots: tuple[Path, Path]) -> None:
        book, student = roots
        solution_ids: set[str] = set()
        exercises: dict[str, str] = {}
        for path in _pages(book):
            rel = path.relative_to(book)
            mine, theirs = _page(student / rel), _page(path)
            solution_ids |= set(theirs.solutions)
            assert mine.solutions == {}, f"{rel}: solutions left"
            assert mine.exercises == theirs.exercises, f"{rel}: exercises differ"
            for label, (title, number) in mine.exercises.items():
                assert title.startswith("Exercise"), f"{rel}: {label} has the title {title!r}"
                # a chapter's exercises (and those of its sections) are numbered per chapter
                chapter = CHAPTER_OF_PAGE.get(rel.as_posix())
                if chapter is not None:
                    assert re.fullmatch(rf"Exercise {chapter}\.\d+", number), \
                        f"{rel}: {label} is numbered {number!r}"
            exercises.update({k: f"{rel}: {v}" for k, v in mine.exercises.items()})
            # text that only a solution had is gone from the page
            for sid, text in theirs.solutions.items():
                for line in text.splitlines():
                    line = " ".join(unescape(line).split())
                    if len(line) >= MIN_LINE and line not in theirs.outside:
                        assert line not in mine.outside, f"{rel}: text of solution {sid} left"
        assert len(solution_ids) >= 42
        # every exercise of the sources, with its label
        labels = {b.options.get("label") for path in SOURCES
                  for b in se.count_directives(_doc(path, _load(path)[0]), "exercise")}
        assert set(exercises) == labels
        # nothing on any student page (the search page, genindex...) points to a solution
        for path in _pages(student):
            page = _page(path)
            assert not page.ids & solution_ids, f"{path.name}: a solution's id is left"
            dangling = [h for h in page.hrefs if h.rpartition("#")[2] in solution_ids]
            assert dangling == [], f"{path.name}: links to removed solutions"
            assert 'class="solution' not in page.html

    def test_search_index_has_no_word_only_a_solution_had(self, roots: tuple[Path, Path]) -> None:
        from sphinx.search.en import SearchEnglish

        book, student = roots
        stem = functools.cache(SearchEnglish({}).stem)
        ours, theirs = _search_index(student), _search_index(book)
        assert ours["docnames"] == theirs["docnames"]

        def terms(text: str) -> set[str]:
            # the forms the indexer stores (Sphinx's IndexBuilder.feed): the stem, else the word
            words = set(_ALPHA.findall(text))
            return words | {w.lower() for w in words} | {stem(w).lower() for w in words}

        caught = 0
        for doc, docname in enumerate(ours["docnames"]):
            rel = Path(docname + ".html")
            solutions = _page(book / rel).solutions
            if not solutions:
                continue
            # every word of the student page (its whole text, titles included) may be indexed
            page = _page(student / rel)
            allowed = terms(_text(page.html))
            only = terms(" ".join(solutions.values())) - allowed
            for kind in ("terms", "titleterms"):
                left = {w for w in only if doc in _docs_of(ours[kind].get(w, []))}
                assert left == set(), f"{docname}: the search index still has {sorted(left)}"
                caught += sum(doc in _docs_of(theirs[kind].get(w, [])) for w in only)
        assert caught > 0, "the check never saw a solution-only word in the instructor index"

    def test_inventory_and_downloads_have_no_solution(self, roots: tuple[Path, Path]) -> None:
        from sphinx.util.inventory import InventoryFile

        book, student = roots
        with open(student / "objects.inv", "rb") as fh:
            inv = InventoryFile.load(fh, "", lambda base, uri: uri)
        labels = set(inv.get("std:label", {}))
        assert not {k for k in labels if "-solution-" in k}
        exercises = {b.options.get("label") for path in SOURCES
                     for b in se.count_directives(_doc(path, _load(path)[0]), "exercise")}
        assert exercises <= labels
        sources = sorted((student / "_sources").rglob("*"))
        assert sources
        for path in sources:
            if path.suffix in (".ipynb", ".md"):
                text = path.read_text(encoding="utf-8")
                assert se.count_directives(_doc(path, text), "solution") == [], path.name
                original = book / "_sources" / path.relative_to(student / "_sources")
                assert text == se.strip_text(original.read_text(encoding="utf-8"), path.suffix)
