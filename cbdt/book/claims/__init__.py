"""The paper's claims beside the book's measurements, and the generated reproducibility page.

Every chapter that re-runs an experiment of the paper ends with a :class:`ChapterClaims`:
one :class:`Claim` per quantitative statement of the paper, with the paper's value, the value
the chapter has just measured, a status from :data:`STATUSES` and the reason where they
differ. The rows are built from the chapter's computed results (never typed by hand) by the
chapter's module of this package, which loads on first use: ``claims.ch02_proposition1``,
``ch03_invariance``, ``ch05_06_synthetic``, ``ch07_pjm``, ``ch08_uci``, ``ch09_drift`` and
``ch10_nystrom`` phrase what :mod:`cbdt.book.experiments` computes. :func:`report` shows the
rows at the end of the chapter and keeps them in step with ``book/_claims/<chapter>.json``:

* by default :func:`report` *checks*: when the rows just computed differ from the stored ones
  it raises :class:`ClaimsOutOfDate` (so nbval fails when a chapter's numbers move away from
  the page);
* with ``CBDT_WRITE_CLAIMS=1`` (``scripts/execute_notebooks.py --write-claims``) it *writes*
  them instead.

``book/reproducibility.md`` is rendered from the stored files by :func:`render_page`
(``python scripts/reproducibility_page.py``); ``tests/test_claims.py`` fails when the stored
page and the stored claims disagree. Together: the page is what the code computes.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cbdt.book import classmode

__all__ = [
    "STATUSES",
    "Claim",
    "ChapterClaims",
    "ClaimsOutOfDate",
    "TRAINED_TOLERANCE",
    "interval_status",
    "fmt",
    "mean_ci_math",
    "power10",
    "sci",
    "report",
    "claims_dir",
    "load_claims",
    "render_page",
    "render_confirmations",
]

#: The chapter modules of this package (``claims.ch08_uci``), loaded on first use.
CHAPTERS: tuple[str, ...] = (
    "ch02_proposition1",
    "ch03_invariance",
    "ch05_06_synthetic",
    "ch07_pjm",
    "ch08_uci",
    "ch09_drift",
    "ch10_nystrom",
)


def __getattr__(name: str) -> Any:
    """``claims.ch08_uci`` imports the chapter's module (and its experiments) on first use."""
    if name in CHAPTERS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The statuses a claim can have, with their meaning (the page's legend).
STATUSES: dict[str, str] = {
    "agrees": (
        "the paper's value lies inside the book's 95% interval (for an exact result: within "
        "the stated tolerance); the book's mean inside the paper's interval is not enough"
    ),
    "agrees in shape": (
        "the direction, ranking or pattern the paper reports holds; the values are not on a "
        "common scale"
    ),
    "differs": (
        "the paper's value lies outside the book's interval, or the book measures something "
        "else; the reason column says which"
    ),
    "does not hold": "the book's experiment contradicts the paper's statement",
    "not comparable": "the paper's definition or set-up is not given precisely enough",
    "book only": "a finding of the book with no counterpart in the paper",
}

#: :attr:`ChapterClaims.tolerance` of the chapters whose numbers come from trained networks:
#: one unit of the last printed digit (a rounding boundary crossed; see TESTING.md).
TRAINED_TOLERANCE: int = 1

#: Environment variable that makes :func:`report` write the stored claims instead of checking.
WRITE_ENV = "CBDT_WRITE_CLAIMS"


class ClaimsOutOfDate(AssertionError):
    """The claims a chapter computes differ from those the reproducibility page was built from."""


@dataclass(frozen=True)
class Claim:
    """One statement of the paper beside the book's measurement.

    Parameters
    ----------
    claim : str
        The statement, in Markdown (math as ``$...$``).
    paper : str
        The paper's value as it prints it (``"-"`` when it gives none).
    book : str
        The value the chapter measured, formatted from the computed result.
    status : str
        One of :data:`STATUSES`.
    reason : str, default=""
        Why the two differ, or what qualifies the status.
    """

    claim: str
    paper: str
    book: str
    status: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(
                f"status must be one of {sorted(STATUSES)}, got {self.status!r} (claim "
                f"{self.claim!r}); qualifications go into the reason."
            )
        for name in ("claim", "paper", "book"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"a claim's {name} must not be empty (claim {self.claim!r}).")


@dataclass
class ChapterClaims:
    """The claims of one chapter, as its last section and as one section of the page.

    Parameters
    ----------
    chapter : str
        Two-digit chapter number, e.g. ``"05"``.
    title : str
        Section title on the reproducibility page.
    doc : str
        The chapter's document name, e.g. ``"notebooks/05_synthetic_recovery"``.
    claims : list of Claim
    intro : list of str, optional
        Paragraphs shown before the table (set-up the comparison depends on).
    notes : list of str, optional
        Paragraphs after the table (why values differ), generated from the results.
    tables : list of (str, pandas.DataFrame-like), optional
        Extra tables, each with a one-line caption, as Markdown-ready rows
        ``{"columns": [...], "rows": [[...], ...]}``.
    tolerance : int, default=0
        How far a recomputed number may lie from the stored one, in units of its last printed
        digit, and still count as the same result in :func:`report`. ``0`` for exact results
        (rounding-level quantities are stored as bounds and verdicts, never as values). ``1``
        for results of trained networks: their measured spread across CPUs (float64 training)
        is far below one unit of the last printed digit, so the only way the CPU can move such
        a number is across a rounding boundary, by exactly one unit; a seed or a
        hyper-parameter that changes moves it by more.
    """

    chapter: str
    title: str
    doc: str
    claims: list[Claim]
    intro: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)
    tolerance: int = 0

    def __post_init__(self) -> None:
        if (not isinstance(self.tolerance, int) or isinstance(self.tolerance, bool)
                or self.tolerance < 0):
            raise ValueError(f"tolerance must be a non-negative integer (units of the last "
                             f"printed digit), got {self.tolerance!r}.")
        if not re.fullmatch(r"\d\d", self.chapter):
            raise ValueError(f"chapter must be two digits like '05', got {self.chapter!r}.")
        if not self.claims:
            raise ValueError(f"chapter {self.chapter} lists no claims.")
        for t in self.tables:
            if set(t) != {"caption", "columns", "rows"} or any(
                len(r) != len(t["columns"]) for r in t["rows"]
            ):
                raise ValueError(
                    "each extra table is {'caption': str, 'columns': [...], 'rows': [[...]]} "
                    "with one cell per column."
                )

    # -- serialisation ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (what ``book/_claims/<chapter>.json`` holds).

        Returns
        -------
        dict
        """
        d = asdict(self)
        d["tables"] = [
            {"caption": str(t["caption"]), "columns": [str(c) for c in t["columns"]],
             "rows": [[str(v) for v in r] for r in t["rows"]]}
            for t in self.tables
        ]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChapterClaims:
        """Inverse of :meth:`to_dict`.

        Parameters
        ----------
        d : dict

        Returns
        -------
        ChapterClaims
        """
        d = dict(d)
        d["claims"] = [Claim(**c) for c in d["claims"]]
        return cls(**d)

    # -- display ------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Number of claims per status (statuses without claims left out).

        Returns
        -------
        dict of str to int
        """
        out: dict[str, int] = {}
        for c in self.claims:
            out[c.status] = out.get(c.status, 0) + 1
        return {s: out[s] for s in STATUSES if s in out}

    def markdown(self, heading: str = "##", link_prefix: str = "../") -> str:
        """This chapter's section of the reproducibility page (MyST Markdown).

        Parameters
        ----------
        heading : str, default="##"
        link_prefix : str, default="../"
            Path from the page to the repository root (for the ``{doc}`` link).

        Returns
        -------
        str
        """
        lines = [f"{heading} {self.title} (chapter {int(self.chapter):d})", ""]
        lines.append(f"Source: {{doc}}`{link_prefix}{self.doc}`, section *The paper beside "
                     "the book*.")
        lines.append("")
        return "\n".join(lines) + self.body()

    def body(self) -> str:
        """Intro, claims table, reasons, extra tables and notes, as MyST Markdown.

        Returns
        -------
        str
        """
        lines: list[str] = []
        for p in self.intro:
            lines += [p, ""]
        lines += md_table(["", "claim", "paper", "book", "status"],
                           [[str(i), c.claim, c.paper, c.book, _status_md(c.status)]
                            for i, c in enumerate(self.claims, 1)])
        lines.append("")
        reasons = [(i, c.reason) for i, c in enumerate(self.claims, 1) if c.reason.strip()]
        if reasons:
            lines += ["Reasons, by row:", ""]
            lines += [f"- **({i})** {_md_cell(r)}" for i, r in reasons]
            lines.append("")
        for t in self.tables:
            lines += [t["caption"], ""]
            lines += md_table(t["columns"], t["rows"])
            lines.append("")
        for p in self.notes:
            lines += [p, ""]
        return "\n".join(lines).rstrip() + "\n"

    def __repr__(self) -> str:
        head = f"Chapter {self.chapter}: {len(self.claims)} claims " + ", ".join(
            f"{v} {k}" for k, v in self.counts().items()
        )
        rows = [f"- [{c.status}] {_plain(c.claim)}: paper {_plain(c.paper)}; book "
                f"{_plain(c.book)}" for c in self.claims]
        return "\n".join([head, *rows])

    def _repr_markdown_(self) -> str:
        """The chapter's table, reasons and notes (Jupyter and the book render the Markdown)."""
        return self.body()


