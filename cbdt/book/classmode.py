"""Class mode: every chapter's Run All within two minutes on a two-core laptop.

The book's pages show each chapter's *full* run: five seeds, the whole drift grid, every
bandwidth. On a two-core laptop a few chapters need several minutes for that, too long for a
90-minute class. Each chapter therefore starts with one switch::

    CLASS_MODE = False   # True: the class run (under 2 minutes on a 2-core laptop)

and its setup cell starts the chapter's clock with :func:`start`. With the switch on, the few
cells that dominate the run time ask :meth:`ChapterRun.choose` for a smaller workload (fewer
seeds, fewer grid points), each such cell says so in its output, the explorers' static twins
are not rendered (a live kernel shows the live explorer), and the chapter's claims table
(:func:`cbdt.book.claims.report`) compares the class run's *verdicts* with the book's full
run instead of checking its numbers against the page. The last cell, :meth:`ChapterRun.finish`,
prints the run time against the budget.

A class run computes what it shows on less work, with one exception: a result that no smaller
workload can stand in for (chapter 9's networks trained on two years of hourly load) is the
full run's own, kept in ``book/_results`` and loaded (:meth:`ChapterRun.stored`); the cell
says so. Everything else is recomputed, so a class run's numbers differ from the book's (fewer
seeds give wider intervals), which is why every changed cell says so and why only verdicts
are compared.

``tests/test_class_mode.py`` runs every chapter with the switch on, as a student would, and
checks that the budget line is printed and met and that the verdicts agree with the full run.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["BUDGET_S", "ChapterRun", "ResultsOutOfDate", "book_root", "compare_verdicts", "current",
           "is_on", "start"]

#: The class-mode budget of one chapter's Run All, in seconds ("within two minutes on a
#: 2-core laptop").
BUDGET_S: float = 120.0

_CURRENT: ChapterRun | None = None
# the explorers' static-twin switch as the kernel started (a class run turns the twins off,
# a full run in the same kernel restores this)
_STATIC_TWIN = os.environ.get("CBDT_STATIC_TWIN")


def _wrap(text: str) -> str:
    """A message as lines short enough for a phone's output block (the book does not wrap
    printed text)."""
    return textwrap.fill(text, width=72, break_on_hyphens=False)


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)) and len(value) > 6:
        return f"{len(value)} values"
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


@dataclass
class ChapterRun:
    """One run of a chapter: its mode, its clock and what class mode changed.

    Made by :func:`start`; read the attributes, do not construct it yourself.

    Attributes
    ----------
    chapter : str
        Two digits, ``"07"``.
    on : bool
        Whether this is the class run.
    budget_s : float
        The class-mode budget of the whole run, seconds (:data:`BUDGET_S`).
    changes : list of (str, Any, Any)
        ``(what, full value, class value)`` for every :meth:`choose` so far.
    verdicts : dict or None
        Set by :func:`cbdt.book.claims.report` in a class run: ``{"same": n, "total": m,
        "differ": [claim, ...]}``, the claims whose status differs from the full run's.
    """

    chapter: str
    on: bool
    budget_s: float = BUDGET_S
    started: float = field(default_factory=time.perf_counter)
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    verdicts: dict[str, Any] | None = None

    def choose(self, what: str, full: Any, class_: Any) -> Any:
        """``full`` in the full run, ``class_`` in the class run (and say so).

        Parameters
        ----------
        what : str
            What the value is, in words (``"seeds"``, ``"drift levels"``).
        full, class_ : object
            The value of the full run (what the book shows) and of the class run.

        Returns
        -------
        object
            ``class_`` when :attr:`on`, else ``full``.
        """
        if not self.on:
            return full
        self.changes.append((what, full, class_))
        print(f"[class mode] {what}: {_show(class_)} (the full run uses {_show(full)})")
        return class_

    def stored(self, name: str, what: str, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """A result the full run computes and keeps, and the class run loads.

        For the few results that no smaller workload can stand in for (networks trained on
        years of hourly data), the class run shows the full run's own result, read from
        ``book/_results/<name>.json``, and says so. The full run computes it and keeps that
        file in step the way :func:`cbdt.book.claims.report` keeps the claims: with
        ``CBDT_WRITE_CLAIMS=1`` (``scripts/execute_notebooks.py --write-claims``) it writes
        the file, otherwise it checks the file against what it computed and raises
        :class:`ResultsOutOfDate` when they differ.

        Parameters
        ----------
        name : str
            File stem under ``book/_results`` (``"09_pjm_drift"``).
        what : str
            What the result is, in words, for the class run's note.
        compute : callable
            Computes the result (a DataFrame of numbers, strings and booleans; its
            ``attrs`` are kept).

        Returns
        -------
        pandas.DataFrame
        """
        path = _results_dir()
        path = None if path is None else path / f"{name}.json"
        if self.on and path is not None and path.is_file():
            print(f"[class mode] {what}: the full run's result, loaded from "
                  f"book/_results/{name}.json (not recomputed)")
            return _read_frame(path)
        df = compute()
        if path is None:
            return df
        if os.environ.get("CBDT_WRITE_CLAIMS") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_frame_json(df), encoding="utf-8")
        elif not self.on:
            _check_frame(df, path)
        return df

    @property
    def elapsed(self) -> float:
        """Seconds since :func:`start`."""
        return time.perf_counter() - self.started

    def finish(self) -> None:
        """Print the run time of the chapter (in a class run: against the budget, and the
        verdicts compared with the full run's)."""
        t = self.elapsed
        if self.on:
            met = "met" if t <= self.budget_s else "NOT met"
            print(f"[class mode] Run All: {t:.0f} s of a {self.budget_s:.0f} s budget ({met}).")
            if self.verdicts is not None:
                v = self.verdicts
                print(f"[class mode] verdicts: {v['same']} of {v['total']} claims have the "
                      "status of the book's full run.")
                for claim in v["differ"]:
                    print(f"[class mode] a different verdict: {claim}")
        else:
            print(_wrap(f"Run All: {t:.0f} s (the full run; CLASS_MODE = True in the first cell "
                        f"keeps a run under {self.budget_s / 60:.0f} minutes on a 2-core "
                        "laptop)."))


class ResultsOutOfDate(AssertionError):
    """A result a full run computed differs from the one ``book/_results`` keeps for class."""


def book_root(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The checkout of the book (the folder with ``_toc.yml`` and ``book/``), searched upwards.

    Parameters
    ----------
    start : path-like, optional
        Where to start; default the current directory (a notebook runs in ``notebooks/``).

    Returns
    -------
    pathlib.Path or None
        ``None`` outside a checkout of the book (e.g. an installed package).
    """
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "_toc.yml").is_file() and (d / "book").is_dir():
            return d
    return None


def _results_dir() -> Path | None:
    root = book_root()
    return None if root is None else root / "book" / "_results"


def _frame_json(df: pd.DataFrame) -> str:
    data = {"attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in df.attrs.items()},
            "columns": [str(c) for c in df.columns],
            "dtypes": [str(t) for t in df.dtypes],
            "data": [[None if isinstance(v, float) and math.isnan(v) else
                      (v.item() if hasattr(v, "item") else v) for v in row]
                     for row in df.itertuples(index=False, name=None)]}
    return json.dumps(data, indent=0, ensure_ascii=False) + "\n"


def _read_frame(path: Path) -> pd.DataFrame:
    d = json.loads(path.read_text(encoding="utf-8"))
    df = pd.DataFrame(d["data"], columns=d["columns"])
    df = df.astype(dict(zip(d["columns"], d["dtypes"], strict=True)))
    df.attrs.update({k: tuple(v) if isinstance(v, list) else v for k, v in d["attrs"].items()})
    return df


def _check_frame(df: pd.DataFrame, path: Path) -> None:
    fix = ("If the change is intended, re-execute the chapter with `python "
           "scripts/execute_notebooks.py --write-claims <notebook>` (CBDT_WRITE_CLAIMS=1).")
    if not path.is_file():
        raise ResultsOutOfDate(f"{path} is missing, so a class run cannot load it. {fix}")
    old = _read_frame(path)
    try:
        # trained networks: another CPU's kernels move an AUC by a few 1e-6 (one pair of
        # scores reordered; generic kernels, ch. 09); a stale file (another seed, config or
        # code) moves it by far more than the 1e-3 the chapter prints, as for the claims
        pd.testing.assert_frame_equal(df.reset_index(drop=True), old, check_exact=False,
                                      rtol=0, atol=1e-3, check_dtype=False)
    except AssertionError as exc:
        raise ResultsOutOfDate(f"The result this chapter computed differs from {path}, which "
                              f"a class run loads:\n{exc}\n{fix}") from None


def start(chapter: str, on: bool, *, budget_s: float = BUDGET_S) -> ChapterRun:
    """Start a chapter's run and say which run it is.

    Parameters
    ----------
    chapter : str
        The chapter's two digits (``"07"``).
    on : bool
        The chapter's ``CLASS_MODE`` switch.
    budget_s : float, default=BUDGET_S
        The class-mode budget of the chapter's Run All.

    Returns
    -------
    ChapterRun
        The run; the chapter's cells call its :meth:`~ChapterRun.choose` and, at the end,
        :meth:`~ChapterRun.finish`.
    """
    global _CURRENT
    if not isinstance(on, bool):
        raise TypeError(f"CLASS_MODE must be True or False, got {on!r}.")
    if len(chapter) != 2 or not chapter.isdigit():
        raise ValueError(f"chapter must be two digits like '07', got {chapter!r}.")
    _CURRENT = ChapterRun(chapter, on, budget_s)
    if on:
        # a live kernel shows the live explorer; its static twin only feeds the HTML book
        os.environ["CBDT_STATIC_TWIN"] = "0"
        print(_wrap(f"CLASS MODE: a shortened run of chapter {int(chapter)} for class (budget "
                    f"{budget_s:.0f} s on a 2-core laptop). Cells that do less work say so with "
                    "[class mode]; their numbers differ from the book's pages, which show the "
                    "full run, and the claims table compares verdicts, not numbers."))
    else:
        if _STATIC_TWIN is None:
            os.environ.pop("CBDT_STATIC_TWIN", None)
        else:
            os.environ["CBDT_STATIC_TWIN"] = _STATIC_TWIN
        print(_wrap("Full run: the run the book's pages show. For class, set CLASS_MODE = "
                    "True in the first cell and run all cells again."))
    return _CURRENT


def current() -> ChapterRun | None:
    """The run started last in this process (None before any :func:`start`)."""
    return _CURRENT


def is_on() -> bool:
    """Whether the current chapter run is a class run."""
    return _CURRENT is not None and _CURRENT.on


def compare_verdicts(run: ChapterRun, new: Sequence[tuple[str, str]],
                     stored: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Compare the statuses of a class run's claims with the full run's, row by row.

    The rows are matched by position (a claim's wording may name the number of seeds, which
    the class run changes).

    Parameters
    ----------
    run : ChapterRun
        The class run; its :attr:`~ChapterRun.verdicts` is set.
    new, stored : sequence of (claim, status)
        The class run's claims and the full run's (``book/_claims/<chapter>.json``), in the
        chapter's order.

    Returns
    -------
    dict
        ``{"same": n, "total": m, "differ": ["claim (full run: status; class run: status)",
        ...]}`` with the full run's wording; a row present on one side only is "absent" there.
    """
    same, differ = 0, []
    for i in range(max(len(new), len(stored))):
        full = stored[i][1] if i < len(stored) else "absent"
        ours = new[i][1] if i < len(new) else "absent"
        if full == ours:
            same += 1
        else:
            claim = stored[i][0] if i < len(stored) else new[i][0]
            differ.append(f"{claim} (full run: {full}; class run: {ours})")
    result = {"same": same, "total": len(stored), "differ": differ}
    run.verdicts = result
    return result
