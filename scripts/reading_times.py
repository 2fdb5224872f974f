"""Write each chapter's reading time, computed by :mod:`cbdt.book.reading_time`.

Each chapter's first cell says "Reading time about N minutes", and the session plan of
``book/instructor.md`` gives each chapter as ``{doc}`k <../notebooks/NN_x>` (N min)``. This
script computes N from the student edition of the chapter (``student_edition.strip_notebook``:
the solutions are not read before class) and writes it into both places; nothing else changes.
``tests/test_reading_times.py`` fails when a stated time differs from the computed one.

usage::

    python scripts/reading_times.py           # print the table and write the minutes
    python scripts/reading_times.py --check   # print the table; exit 1 if a time is stale
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import student_edition  # noqa: E402

from cbdt.book.reading_time import ReadingTime, reading_time  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
INSTRUCTOR = ROOT / "book" / "instructor.md"
#: the statement in a chapter's first cell
CHAPTER_TIME = re.compile(r"Reading time about (\d+) minutes")
#: a chapter's time in the session plan
PLAN_TIME = re.compile(r"(\{doc\}`\d+ <\.\./notebooks/(\d\d_\w+)>`) \((\d+) min\)")
#: the total of a session's before-class cell
PLAN_TOTAL = re.compile(r"(\d+) min in all")


def with_totals(text: str) -> str:
    """The plan with each "N min in all" set to the sum of the chapter times in its cell."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("|") and PLAN_TOTAL.search(line):
            cells = line.split("|")
            for i, cell in enumerate(cells):
                if PLAN_TOTAL.search(cell):
                    total = sum(int(m.group(3)) for m in PLAN_TIME.finditer(cell))
                    cells[i] = PLAN_TOTAL.sub(f"{total} min in all", cell)
            line = "|".join(cells)
        out.append(line)
    return "".join(out)


def computed() -> dict[str, ReadingTime]:
    """Each chapter's reading time, keyed by the notebook's stem."""
    return {p.stem: reading_time(student_edition.strip_notebook(json.loads(
        p.read_text(encoding="utf-8")))) for p in NOTEBOOKS}


def stated_in_chapter(path: pathlib.Path) -> int | None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = nb["cells"][0]["source"]
    m = CHAPTER_TIME.search(src if isinstance(src, str) else "".join(src))
    return int(m.group(1)) if m else None


def stated_in_plan(text: str | None = None) -> list[tuple[str, int]]:
    """(chapter stem, minutes) of every chapter time in the session plan, in order."""
    text = INSTRUCTOR.read_text(encoding="utf-8") if text is None else text
    return [(m.group(2), int(m.group(3))) for m in PLAN_TIME.finditer(text)]


def write(times: dict[str, ReadingTime], skip: tuple[str, ...] = ()) -> list[str]:
    changed = []
    import nbformat  # one load-modify-save per notebook, as nbformat writes them

    for path in NOTEBOOKS:
        if path.stem in skip:
            continue
        minutes = times[path.stem].minutes
        if stated_in_chapter(path) in (None, minutes):
            continue
        nb = nbformat.read(path, as_version=4)
        nb.cells[0].source = CHAPTER_TIME.sub(f"Reading time about {minutes} minutes",
                                              nb.cells[0].source, count=1)
        nbformat.write(nb, path)
        changed.append(str(path.relative_to(ROOT)))
    text = INSTRUCTOR.read_text(encoding="utf-8")
    new = with_totals(PLAN_TIME.sub(
        lambda m: f"{m.group(1)} ({times[m.group(2)].minutes} min)", text))
    if new != text:
        INSTRUCTOR.write_text(new, encoding="utf-8")
        changed.append(str(INSTRUCTOR.relative_to(ROOT)))
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--skip", action="append", default=[], metavar="STEM",
                    help="leave this chapter's first cell as it is (may repeat)")
    args = ap.parse_args(argv)
    times = computed()
    for stem, t in times.items():
        print(f"{stem:28s} {t.words:6d} words {t.code_lines:5d} code lines "
              f"{t.exact_minutes:6.1f} -> {t.minutes:3d} min")
    if args.check:
        stale = [p.stem for p in NOTEBOOKS if stated_in_chapter(p) != times[p.stem].minutes]
        stale += [f"instructor.md: {s}" for s, m in stated_in_plan() if m != times[s].minutes]
        plan = INSTRUCTOR.read_text(encoding="utf-8")
        if with_totals(plan) != plan:
            stale.append("instructor.md: a session's total")
        if stale:
            print("stale reading times:", ", ".join(stale), "(python scripts/reading_times.py)")
            return 1
        return 0
    for f in write(times, tuple(args.skip)):
        print("wrote", f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
