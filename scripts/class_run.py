"""Run chapters as a student does in class: ``CLASS_MODE = True`` in the first cell, Run All.

usage::

    python scripts/class_run.py notebooks/07_pjm_audit.ipynb [...] [--json out.json]

Each chapter runs in a fresh kernel (nbclient) from a copy with the switch turned on
(:mod:`cbdt.book.classmode`); the notebooks themselves are not changed. For each chapter it
prints the run time, the slowest cells and every ``[class mode]`` line the run printed (what
it changed, the budget line, the verdicts), and with ``--json`` writes them for
``tests/test_class_mode.py``. An instructor can run it on the machine a class will use to see
whether the budget holds there.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

SWITCH_OFF, SWITCH_ON = "CLASS_MODE = False", "CLASS_MODE = True"


def class_run(path: pathlib.Path, timeout: int = 600) -> dict:
    """Run one chapter in class mode; return its outputs' text, run time and cell times."""
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    if SWITCH_OFF not in first.source:
        raise SystemExit(f"{path}: the first code cell has no {SWITCH_OFF!r} switch")
    first.source = first.source.replace(SWITCH_OFF, SWITCH_ON)
    started: dict[int, float] = {}
    cells: list[tuple[int, float, str]] = []

    def on_start(cell, cell_index, **_):
        started[cell_index] = time.perf_counter()

    def on_done(cell, cell_index, **_):
        head = cell.source.splitlines()[0][:60] if cell.source else ""
        cells.append((cell_index, time.perf_counter() - started[cell_index], head))

    env_twin = os.environ.pop("CBDT_STATIC_TWIN", None)  # the class run decides the twins
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.resolve().parent)}},
                            on_cell_execute=on_start, on_cell_executed=on_done)
    # no stand-in for a browser's Output widget: nbclient's (it answers the kernel's comm
    # messages from the client) now and then left an explorer cell waiting until the cell
    # timeout (600 s, on an idle machine, in ch. 06 and 07); without it the explorers' output
    # lands in the cell's outputs, which nothing here reads
    client.widget_registry = {}
    t0 = time.perf_counter()
    try:
        client.execute()
    finally:
        if env_twin is not None:
            os.environ["CBDT_STATIC_TWIN"] = env_twin
    seconds = time.perf_counter() - t0
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")
    return {"notebook": path.name, "seconds": seconds, "load": os.getloadavg(),
            "text": text, "cells": sorted(cells, key=lambda c: -c[1])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=pathlib.Path)
    ap.add_argument("--json", type=pathlib.Path, help="write the results here")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    results = []
    for path in args.notebooks:
        r = class_run(path, args.timeout)
        results.append(r)
        slow = ", ".join(f"cell {i} {t:.1f} s" for i, t, _ in r["cells"][:3])
        print(f"{path.name}: {r['seconds']:.1f} s (load {r['load'][0]:.1f}); slowest: {slow}")
        for line in r["text"].splitlines():
            if line.startswith(("[class mode]", "CLASS MODE")):
                print("   ", line)
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
