"""Every number in the book's prose is one the book computed, printed or cites.

The prose of a chapter (its Markdown cells and figure captions) and of the book's pages
(``book/*.md``) states numbers: measured values ("agreement 98.5%"), the paper's values, sizes
and hyper-parameters. This module finds each of them and looks it up in the sources the prose
may quote. A number that none of them holds is stale (the prose follows an older run) or typed
by hand; the test fails and names it, with its sentence.

**Sources.** For a chapter ``NN``:

* the chapter's stored outputs (``text/plain``, ``text/markdown``, ``text/html``, streams);
* its claims file ``book/_claims/NN.json``;
* the stored benchmarks ``benchmarks/results/*.csv`` and their ``*_meta.json``;
* the paper, ``../shared/paper/paper.tex`` next to the checkout (as the data sets are; the paper
  is not part of the repository). When it is absent, a document whose prose holds numbers
  found nowhere else is skipped, and the skip names them: they may be the paper's;
* the printed output of its exercises, ``book/_exercises/NN_*.json`` (written by
  ``tests/nbcheck.py``: what each code block of an exercise or solution prints, keyed
  ``<label>#<i>`` for the exercise's i-th block and ``<label>/solution#<i>`` for its
  solution's), for the numbers of a ``{solution}`` whose code, or whose exercise's
  code, prints them: that exercise's output. A solution whose output is not stored fails
  (``make exercises`` writes it);
* *as written*: the numbers of the chapter's code (code cells, fenced code blocks and inline
  code of its Markdown). Hyper-parameters, seeds and sizes stated in the code may be restated
  in the prose ("1000 full-batch Adam steps", ``multiples = [0.0, 1e-4, 1e-2, 1.0]``), but only
  verbatim: code is never a source for a rounded value.

A page of ``book/`` draws on every chapter's outputs, claims and exercise outputs (it
summarises them; the instructor page's problems run after a chapter, into that chapter's file),
the benchmarks, the paper and its own code blocks; ``book/reproducibility.md``, generated from
the claims, on the claims alone.

**Matching.** A prose number with ``d`` decimals matches a source number ``s`` when ``s``
rounded to ``d`` decimals is the prose number (``|s - p| < 0.5 * 10**-d``): the prose may
round a printed value, never add digits to it (0.93 matches 0.9312; 0.9312 does not match
0.93). A source exactly half-way does not count: a printed 0.9775 is a rounding itself, and
the value behind it may round to 0.977 or 0.978, so the prose must say 0.9775. A percentage
also matches a source fraction (96.0% matches 0.960) and a fraction a source percentage.
Signs are ignored (prose says "falls by 0.02" of a printed -0.02). Thousands separators
(``14,000``, ``14{,}000`` in math) are dropped. Code numbers match only when equal in value.

What the lookup cannot see: a number derived in the prose that happens to equal another
printed number (ch. 06 once said its four one-product methods "lie within 1.16 times of each
other", a stale spread that equals the inner product's printed 1.16x). Such sentences are
generated from the data instead (``cbdt.book.claims``' phrasing helpers, unit-tested).

**What counts as a number, and what is structure.** Each rule is a regular expression below;
none needs a list of values:

* numbers in a decimal notation with a point (``0.978``, ``1.05x``), percentages (``27%``),
  and integers of 100 or more (``3221/3358``, ``n = 14,000``) are checked;
* integers below 100 that are not percentages are not: they are counts and labels ("5 seeds",
  "3 actions", "Top-30", "Table 1", list numbers). Checking them would take an allow-list
  larger than the rules;
* references and labels are removed before numbers are read: roles (``{eq}`eq-7```,
  ``{ref}``, ``{numref}``, ``{doc}``, ``{cite}``), link targets, directive options
  (``:label: ex-06-1``, ``:enumerator: 6.1``), HTML and MyST (``%``) comments, DOIs, the
  ``lab-`` cells that ``scripts/lab_markup.py`` copies from other pages, and numbers after a
  structural
  word ("eq. 7", "Sec. 5.3", "Table C2", "Fig. 1.3", "chapter 05", "ch. 6", "Exercise 5.1",
  "Appendix D", "Proposition 1", "Problem 2.2", "seed 0", "row 2");
* numbers glued to a letter are identifiers, not values (``float64``, ``x86-64``, ``AVX-512``,
  ``a1``, ``L2``, ``Top-30``);
* in math, subscripts and superscripts (``t_{0.975,4}``, ``10^{-9}``) are indices and orders of
  magnitude, not values, and ``10^{k}`` is not read as the number 10;
* arithmetic shown in math is checked where it stands: in ``2/256 \\approx 0.0078`` or
  ``0.5489 + 0.4444 = 0.9933`` (numbers, ``+ - * / ^``, ``\\cdot``, ``\\frac``) the result
  is evaluated, and leaves the prose when the expression rounds to it; the operands are
  numbers like any other;
* years (four-digit integers 1900-2099) and dates (``2026-11-27``) are not values;
* version numbers (``1.x``, ``3.11``, ``v0.1``, three-part ``2.4.6``) are not values.

**The allow-list** :data:`ALLOWED` holds the few remaining constants per document, each with
its reason and the expression (of the library, where it has one) that computes it;
:func:`test_allowed_constants_are_what_the_code_computes` evaluates each, and an entry no
longer needed fails the test, so the list cannot grow stale.
"""

