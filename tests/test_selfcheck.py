"""Self-check of the exercises (cbdt.book.selfcheck): right and wrong answers, both editions.

The expected answers are read off the stored outputs of the solutions' code
(``book/_exercises``) by ``scripts/selfcheck_answers.py``; the data file must be what that
script writes now, so an answer cannot be typed by hand or go stale. The data file ships with
the package (and so with the student edition) and must hold no answer in plain text.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from decimal import Decimal
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbdt.book._selfcheck_answers as data
from cbdt.book.selfcheck import Verdict, canonical, check, digest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))
import selfcheck_answers as sa  # noqa: E402
import student_edition as se  # noqa: E402
from nbcheck import notebook_blocks, read_exercises  # noqa: E402

SPECS = {s.label: s for s in sa.SPECS}
DATA_FILE = ROOT / "cbdt" / "book" / "_selfcheck_answers.py"


def _notebook(spec: sa.Spec) -> Path:
    return ROOT / "notebooks" / f"{spec.notebook}.ipynb"


# --------------------------------------------------------------------------- the stored data


def test_data_file_is_what_the_stored_outputs_give() -> None:
    assert DATA_FILE.read_text(encoding="utf-8") == sa.render(sa.entries()), (
        "cbdt/book/_selfcheck_answers.py is stale: python scripts/selfcheck_answers.py")
    assert set(data.ANSWERS) == set(SPECS)


_EXERCISE_LABEL = re.compile(r"^:label:\s*(ex-[\w-]+)\s*$", re.MULTILINE)


def _exercise_labels(text: str) -> list[str]:
    """The labels of the exercises of a chapter's or page's markdown (``:label: ex-...``)."""
    return _EXERCISE_LABEL.findall(text)


def _book_exercises() -> dict[str, str]:
    """Every exercise of the book: label -> the stem of its notebook or page."""
    out: dict[str, str] = {}
    for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(p, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                out |= dict.fromkeys(_exercise_labels(cell.source), p.stem)
    for p in sorted((ROOT / "book").glob("*.md")):
        out |= dict.fromkeys(_exercise_labels(p.read_text(encoding="utf-8")), p.stem)
    return out


def test_every_chapter_with_exercises_has_a_self_check() -> None:
    chapters = {stem for stem in _book_exercises().values() if stem[:2].isdigit()}
    assert chapters, "no exercise found in notebooks/"
    assert chapters == {s.notebook for s in sa.SPECS}


def test_every_exercise_has_a_self_check_or_a_reason_for_none() -> None:
    """An exercise with a numeric or categorical answer has a check (SPECS); every other one is
    listed, with the reason, in ``NO_CHECK``: a new exercise must be decided on."""
    book = _book_exercises()
    checked, reasoned = set(SPECS), set(sa.NO_CHECK)
    assert not checked & reasoned, f"both checked and listed as without: {checked & reasoned}"
    assert set(book) == checked | reasoned, (
        f"not decided on (add a Spec or a NO_CHECK reason): {sorted(set(book) - checked - reasoned)}; "
        f"no such exercise: {sorted((checked | reasoned) - set(book))}")
    for label, spec in SPECS.items():
        assert book[label] == spec.notebook, (label, book[label], spec.notebook)
    assert all(len(why) > 20 for why in sa.NO_CHECK.values())


def _yes_no(form: str) -> bool:
    """A yes/no answer or a tuple of them ("no, yes"): words that any form text shows, as in
    "(yes/no, yes/no)"; a check of such an answer hides nothing a guess would not find."""
    return all(w.strip() in ("yes", "no", "true", "false") for w in form.lower().split(","))


@pytest.mark.parametrize("label", sorted(SPECS))
def test_no_answer_in_plain_text(label: str) -> None:
    spec = SPECS[label]
    answer = spec.answer()
    text = DATA_FILE.read_text(encoding="utf-8")
    for e in data.ANSWERS.values():
        text = text.replace(e["digest"], "")  # hex digits may hold any short number
    text = re.sub(r"'ex-[\w-]+'", "", text)  # the labels: "ex-10-2" does not show a 10
    forms = {canonical(spec.kind, answer, spec.decimals)}
    forms |= {str(a) for a in (answer if isinstance(answer, tuple) else (answer,))}
    for form in forms:
        if spec.kind == "choice" and _yes_no(form):
            continue  # a yes/no answer is one of two words whatever the file says
        assert not re.search(rf"(?<![\w.]){re.escape(form)}(?![\w.])", text, re.IGNORECASE), (
            f"{label}: the data file shows its answer {form!r}")


# --------------------------------------------------------------------------- right and wrong


def _wrong(spec: sa.Spec, answer) -> list:
    if spec.kind == "number":
        unit = Decimal(1).scaleb(-spec.decimals)
        q = Decimal(canonical("number", answer, spec.decimals))
        return [str(q + 2 * unit), str(q - 2 * unit), "nan", "word"]
    if spec.kind == "integer":
        n = int(Decimal(answer))
        return [n + 1, n - 1, n + 0.5]
    if isinstance(answer, tuple):
        flipped = tuple("no" if canonical("choice", a) == "yes" else "yes" for a in answer)
        return [flipped, answer[:1]]
    return ["not the answer", answer + "x"]


@pytest.mark.parametrize("label", sorted(SPECS))
def test_right_answer_is_correct_and_wrong_ones_not_yet(label: str) -> None:
    spec = SPECS[label]
    answer = spec.answer()
    ok = check(label, answer)
    assert isinstance(ok, Verdict) and ok and str(ok) == f"{label}: correct"
    for wrong in _wrong(spec, answer):
        v = check(label, wrong)
        assert not v and str(v).startswith(f"{label}: not yet"), (wrong, str(v))
        assert "Hint" in str(v) or "expected" in str(v)
    blank = check(label, ...)
    assert not blank and "replace ... with your answer" in str(blank)


@pytest.mark.parametrize("label", sorted(s.label for s in sa.SPECS if s.kind == "number"))
def test_numbers_are_accepted_within_one_unit_either_side_of_a_boundary(label: str) -> None:
    spec = SPECS[label]
    unit = Decimal(1).scaleb(-spec.decimals)
    q = Decimal(canonical("number", spec.answer(), spec.decimals))
    # just inside one unit of the stored rounding, on both sides, and beyond 1.5 units
    for y in (q - unit, q + unit, q - Decimal("1.49") * unit, q + Decimal("1.49") * unit):
        assert check(label, float(y)), (label, y)
    for y in (q - Decimal("1.51") * unit, q + Decimal("1.51") * unit):
        assert not check(label, float(y)), (label, y)


def test_choices_are_normalised() -> None:
    assert canonical("choice", "  LSTSQ ") == "lstsq"
    assert canonical("choice", (True, "No")) == canonical("choice", ("yes", False)) == "yes, no"
    assert canonical("choice", "'hold'") == "hold"
    assert canonical("integer", 627.0) == canonical("integer", "627") == "627"
    assert canonical("number", -0.0001, 3) == "0.000"
    assert canonical("number", 0.0445, 3) == "0.044"  # half to even, in exact decimals
    assert canonical("number", 0.04451, 3) == "0.045"
    # what solutions pass: numpy scalars (a count from .sum(), a mean, a bool)
    assert canonical("integer", np.int64(28)) == "28"
    assert canonical("number", np.float64(0.91875), 3) == "0.919"
    assert canonical("choice", (np.bool_(True), np.bool_(False))) == "yes, no"
    with pytest.raises(TypeError):
        canonical("integer", 3.5)
    with pytest.raises(TypeError):
        canonical("number", True, 3)


def test_unknown_exercise_is_an_error_that_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="ex-05-3"):
        check("ex-99-9", 1)


@settings(max_examples=25, deadline=None)
@given(x=st.floats(-1e3, 1e3, allow_nan=False), d=st.integers(0, 4),
       e=st.floats(-0.99, 0.99))
def test_a_value_near_the_stored_one_is_accepted_whatever_the_boundary(
        monkeypatch_module, x: float, d: int, e: float) -> None:
    """A value within one unit of the stored rounding is accepted wherever it falls."""
    stored = canonical("number", x, d)
    monkeypatch_module.setitem(data.ANSWERS, "ex-test", {
        "kind": "number", "decimals": d, "hint": "h", "digest": digest("ex-test", stored)})
    y = float(Decimal(stored) + Decimal(repr(e)) * Decimal(1).scaleb(-d))
    assert check("ex-test", y)
    far = float(Decimal(stored) + (2 if e >= 0 else -2) * Decimal(1).scaleb(-d))
    assert not check("ex-test", far)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


# --------------------------------------------------------------------------- both editions


def _blocks(nb) -> dict[str, str]:
    return {b.key: b.source for b in notebook_blocks(nb, "test")}


@pytest.mark.parametrize("label", sorted(SPECS))
def test_exercise_has_a_check_block_and_solution_checks_its_computed_value(label: str) -> None:
    spec = SPECS[label]
    nb = nbformat.read(_notebook(spec), as_version=4)
    blocks = _blocks(nb)
    call = f'check("{label}", ...)'
    ex = [k for k, src in blocks.items() if k.startswith(f"{label}#") and call in src]
    assert len(ex) == 1, f"{label}: the exercise needs one block with {call}"
    sol = [k for k, src in blocks.items()
           if k.startswith(f"{label}/solution#") and f'check("{label}", ' in src
           and call not in src]
    assert sol, f"{label}: the solution must call check on the value its code computes"
    stored = read_exercises(_notebook(spec))
    assert f"{label}: correct" in stored[sol[-1]], (
        f"{label}: the stored output of the solution's check is not 'correct' (make exercises)")
    assert "replace ... with your answer" in stored[ex[0]]


def _run_block(source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        scope: dict = {}
        *body, last = source.strip().splitlines()
        exec("\n".join(body), scope)  # noqa: S102 -- the book's own code blocks
        print(eval(last.split("#")[0], scope))  # noqa: S307
    return out.getvalue()


def _answer_forms(spec: sa.Spec) -> set[str]:
    """How an answer may be written: its canonical form and, for a single value, what the
    solution printed. Yes and no are left out (a yes/no answer is one of two words whatever a
    text says), and so are the parts of a pair: an action's name or a small count alone in an
    exercise's text does not give away which pair is the answer."""
    answer = spec.answer()
    forms = {canonical(spec.kind, answer, spec.decimals)}
    if not isinstance(answer, tuple):
        forms.add(str(answer))
    return {f for f in forms if not _yes_no(f)}


