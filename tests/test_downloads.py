"""The intro page's downloads (book/_ext/downloads.py): the notebooks as zips and the PDF.

Without a built book these tests check the zips' contents and that every link of the intro page
names a file the extension writes. With ``CBDT_BUILT_HTML`` (``make book-strict`` sets it to
``_build/html``) every linked file must exist in the built book, the PDF only where
``make pdf`` printed one (``make downloads`` sets ``CBDT_REQUIRE_PDF=1``); with
``CBDT_STUDENT_HTML`` (``make student-test``) the student edition must have its zip and
neither the instructor zip nor the PDF.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import student_edition as se  # noqa: E402

_spec = importlib.util.spec_from_file_location("cbdt_book_downloads",
                                               ROOT / "book" / "_ext" / "downloads.py")
assert _spec is not None and _spec.loader is not None
dl = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = dl
_spec.loader.exec_module(dl)

INTRO = ROOT / "book" / "intro.md"
LINK = re.compile(r'href="\.\./downloads/([^"]+)"')


def intro_links() -> dict[str, bool]:
    """{file name: shown in the student edition} of the intro page's download links."""
    text = INTRO.read_text(encoding="utf-8")
    only = re.search(r"```\{only\} not student\n(.*?)\n```", text, re.DOTALL)
    instructor_only = set(LINK.findall(only.group(1))) if only else set()
    return {name: name not in instructor_only for name in LINK.findall(text)}


def test_intro_links_name_the_files_the_extension_writes() -> None:
    links = intro_links()
    assert links == {dl.STUDENT_ZIP: True, dl.INSTRUCTOR_ZIP: False, dl.PDF_NAME: False}


@pytest.mark.parametrize("student", [True, False], ids=["student", "instructor"])
def test_notebook_zips_hold_every_chapter(student: bool) -> None:
    files = dl.notebook_files(student=student)
    chapters = {p.name for p in dl.chapters()}
    assert {Path(n).name for n in files if n.endswith(".ipynb")} == chapters
    solutions = 0
    for name, text in files.items():
        if not name.endswith(".ipynb"):
            continue
        nb = json.loads(text)
        exercises = se.count_directives(nb, "exercise")
        assert exercises, name  # every chapter has exercises, in both editions
        solutions += len(se.count_directives(nb, "solution"))
        original = (ROOT / "notebooks" / Path(name).name).read_text(encoding="utf-8")
        assert text == (se.strip_text(original, ".ipynb") if student else original)
    assert (solutions == 0) if student else (solutions > 0)


def test_zips_are_reproducible(tmp_path: Path) -> None:
    files = {"b.txt": "2", "a.txt": "1"}
    dl.write_zip(tmp_path / "1.zip", files)
    dl.write_zip(tmp_path / "2.zip", dict(reversed(list(files.items()))))
    assert (tmp_path / "1.zip").read_bytes() == (tmp_path / "2.zip").read_bytes()
    assert zipfile.ZipFile(tmp_path / "1.zip").namelist() == ["a.txt", "b.txt"]


def test_student_build_writes_no_instructor_file(tmp_path: Path) -> None:
    written = dl.write_downloads(tmp_path, student=True)
    assert [p.name for p in written] == [dl.STUDENT_ZIP]
    assert sorted(p.name for p in (tmp_path / "downloads").iterdir()) == [dl.STUDENT_ZIP]


def _built(var: str) -> Path:
    where = os.environ.get(var)
    if not where:
        pytest.skip(f"{var} is not set: no built book to check (make book-strict / "
                    "make student-test set it)")
    html = (ROOT / where).resolve()
    assert (html / "index.html").exists(), f"{var}={where}: no built book there"
    return html


def _intro_hrefs(html: Path) -> set[str]:
    page = (html / "book" / "intro.html").read_text(encoding="utf-8")
    return set(LINK.findall(page))


def test_built_book_has_every_linked_download() -> None:
    html = _built("CBDT_BUILT_HTML")
    hrefs = _intro_hrefs(html)
    assert hrefs == set(intro_links())
    pdf_printed = dl.PDF.exists()
    if os.environ.get("CBDT_REQUIRE_PDF") == "1":
        assert pdf_printed, "make downloads: make pdf wrote no _build/pdf/cbdt-book.pdf"
    for name in hrefs:
        target = html / "downloads" / name
        if name == dl.PDF_NAME and not pdf_printed:
            continue  # make pdf has not run; the intro page says how to get the PDF
        assert target.is_file() and target.stat().st_size > 0, f"intro links {name}: missing"
        if name.endswith(".zip"):
            with zipfile.ZipFile(target) as zf:
                assert zf.testzip() is None
                assert len([n for n in zf.namelist() if n.endswith(".ipynb")]) == len(
                    dl.chapters())


def test_student_book_links_and_ships_only_the_student_zip() -> None:
    html = _built("CBDT_STUDENT_HTML")
    assert _intro_hrefs(html) == {n for n, shown in intro_links().items() if shown}
    assert sorted(p.name for p in (html / "downloads").iterdir()) == [dl.STUDENT_ZIP]
    with zipfile.ZipFile(html / "downloads" / dl.STUDENT_ZIP) as zf:
        for name in zf.namelist():
            if name.endswith(".ipynb"):
                nb = json.loads(zf.read(name))
                assert se.count_directives(nb, "solution") == [], name
