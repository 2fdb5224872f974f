"""Write (or check) book/reproducibility.md from the chapters' stored claims.

Usage:
    python scripts/reproducibility_page.py           # regenerate the page
    python scripts/reproducibility_page.py --check   # exit 1 when the page is out of date

The claims are written by the chapters themselves (``scripts/execute_notebooks.py
--write-claims``) into ``book/_claims/<chapter>.json``; nbval checks them on every run.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from cbdt.claims import load_claims, render_page

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "reproducibility.md"
CLAIMS = ROOT / "book" / "_claims"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check, do not write")
    args = ap.parse_args(argv)
    page = render_page(load_claims(CLAIMS))
    if args.check:
        if PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE} is out of date; run python scripts/reproducibility_page.py")
            return 1
        print(f"{PAGE} matches {CLAIMS}")
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE} ({len(page.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
