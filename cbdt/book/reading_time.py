"""Reading times of the chapters, computed from the chapters themselves.

A chapter's first cell states "Reading time about N minutes", and the instructor page plans
its sessions with those minutes. Both are computed here, from what a student reads in the
student edition (every solution removed, as ``scripts/student_edition.py`` removes them):

* **prose**: the words of the markdown cells shown in the book (cells tagged ``remove-cell``,
  such as the ``lab-`` cells JupyterLab alone shows, do not count), code blocks inside the
  markdown excepted; a word is a run of non-blank characters holding a letter or a digit, so a
  formula counts one word per symbol group. Read at :data:`WORDS_PER_MINUTE`, a rate for
  technical prose with formulas (general prose is read at 230-250 words a minute);
* **code**: the non-blank lines of the code cells and of the code blocks inside the markdown
  (an exercise's check block, for instance), read at :data:`CODE_LINES_PER_MINUTE`: a student
  reads a line of code, and what it prints, rather than skims it.

Outputs (tables, figures) are not counted: they are read with the sentence that discusses
them. The sum is rounded *up* to a multiple of :data:`ROUND_TO` minutes.
``scripts/reading_times.py`` writes the minutes into each chapter's first cell and into the
session plan of ``book/instructor.md``; ``tests/test_reading_times.py`` fails when a stated
time is not the computed one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CODE_LINES_PER_MINUTE", "ROUND_TO", "WORDS_PER_MINUTE", "ReadingTime",
           "reading_time"]

#: Words of technical prose read per minute.
WORDS_PER_MINUTE = 200
#: Non-blank lines of code read per minute.
CODE_LINES_PER_MINUTE = 20
#: Reading times are rounded up to a multiple of this many minutes.
ROUND_TO = 5

_FENCE = re.compile(r"^\s*(?:(?:[-*+]|\d+[.)])\s+)?(`{3,}|~{3,})\s*([\w+-]*)")
_WORD = re.compile(r"\S*[^\W_]\S*")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# MyST directive fences ({exercise}, {figure}, ...) are markup, not code
_DIRECTIVE_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\{")


@dataclass(frozen=True)
class ReadingTime:
    """The words and code lines of a chapter and the minutes they take to read."""

    words: int
    code_lines: int

    @property
    def exact_minutes(self) -> float:
        return self.words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE

    @property
    def minutes(self) -> int:
        """The stated reading time: :attr:`exact_minutes` rounded up to :data:`ROUND_TO`."""
        return max(ROUND_TO, ROUND_TO * math.ceil(self.exact_minutes / ROUND_TO - 1e-9))


def _source(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def _markdown(text: str) -> tuple[int, int]:
    """Words of the prose and non-blank lines of the code blocks of one markdown text."""
    words = lines = 0
    fence: str | None = None
    for line in _COMMENT.sub("", text).splitlines():
        if fence is not None:
            if re.match(rf"^\s*{re.escape(fence)}\s*$", line):
                fence = None
            elif line.strip():
                lines += 1
            continue
        m = _FENCE.match(line)
        if m and not _DIRECTIVE_FENCE.match(line) and m.group(2) in ("python", "python3",
                                                                    "ipython3", "ipython"):
            fence = m.group(1)
            continue
        if line.lstrip().startswith(("%", ":label:", ":class:", ":enumerator:", ":name:")):
            continue  # MyST comments and directive options
        words += len(_WORD.findall(line))
    return words, lines


def reading_time(nb: Mapping[str, Any]) -> ReadingTime:
    """The reading time of a notebook as a student reads it.

    Parameters
    ----------
    nb : mapping
        A version-4 notebook (``nbformat.NotebookNode`` or the parsed JSON), *already without
        its solutions* (``scripts/student_edition.py``'s ``strip_notebook``).

    Returns
    -------
    ReadingTime
        Its words, code lines and minutes.
    """
    words = lines = 0
    for cell in nb["cells"]:
        if "remove-cell" in cell.get("metadata", {}).get("tags", []):
            continue
        src = _source(cell)
        if cell["cell_type"] == "markdown":
            w, c = _markdown(src)
            words, lines = words + w, lines + c
        elif cell["cell_type"] == "code":
            lines += sum(1 for line in src.splitlines() if line.strip())
    return ReadingTime(words, lines)