# ---------------------------------------------------------------------------------------
# formatting helpers shared by the chapters' claim functions
# ---------------------------------------------------------------------------------------


def fmt(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, thousands separated, ``-`` for NaN.

    Parameters
    ----------
    x : float
    digits : int, default=3

    Returns
    -------
    str
    """
    x = float(x)
    if math.isnan(x):
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def mean_ci_math(mean: float, half: float, digits: int = 3, pct: bool = False) -> str:
    """``mean ± half`` in Markdown math, as the chapters print it (:func:`cbdt.metrics.mean_ci`
    computes the interval; :func:`cbdt.metrics.format_mean_ci` prints it as plain text).

    Parameters
    ----------
    mean, half : float
        Mean and half-width of the 95% interval.
    digits : int, default=3
        Decimals (after scaling by 100 when ``pct``).
    pct : bool, default=False
        Print as percentages.

    Returns
    -------
    str
    """
    s = 100.0 if pct else 1.0
    unit = r"\%" if pct else ""
    return f"${mean * s:.{digits}f}\\pm{half * s:.{digits}f}{unit}$"


def power10(x: float) -> str:
    """``1e-7`` as ``10^{-7}`` (for ``$...$`` math); other numbers with :func:`fmt`."""
    e = math.log10(float(x))
    if abs(e - round(e)) < 1e-9:
        return {0: "1", 1: "10"}.get(round(e), f"10^{{{round(e)}}}")
    return fmt(x)


def sci(x: float) -> str:
    """``2.5e-08`` as ``2.5\\times10^{-8}`` (for ``$...$`` math)."""
    m, e = f"{float(x):.1e}".split("e")
    return f"{m}\\times10^{{{int(e)}}}"


def interval_status(paper: float, mean: float, half: float) -> str:
    """``"agrees"`` when the paper's value lies in ``mean ± half``, else ``"differs"``.

    Parameters
    ----------
    paper : float
        The paper's value.
    mean, half : float
        The book's mean and the half-width of its interval.

    Returns
    -------
    str
    """
    return "agrees" if abs(float(paper) - float(mean)) <= float(half) else "differs"


# ---------------------------------------------------------------------------------------
# storage, check and page
# ---------------------------------------------------------------------------------------


def claims_dir(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The repository's ``book/_claims`` folder, searched upwards from ``start``.

    Parameters
    ----------
    start : path-like, optional
        Where to start; default the current directory (a notebook runs in ``notebooks/``).

    Returns
    -------
    pathlib.Path or None
        ``None`` outside a checkout of the book (e.g. an installed package).
    """
    root = classmode.book_root(start)
    return None if root is None else root / "book" / "_claims"


def report(chapter: ChapterClaims, *, directory: str | os.PathLike[str] | None = None
           ) -> ChapterClaims:
    """Show a chapter's claims and keep ``book/_claims/<chapter>.json`` in step with them.

    Parameters
    ----------
    chapter : ChapterClaims
        Built from the chapter's results by a function of :mod:`cbdt.book.experiments`.
    directory : path-like, optional
        The claims folder; default :func:`claims_dir` (nothing is checked outside a checkout).

    Returns
    -------
    ChapterClaims
        ``chapter``, for display.

        When every number of ``chapter`` lies within ``chapter.tolerance`` units of the last
        printed digit of the stored one (and the text around the numbers is the same), the
        *stored* claims are returned, so the page and the chapter show the same rows.

        In a class run (:mod:`cbdt.book.classmode`, fewer seeds) nothing is checked or
        written: the class run's statuses are compared with the stored full run's, claim by
        claim, for :meth:`~cbdt.book.classmode.ChapterRun.finish` to report.

    Raises
    ------
    ClaimsOutOfDate
        When the stored claims differ from ``chapter`` beyond its tolerance (or are missing)
        and ``CBDT_WRITE_CLAIMS`` is not ``1``.
    """
    d = Path(directory) if directory is not None else claims_dir()
    if d is None:
        return chapter
    path = d / f"{chapter.chapter}.json"
    run = classmode.current()
    if run is not None and run.on:
        # a class run (fewer seeds, a smaller grid): its numbers are not the page's, so only
        # the verdicts are compared with the full run's; ChapterRun.finish prints the result
        stored = (json.loads(path.read_text(encoding="utf-8"))["claims"] if path.is_file()
                  else [])
        classmode.compare_verdicts(run, [(c.claim, c.status) for c in chapter.claims],
                                   [(c["claim"], c["status"]) for c in stored])
        return chapter
    new = chapter.to_dict()
    if os.environ.get(WRITE_ENV) == "1":
        d.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return chapter
    fix = (
        "If the change is intended, re-execute the chapter with "
        f"`python scripts/execute_notebooks.py --write-claims <notebook>` ({WRITE_ENV}=1) and "
        "regenerate the page with `python scripts/reproducibility_page.py`."
    )
    if not path.is_file():
        raise ClaimsOutOfDate(f"{path} is missing, so book/reproducibility.md cannot show "
                              f"chapter {chapter.chapter}. {fix}")
    old = json.loads(path.read_text(encoding="utf-8"))
    if old == new:
        return chapter
    if old.get("tolerance") == chapter.tolerance and _within(old, new, chapter.tolerance):
        return ChapterClaims.from_dict(old)
    raise ClaimsOutOfDate(
        f"The claims chapter {chapter.chapter} computes differ from {path}, from which "
        f"book/reproducibility.md is built, by more than the chapter's tolerance of "
        f"{chapter.tolerance} unit(s) in the last printed digit:\n{_diff(old, new)}\n{fix}"
    )


def load_claims(directory: str | os.PathLike[str]) -> list[ChapterClaims]:
    """Every stored chapter's claims, in chapter order.

    Parameters
    ----------
    directory : path-like
        The ``book/_claims`` folder.

    Returns
    -------
    list of ChapterClaims
    """
    files = sorted(Path(directory).glob("[0-9][0-9].json"))
    return [ChapterClaims.from_dict(json.loads(f.read_text(encoding="utf-8"))) for f in files]


_PAGE_HEAD = """\
(reproducibility)=
# The paper's numbers beside the book's

<!-- Generated by scripts/reproducibility_page.py from book/_claims/*.json, which the
chapters write (CBDT_WRITE_CLAIMS=1) and nbval checks; do not edit by hand. -->

Every quantitative claim of the paper that the book has re-run, with the book's measurement,
a status and the reason where the two differ. Each section is the last section of a chapter,
*The paper beside the book*: the rows are built there from the results the chapter has just
computed, and the test suite re-executes every chapter (nbval) and fails when a row here no
longer matches what the chapter computes. Unless a row says otherwise, the book's values are
means with 95% Student-$t$ intervals over the chapter's seeds.

Nothing in the book was tuned towards the paper's numbers. Where the paper leaves a choice
open (a metric's exact definition, the probe's ridge, the similarity bandwidth, the synthetic
market), the chapter states the choice and its reason before showing a number, and a
sensitivity table shows what the choice changes.
"""


#: The rule for "agrees", stated on the page above the legend.
_RULE = (
    "**The rule for *agrees*.** A row agrees only when the paper's value lies inside the "
    "book's 95% interval (for an exact result: within the stated tolerance). The converse, the "
    "book's mean inside the paper's interval, is not enough: a wide interval on the paper's side "
    "would then let almost any result agree. Where the paper gives an interval of its own and "
    "the two overlap while the paper's value lies outside the book's, the row still *differs*."
)


def render_page(chapters: Sequence[ChapterClaims]) -> str:
    """``book/reproducibility.md`` from the chapters' stored claims.

    Parameters
    ----------
    chapters : sequence of ChapterClaims
        In page order (:func:`load_claims`).

    Returns
    -------
    str
        MyST Markdown.
    """
    total: dict[str, int] = {}
    for ch in chapters:
        for s, v in ch.counts().items():
            total[s] = total.get(s, 0) + v
    n = sum(total.values())
    lines = [_PAGE_HEAD, _RULE, "", "Status legend:", ""]
    lines += [f"- **{s}**: {meaning}." for s, meaning in STATUSES.items()]
    lines.append("")
    summary = ", ".join(f"{total[s]} {s}" for s in STATUSES if s in total)
    lines += [f"In all, {n} claims from {len(chapters)} chapters: {summary}.", ""]
    lines += md_table(
        ["chapter", *[s for s in STATUSES if s in total]],
        [[f"{{doc}}`{int(ch.chapter):d} <../{ch.doc}>`",
          *[str(ch.counts().get(s, 0)) for s in STATUSES if s in total]] for ch in chapters],
    )
    lines.append("")
    body = "\n".join(lines) + "\n" + "\n".join(ch.markdown() for ch in chapters)
    return body.rstrip() + "\n"


#: How :func:`render_confirmations` groups the statuses: (heading, statuses, lead sentence).
_CONFIRM_GROUPS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("What the book confirms", ("agrees", "agrees in shape"),
     "The book's measurement matches the paper's value, or (*in shape*) the direction, ranking "
     "or pattern the paper reports holds."),
    ("What the book does not confirm", ("does not hold", "differs", "not comparable"),
     "The book's experiment contradicts the statement (*does not hold*), measures another value "
     "(*differs*; the reproducibility page gives the reason for each), or cannot compare because "
     "the paper's set-up is not given precisely enough (*not comparable*)."),
    ("What the book adds", ("book only",),
     "Findings of the book with no counterpart in the paper."),
)