from __future__ import annotations

import bisect
import importlib
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAGES = sorted(p for p in (ROOT / "book").glob("*.md"))
PAPER = ROOT.parent / "shared" / "paper" / "paper.tex"

# --------------------------------------------------------------------------- reading numbers

#: a number as written: thousands separators (also ``{,}`` of math), a decimal part, an exponent
_NUM = re.compile(
    r"(?<![\w.])(?P<num>\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<exp>e[-+]?\d+)?(?![\w])(?P<pct>\s?(?:%|\\%|percent))?"
)
#: a number in a source: as ``_NUM``, also glued to letters (``0.272\\pm0.025``, ``1.07x``)
_SRC_NUM = re.compile(
    r"(?P<num>\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<exp>e[-+]?\d+)?(?P<pct>\s?(?:%|\\%|percent))?"
)
#: words after which a number names a part of a document or an index, not a value
_STRUCTURAL = re.compile(
    r"(?:\b(?:eqs?|equations?|Sec|Secs|Sections?|§|Fig|Figs|Figures?|Tables?|chapters?|ch|"
    r"Chapters?|Ch|Exercises?|ex|Problems?|Appendix|Appendices|App|Proposition|Lemma|Remark|"
    r"Definition|Theorem|Corollary|Step|rows?|columns?|seeds?|item|items|issue|"
    r"cell|cells|line|lines|Part|parts?|version|Python|python|page|pages|action|actions|"
    r"eq-|Algorithm)\.?\s*(?:\(|\{|\[)?"
    r"(?:[A-Z]?\d+(?:\.\d+)*(?:\s*(?:,|-|–|and|to|or)\s*)?)*)\Z"
)
_YEAR = re.compile(r"^(19|20)\d\d$")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
_VERSION = re.compile(r"\bv?\d+\.(?:\d+\.)+\d+\b|\bv\d+(?:\.\d+)*\b|\b\d+\.x\b")


@dataclass(frozen=True)
class ProseNumber:
    """One number of the prose: as written, its value, decimals, and the sentence around it."""

    text: str
    value: Decimal
    decimals: int
    percent: bool
    context: str

    def matches(self, s: Source) -> bool:
        half = Decimal(5) * Decimal(10) ** (-self.decimals - 1)
        return any(s.near(self.value / scale, half / scale) for scale in (
            (1, 100) if self.percent else (1,)))


