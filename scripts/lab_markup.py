"""Make the chapters' MyST markup render in JupyterLab (jupyterlab-myst) as it does in the book.

Usage:
    python scripts/lab_markup.py notebooks/01_cbdt_theory.ipynb ...   # rewrite these notebooks
    python scripts/lab_markup.py --check notebooks/*.ipynb            # exit 1 if one would change

jupyterlab-myst (the ``book`` extra) renders the notebooks' MyST in JupyterLab with mystmd:
roles, admonitions, exercises, solutions (folded: ``:class: dropdown``) and math. It sees one
notebook at a time, so what a chapter cites from *other* pages of the book does not resolve
there, and a few book conventions differ. This script fixes that in the notebook itself, in a
way the book (Sphinx, Jupyter Book 1.x) renders exactly as before:

* **Cells only JupyterLab shows.** Cells tagged ``remove-cell`` are dropped by MyST-NB before
  Sphinx parses them, so they can hold markup for JupyterLab alone. The script writes two kinds,
  each with an id starting ``lab-``; it deletes and rewrites them on every run (idempotent):

  - ``lab-fig-...``: after each figure (a code cell with ``mystnb.figure`` metadata, or a
    ``{glue:figure}`` cell) its number and caption, as the book prints them (``Fig. 7.3``);
    ``{numref}`` resolves to it.
  - ``lab-cited`` (the last cell): what the chapter cites from other pages, so that each
    reference resolves in the notebook and shows its target on hover: the paper's equations
    from ``book/equations.md`` with the paper's numbers (``{eq}`eq-9``` renders as "(9)"), the
    statements of ``book/proof_proposition1.md`` (``{prf:ref}``), the exercises of other
    chapters (``{ref}``), the glossary entries of ``book/notation.md`` (``{term}``) and the
    bibliography entries of ``book/references.bib`` (mystmd cannot resolve ``{cite}`` without a
    bibliography; it shows the key, which this list spells out).

* **Unlabelled displays.** ``$$ ... $$`` becomes ``\\begin{equation*} ... \\end{equation*}``:
  the book never numbers an unlabelled display, mystmd numbers every ``$$`` display.

* **Links to other pages.** ``{doc}`09_drift_grid``` and ``{ref}`text <page-label>``` (a label
  that opens a page) become Markdown links to the file, ``[](09_drift_grid.ipynb)`` and
  ``[text](../book/reproducibility.md)``. The book renders them as before (the page title, or the
  text); in JupyterLab the link opens the notebook or page (``{doc}`` would point at a file that
  does not exist).

* **``{glue:figure}`` cells** (an unknown directive to mystmd) get ``jupyter.source_hidden`` so
  JupyterLab shows them collapsed (the figure is the output of the code cell above, the caption
  is in the ``lab-fig-`` cell below); a cell that holds text besides the directive is split so
  the text stays visible.

Everything is read from the book's own sources on each run; nothing is typed twice. Run the
script again after editing a chapter's references, ``book/equations.md``, ``book/notation.md``,
``book/proof_proposition1.md`` or ``book/references.bib`` (``--check`` says whether it is due).

What stays different in JupyterLab: a chapter's exercises are numbered 1, 2, ... (the book: 5.1,
5.2, ...), since mystmd reads a numbering prefix only from front matter in the first cell, which
the title cell cannot carry; and a citation shows its key (``gilboa1995case``) with a warning
mark, spelled out in the ``lab-cited`` cell.
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import re
import sys
from collections.abc import Iterable

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BOOK = ROOT / "book"
#: prefix of the ids of the cells this script writes (and deletes on every run)
LAB_ID = "lab-"
LAB_TAG = "remove-cell"

_ROLE = r"\{%s\}`([^`]+)`"
_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$", re.M)
_TEXT_TARGET = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)


# ----------------------------------------------------------------------------- the book's sources


def _fenced_blocks(text: str, names: Iterable[str]) -> list[dict]:
    """Fenced directives ``name`` in ``text``: name, argument, options, body, span."""
    names = set(names)
    out = []
    for m in _FENCE.finditer(text):
        if m["name"] not in names:
            continue
        fence = m["fence"]
        end = re.compile(rf"^{re.escape(fence)}[ \t]*$", re.M).search(text, m.end())
        if end is None:
            raise ValueError(f"unclosed {{{m['name']}}} directive")
        body = text[m.end() + 1 : end.start()]
        options: dict[str, str] = {}
        lines = body.split("\n")
        while lines and (opt := re.match(r"^:([\w-]+):\s*(.*)$", lines[0])):
            options[opt[1]] = opt[2].strip()
            lines.pop(0)
        out.append({"name": m["name"], "arg": m["arg"].strip(), "options": options,
                    "body": "\n".join(lines).strip("\n"), "span": (m.start(), end.end())})
    return out


def book_equations() -> dict[str, str]:
    """The paper's equations, ``{"eq-9": TeX}``, as ``book/equations.md`` defines them."""
    text = (BOOK / "equations.md").read_text(encoding="utf-8")
    eqs = {m[2]: m[1].strip() for m in re.finditer(r"^\$\$\n(.*?)\n\$\$ \((eq-\d+)\)", text,
                                                    re.M | re.S)}
    if not eqs:
        raise ValueError("no labelled equation found in book/equations.md")
    return eqs


