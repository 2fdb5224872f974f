"""The book's downloads, linked from the intro page: notebooks as zip files, the whole-book PDF.

When an HTML build finishes, this extension writes into ``<html>/downloads/``:

* ``cbdt-notebooks-student.zip``: the chapters' notebooks without solutions (the student
  edition, ``scripts/student_edition.py``'s ``strip_notebook``), in both editions of the book;
* ``cbdt-notebooks-instructor.zip``: the chapters' notebooks as they are, solutions included,
  in the instructor edition only (the student build, Sphinx tag ``student``, has none);
* ``cbdt-book.pdf``: the whole book printed by ``make pdf`` (``_build/pdf/cbdt-book.pdf``),
  copied when it exists, in the instructor edition only. Printing takes minutes, so
  ``make book`` does not print it; ``make pdf`` copies the PDF into ``_build/html/downloads/``
  itself, and ``make downloads`` does both.

The intro page links them with plain relative links (``../downloads/...``), so Sphinx neither
copies nor checks them, and the links of the instructor-only files sit in
``{only} not student`` blocks. ``tests/test_downloads.py`` checks that every linked file
exists in the built HTML (the PDF after ``make pdf``) and that the student zip holds no
solution. The zips are reproducible: sorted entries, a fixed date.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
import sys
import zipfile
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PDF = ROOT / "_build" / "pdf" / "cbdt-book.pdf"
FOLDER = "downloads"
INSTRUCTOR_ZIP = "cbdt-notebooks-instructor.zip"
STUDENT_ZIP = "cbdt-notebooks-student.zip"
PDF_NAME = "cbdt-book.pdf"
_DATE = (2026, 1, 1, 0, 0, 0)

README = """cbdt: From Neural Network Decisions to Training Cases, the notebooks ({edition} edition)

Each chapter of the book is one notebook, stored with its outputs: open them in JupyterLab
to read them. To run them, install the library and its book extra from the repository
(pip install -e '.[book,scale]' in a clone, or `make lab`, which does it and opens
JupyterLab), and open these notebooks next to the repository's notebooks/ folder, so that
their links to the book's pages (../book/...) resolve. {solutions}
"""


def _student_edition() -> Any:
    """``scripts/student_edition.py`` (not a package), loaded once."""
    name = "cbdt_student_edition"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "scripts" / "student_edition.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]


def chapters() -> list[pathlib.Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def write_zip(path: pathlib.Path, files: dict[str, str]) -> None:
    """A zip of ``{name: text}``, entries sorted, every entry dated ``_DATE``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, files[name].encode("utf-8"))


def notebook_files(student: bool) -> dict[str, str]:
    """The zip's entries: ``cbdt-notebooks/NN_x.ipynb`` and a ``README.txt``."""
    files: dict[str, str] = {}
    se = _student_edition() if student else None
    for path in chapters():
        text = path.read_text(encoding="utf-8")
        if se is not None:
            text = se.strip_text(text, ".ipynb")
            json.loads(text)  # a notebook still
        files[f"cbdt-notebooks/{path.name}"] = text
    edition = "student" if student else "instructor"
    files["cbdt-notebooks/README.txt"] = README.format(
        edition=edition,
        solutions=("The exercises' solutions are removed; each exercise with a numeric or "
                   "categorical answer has a check block (cbdt.book.selfcheck) that says "
                   "whether your answer is correct." if student else
                   "The solutions are included (folded in JupyterLab)."))
    return files


def write_downloads(outdir: pathlib.Path, student: bool) -> list[pathlib.Path]:
    """Write the downloads of one edition into ``outdir/downloads``; return the files."""
    folder = outdir / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    written = [folder / STUDENT_ZIP]
    write_zip(folder / STUDENT_ZIP, notebook_files(student=True))
    if not student:
        write_zip(folder / INSTRUCTOR_ZIP, notebook_files(student=False))
        written.append(folder / INSTRUCTOR_ZIP)
        if PDF.exists():
            shutil.copyfile(PDF, folder / PDF_NAME)
            written.append(folder / PDF_NAME)
    return written


def _build_finished(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.name != "html":
        return  # not the PDF's single page (singlehtml), nor a failed build
    student = app.tags.has("student")
    for path in write_downloads(pathlib.Path(app.outdir), student):
        print(f"downloads: {path.relative_to(app.outdir)}")


def setup(app: Any) -> dict[str, Any]:
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
