"""Each chapter's stated reading time is the one computed from the chapter (issue 32, item 7).

``cbdt.book.reading_time`` counts the words and code lines a student reads (the student
edition: solutions removed) and converts them at stated rates; ``scripts/reading_times.py``
writes the minutes into each chapter's first cell and into the session plan of
``book/instructor.md``. These tests fail when a stated time, or a session's total, is not the
computed one, and check the counting itself on small notebooks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

from cbdt.book.reading_time import (
    CODE_LINES_PER_MINUTE,
    ROUND_TO,
    WORDS_PER_MINUTE,
    ReadingTime,
    reading_time,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import reading_times as rt  # noqa: E402

TIMES = rt.computed()


@pytest.mark.parametrize("path", rt.NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_states_its_computed_reading_time(path: Path) -> None:
    t = TIMES[path.stem]
    assert rt.stated_in_chapter(path) == t.minutes, (
        f"{path.name} states {rt.stated_in_chapter(path)} minutes; computed {t.minutes} "
        f"({t.words} words, {t.code_lines} code lines): python scripts/reading_times.py")


def test_session_plan_states_the_computed_times_and_totals() -> None:
    plan = rt.stated_in_plan()
    assert {stem for stem, _ in plan} == set(TIMES), "every chapter has a place in the plan"
    wrong = [(s, m, TIMES[s].minutes) for s, m in plan if m != TIMES[s].minutes]
    assert not wrong, f"book/instructor.md: (chapter, stated, computed) {wrong}"
    text = rt.INSTRUCTOR.read_text(encoding="utf-8")
    assert rt.with_totals(text) == text, "a session's 'min in all' is not the sum of its cells"
    assert text.count("min in all") == 4  # the four sessions


def test_the_plan_keeps_its_nbcheck_markers() -> None:
    text = rt.INSTRUCTOR.read_text(encoding="utf-8")
    assert "% nbcheck: runs after notebooks/" in text


def _nb(*cells: tuple[str, str, list[str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    for kind, src, tags in cells:
        cell = (nbformat.v4.new_markdown_cell(src) if kind == "md"
                else nbformat.v4.new_code_cell(src))
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


def test_counting_words_and_code_lines() -> None:
    md = ("# A title\n\nSome prose, with $x_i$ math.\n<!-- not read -->\n% not read either\n\n"
          "```{exercise}\n:label: ex-1\n\nDo it.\n\n~~~python\nx = 1\n\ncheck(x)\n~~~\n```\n")
    nb = _nb(("md", md, []), ("code", "a = 1\n\nb = 2\n", []),
             ("md", "ten more words that a lab only cell shows in lab", ["remove-cell"]))
    t = reading_time(nb)
    # words: A title (2) + Some prose, with $x_i$ math. (5) + ```{exercise} (1) + Do it. (2)
    assert t == ReadingTime(words=10, code_lines=4)


def test_minutes_round_up_to_the_stated_step() -> None:
    assert ReadingTime(0, 0).minutes == ROUND_TO
    one_step = ReadingTime(WORDS_PER_MINUTE * ROUND_TO, 0)
    assert one_step.minutes == ROUND_TO
    assert ReadingTime(WORDS_PER_MINUTE * ROUND_TO + 1, 0).minutes == 2 * ROUND_TO
    assert ReadingTime(0, CODE_LINES_PER_MINUTE * 7).minutes == 10
    assert ReadingTime(1000, 100).exact_minutes == pytest.approx(
        1000 / WORDS_PER_MINUTE + 100 / CODE_LINES_PER_MINUTE)
