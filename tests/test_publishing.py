"""The book's licence and citation metadata agree with each other (issue 10, deliver 6).

``book/about.md`` shows ``LICENSE`` and ``CITATION.cff`` verbatim (literalinclude) and adds
BibTeX for the paper and the book; these tests keep the BibTeX, the CFF file, ``LICENSE`` and
``pyproject.toml`` saying the same thing.
"""

from __future__ import annotations

import pathlib
import re
import tomllib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
ABOUT = ROOT / "book" / "about.md"

# top-level and person keys of the Citation File Format 1.2.0 schema that this file may use
CFF_TOP = {"abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi",
           "identifiers", "keywords", "license", "license-url", "message", "preferred-citation",
           "references", "repository", "repository-artifact", "repository-code", "title", "type",
           "url", "version"}
CFF_PERSON = {"address", "affiliation", "alias", "city", "country", "email", "family-names",
              "fax", "given-names", "name-particle", "name-suffix", "orcid", "post-code",
              "region", "tel", "website"}


def _cff():
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _bibtex(text: str, kind: str) -> dict[str, str]:
    m = re.search(r"@" + kind + r"\{[^,]+,\n(.*?)\n\}", text, re.S)
    assert m, f"book/about.md has no @{kind} entry"
    fields = re.findall(r"(\w+)\s*=\s*\{((?:[^{}]|\{[^{}]*\})*)\}", m.group(1), re.S)
    return {k: " ".join(v.split()) for k, v in fields}


def test_citation_file_is_valid_cff_and_matches_the_package_and_licence():
    cff = _cff()
    assert set(cff) <= CFF_TOP and {"authors", "cff-version", "message", "title"} <= set(cff)
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", cff["date-released"])
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert str(cff["version"]) == pyproject["version"]
    assert cff["license"] == "MIT" == pyproject["license"]["text"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    pref = cff["preferred-citation"]
    assert {"type", "title", "authors"} <= set(pref) and pref["status"] == "preprint"
    for person in pref["authors"]:
        assert set(person) <= CFF_PERSON


def test_about_page_shows_the_licence_and_cites_what_citation_cff_says():
    text = ABOUT.read_text(encoding="utf-8")
    assert "```{literalinclude} ../LICENSE" in text
    assert "```{literalinclude} ../CITATION.cff" in text
    cff = _cff()
    book = _bibtex(text, "software")
    assert book["title"] == " ".join(cff["title"].split())
    assert book["version"] == str(cff["version"]) and book["date"] == cff["date-released"]
    assert book["license"] == cff["license"]
    assert book["author"] == "{" + cff["authors"][0]["name"] + "}"
    paper = _bibtex(text, "misc")
    pref = cff["preferred-citation"]
    assert paper["title"] == " ".join(pref["title"].split())
    assert paper["author"] == " and ".join(
        f"{a['family-names']}, {a['given-names']}" for a in pref["authors"])


def test_instructor_and_about_pages_are_in_the_reference_part():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    ref = next(p for p in toc["parts"] if p["caption"] == "Reference")
    files = [c["file"] for c in ref["chapters"]]
    assert files[0] == "book/instructor" and files[-1] == "book/about"
