"""Derive the book's publishing configuration from the one place that names the repository.

The repository URL lives in ``pyproject.toml`` only, as ``[project.urls] Repository``:

- **unset** (the key absent or empty): ``make book`` builds from ``_config.yml`` as it is. The
  book then links to no external service at all and works offline.
- **set** (e.g. ``Repository = "https://github.com/OWNER/cbdt"``): this script writes
  ``_build/_config.publish.yml``, which is ``_config.yml`` plus the repository (url, branch,
  path to the book), the repository and issue buttons, and the launch buttons: Binder
  (``https://mybinder.org``, which builds ``environment.yml``) and, for GitHub repositories,
  Colab (``https://colab.research.google.com``). ``make book`` passes it to
  ``jupyter-book build --config``.

Jupyter Book 1.x refuses ``use_repository_button``/``use_issues_button`` without
``repository.url``, and this book's ``sphinx.config.html_theme_options`` replaces the theme
options Jupyter Book derives from ``html``/``launch_buttons``/``repository``; so the buttons are
set in both places here, and only in the derived file.

Every chapter notebook starts (after its title cell and its class-mode switch,
:mod:`cbdt.book.classmode`) with a code cell ``colab-install`` that
installs cbdt when the kernel cannot import it (Colab, a fresh Binder or local kernel) and prints
nothing otherwise. Its install spec is derived from the same URL; after changing the URL run
``python scripts/book_config.py --sync-notebooks`` (tests/test_publishing.py fails until then).

usage::

    python scripts/book_config.py                  # print the config file make book should use
    python scripts/book_config.py --url URL        # the same, for another URL ('' = unset)
    python scripts/book_config.py --sync-notebooks # rewrite the colab-install cells
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import re
import sys
import tomllib
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
BASE_CONFIG = ROOT / "_config.yml"
PUBLISH_CONFIG = ROOT / "_build" / "_config.publish.yml"
PYPROJECT = ROOT / "pyproject.toml"
NOTEBOOKS = ROOT / "notebooks"

BINDER_URL = "https://mybinder.org"
COLAB_URL = "https://colab.research.google.com"
DEFAULT_BRANCH = "main"
INSTALL_CELL_ID = "colab-install"

_URL_RE = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?/[A-Za-z0-9_.~-]+/[A-Za-z0-9_.~-]+")


def normalize_url(url: str | None) -> str | None:
    """Return the repository URL in canonical form, or None when it is unset.

    Parameters
    ----------
    url : str or None
        ``https://HOST/OWNER/REPO`` (a trailing ``/`` or ``.git`` is dropped); ``None`` or a
        blank string means unset.

    Returns
    -------
    str or None
        The canonical URL, or ``None``.

    Raises
    ------
    ValueError
        If ``url`` is not an ``https://HOST/OWNER/REPO`` URL.
    """
    if url is None or not url.strip():
        return None
    url = url.strip().rstrip("/")
    if url.endswith(".git"):
        url = url[: -len(".git")]
    if not _URL_RE.fullmatch(url):
        raise ValueError(
            f"repository URL {url!r} is not of the form https://HOST/OWNER/REPO "
            "(set [project.urls] Repository in pyproject.toml, or leave it out)"
        )
    return url


def repository_url(pyproject: pathlib.Path = PYPROJECT) -> str | None:
    """Read the repository URL from ``[project.urls] Repository`` of ``pyproject``.

    Parameters
    ----------
    pyproject : pathlib.Path
        The ``pyproject.toml`` to read.

    Returns
    -------
    str or None
        The canonical URL, or ``None`` when the key is absent or empty.
    """
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return normalize_url(data.get("project", {}).get("urls", {}).get("Repository"))


def derive_config(base: dict[str, Any], url: str | None, branch: str = DEFAULT_BRANCH,
                  path_to_book: str = "", root: pathlib.Path = ROOT) -> dict[str, Any]:
    """Return the Jupyter Book configuration for ``url``.

    Parameters
    ----------
    base : dict
        The parsed ``_config.yml``; it is not modified.
    url : str or None
        The repository URL (see :func:`normalize_url`); ``None`` returns a copy of ``base``.
    branch : str
        The branch the buttons point at.
    path_to_book : str
        The book's folder relative to the repository root (``""``: the root).
    root : pathlib.Path
        The book's source folder; ``sphinx.local_extensions`` paths are made absolute against
        it because the derived file does not live beside ``_config.yml``.

    Returns
    -------
    dict
        The configuration; with a URL it has the repository, repository and issue buttons, and
        the Binder (and, for GitHub, Colab) launch buttons.
    """
    cfg = copy.deepcopy(base)
    url = normalize_url(url)
    if url is None:
        return cfg
    if not branch or not branch.strip():
        raise ValueError("branch must be a non-empty string")
    launch = {"notebook_interface": "classic", "binderhub_url": BINDER_URL,
              "colab_url": COLAB_URL if url.startswith("https://github.com/") else ""}
    cfg["repository"] = {"url": url, "branch": branch, "path_to_book": path_to_book}
    html = cfg.setdefault("html", {})
    html["use_repository_button"] = True
    html["use_issues_button"] = True
    cfg["launch_buttons"] = {**cfg.get("launch_buttons", {}), **launch}
    sphinx = cfg.setdefault("sphinx", {})
    theme = sphinx.setdefault("config", {}).setdefault("html_theme_options", {})
    theme.update(repository_url=url, repository_branch=branch, path_to_docs=path_to_book,
                 use_repository_button=True, use_issues_button=True,
                 launch_buttons=dict(cfg["launch_buttons"]))
    local = sphinx.get("local_extensions") or {}
    sphinx["local_extensions"] = {k: str((root / v).resolve()) for k, v in local.items()}
    return cfg


def write_config(url: str | None, out: pathlib.Path = PUBLISH_CONFIG,
                 base_path: pathlib.Path = BASE_CONFIG, branch: str = DEFAULT_BRANCH) -> pathlib.Path:
    """Write the derived configuration and return the path ``make book`` should use.

    Parameters
    ----------
    url : str or None
        The repository URL; ``None`` writes nothing and returns ``base_path``.
    out : pathlib.Path
        Where the derived configuration goes.
    base_path : pathlib.Path
        The book's ``_config.yml``.
    branch : str
        The branch the buttons point at.

    Returns
    -------
    pathlib.Path
        ``base_path`` when ``url`` is unset, ``out`` otherwise.
    """
    url = normalize_url(url)
    if url is None:
        return base_path
    base = yaml.safe_load(base_path.read_text(encoding="utf-8"))
    cfg = derive_config(base, url, branch=branch, root=base_path.parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Generated by scripts/book_config.py from {base_path.name} and "
              f"[project.urls] Repository = {url}; do not edit.\n")
    out.write_text(header + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True),
                   encoding="utf-8")
    return out


def install_spec(url: str | None, branch: str = DEFAULT_BRANCH) -> str:
    """Return the pip requirement the ``colab-install`` cell installs.

    Parameters
    ----------
    url : str or None
        The repository URL; unset installs from the checkout the notebook sits in (``..``).
    branch : str
        The branch to install from when ``url`` is set.

    Returns
    -------
    str
        ``cbdt[book] @ git+URL@BRANCH``, or ``..[book]`` when unset.
    """
    url = normalize_url(url)
    return "..[book]" if url is None else f"cbdt[book] @ git+{url}@{branch}"


def install_cell_source(url: str | None, branch: str = DEFAULT_BRANCH) -> str:
    """Return the source of the ``colab-install`` cell for ``url``.

    The cell prints nothing when cbdt is importable. Otherwise, with a repository URL it
    installs cbdt from that URL (Colab, Binder); as shipped (no URL) it installs from the
    checkout the notebook sits in, only when that checkout is there (``../pyproject.toml`` and
    ``../cbdt``), and elsewhere prints one line that says what to do, never a failing pip call.

    Parameters
    ----------
    url : str or None
        The repository URL (see :func:`install_spec`).
    branch : str
        The branch to install from.

    Returns
    -------
    str
        Python with one ``%pip`` line magic.
    """
    head = (
        "# install cbdt if this kernel lacks it (Colab, Binder); silent otherwise\n"
        "try:\n"
        "    import cbdt\n"
        "except ImportError:\n"
    )
    if normalize_url(url) is not None:
        return head + f'    %pip install --quiet "{install_spec(url, branch)}"'
    return head + (
        "    from pathlib import Path\n"
        '    if Path("../pyproject.toml").is_file() and Path("../cbdt").is_dir():\n'
        f'        %pip install --quiet "{install_spec(None)}"\n'
        "    else:\n"
        '        print("cbdt is not installed and this notebook is not inside a cbdt "\n'
        '              "checkout: clone the repository and run `make lab` there "\n'
        '              "(or `pip install \'.[book]\'` in the checkout), then restart "\n'
        '              "the kernel.")'
    )


def sync_notebooks(url: str | None, notebooks: pathlib.Path = NOTEBOOKS,
                   branch: str = DEFAULT_BRANCH) -> list[pathlib.Path]:
    """Insert or update the ``colab-install`` cell of every chapter notebook.

    The cell goes right after the notebook's title cell and its class-mode switch
    (:mod:`cbdt.book.classmode`) and has no outputs. Other
    cells are not touched. Run it under the notebook lock when others edit notebooks.

    Parameters
    ----------
    url : str or None
        The repository URL.
    notebooks : pathlib.Path
        The folder of ``NN_*.ipynb`` chapters.
    branch : str
        The branch to install from.

    Returns
    -------
    list of pathlib.Path
        The notebooks that changed.
    """
    import nbformat

    source = install_cell_source(url, branch)
    changed = []
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if c.get("id") == INSTALL_CELL_ID]
        if len(cells) > 1:
            raise ValueError(f"{path.name}: {len(cells)} cells with id {INSTALL_CELL_ID!r}")
        if cells and cells[0].source == source:
            continue
        if cells:
            cells[0].source = source
            cells[0].outputs = []
            cells[0].execution_count = None
        else:
            cell = nbformat.v4.new_code_cell(source=source)
            cell.id = INSTALL_CELL_ID
            # after the title and, where there is one, the class-mode switch
            nb.cells.insert(2 if nb.cells[1].get("id") == "class-mode" else 1, cell)
        nbformat.validate(nb)
        nbformat.write(nb, path)
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    """Command line: print the configuration to build with, or sync the notebooks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None,
                        help="repository URL instead of pyproject.toml's ('' = unset)")
    parser.add_argument("--branch", default=DEFAULT_BRANCH)
    parser.add_argument("--out", type=pathlib.Path, default=PUBLISH_CONFIG)
    parser.add_argument("--sync-notebooks", action="store_true",
                        help="rewrite the colab-install cell of every notebook")
    args = parser.parse_args(argv)
    url = repository_url() if args.url is None else normalize_url(args.url)
    if args.sync_notebooks:
        for path in sync_notebooks(url, branch=args.branch):
            print(f"updated {path.relative_to(ROOT)}")
        return 0
    path = write_config(url, out=args.out, branch=args.branch)
    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
