"""Write (or check) the generated parts of the book's Reference pages.

Usage:
    python scripts/reproducibility_page.py           # regenerate them
    python scripts/reproducibility_page.py --check   # exit 1 when any of them is out of date

What it writes:

* ``book/reproducibility.md``, all of it, from the chapters' stored claims
  (:func:`cbdt.book.claims.render_page`);
* in ``book/instructor.md``, the block between the markers ``<!-- BEGIN generated: claims -->``
  and ``<!-- END generated: claims -->``: what the book confirms and what it does not
  (:func:`cbdt.book.claims.render_confirmations`), and the block between the ``exercises`` markers:
  every exercise of the chapters, classified as pen-and-paper or coding by
  :func:`classify_exercise`.

The claims are written by the chapters themselves (``scripts/execute_notebooks.py
--write-claims``) into ``book/_claims/<chapter>.json``; nbval checks them on every run.
``tests/test_claims.py`` fails when a stored page differs from its rendering.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

from cbdt.book.claims import load_claims, render_confirmations, render_page

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "reproducibility.md"
INSTRUCTOR = ROOT / "book" / "instructor.md"
CLAIMS = ROOT / "book" / "_claims"
NOTEBOOKS = ROOT / "notebooks"

#: The three kinds of exercise, in the order the instructor page lists them.
KINDS = ("pen and paper", "coding", "both")

# a sphinx-exercise directive in a MyST fence of backticks or tildes (3 or more)
_DIRECTIVE = re.compile(r"^(?P<fence>`{3,}|~{3,})\{(?P<kind>exercise|solution)\}[ \t]*(?P<arg>\S*)"
                        r"[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M)
_CODE = re.compile(r"^\s*(?:\d+\.|[-*]|\([a-z]+\))?\s*(`{3,}|~{3,})\s*(\{code-cell\}\s*)?(python|ipython3?)\b", re.M)
_TAG = re.compile(r"^\s*\*\((?P<tag>[^)]*)\)\*")
_PROOF = re.compile(r"\b(show|prove|derive|conclude)\b", re.I)


def _label(body: str, arg: str) -> str:
    m = re.search(r"^:label:\s*(\S+)", body, re.M)
    return m.group(1) if m else arg


def _text(body: str) -> str:
    """The directive's body without its ``:option:`` lines."""
    return "\n".join(ln for ln in body.splitlines() if not re.match(r"^:\w[\w-]*:", ln)).strip()


def classify_exercise(exercise: str, solution: str) -> tuple[str, str]:
    """The kind of one exercise and the rule that decided it.

    Rules, first match wins:

    1. the exercise's own tag, ``*(pen and paper)*``, ``*(coding)*`` or ``*(pen and paper,
       then code)*`` at the start of its text (``both`` for the last);
    2. otherwise: *code* when the exercise or its solution holds a Python code block (the
       reader is expected to run something), *derivation* when the exercise asks to show,
       prove, derive or conclude something; both give ``both``, code alone ``coding``, and a
       derivation or neither (a question answered in prose) ``pen and paper``.

    Parameters
    ----------
    exercise, solution : str
        The bodies of the ``{exercise}`` directive and of its ``{solution}``.

    Returns
    -------
    (kind, rule) : (str, str)
        ``kind`` is one of :data:`KINDS`; ``rule`` is ``"tag"`` or ``"content"``.
    """
    text = _text(exercise)
    m = _TAG.match(text)
    if m:
        tag = m.group("tag").lower()
        paper, code = "pen and paper" in tag, "cod" in tag
        if paper or code:
            return ("both" if paper and code else "pen and paper" if paper else "coding"), "tag"
    code = bool(_CODE.search(exercise) or _CODE.search(solution))
    proof = bool(_PROOF.search(text))
    if code and proof:
        return "both", "content"
    return ("coding" if code else "pen and paper"), "content"


#: Pages outside the notebooks whose exercises belong to a chapter (and continue its numbering):
#: the proof of Proposition 1 is a section of chapter 2 (see ``_toc.yml``).
SECTION_PAGES = {ROOT / "book" / "proof_proposition1.md": "02"}


def _exercise_rows(doc: str, chapter: str, md: str) -> list[dict[str, str]]:
    exercises: dict[str, str] = {}
    solutions: dict[str, str] = {}
    for m in _DIRECTIVE.finditer(md):
        target = exercises if m.group("kind") == "exercise" else solutions
        target[_label(m.group("body"), m.group("arg"))] = m.group("body")
    rows = []
    for label, body in exercises.items():
        kind, rule = classify_exercise(body, solutions.get(label, ""))
        rows.append({"doc": doc, "chapter": chapter, "label": label, "kind": kind, "rule": rule})
    return rows