def book_glossary() -> dict[str, tuple[str, str]]:
    """Glossary entries of ``book/notation.md``: ``{lowercase term: (term, definition)}``."""
    text = (BOOK / "notation.md").read_text(encoding="utf-8")
    entries: dict[str, tuple[str, str]] = {}
    for block in _fenced_blocks(text, ["glossary"]):
        # an entry: one or more unindented term lines, then its indented definition lines
        groups: list[tuple[list[str], list[str]]] = []
        for line in block["body"].split("\n"):
            if not line.strip():
                continue
            if line.startswith((" ", "\t")):
                groups[-1][1].append(line.strip())
            elif groups and not groups[-1][1]:
                groups[-1][0].append(line.strip())
            else:
                groups.append(([line.strip()], []))
        for terms, definition in groups:
            for term in terms:
                entries[term.lower()] = (term, " ".join(definition))
    return entries


def _toc_chapter(docname: str) -> int:
    """The chapter number of a notebook or of a section page (from its notebook's prefix)."""
    if docname.startswith("notebooks/"):
        return int(pathlib.PurePath(docname).name[:2])
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    m = re.search(r"file: notebooks/(\d\d)_\w+\n\s+sections:\n(?:\s+- file: .*\n)*?\s+- file: "
                  + re.escape(docname) + r"\s*$", toc, re.M)
    if m is None:
        raise ValueError(f"{docname} is not a section of a numbered chapter in _toc.yml")
    return int(m[1])


def book_statements() -> dict[str, dict]:
    """The ``{prf:...}`` statements of ``book/proof_proposition1.md`` with their book numbers.

    sphinx-proof numbers each kind per chapter: the page is a section of ch. 2, so ``prop-1``
    is Proposition 2.1 and ``rem-uniqueness`` Remark 2.1.
    """
    page = "book/proof_proposition1"
    chapter = _toc_chapter(page)
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    counts: dict[str, int] = {}
    out = {}
    for block in _fenced_blocks(text, [f"prf:{k}" for k in (
            "proposition", "lemma", "theorem", "corollary", "remark", "definition", "example",
            "conjecture", "axiom", "criterion", "property", "observation", "assumption",
            "notation", "algorithm")]):
        kind = block["name"]
        counts[kind] = counts.get(kind, 0) + 1
        label = block["options"].get("label")
        if label:
            out[label] = {**block, "enumerator": f"{chapter}.{counts[kind]}"}
    return out


def book_exercises() -> dict[str, tuple[str, str]]:
    """Every chapter's exercise labels: ``{"ex-09-2": ("9.2", "09_drift_grid.ipynb")}``."""
    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        k = 0
        for cell in nb.cells:
            if cell.cell_type != "markdown" or cell.get("id", "").startswith(LAB_ID):
                continue
            for block in _fenced_blocks(cell.source, ["exercise"]):
                k += 1
                label = block["options"].get("label")
                if label:
                    out[label] = (f"{int(path.name[:2])}.{k}", path.name)
    return out


