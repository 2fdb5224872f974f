"""Execute notebooks in place and normalise them for clean diffs and nbval.

Usage: python scripts/execute_notebooks.py [--write-claims] notebooks/01_cbdt_theory.ipynb [...]

Runs each notebook top to bottom with a per-cell timeout (a run without one once hung),
stores widget state (so the HTML book can render the widgets) without the Output widgets'
last renders (:func:`drop_output_widget_renders`), and strips the per-cell execution
timestamps that would otherwise change on every run.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient


def execute(path: pathlib.Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    drop_output_widget_renders(nb)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return elapsed


def drop_output_widget_renders(nb: nbformat.NotebookNode) -> int:
    """Empty the stored ``outputs`` of every ``Output`` widget in the notebook's widget state.

    An explorer's live view renders into an ``Output`` widget, and the stored state kept a copy
    of its last render (a PNG). The book shows the explorer's static twin (``text/html``) and
    a kernel renders the live view afresh, so that copy only doubled the size of the
    notebook. The widget models themselves stay, so a front end that restores stored widgets
    still finds them. Returns the number of Output widgets emptied.
    """
    state = (nb.metadata.get("widgets", {})
             .get("application/vnd.jupyter.widget-state+json", {}).get("state", {}))
    emptied = 0
    for model in state.values():
        if model.get("model_name") == "OutputModel" and model.get("state", {}).get("outputs"):
            model["state"]["outputs"] = []
            emptied += 1
    return emptied


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("notebooks", nargs="+", type=pathlib.Path)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument(
        "--write-claims",
        action="store_true",
        help="let the chapters write book/_claims/<chapter>.json (CBDT_WRITE_CLAIMS=1) instead "
        "of checking them; then run scripts/reproducibility_page.py",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    if args.write_claims:
        os.environ["CBDT_WRITE_CLAIMS"] = "1"
    for p in args.notebooks:
        dt = execute(p, args.timeout)
        print(f"{p}: executed in {dt:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