@dataclass
class Source:
    """Numbers that prose may quote: ``rounded`` (any rounding of them) and ``exact``."""

    rounded: set[Decimal] = field(default_factory=set)
    percents: set[Decimal] = field(default_factory=set)
    exact: set[Decimal] = field(default_factory=set)
    _sorted: list[Decimal] | None = field(default=None, repr=False, compare=False)

    def near(self, value: Decimal, half: Decimal) -> bool:
        """A number that rounds to ``value`` (``|s - value| < half``): a printed one, or a
        printed percentage divided by 100 (prose 0.960 of a printed 96.0%). A prose
        percentage asks with ``value / 100`` (prose 96.0% of a printed 0.960)."""
        if self._sorted is None:
            self._sorted = sorted(self.rounded | {v / 100 for v in self.percents})
        i = bisect.bisect_right(self._sorted, value - half)  # the first above value - half
        return i < len(self._sorted) and self._sorted[i] < value + half

    def add_text(self, text: str, exact: bool = False) -> None:
        for m in _SRC_NUM.finditer(_flatten(text)):
            v = _value(m)
            if v is None:
                continue
            self._sorted = None
            if exact:
                self.exact.add(v)
            else:
                self.rounded.add(v)
                if m.group("pct"):
                    self.percents.add(v)

    def __or__(self, other: Source) -> Source:
        return Source(self.rounded | other.rounded, self.percents | other.percents,
                      self.exact | other.exact)


def _flatten(text: str) -> str:
    return text.replace("{,}", ",").replace("\\,", " ").replace("\u2009", " ")


def _value(m: re.Match[str]) -> Decimal | None:
    s = m.group("num").replace("{,}", "").replace(",", "")
    try:
        v = Decimal(s + (m.group("exp") or ""))
    except ArithmeticError:
        return None
    return abs(v)


def _decimals(m: re.Match[str]) -> int:
    if m.group("exp"):
        return max(0, -Decimal(m.group("num").replace(",", "") + m.group("exp")).as_tuple()
                   .exponent)
    return len(m.group("num").partition(".")[2])


def _rounds_to(source: Decimal, prose: Decimal, decimals: int) -> bool:
    """``prose`` is ``source`` rounded to ``decimals``. A source exactly half-way (a printed
    0.9775 for a prose 0.978) does not count: the value behind the printed digits may lie on
    either side, so the rounding of the rounded number is not the rounding of the value."""
    return abs(source - prose) < Decimal(5) * Decimal(10) ** (-decimals - 1)


# --------------------------------------------------------------------------- Markdown to prose

_FENCE = re.compile(r"^(?P<f>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=f)[ \t]*$",
                    re.M | re.S)
_INLINE_CODE = re.compile(r"(?<!`)``?(?!`)(?P<code>[^`\n]+?)``?(?!`)")
_ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_OPTION = re.compile(r"^\s*:[\w-]+:.*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_MYST_COMMENT = re.compile(r"^%.*$", re.M)
_HTML_TAG = re.compile(r"<[^>\n]+>")
_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$|(?<!\\)\$(?P<d>[^$\n]+?)(?<!\\)\$|"
    r"\\begin\{(?P<env>equation\*?|align\*?|aligned|gather\*?|multline\*?)\}(?P<e>.*?)"
    r"\\end\{(?P=env)\}",
    re.S,
)
_MATH_SCRIPT = re.compile(r"[_^](?:\{(?:[^{}]|\{[^{}]*\})*\}|\\?[\w.]+)")
_POWER10 = re.compile(r"(?<![\d.])10\s*(?=\^)")
_DOI = re.compile(r"\b(?:doi:\s*|DOI\s+|doi\.org/)?10\.\d{4,}/\S+")


_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
#: ``<arithmetic of numbers> = <number>`` or ``\approx <number>`` in math
_ARITHMETIC = re.compile(
    r"(?P<expr>[\d.\s+\-*/()^]*\d[\d.\s+\-*/()^]*?)\s*(?:=|\\approx)\s*"
    r"(?P<num>\d+(?:\.\d+)?)(?![\d.])")


def _evaluate(expr: str) -> Decimal | None:
    """``expr`` (digits, a point, + - * / ^ and parentheses only), or None if it is not one."""
    expr = expr.strip()
    if not re.fullmatch(r"[\d.\s+\-*/()^]+", expr) or not re.search(r"\d\s*[-+*/^]\s*[\d(]",
                                                                        expr):
        return None
    try:
        v = eval(expr.replace("^", "**"), {"__builtins__": {}})  # noqa: S307 -- checked above
    except (SyntaxError, ArithmeticError, TypeError):
        return None
    return abs(Decimal(repr(float(v))))