def render_confirmations(chapters: Sequence[ChapterClaims], heading: str = "###",
                         link_prefix: str = "../") -> str:
    """A short "what the book confirms / does not" summary of the stored claims (MyST Markdown).

    One bullet per claim, grouped by status (:data:`STATUSES`) into what the book confirms,
    what it does not, and what it adds, each linked to its chapter. The numbers themselves
    stay on the reproducibility page (:func:`render_page`), which this summary points to.

    Parameters
    ----------
    chapters : sequence of ChapterClaims
        In page order (:func:`load_claims`).
    heading : str, default="###"
        Markdown heading of each group.
    link_prefix : str, default="../"
        Path from the page to the repository root (for the ``{doc}`` links).

    Returns
    -------
    str
    """
    total = sum(len(ch.claims) for ch in chapters)
    lines = [f"Generated from the {total} claims of {len(chapters)} chapters that "
             "{ref}`reproducibility` lists with the paper's and the book's values.", ""]
    for title, statuses, lead in _CONFIRM_GROUPS:
        items = [(ch, c) for s in statuses for ch in chapters for c in ch.claims
                 if c.status == s]
        if not items:
            continue
        lines += [f"{heading} {title} ({len(items)})", "", lead, ""]
        for ch, c in items:
            tag = "" if len(statuses) == 1 or c.status == "agrees" else f" *({c.status})*"
            link = f"{{doc}}`ch. {int(ch.chapter):d} <{link_prefix}{ch.doc}>`"
            lines.append(f"- {_md_cell(c.claim)}{tag} ({link})")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------
