"""Refresh the stored display of each chapter's claims cell from book/_claims (no re-run).

The cell ``claims.report(...)`` displays the ChapterClaims that nbval has just checked to equal
``book/_claims/<chapter>.json``; when only the *display* (``cbdt.book.claims``' HTML/text rendering)
changes, this rewrites the stored outputs of those cells from the JSON, without re-executing
the chapters. nbval then confirms the result.
"""

from __future__ import annotations

import pathlib
import sys

import nbformat

from cbdt.book.claims import load_claims

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    for ch in load_claims(ROOT / "book" / "_claims"):
        path = ROOT / f"{ch.doc}.ipynb"
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if c.cell_type == "code" and "claims.report(" in c.source]
        if len(cells) != 1:
            print(f"{path}: expected one claims.report cell, found {len(cells)}")
            return 1
        outs = [o for o in cells[0].outputs if o.get("output_type") == "execute_result"]
        if len(outs) != 1:
            print(f"{path}: the claims cell has no single execute_result")
            return 1
        outs[0]["data"] = {"text/markdown": ch._repr_markdown_(), "text/plain": repr(ch)}
        nbformat.write(nb, path)
        print(f"{path.name}: refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