def _drop_checked_arithmetic(body: str) -> str:
    """Math that shows its arithmetic, ``2/256 \\approx 0.0078`` or ``0.5489 + 0.4444 = 0.9933``,
    is checked here: a result that its expression rounds to leaves the prose (an expression
    that does not evaluate, or a wrong result, stays and is looked up as any other number)."""
    flat = body.replace("\\cdot", "*").replace("\\times", "*")
    while _FRAC.search(flat):
        flat = _FRAC.sub(r"((\1)/(\2))", flat)

    def check(m: re.Match[str]) -> str:
        expr, num = m.group("expr"), m.group("num")
        for start in range(len(expr)):  # the longest tail that evaluates (drops a lone "(")
            v = _evaluate(expr[start:])
            if v is not None:
                decimals = len(num.partition(".")[2])
                if _rounds_to(v, Decimal(num), decimals):
                    return m.group(0)[: m.start("num") - m.start()] + " (checked) "
                break
        return m.group(0)

    return _ARITHMETIC.sub(check, flat)


def split_markdown(md: str, coded: set[str] | None = None
                   ) -> tuple[list[tuple[str, str]], str]:
    """``md`` as prose segments ``(kind, text)`` and code.

    Code blocks, inline code, roles, link targets, directive options and comments leave the
    prose; math stays, without its sub- and superscripts and powers of ten. ``kind`` is
    ``"solution:<label>"`` for the prose of a ``{solution}`` that holds code, or whose
    exercise does (its numbers are what that code prints), and ``"prose"`` otherwise. ``coded`` collects the
    labels of exercises with code across the cells of a document.
    """
    coded = set() if coded is None else coded
    code: list[str] = []
    segments: list[tuple[str, str]] = []

    def fence(m: re.Match[str]) -> str:
        info = m.group("info").strip()
        if info.startswith("{math}"):
            return "\n$$" + _OPTION.sub("", m.group("body")) + "$$\n"
        if info.startswith("{") and not info.startswith("{code"):
            # a directive (exercise, solution, figure, admonition): its body is prose
            inner, inner_code = split_markdown(m.group("body"), coded)
            code.append(inner_code)
            label = re.search(r"^:label:\s*(\S+)", m.group("body"), re.M)
            if info.startswith("{exercise}") and label and inner_code.strip():
                coded.add(label.group(1))
            if info.startswith("{solution}") and (
                    inner_code.strip() or info.removeprefix("{solution}").strip() in coded):
                label = info.removeprefix("{solution}").strip()
                segments.extend((f"solution:{label}", t) for _, t in inner)
                return "\n"
            segments.extend((k, t) for k, t in inner if k != "prose")
            return "\n" + "\n".join(t for k, t in inner if k == "prose") + "\n"
        code.append(m.group("body"))
        return "\n"

    text = _COMMENT.sub(" ", md)
    text = _MYST_COMMENT.sub("", text)
    text = _FENCE.sub(fence, text)
    text = re.sub(r"^:{3,}\{[^}]*\}.*$|^:{3,}\s*$", "", text, flags=re.M)
    text = _OPTION.sub("", text)
    text = _ROLE.sub(" ", text)

    def inline(m: re.Match[str]) -> str:
        code.append(m.group("code"))
        return " "

    text = _INLINE_CODE.sub(inline, text)
    text = _LINK_TARGET.sub("]", text)
    text = _HTML_TAG.sub(" ", text)
    text = _DOI.sub(" ", text)

    def math(m: re.Match[str]) -> str:
        body = next(g for g in (m.group("dd"), m.group("d"), m.group("e")) if g is not None)
        body = _drop_checked_arithmetic(body)
        body = _POWER10.sub(" ", body)
        body = _MATH_SCRIPT.sub(" ", body)
        body = re.sub(r"\\[A-Za-z]+", " ", body)  # commands (\times, \mathrm, \pm)
        return " " + body.replace("{", " ").replace("}", " ") + " "

    text = _MATH.sub(math, _flatten(text))
    return [("prose", text), *segments], "\n".join(code)


