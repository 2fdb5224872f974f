"""The book's licence and citation metadata agree with each other.

``book/about.md`` shows ``LICENSE`` and ``CITATION.cff`` verbatim (literalinclude) and adds
BibTeX for the paper and the book; these tests keep the BibTeX, the CFF file, ``LICENSE`` and
``pyproject.toml`` saying the same thing.
"""

from __future__ import annotations

import pathlib
import re
import tomllib
import unicodedata

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


# --- Publishing: repository, issue and launch buttons only when the URL is set

import importlib.util  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import urllib.parse  # noqa: E402

import nbformat  # noqa: E402
import pytest  # noqa: E402


def _load_book_config():
    spec = importlib.util.spec_from_file_location("book_config", ROOT / "scripts" / "book_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bc = _load_book_config()
URL = "https://github.com/example-org/cbdt-book"
PAGE = "notebooks/05_synthetic_recovery"


def _base():
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def test_the_base_config_has_no_buttons_and_no_launch_service():
    base = _base()
    assert "repository" not in base
    assert not any(base["html"].get(k) for k in
                   ("use_repository_button", "use_issues_button", "use_edit_page_button"))
    assert not any(v for k, v in base["launch_buttons"].items() if k.endswith("_url"))
    theme = base["sphinx"]["config"]["html_theme_options"]
    assert not theme.get("use_repository_button") and "launch_buttons" not in theme


def test_derived_config_unset_is_the_base_and_set_adds_every_button():
    base = _base()
    assert bc.derive_config(base, None) == base and bc.derive_config(base, "  ") == base
    cfg = bc.derive_config(base, URL + ".git/")
    assert base == _base(), "derive_config modified its input"
    assert cfg["repository"] == {"url": URL, "branch": "main", "path_to_book": ""}
    assert cfg["html"]["use_repository_button"] is cfg["html"]["use_issues_button"] is True
    assert cfg["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    theme = cfg["sphinx"]["config"]["html_theme_options"]
    assert theme["repository_url"] == URL and theme["repository_branch"] == "main"
    assert theme["use_repository_button"] is theme["use_issues_button"] is True
    assert theme["launch_buttons"] == cfg["launch_buttons"]
    # the derived file lives in _build/, so local extensions must not be relative to it
    for path in cfg["sphinx"]["local_extensions"].values():
        assert pathlib.Path(path).is_absolute() and pathlib.Path(path).is_dir()
    # everything else is the base, unchanged
    for key in set(base) - {"repository", "html", "launch_buttons", "sphinx"}:
        assert cfg[key] == base[key]
    # Colab opens GitHub repositories only
    gitlab = bc.derive_config(base, "https://gitlab.com/example-org/cbdt-book")
    assert gitlab["launch_buttons"]["colab_url"] == ""
    assert gitlab["launch_buttons"]["binderhub_url"] == "https://mybinder.org"


@pytest.mark.parametrize("bad", ["github.com/a/b", "http://github.com/a/b", "https://github.com/a",
                                 "https://github.com/a/b c", "git@github.com:a/b.git"])
def test_a_malformed_repository_url_is_refused(bad):
    with pytest.raises(ValueError, match="HOST/OWNER/REPO"):
        bc.normalize_url(bad)


def test_write_config_returns_the_plain_config_when_unset(tmp_path):
    out = tmp_path / "publish.yml"
    assert bc.write_config(None, out=out) == ROOT / "_config.yml" and not out.exists()
    assert bc.write_config(URL, out=out) == out
    assert yaml.safe_load(out.read_text(encoding="utf-8")) == bc.derive_config(_base(), URL)


def test_the_one_place_is_pyproject_and_the_cli_reads_it(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert bc.repository_url(pyproject) is None
    pyproject.write_text(f'[project]\nname = "x"\n[project.urls]\nRepository = "{URL}/"\n',
                         encoding="utf-8")
    assert bc.repository_url(pyproject) == URL
    out = tmp_path / "p.yml"
    run = [sys.executable, str(ROOT / "scripts" / "book_config.py"), "--out", str(out)]
    unset = subprocess.run([*run, "--url", ""], capture_output=True, text=True, check=True)
    assert unset.stdout.strip() == "_config.yml" and not out.exists()
    done = subprocess.run([*run, "--url", URL], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(out) and out.is_file()
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert makefile.count("scripts/book_config.py") >= 2  # make book and make book-strict


def test_every_chapter_opens_with_the_install_cell_for_the_configured_url():
    """The colab-install cell follows the class-mode switch and installs from the one URL."""
    expected = bc.install_cell_source(bc.repository_url())
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(paths) == 12  # 01-11 and the appendix, 12
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        ids = [c.get("id") for c in nb.cells]
        assert ids.count("colab-install") == 1, path.name
        # title, the class-mode switch (tests/test_class_mode.py), then the install cell
        switch, install = [c for c in nb.cells if c.cell_type == "code"][:2]
        assert switch.id == "class-mode" and nb.cells[1] is switch, path.name
        assert install.id == "colab-install" and nb.cells[2] is install, path.name
        assert install.source == expected, (
            f"{path.name}: the install cell does not match [project.urls] Repository; run "
            "python scripts/book_config.py --sync-notebooks")
        assert install.outputs == [], f"{path.name}: the install cell must print nothing"
    assert "git+" + URL + "@main" in bc.install_cell_source(URL)
    assert '"..[book]"' in bc.install_cell_source(None)


def _external(html: str) -> set[str]:
    urls = set(re.findall(r"""(?:href|src)=["'](https?://[^"']+)["']""", html))
    return {u for u in urls if urllib.parse.urlsplit(u).hostname not in ("127.0.0.1", "localhost")}


def _build_one_page(tmp_path: pathlib.Path, url: str | None) -> subprocess.Popen:
    """Start building the real book restricted to PAGE (make book's config for ``url``)."""
    name = "set" if url else "unset"
    toc = tmp_path / f"toc_{name}.yml"
    toc.write_text(f"format: jb-book\nroot: {PAGE}\n", encoding="utf-8")
    config = bc.write_config(url, out=tmp_path / f"config_{name}.yml")
    cmd = [str(pathlib.Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT),
           "--config", str(config), "--toc", str(toc), "--path-output", str(tmp_path / name),
           "-q"]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _page(tmp_path: pathlib.Path, name: str, proc: subprocess.Popen) -> str:
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, log[-3000:]
    return (tmp_path / name / "_build" / "html" / f"{PAGE}.html").read_text(encoding="utf-8")


def test_one_page_book_has_the_buttons_only_when_the_url_is_set(tmp_path):
    # the two builds run side by side
    procs = {"unset": _build_one_page(tmp_path, None), "set": _build_one_page(tmp_path, URL)}
    unset, published = (_page(tmp_path, k, p) for k, p in procs.items())
    nb = PAGE + ".ipynb"
    buttons = {
        URL,
        "https://mybinder.org/v2/gh/example-org/cbdt-book/main?urlpath=tree/" + nb,
        "https://colab.research.google.com/github/example-org/cbdt-book/blob/main/" + nb,
    }
    ext_set, ext_unset = _external(published), _external(unset)
    assert buttons <= ext_set, sorted(ext_set)
    issues = [u for u in ext_set if u.startswith(URL + "/issues/new")]
    assert len(issues) == 1, sorted(ext_set)
    # the buttons are the only external links the URL adds
    assert ext_set - ext_unset == buttons | set(issues)
    for needle in ("mybinder", "colab", "example-org", "launch-buttons", "/issues/new",
                   "fa-github"):
        assert needle not in unset, f"the offline build mentions {needle!r}"
    # the offline page loads nothing from outside (stylesheets, scripts, images)
    loads = re.findall(r"""<(?:script|link|img)\b[^>]*(?:src|href)=["'](https?://[^"']+)""", unset)
    assert loads == []


def test_binder_environment_installs_the_package_and_the_pinned_cpu_torch():
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    deps = env["dependencies"]
    python = [d for d in deps if isinstance(d, str) and d.startswith("python=")]
    assert python == ["python=3.11"]
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    pin = next(line for line in (ROOT / "requirements" / "constraints.txt").read_text(
        encoding="utf-8").splitlines() if line.startswith("torch=="))
    assert pin + "+cpu" in pip and "--extra-index-url https://download.pytorch.org/whl/cpu" in pip
    assert "-c requirements/constraints.txt" in pip
    assert any(re.fullmatch(r"-e \.\[([a-z,]+)\]", x) and "book" in x for x in pip)


PDF = ROOT / "_build" / "pdf" / "cbdt-book.pdf"


def _titles() -> list[str]:
    """The first heading of every page in _toc.yml (what the PDF must contain)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            files += [chapter["file"]] + [s["file"] for s in chapter.get("sections", [])]
    titles = []
    for f in files:
        path = ROOT / (f + (".ipynb" if f.startswith("notebooks/") else ".md"))
        text = ("\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                          if c.cell_type == "markdown")
                if path.suffix == ".ipynb" else path.read_text(encoding="utf-8"))
        titles.append(re.search(r"^# (.+)$", text, re.M).group(1).strip())
    return titles


@pytest.mark.skipif(not PDF.is_file(), reason="no _build/pdf/cbdt-book.pdf: run `make pdf`")
def test_the_pdf_holds_every_page_with_typeset_math():
    pypdf = pytest.importorskip("pypdf")
    sys.path.insert(0, str(ROOT / "scripts"))
    from print_pdf import count_pages

    reader = pypdf.PdfReader(PDF)
    assert len(reader.pages) == count_pages(PDF) >= 100
    text = " ".join(" ".join(p.extract_text().split()) for p in reader.pages)
    text = unicodedata.normalize("NFKC", text).replace("’", "'")  # ligatures, smart quotes
    for title in _titles():
        plain = re.sub(r"[`*]|\{[a-z]+\}", "", title)
        plain = re.sub(r"\$[^$]*\$", "", plain).split(":")[0].strip()
        assert plain.lower() in text.lower(), f"{title!r} is missing from the PDF"
    # MathJax typeset the math: no TeX delimiters left, and its glyphs are in the text
    assert "\\(" not in text and "\\[" not in text and "\\begin{" not in text
    assert text.count("α") > 100 and text.count("Φ") > 50


def _run_install_cell(source: str, cwd: pathlib.Path, tmp: pathlib.Path
                      ) -> tuple[str, list[str]]:
    """Run the colab-install cell in a fresh IPython shell in ``cwd`` with cbdt not importable.

    ``%pip`` is replaced by a magic that records its argument, so nothing is installed.
    Returns what the cell printed and the recorded pip arguments.
    """
    driver = (
        "import sys, json\n"
        "sys.modules['cbdt'] = None  # import cbdt raises ImportError, as in a fresh kernel\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "calls = []\n"
        "shell.register_magic_function(lambda line: calls.append(line), 'line', 'pip')\n"
        "res = shell.run_cell(open(sys.argv[1]).read())\n"
        "assert res.success, res.error_in_exec or res.error_before_exec\n"
        "print('PIP-CALLS=' + json.dumps(calls))\n"
    )
    cell = tmp / "_cell.py"
    cell.write_text(source, encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", driver, str(cell)], cwd=cwd, text=True,
                         capture_output=True, timeout=120, check=True).stdout
    printed, _, calls = out.rpartition("PIP-CALLS=")
    return printed.strip(), json.loads(calls)


def test_install_cell_outside_a_checkout_prints_one_line_and_calls_no_pip(tmp_path):
    """As shipped (no URL), in a folder that is not a checkout (Colab, a copied notebook)."""
    printed, calls = _run_install_cell(bc.install_cell_source(None), tmp_path, tmp_path)
    assert calls == []
    assert len(printed.splitlines()) == 1 and "not inside a cbdt checkout" in printed
    assert "make lab" in printed


def test_install_cell_inside_the_checkout_installs_the_checkout(tmp_path):
    """As shipped, in the repository's notebooks/ folder: pip installs ``..[book]``."""
    printed, calls = _run_install_cell(bc.install_cell_source(None), ROOT / "notebooks",
                                       tmp_path)
    assert printed == "" and calls == ['install --quiet "..[book]"']


def test_install_cell_with_a_repository_url_installs_from_it(tmp_path):
    """With [project.urls] Repository set, the cell installs from the URL wherever it runs."""
    printed, calls = _run_install_cell(bc.install_cell_source(URL), tmp_path, tmp_path)
    assert printed == "" and calls == [f'install --quiet "cbdt[book] @ git+{URL}@main"']