@pytest.mark.parametrize("label", sorted(SPECS))
def test_student_edition_does_not_show_the_answer_next_to_the_exercise(label: str) -> None:
    """The student edition's text of the exercise (its statement and check block, the solution
    gone) holds neither the rounded answer nor the value the solution printed."""
    spec = SPECS[label]
    raw = json.loads(_notebook(spec).read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in se.strip_notebook(raw)["cells"]
                     if c["cell_type"] == "markdown")
    start = text.index(f":label: {label}")
    end = min((i for i in (text.find("{exercise}", start), text.find("{solution", start))
               if i >= 0), default=len(text))
    statement = text[start:end]
    assert f'check("{label}", ...)' in statement
    for form in _answer_forms(spec):
        assert not re.search(rf"(?<![\w.]){re.escape(form)}(?![\w.])", statement,
                             re.IGNORECASE), f"{label}: the exercise shows its answer {form!r}"


@pytest.mark.parametrize("edition", ["instructor", "student"])
@pytest.mark.parametrize("label", sorted(SPECS))
def test_check_block_works_in_both_editions(label: str, edition: str) -> None:
    """The exercise's check block, as each edition prints it, run with the right answer and
    with a wrong one; the student edition keeps the block and loses the solution's call."""
    spec = SPECS[label]
    raw = json.loads(_notebook(spec).read_text(encoding="utf-8"))
    nb = se.strip_notebook(raw) if edition == "student" else raw
    blocks = _blocks(nbformat.from_dict(nb))
    src = next(s for k, s in blocks.items()
               if k.startswith(f"{label}#") and f'check("{label}", ...)' in s)
    if edition == "student":
        assert not [k for k in blocks if k.startswith(f"{label}/solution")]
    answer = spec.answer()
    assert _run_block(src.replace("...", repr(answer))).strip() == f"{label}: correct"
    wrong = _wrong(spec, answer)[0]
    assert _run_block(src.replace("...", repr(wrong))).startswith(f"{label}: not yet")
    assert "replace ... with your answer" in _run_block(src)