def collect_exercises(notebooks: pathlib.Path = NOTEBOOKS,
                      sections: dict[pathlib.Path, str] | None = None) -> list[dict[str, str]]:
    """Every exercise of the chapters and of their section pages, classified and numbered.

    Parameters
    ----------
    notebooks : pathlib.Path
        The folder of the chapters (``NN_topic.ipynb``).
    sections : dict, optional
        Markdown pages that are sections of a chapter, mapped to the chapter's number
        (default :data:`SECTION_PAGES`); their exercises follow the chapter's own.

    Returns
    -------
    list of dict
        ``{"doc", "chapter", "number", "label", "kind", "rule"}`` in chapter and exercise
        order; ``number`` is the exercise's number as the book prints it (``"2.4"``).
    """
    sections = SECTION_PAGES if sections is None else sections
    rows = []
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        md = "\n\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                         for c in cells if c["cell_type"] == "markdown")
        chapter = path.stem[:2]
        mine = _exercise_rows(f"notebooks/{path.stem}", chapter, md)
        for page, ch in sections.items():
            if ch == chapter:
                mine += _exercise_rows(f"book/{page.stem}", chapter,
                                       page.read_text(encoding="utf-8"))
        for i, row in enumerate(mine, start=1):
            row["number"] = f"{int(chapter)}.{i}"
        rows += mine
    return rows


def render_exercises(rows: list[dict[str, str]]) -> str:
    """The instructor page's table of exercises: one row per chapter (MyST Markdown).

    Parameters
    ----------
    rows : list of dict
        From :func:`collect_exercises`.

    Returns
    -------
    str
    """
    chapters = list(dict.fromkeys(r["chapter"] for r in rows))
    by_tag = sum(r["rule"] == "tag" for r in rows)
    totals = {k: sum(r["kind"] == k for r in rows) for k in KINDS}
    sections = sorted({r["doc"] for r in rows if not r["doc"].startswith("notebooks/")})
    lines = [
        f"In all, {len(rows)} exercises in {len(chapters)} chapters"
        + (" (including those of " + ", ".join(f"{{doc}}`../{d}`" for d in sections) + ")"
           if sections else "")
        + ": " + ", ".join(f"{totals[k]} {k}" for k in KINDS)
        + f" ({by_tag} classified by their own tag, {len(rows) - by_tag} by their content).",
        "",
        "| chapter | pen and paper | coding | both |",
        "|---|---|---|---|",
    ]
    for ch in chapters:
        mine = [r for r in rows if r["chapter"] == ch]
        doc = next(r["doc"] for r in mine if r["doc"].startswith("notebooks/"))
        cells = [", ".join(f"{{ref}}`{r['number']} <{r['label']}>`"
                           for r in mine if r["kind"] == k) or "-" for k in KINDS]
        lines.append(f"| {{doc}}`{int(ch):d} <../{doc}>` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def blocks() -> dict[str, str]:
    """The generated blocks of ``book/instructor.md``, by marker name."""
    return {"claims": render_confirmations(load_claims(CLAIMS)),
            "exercises": render_exercises(collect_exercises())}


def fill(page: str, generated: dict[str, str]) -> str:
    """``page`` with the text between each ``BEGIN/END generated: <name>`` pair replaced."""
    for name, text in generated.items():
        pat = re.compile(rf"(<!-- BEGIN generated: {name} -->\n).*?(<!-- END generated: {name} -->)",
                         re.S)
        if not pat.search(page):
            raise ValueError(f"the page has no '<!-- BEGIN generated: {name} -->' ... "
                             f"'<!-- END generated: {name} -->' block")
        page = pat.sub(lambda m, t=text: m.group(1) + "\n" + t + "\n" + m.group(2), page)
    return page


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check, do not write")
    args = ap.parse_args(argv)
    wanted = {PAGE: render_page(load_claims(CLAIMS)),
              INSTRUCTOR: fill(INSTRUCTOR.read_text(encoding="utf-8"), blocks())}
    stale = [p for p, text in wanted.items() if p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p} is out of date; run python scripts/reproducibility_page.py")
        if not stale:
            print(f"{PAGE} and {INSTRUCTOR} match {CLAIMS} and {NOTEBOOKS}")
        return 1 if stale else 0
    for p, text in wanted.items():
        p.write_text(text, encoding="utf-8")
        print(f"wrote {p} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