def prose_numbers(prose: str) -> Iterator[ProseNumber]:
    """The numbers of ``prose`` that state a value (the rules of the module docstring)."""
    prose = _DATE.sub(" ", prose)
    prose = _VERSION.sub(" ", prose)
    for m in _NUM.finditer(prose):
        num = m.group("num")
        start = m.start("num")
        before = prose[max(0, start - 60):start]
        # glued to a letter or hyphenated identifier: float64, Top-30, x86-64
        if re.search(r"[A-Za-z][-_]?\Z", before):
            continue
        if _STRUCTURAL.search(before):
            continue
        v = _value(m)
        if v is None:
            continue
        percent = bool(m.group("pct"))
        has_point = "." in num or m.group("exp")
        if not has_point and not percent:
            if v < 100 or _YEAR.match(num):
                continue
        ctx = prose[max(0, start - 70):m.end() + 50]
        yield ProseNumber(m.group(0).strip(), v, _decimals(m), percent,
                          " ".join(ctx.split()))


# --------------------------------------------------------------------------- the documents


@dataclass
class Document:
    """A chapter or page: its prose segments ``(where, kind, text)`` and its sources."""

    name: str
    prose: list[tuple[str, str, str]]
    source: Source
    code: Source
    #: exercise label -> what its code blocks print (book/_exercises), keys ``ex-06-4/...``
    exercises: dict[str, Source]


def _output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    data = output.get("data", {})
    return "\n".join("".join(data[k]) for k in ("text/plain", "text/markdown", "text/html")
                     if k in data)


def _json_strings(obj: object) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _json_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _json_strings(v)


def _json_source(files: Iterable[Path]) -> Source:
    s = Source()
    for f in files:
        for text in _json_strings(json.loads(f.read_text(encoding="utf-8"))):
            s.add_text(text)
    return s


def benchmark_source(names: Iterable[str] | None = None) -> Source:
    """The stored benchmarks, ``benchmarks/results/*.csv`` and ``*_meta.json`` (only those
    whose stem is in ``names``, ``attribution`` for ``attribution.csv`` and
    ``attribution_meta.json``, when given)."""
    s = Source()
    for f in sorted((ROOT / "benchmarks" / "results").glob("*")):
        if f.suffix in (".csv", ".json") and (
                names is None or f.stem.removesuffix("_meta") in names):
            s.add_text(f.read_text(encoding="utf-8"))
    return s


def benchmarks_read_by(path: Path) -> set[str] | None:
    """The stored benchmarks a document may quote: those its code loads
    (``load_benchmark("fit")``); every one (None) for a document that names
    ``benchmarks/results`` without loading one (the pages built from the claims); none for
    the rest. A chapter that reads no benchmark cannot take a number from one: thousands of
    measured values would otherwise vouch for any number by chance (a re-run stored 400.47
    ms, and ch. 07's 400 MWh looked sourced)."""
    text = path.read_text(encoding="utf-8")
    names = set(re.findall(r'load_benchmark\(\s*\\?"(\w+)', text))
    if names:
        return names
    return None if "benchmarks/results" in text else set()


def paper_source() -> Source | None:
    """The numbers of the paper, or None when ``../shared/paper/paper.tex`` is absent."""
    if not PAPER.is_file():
        return None
    s = Source()
    s.add_text(PAPER.read_text(encoding="utf-8"))
    return s


def _exercise_sources(pattern: str) -> dict[str, Source]:
    """What each exercise's code prints, by label (``book/_exercises/<pattern>``, whose keys
    are ``<label>#<i>`` for an exercise's code and ``<label>/solution#<i>`` for its
    solution's)."""
    out: dict[str, Source] = {}
    for f in sorted((ROOT / "book" / "_exercises").glob(pattern)):
        for key, text in json.loads(f.read_text(encoding="utf-8")).items():
            label = key.split("/", 1)[0].split("#", 1)[0]
            out.setdefault(label, Source()).add_text(str(text))
    return out