# internals
# ---------------------------------------------------------------------------------------


def _md_cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ").strip() or " "


def md_table(columns: Iterable[Any], rows: Iterable[Iterable[Any]]) -> list[str]:
    cols = [_md_cell(c) for c in columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in rows]
    return out


def _status_md(status: str) -> str:
    return status if status in ("agrees", "agrees in shape") else f"**{status}**"


def _plain(s: str) -> str:
    return re.sub(r"\$([^$]*)\$", r"\1", s)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _same_within(a: str, b: str, tolerance: int) -> bool:
    """``a`` and ``b`` differ only in numbers, each by at most ``tolerance`` units of the
    last digit ``a`` prints it with (the same number of decimals in both)."""
    if a == b:
        return True
    if tolerance == 0 or _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b), strict=True):
        dx = len(x.partition(".")[2])
        if dx != len(y.partition(".")[2]):
            return False
        if abs(float(x) - float(y)) > tolerance * 10.0 ** -dx * (1 + 1e-9):
            return False
    return True


def _within(old: Any, new: Any, tolerance: int) -> bool:
    """Stored and recomputed claims (plain data) agree up to ``tolerance`` (see report)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_within(old[k], new[k], tolerance) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(
            _within(a, b, tolerance) for a, b in zip(old, new, strict=True))
    if isinstance(old, str) and isinstance(new, str):
        return _same_within(old, new, tolerance)
    return bool(old == new)


def _diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    lines = []
    for key in sorted(set(old) | set(new)):
        if key == "claims":
            continue
        if old.get(key) != new.get(key):
            lines.append(f"  {key}: stored {old.get(key)!r}\n  {' ' * len(key)}  now    "
                         f"{new.get(key)!r}")
    oc, nc = old.get("claims", []), new.get("claims", [])
    for i in range(max(len(oc), len(nc))):
        a = oc[i] if i < len(oc) else None
        b = nc[i] if i < len(nc) else None
        if a != b:
            lines.append(f"  claim {i + 1}: stored {a!r}\n  {' ' * len(str(i + 1))}         now"
                         f"    {b!r}")
    return "\n".join(lines) or "  (same content, different order)"
