"""The API reference page (book/api.md) and its Sphinx extension (book/_ext/api_reference.py).

The strict book build (``make book-strict``) is what proves the page complete: the extension
warns for every public name it does not document, and ``-W`` makes that an error. These tests
check, without a build, that the page asks for every module, that it is in the book and linked
from the README, that ``make test`` runs the docstrings' examples, and the extension's text
rewrites on small docstrings.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
API = ROOT / "book" / "api.md"
PAGES = [API, ROOT / "book" / "api_audit.md", ROOT / "book" / "api_data.md"]

sys.path.insert(0, str(ROOT / "book" / "_ext"))
api_reference = pytest.importorskip("api_reference")


def _automodules() -> list[str]:
    return [m for page in PAGES
            for m in re.findall(r"^\.\. automodule:: (\S+)$", page.read_text(encoding="utf-8"), re.M)]


def test_every_module_of_the_reference_is_rendered():
    assert set(api_reference.MODULES) <= set(_automodules())


def test_the_cbdt_section_excludes_only_reexports_documented_elsewhere():
    """``cbdt``'s excluded names are re-exports of a module that the page documents."""
    import cbdt

    text = API.read_text(encoding="utf-8")
    block = re.search(r":exclude-members:(.*?)\n   :", text, re.S).group(1)
    excluded = [n.strip() for n in block.replace("\n", " ").split(",") if n.strip()]
    documented = set(_automodules())
    for name in excluded:
        obj = getattr(cbdt, name)
        home = [m for m in documented if m != "cbdt"
                and getattr(importlib.import_module(m), name, None) is obj]
        assert home, f"cbdt.{name} is excluded but documented nowhere else"


def test_the_page_is_in_the_book_and_linked_from_the_readme():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [s["file"] for p in toc["parts"] for c in p["chapters"] for s in [c, *c.get("sections", [])]]
    assert {"book/api", "book/api_audit", "book/api_data"} <= set(files)
    assert "(book/api.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert "api_reference" in config["sphinx"]["local_extensions"]


def test_make_test_runs_the_docstring_examples():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test: .*\bdoctest\b", make, re.M)
    assert re.search(r"^doctest: .*\n\t.*--doctest-modules cbdt", make, re.M)


def test_bars_are_text_outside_roles_literals_and_math():
    lines = [
        "Scores, shape (m, |A|), one per action.",
        "The count :math:`|A|` and ``|A|`` stay as written.",
        ".. math:: \\sum_a |A|",
        "   x = |A|",
        "",
        "After the block, |H| is text again.",
    ]
    api_reference._bars_as_text(None, "function", "f", None, {}, lines)
    assert lines[0] == "Scores, shape (m, \\|A\\|), one per action."
    assert lines[1] == "The count :math:`|A|` and ``|A|`` stay as written."
    assert lines[2:5] == [".. math:: \\sum_a |A|", "   x = |A|", ""]
    assert lines[5] == "After the block, \\|H\\| is text again."


def test_attribute_types_become_text_and_properties_are_indexed_once():
    class Est:
        @property
        def dual_(self):
            """The dual matrix."""

    lines = [
        ".. attribute:: readout_",
        "",
        "   The readout.",
        "",
        "   :type: ndarray of shape (H, |A|)",
        "",
        ".. attribute:: dual_",
        "",
        "   The dual.",
    ]
    api_reference._attribute_types_as_text(None, "class", "Est", Est, {}, lines)
    assert "   *Type:* *ndarray of shape (H, |A|)*" in lines
    assert not any(line.strip().startswith(":type:") for line in lines)
    assert lines[lines.index(".. attribute:: dual_") + 1] == "   :no-index:"