def _read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _notebook_outputs(nb: dict) -> Source:
    s = Source()
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            s.add_text(_output_text(out))
    return s


def notebook_document(path: Path) -> Document:
    """A chapter: its Markdown cells (not the ``lab-`` cells, copies of other pages written by
    ``scripts/lab_markup.py``) and figure captions; its outputs, claims and code."""
    nb = _read_notebook(path)
    chapter = path.name[:2]
    source = _notebook_outputs(nb) | _json_source(
        sorted((ROOT / "book" / "_claims").glob(f"{chapter}.json")))
    code = Source()
    prose: list[tuple[str, str, str]] = []

    coded: set[str] = set()

    def add(where: str, md: str) -> None:
        segments, c = split_markdown(md, coded)
        prose.extend((where, kind, text) for kind, text in segments)
        code.add_text(c, exact=True)

    for cell in nb["cells"]:
        src = "".join(cell["source"])
        cid = cell.get("id", "?")
        if cell["cell_type"] == "code":
            code.add_text(src, exact=True)
            cap = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption")
            if cap:
                add(f"cell {cid} (figure caption)", cap)
        elif cell["cell_type"] == "markdown" and not cid.startswith("lab-"):
            add(f"cell {cid}", src)
    return Document(path.stem, prose, source, code, _exercise_sources(f"{chapter}_*.json"))


def page_document(path: Path) -> Document:
    """A page of ``book/``: it may quote every chapter (the reproducibility page, generated
    from the claims, only the claims)."""
    segments, c = split_markdown(path.read_text(encoding="utf-8"))
    source = _json_source(sorted((ROOT / "book" / "_claims").glob("[0-9][0-9].json")))
    if path.stem != "reproducibility":
        for nb in NOTEBOOKS:
            source = source | _notebook_outputs(_read_notebook(nb))
    code = Source()
    code.add_text(c, exact=True)
    return Document(f"book/{path.name}", [("page", k, t) for k, t in segments], source, code,
                    _exercise_sources("*.json"))


def document(path: Path) -> Document:
    return notebook_document(path) if path.suffix == ".ipynb" else page_document(path)


# --------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class Finding:
    where: str
    number: ProseNumber

    def __str__(self) -> str:
        return f"{self.where}: {self.number.text!r} in \"...{self.number.context}...\""


@dataclass
class Result:
    unmatched: list[Finding] = field(default_factory=list)
    #: numbers of a solution with code whose output book/_exercises does not hold (yet)
    unverified: list[Finding] = field(default_factory=list)
    #: numbers that only the paper could match, when the paper is absent
    paper_absent: bool = False
    allowed_used: set[str] = field(default_factory=set)


def check(doc: Document, benchmarks: Source, paper: Source | None) -> Result:
    """Look every prose number of ``doc`` up in its sources (the module docstring's rules)."""
    allowed = ALLOWED.get(doc.name, {})
    res = Result(paper_absent=paper is None)
    for where, kind, text in doc.prose:
        for p in prose_numbers(text):
            if p.value in doc.code.exact or p.matches(doc.source) or p.matches(benchmarks):
                continue
            if paper is not None and p.matches(paper):
                continue
            if p.text in allowed:  # only where no source holds it: an entry can go stale
                res.allowed_used.add(p.text)
                continue
            if kind.startswith("solution:"):
                printed = doc.exercises.get(kind.partition(":")[2])
                if printed is None:
                    res.unverified.append(Finding(where, p))
                    continue
                if p.matches(printed):
                    continue
            res.unmatched.append(Finding(where, p))
    return res


@dataclass(frozen=True)
class Allowed:
    """An allow-list entry: why the number is in the prose, and where it can be computed.

    ``value`` is a Python expression (with :mod:`math` and, when ``module`` is given, that
    module's names in scope) whose result, or one element of it, the number must round.
    """

    reason: str
    value: str | None = None
    module: str | None = None

    def evaluate(self) -> list[Decimal]:
        scope: dict[str, object] = {"math": math}
        if self.module:
            scope.update(vars(importlib.import_module(self.module)))
        v = eval(self.value, scope)  # noqa: S307 -- expressions written in this file
        items = v if isinstance(v, (list, tuple)) else [v]
        return [abs(Decimal(repr(float(x)))) for x in items]


