"""Show that the notebook check (tests/nbcheck.py) still fails on a real change.

Each mutation copies a chapter next to the original (``notebooks/_mutant_*.ipynb``, removed
afterwards), changes one thing, re-runs it with ``pytest --nbcheck`` on this machine's kernels
and reports which compared cells fail, and the first reason of each:

``seed``      ch. 11 trains its network with seed 1 instead of 0;
``epoch``     ch. 11 trains one epoch more;
``word``      a verdict in ch. 11's stored output is changed ("True" to "False"), as a stale
              sentence would be;
``none``      the unchanged chapter (must pass: the check is not simply failing).

The printed seed and epoch count are themselves compared, so the cell that prints them is
reported apart from the cells whose *computed* numbers and figures moved.

Usage: ``python scripts/nbcheck_mutations.py [seed epoch word none]`` (about a minute each on two
cores; needs the test environment).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "11_audit_your_network.ipynb"
CONFIG = "config = own.OwnNetworkConfig()"


def _code(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code"]


def mutate(name: str, nb: nbformat.NotebookNode) -> str:
    """Apply mutation ``name`` to ``nb`` in place; return what changed."""
    if name == "none":
        return "nothing"
    if name in ("seed", "epoch"):
        cell = next(c for c in _code(nb) if CONFIG in c.source)
        new = ("config = own.OwnNetworkConfig(seed=1)" if name == "seed" else
               "config = own.OwnNetworkConfig(epochs=own.OwnNetworkConfig().epochs + 1)")
        cell.source = cell.source.replace(CONFIG, new)
        return f"{CONFIG!r} -> {new!r}"
    if name == "word":
        for i, cell in enumerate(_code(nb)):
            for out in cell.outputs:
                if out.get("output_type") == "stream" and "bit-identical weights: True" in out.text:
                    out.text = out.text.replace("weights: True", "weights: False")
                    return f"code cell {i}'s stored 'bit-identical weights: True' -> 'False'"
        raise SystemExit("the sentence to change is not in ch. 11's outputs any more")
    raise SystemExit(f"unknown mutation {name!r}")


def run(name: str) -> tuple[str, list[tuple[str, str]], str]:
    nb = nbformat.read(CHAPTER, as_version=4)
    what = mutate(name, nb)
    path = CHAPTER.with_name(f"_mutant_{name}_{CHAPTER.name}")
    nbformat.write(nb, path)
    env = dict(os.environ, CBDT_STATIC_TWIN="0", PYTHONPATH=str(ROOT / "tests"))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "nbcheck", "--nbcheck",
             "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-p", "no:randomly",
             "-p", "no:xdist", "-q", "-k", "not Exercise", "-rf", str(path.relative_to(ROOT))],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    finally:
        path.unlink(missing_ok=True)
    out = proc.stdout + proc.stderr
    failed = re.findall(r"^FAILED \S+::(Cell \d+)", out, re.M)
    reasons = []
    for cell in failed:
        block = out.split(f"::{cell} _", 1)[-1]
        m = re.search(r"(mismatch '[^']+': \S*\s*[^\n]*|Cell execution caused an exception)",
                      block)
        reasons.append((cell, re.sub(r"\x1b\[[0-9;]*m", "", m.group(1))[:160] if m else "?"))
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    return what, reasons, summary


def main(argv: list[str]) -> int:
    names = argv or ["seed", "epoch", "word", "none"]
    ok = True
    for name in names:
        what, reasons, summary = run(name)
        print(f"== {name}: {what}\n   {summary}")
        for cell, why in reasons:
            print(f"   {cell}: {why}")
        ok &= (not reasons) if name == "none" else bool(reasons)
    print("every mutation was caught and the unchanged chapter passed" if ok else
          "NOT AS EXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