def page_labels() -> dict[str, pathlib.Path]:
    """Labels that open a page (``(label)=`` on its first line): ``{label: file}``."""
    out = {}
    for path in sorted(BOOK.glob("*.md")) + sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        if path.suffix == ".md":
            first = path.read_text(encoding="utf-8").lstrip().split("\n", 1)[0]
        else:
            cells = [c for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "markdown" and not c.get("id", "").startswith(LAB_ID)]
            first = cells[0].source.lstrip().split("\n", 1)[0] if cells else ""
        m = re.fullmatch(r"\(([\w-]+)\)=\s*", first)
        if m:
            out[m[1]] = path
    return out


def bibliography() -> dict[str, str]:
    """``book/references.bib`` as ``{key: "Authors (year). Title. Venue."}`` (plain text)."""
    from pybtex.database import parse_file

    data = parse_file(str(BOOK / "references.bib"))
    out = {}
    for key, entry in data.entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [" ".join(p.last_names).replace("{", "").replace("}", "") for p in people]
        if len(names) > 2:
            who = f"{names[0]} et al."
        else:
            who = " and ".join(names)
        f = entry.fields
        title = f.get("title", "").replace("{", "").replace("}", "")
        venue = (f.get("journal") or f.get("booktitle") or f.get("publisher")
                 or f.get("howpublished") or f.get("institution") or "")
        venue = re.sub(r"\\url\{([^}]*)\}", r"\1", venue).replace("{", "").replace("}", "")
        parts = [f"{who} ({f.get('year', 'n.d.')})", title, f"*{venue}*" if venue else ""]
        out[key] = ". ".join(p for p in parts if p) + "."
    return out


class Book:
    """Everything a notebook may cite from other pages, read once."""

    def __init__(self) -> None:
        self.equations = book_equations()
        self.glossary = book_glossary()
        self.statements = book_statements()
        self.exercises = book_exercises()
        self.pages = page_labels()
        self._bib: dict[str, str] | None = None

    @property
    def bib(self) -> dict[str, str]:
        if self._bib is None:
            self._bib = bibliography()
        return self._bib


# ----------------------------------------------------------------------------- rewriting


def _resolve_doc(target: str, notebook: pathlib.Path) -> pathlib.Path | None:
    """The file a ``{doc}`` target names (relative to the notebook, or absolute from the root)."""
    base = ROOT if target.startswith("/") else notebook.parent
    stem = (base / target.lstrip("/")).resolve()
    for suffix in (".ipynb", ".md"):
        if stem.with_suffix(suffix).is_file():
            return stem.with_suffix(suffix)
    return None


def _rel(path: pathlib.Path, notebook: pathlib.Path) -> str:
    return pathlib.Path(os.path.relpath(path, notebook.parent)).as_posix()


def rewrite_links(source: str, notebook: pathlib.Path, book: Book) -> str:
    """``{doc}`` and page ``{ref}`` roles as Markdown links to the file."""

    def doc(m: re.Match) -> str:
        body = m[1]
        tm = _TEXT_TARGET.match(body)
        text, target = (tm["text"], tm["target"]) if tm else ("", body)
        path = _resolve_doc(target.strip(), notebook)
        if path is None:
            raise ValueError(f"{notebook.name}: {{doc}}`{body}`: no such page")
        return f"[{text}]({_rel(path, notebook)})"

    def ref(m: re.Match) -> str:
        body = m[1]
        tm = _TEXT_TARGET.match(body)
        text, target = (tm["text"], tm["target"]) if tm else ("", body)
        path = book.pages.get(target.strip())
        if path is None or path.resolve() == notebook.resolve():
            return m[0]  # a label inside a page: mystmd resolves it, or lab-cited holds it
        return f"[{text}]({_rel(path, notebook)})"

    source = re.sub(_ROLE % "doc", doc, source)
    source = re.sub(_ROLE % "ref", ref, source)
    # Sphinx's smart quotes read an apostrophe right after a link as an opening quote (after the
    # role it read a closing one): write the closing quote itself, as both renderers show it
    return re.sub(r"(\[[^\]]*\]\([^)\s]+\.(?:ipynb|md)\))'", "\\1\u2019", source)


_DISPLAY = re.compile(r"^(?P<indent>[ \t]*)\$\$[ \t]*\n(?P<body>.*?)\n(?P=indent)\$\$[ \t]*$",
                      re.M | re.S)