#: Constants the rules cannot tell from a value, per document: {number as written: Allowed}.
#: Each is computed by its ``value`` in :func:`test_allowed_constants_are_what_the_code_computes`.
ALLOWED: dict[str, dict[str, Allowed]] = {
    "04_audit_signals": {
        "1.765": Allowed("upper end of the risk score's range, log|A| + 1 - 1/|A| for |A| = 3, "
                         "the formula stated beside it", "math.log(3) + 1 - 1 / 3"),
    },
    "07_pjm_audit": {
        "400": Allowed("MWh offered by the aggressive strategy, a parameter of the market "
                       "model", "MarketModel().quantities", "cbdt.datasets.pjm_bidding"),
    },
    "09_drift_grid": {
        "1,797": Allowed("images in scikit-learn's digits data set",
                         "load_digits().data.shape[0]", "sklearn.datasets"),
        "1,000": Allowed("training images per seed of the digits classifier",
                         "ClassifierConfig().n_train", "cbdt.book.experiments.classifier"),
    },
    "11_audit_your_network": {
        "569": Allowed("tumours in scikit-learn's breast cancer data set, suggested for the "
                       "exercise", "load_breast_cancer().data.shape[0]", "sklearn.datasets"),
    },
    "book/data.md": {
        "145,366": Allowed("rows of PJME_hourly.csv, which cbdt.datasets checks on reading",
                           "REGIONS['PJME']", "cbdt.datasets.pjm"),
    },
}


def documents() -> list[Path]:
    return [*NOTEBOOKS, *PAGES]


@pytest.fixture(scope="module")
def paper() -> Source | None:
    return paper_source()


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.name)
def test_prose_numbers_come_from_the_outputs(path, paper):
    doc = document(path)
    res = check(doc, benchmark_source(benchmarks_read_by(path)), paper)
    assert not res.unverified, (
        f"book/_exercises holds no output of these solutions of {doc.name}, so their numbers "
        "cannot be checked: run `make exercises` (tests/test_nbcheck.py asserts every block's "
        "output is stored): " + "; ".join(map(str, res.unverified)))
    if res.unmatched and res.paper_absent:
        pytest.skip(f"{PAPER} is absent, so the numbers of {doc.name} found in no output may "
                    "be the paper's:\n" + "\n".join(map(str, res.unmatched)))
    assert not res.unmatched, (
        f"{len(res.unmatched)} number(s) in the prose of {doc.name} are in no output, claims "
        "file, stored benchmark, exercise output or the paper: generate the sentence from the "
        "data, or correct it to what the outputs say.\n" + "\n".join(map(str, res.unmatched))
    )
    unused = set(ALLOWED.get(doc.name, {})) - res.allowed_used
    assert not unused, (f"allow-list entries of {doc.name} no longer needed (the prose no longer "
                        f"states them, or a source now holds them): {sorted(unused)}")


@pytest.mark.parametrize(
    ("name", "number"), [(d, n) for d, entries in ALLOWED.items() for n in entries])
def test_allowed_constants_are_what_the_code_computes(name, number):
    entry = ALLOWED[name][number]
    assert entry.reason.strip()
    if entry.value is None:
        return
    p = Decimal(number.replace(",", ""))
    decimals = len(number.partition(".")[2])
    values = entry.evaluate()
    assert any(_rounds_to(v, p, decimals) for v in values), (
        f"{name}: the allow-listed {number} is not {entry.value} = {values}")


# --------------------------------------------------------------------------- the rules themselves


def _numbers(md: str) -> list[str]:
    return [p.text for _, text in split_markdown(md)[0] for p in prose_numbers(text)]


def test_structure_is_not_read_as_values():
    md = ("See eq. 7, Sec. 5.3, Table C2, Fig. 1.3, chapter 05 and {eq}`eq-16`; a float64 "
          "network, Top-30, Python 3.11, version 2.4.6, seeds 0-4, the run of 2026-11-27 "
          "(Koh and Liang, 2017), `H = 640`, $t_{0.975,4}$ and $10^{-9}$, 5 seeds.\n\n"
          "```{exercise}\n:label: ex-06-1\n:enumerator: 6.1\n\nText.\n```\n"
          "<!-- 0.123 -->\n% nbcheck 0.456\n[link](../a/0.789.md) DOI 10.24432/C5XW20")
    assert _numbers(md) == []


