"""The package's house: no private name crosses a module boundary, the modules import each
other without a circle, the core imports none of the extras and nothing of the book's code
(``cbdt.book``), and the book's experiments compute without phrasing (``cbdt.book.claims``)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "cbdt"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _relative_imports(name: str, path: pathlib.Path) -> list[tuple[str, list[str]]]:
    """Every ``from ... import`` of a cbdt module in ``path``, relative or absolute, as
    (absolute target, imported names)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = pkg.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            found.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cbdt":
            found.append((node.module, [a.name for a in node.names]))
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    bad = [
        f"{name}: from {target} import {n}"
        for name, path in _modules().items()
        for target, names in _relative_imports(name, path)
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert not bad, bad


def test_no_import_circle() -> None:
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for target, names in _relative_imports(name, path):
            for cand in [target, *(f"{target}.{n}" for n in names)]:
                if cand in mods and cand != name:
                    edges[name].add(cand)
    # a package importing its own submodules is not a circle
    for name in mods:
        edges[name] = {t for t in edges[name] if not t.startswith(name + ".")}

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            x = todo.pop()
            for y in edges[x]:
                if y == b:
                    return True
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        return False

    circles = sorted({tuple(sorted((a, b))) for a in mods for b in edges[a] if reaches(b, a)})
    assert not circles, circles


def test_import_cbdt_loads_no_extra() -> None:
    code = (
        "import sys, cbdt\n"
        "heavy = [m for m in ('torch', 'matplotlib', 'pooch', 'dask', 'tqdm', 'sklearn',"
        " 'ipywidgets', 'xlrd') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == "", f"import cbdt loaded {out}"


def test_the_core_imports_nothing_of_the_book() -> None:
    bad = [
        f"{name}: from {target} import {', '.join(names)}"
        for name, path in _modules().items()
        if not name.startswith("cbdt.book") and name != "cbdt.__main__"  # python -m cbdt: the CLI
        for target, names in _relative_imports(name, path)
        if target.startswith("cbdt.book")
        or (target == "cbdt" and "book" in names)
    ]
    assert not bad, bad


def test_experiments_do_not_phrase() -> None:
    # the claims (prose, statuses) are built in cbdt.book.claims from what experiments return
    bad = [
        f"{name}: from {target}"
        for name, path in _modules().items()
        if name.startswith("cbdt.book.experiments")
        for target, _ in _relative_imports(name, path)
        if target.startswith("cbdt.book.claims")
    ]
    assert not bad, bad