def unnumber_displays(source: str) -> str:
    """Unlabelled ``$$`` displays as ``equation*`` environments (unnumbered in both renderers).

    In the book an unlabelled display has no number (it restates an equation whose number the
    text cites); mystmd numbers every ``$$`` display, which would print a wrong "(1)" beside a
    restated eq. (9). A bare ``\\begin{equation*}`` block (MyST's amsmath syntax) is unnumbered
    in both. Labelled displays (``$$ ... $$ (label)``) are left alone.
    """

    def env(m: re.Match) -> str:
        indent, body = m["indent"], m["body"]
        if "$$" in body:  # not one display: leave it
            return m[0]
        return f"{indent}\\begin{{equation*}}\n{body}\n{indent}\\end{{equation*}}"

    return _DISPLAY.sub(env, source)


def _new_cell(cell_id: str, source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source=source)
    cell.id = cell_id
    cell.metadata = {"tags": [LAB_TAG]}
    return cell


def _figure_cell(label: str, enumerator: str, caption: str) -> nbformat.NotebookNode:
    return _new_cell(f"{LAB_ID}{label}"[:64], (
        f":::{{figure}}\n:label: {label}\n:enumerator: {enumerator}\n\n{caption.strip()}\n:::"))


def _split_glue(cell: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """A markdown cell with a ``{glue:figure}`` directive, split so the directive stands alone."""
    blocks = _fenced_blocks(cell.source, ["glue:figure"])
    if not blocks:
        return [cell]
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for b in blocks:
        start, end = b["span"]
        pieces += [(cell.source[pos:start], False), (cell.source[start:end], True)]
        pos = end
    pieces.append((cell.source[pos:], False))
    pieces = [(text.strip("\n"), is_glue) for text, is_glue in pieces if text.strip()]
    out = []
    for i, (text, is_glue) in enumerate(pieces):
        new = copy.deepcopy(cell)
        new.source = text
        if i:
            new.id = f"{cell.id}-{i}"[:64]
        if is_glue:
            # collapsed in JupyterLab; the leading empty line keeps the directive's first line
            # out of the collapsed cell's one-line preview
            new.source = "\n" + text
            new.metadata.setdefault("jupyter", {})["source_hidden"] = True
        out.append(new)
    return out


def _cited(texts: list[str], book: Book, chapter_file: str) -> dict[str, list[str]]:
    """Labels a notebook's text cites from other pages, closed under what those entries cite."""
    found: dict[str, list[str]] = {"eq": [], "prf": [], "ex": [], "term": [], "cite": []}
    pending = list(texts)

    def add(kind: str, key: str) -> bool:
        if key in found[kind]:
            return False
        found[kind].append(key)
        return True

    while pending:
        text = pending.pop(0)
        for label in re.findall(_ROLE % "eq", text):
            if label in book.equations:
                add("eq", label)
        for label in re.findall(_ROLE % "prf:ref", text):
            label = (_TEXT_TARGET.match(label)["target"] if _TEXT_TARGET.match(label)
                     else label).strip()
            if label in book.statements and add("prf", label):
                st = book.statements[label]
                pending.append(st["arg"] + "\n" + st["body"])
        for label in re.findall(_ROLE % "ref", text):
            label = (_TEXT_TARGET.match(label)["target"] if _TEXT_TARGET.match(label)
                     else label).strip()
            if label in book.exercises and book.exercises[label][1] != chapter_file:
                add("ex", label)
        for body in re.findall(_ROLE % "term", text):
            term = (_TEXT_TARGET.match(body)["target"] if _TEXT_TARGET.match(body)
                    else body).strip().lower()
            if term in book.glossary and add("term", term):
                pending.append(book.glossary[term][1])
        for keys in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            for key in keys.split(","):
                add("cite", key.strip())
    return found


def cited_cell(texts: list[str], notebook: pathlib.Path, book: Book
               ) -> nbformat.NotebookNode | None:
    """The ``lab-cited`` cell: the targets of the notebook's references to other pages."""
    found = _cited(texts, book, notebook.name)
    if not any(found.values()):
        return None
    eq_page = _rel(BOOK / "equations.md", notebook)
    parts = [
        "<!-- Written by scripts/lab_markup.py from the book's pages; the book hides this cell "
        "(tag remove-cell). Do not edit: run the script again. -->",
        "## Cited from other pages of the book",
        "*The equations, statements, exercises, glossary entries and works this chapter cites "
        "from other pages of the book, so that its references resolve in the notebook.*",
    ]
    if found["eq"]:
        parts.append(f"**Equations of the paper** (numbered as in the paper; all of them on the "
                     f"[equations page]({eq_page}))")
        for label in sorted(found["eq"], key=lambda s: int(s.split("-")[1])):
            number = label.split("-")[1]
            parts.append(f"```{{math}}\n:label: {label}\n:enumerated: true\n"
                         f":enumerator: {number}\n{book.equations[label]}\n```")
    if found["prf"]:
        proof = _rel(BOOK / "proof_proposition1.md", notebook)
        parts.append(f"**Statements** (with their proofs on the [proof page]({proof}))")
        order = list(book.statements)
        for label in sorted(found["prf"], key=order.index):
            st = book.statements[label]
            fence = "`" * max(4, max((len(f) for f in re.findall(r"^(`{3,})", st["body"], re.M)),
                                     default=0) + 1)
            parts.append(f"{fence}{{{st['name']}}} {st['arg']}\n:label: {label}\n"
                         f":enumerator: {st['enumerator']}\n\n{unnumber_displays(st['body'])}"
                         f"\n{fence}")
    if found["ex"]:
        for label in sorted(found["ex"]):
            number, where = book.exercises[label]
            parts.append(f"({label})=\n### Exercise {number}\n\nIn chapter [](" + where + ").")
    if found["term"]:
        notation = _rel(BOOK / "notation.md", notebook)
        entries = [book.glossary[t] for t in found["term"]]
        parts.append(f"**Glossary** (all terms on the [notation page]({notation}))")
        parts.append("```{glossary}\n" + "\n\n".join(f"{term}\n: {definition}"
                                                     for term, definition in entries) + "\n```")
    if found["cite"]:
        refs = _rel(BOOK / "references.md", notebook)
        lines = [f"- `{key}`: {book.bib.get(key, 'see the references page')}"
                 for key in sorted(found["cite"])]
        parts.append(f"**Works cited** (by their key; the [references page]({refs}) lists "
                     "all)\n\n" + "\n".join(lines))
    return _new_cell(f"{LAB_ID}cited", "\n\n".join(parts) + "\n")


def transform(nb: nbformat.NotebookNode, notebook: pathlib.Path, book: Book
              ) -> nbformat.NotebookNode:
    """The notebook with its JupyterLab markup (re)written; the input is not modified."""
    nb = copy.deepcopy(nb)
    chapter = int(notebook.name[:2])
    cells = [c for c in nb.cells if not c.get("id", "").startswith(LAB_ID)]
    out: list[nbformat.NotebookNode] = []
    n_fig = 0
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = unnumber_displays(rewrite_links(cell.source, notebook, book))
            for piece in _split_glue(cell):
                out.append(piece)
                for b in _fenced_blocks(piece.source, ["glue:figure"]):
                    n_fig += 1
                    label = b["options"].get("name") or b["options"].get("label")
                    if label:
                        out.append(_figure_cell(label, f"{chapter}.{n_fig}", b["body"]))
            continue
        out.append(cell)
        fig = cell.metadata.get("mystnb", {}).get("figure")
        if cell.cell_type == "code" and fig:
            n_fig += 1
            if fig.get("name"):
                out.append(_figure_cell(fig["name"], f"{chapter}.{n_fig}",
                                        fig.get("caption", "")))
    texts = [c.source for c in out if c.cell_type == "markdown"
             and not c.get("id", "").startswith(LAB_ID)]
    cited = cited_cell(texts, notebook, book)
    if cited is not None:
        out.append(cited)
    nb.cells = out
    nbformat.validate(nb)
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a notebook is out of date")
    args = parser.parse_args(argv)
    book = Book()
    stale = []
    for path in args.notebooks:
        path = path.resolve()
        nb = nbformat.read(path, as_version=4)
        new = transform(nb, path, book)
        if new == nb:
            continue
        stale.append(path)
        if not args.check:
            nbformat.write(new, path)
    for path in stale:
        print(("out of date: " if args.check else "rewrote: ") + str(path.relative_to(ROOT)
                                                                      if path.is_relative_to(ROOT)
                                                                      else path))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