def test_values_are_read_with_their_precision():
    nums = list(prose_numbers("agreement 0.9312, 96.0% of them, n = 14,000 and 3221/3358"))
    assert [(p.text, p.decimals, p.percent) for p in nums] == [
        ("0.9312", 4, False), ("96.0%", 1, True), ("14,000", 0, False), ("3221", 0, False),
        ("3358", 0, False)]
    assert _numbers("$n = 14{,}000$ and $0.829 \\pm 0.043$") == ["14,000", "0.829", "0.043"]


def test_matching_rounds_the_source_never_the_prose():
    src = Source()
    src.add_text("AUC 0.9312, agreement 96.0%, share 0.960, margin 0.9775, -0.0213")

    def found(text):
        return next(prose_numbers(text)).matches(src)

    assert found("0.93") and found("0.931") and found("0.9312")
    assert not found("0.93125") and not found("0.932")
    assert found("96.0%") and found("96%") and found("0.96")
    assert found("0.0213") and found("0.021")  # signs are ignored
    assert not found("0.978")  # a printed 0.9775 may be 0.97749...: a tie does not count
    assert found("0.9775")


def test_arithmetic_in_math_is_checked_where_it_stands():
    # the results leave the prose; the operands stay numbers like any other
    assert _numbers("$2/256 \\approx 0.0078$ and $0.5489 + 0.4444 = 0.9933$") == [
        "256", "0.5489", "0.4444"]
    assert _numbers("$2/256 \\approx 0.0079$") == ["256", "0.0079"]  # a wrong result stays
    assert _numbers("$\\frac{152\\cdot151}{169\\cdot168} \\approx 0.81$") == [
        "152", "151", "169", "168"]


def test_a_solution_with_code_is_checked_against_what_its_code_prints():
    md = ("````{exercise}\n:label: ex-99-1\n\n```python\nprint(0.25)\n```\n````\n\n"
          "```{solution} ex-99-1\nIt prints 0.250.\n```\n\n"
          "```{solution} ex-99-2\nBy hand: 0.125.\n```")
    segments, code = split_markdown(md, set())
    kinds = {kind: text for kind, text in segments}
    assert "0.250" in kinds["solution:ex-99-1"] and "0.125" in kinds["prose"]
    assert "print(0.25)" in code


def test_the_stale_timing_paragraph_of_chapter_06_is_found():
    """The paragraph ch. 06 once printed (its prose followed an older CSV), against the table
    the chapter printed from the benchmark then: every stale ratio is found except 1.16, which
    equals a printed value (the module docstring says why the chapter now generates the
    sentence). The stored benchmark itself is left out: it is re-measured, and a new run may
    happen to contain one of these ratios (the run of issue 31's fit has a 1.05)."""
    stale = ("In the stored benchmark the exact coefficient costs 1.05 times the fastest method "
             "at $n = 500$ (the inner product) and is itself the fastest at $n = 14{,}000$, "
             "where the four methods that need one matrix-vector product per query lie within "
             "1.16 times of each other, against the paper's 170 times. Without the cached dual "
             "matrix it costs 1.43 and 1.15 times. TracIn is the most expensive (2.31 and 8.88 "
             "times).")
    table = Source()
    for ratio in ("1.07x", "1.23x", "2.15x", "1.24x", "1.00x", "1.42x", "1.07x", "1.00x",
                  "10.24x", "1.20x", "1.16x", "1.25x", "170.2x", "n = 500", "n = 14,000"):
        table.add_text(ratio)  # its ratios and the two sizes it names
    missed = [p.text for _, text in split_markdown(stale)[0] for p in prose_numbers(text)
              if not p.matches(table)]
    assert missed == ["1.05", "1.43", "1.15", "2.31", "8.88"]
