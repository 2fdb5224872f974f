"""Self-check of the exercises: ``check("ex-05-3", 0.043)`` says *correct* or *not yet*.

Every exercise of the book with a numeric or categorical answer carries a code block::

    from cbdt.book.selfcheck import check
    check("ex-05-3", ...)   # replace ... with your answer

that a student runs with their answer. The answers are stored in
:mod:`cbdt.book._selfcheck_answers`, which ships with the package and therefore with the
student edition, so it holds no answer in plain text: only, per exercise, the kind of answer,
its precision, a hint and a digest.

**The scheme.** An answer is first written in a canonical form:

* a *number* checked to ``d`` decimals is rounded half-to-even to ``d`` decimals in exact decimal
  arithmetic (``Decimal(repr(x))``) and written with exactly ``d`` decimals (``-0.000`` becomes
  ``0.000``);
* an *integer* (a count) is written in decimal; a float that is not integral is not an integer;
* a *choice* is lower-cased with its whitespace collapsed; ``True``/``yes`` become ``yes``,
  ``False``/``no`` become ``no``; a tuple or list of choices is joined with ``", "``.

The file stores ``PBKDF2-HMAC-SHA256(canonical, salt, ITERATIONS)`` with a salt derived from
the exercise's label (:func:`salt`), so two exercises with the same answer have unrelated digests
and no table computed for one exercise serves for another.

**Rounding boundaries.** A stored number is the solution's computed value rounded to ``d``
decimals. A student who computes the same quantity on another CPU, with another random draw, or
reads it off a table with one digit less than the code prints, may land on the other side of a
rounding boundary: 0.91849 and 0.91851 round to 0.918 and 0.919. So :func:`check` accepts a
number when the digest of its rounding *or of either neighbouring grid value* (one unit of the
``d``-th decimal up or down) matches: every value within one unit of the stored rounding and
nothing beyond one and a half units is accepted, whichever side of a boundary the true value
sits on (``tests/test_selfcheck.py`` checks both edges). The stated tolerance of an exercise is
therefore "to ``d`` decimals, give or take one in the last". Integers (counts) and choices are
exact.

**What the digest protects, and what it cannot.** Reading the file, or the student edition,
does not show an answer: a digest has to be searched for. It is not a secret: :func:`check`
itself is an oracle, and a student who tries every value of a 3-decimal grid or every word will
find the answer, with or without the file. The iterations make each try cost a few
milliseconds, so a search is slower than solving most exercises, but the aim is the one of a
printed answer key folded at the back of a book: no answer in sight, not a lock.

The expected answers are never typed by hand: ``scripts/selfcheck_answers.py`` reads each from
the printed output of its solution's code (``book/_exercises/*.json``, written by the notebook
check), and ``tests/test_selfcheck.py`` re-derives them and compares with this module's data.
Each solution ends with ``check(label, value)`` on the value its code computes, so the notebook
check (``make nbval``) runs the check on the computed answer and fails when it says *not yet*.
"""

from __future__ import annotations

import hashlib
import hmac
import numbers
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

__all__ = ["ITERATIONS", "Verdict", "canonical", "check", "digest", "salt"]

#: PBKDF2 iterations per digest: a few milliseconds per try (see the module docstring).
ITERATIONS = 20_000
_SALT_DOMAIN = b"cbdt.book.selfcheck v1:"


def salt(label: str) -> bytes:
    """The salt of an exercise: SHA-256 of a fixed domain string and its label, 16 bytes."""
    return hashlib.sha256(_SALT_DOMAIN + label.encode("utf-8")).digest()[:16]


def digest(label: str, canonical_answer: str) -> str:
    """The stored digest of an answer in canonical form (hexadecimal)."""
    return hashlib.pbkdf2_hmac("sha256", canonical_answer.encode("utf-8"), salt(label),
                               ITERATIONS).hex()


def _decimal(x: Any) -> Decimal:
    if isinstance(x, bool) or not isinstance(x, (numbers.Real, str, Decimal)):
        raise TypeError(f"expected a number, got {x!r}")
    try:
        if isinstance(x, numbers.Integral):  # also numpy integers, which Decimal refuses
            d = Decimal(int(x))
        elif isinstance(x, (str, Decimal)):
            d = Decimal(x)
        else:  # float, numpy floats: the shortest repr that reads back as the same float
            d = Decimal(repr(float(x)))
    except (InvalidOperation, ValueError) as e:
        raise TypeError(f"expected a number, got {x!r}") from e
    if not d.is_finite():
        raise TypeError(f"expected a finite number, got {x!r}")
    return d


def _choice(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return ", ".join(_choice(v) for v in x)
    if isinstance(x, bool) or type(x).__name__ == "bool_":
        return "yes" if x else "no"
    s = " ".join(str(x).replace("'", "").replace('"', "").split()).lower()
    return {"true": "yes", "false": "no"}.get(s, s)


def canonical(kind: str, answer: Any, decimals: int = 0, shift: int = 0) -> str:
    """An answer in the canonical form its digest is taken of.

    Parameters
    ----------
    kind : {"number", "integer", "choice"}
        What the exercise asks for.
    answer : number, str, bool or tuple of those
        The answer as a student gives it.
    decimals : int
        For ``kind="number"``: the decimals it is compared to.
    shift : int
        For ``kind="number"``: the grid value ``shift`` units of the last decimal away from the
        rounded answer (the neighbours :func:`check` also accepts).

    Raises
    ------
    TypeError
        A number or integer was asked for and ``answer`` is none.
    """
    if kind == "number":
        unit = Decimal(1).scaleb(-decimals)
        q = _decimal(answer).quantize(unit, rounding=ROUND_HALF_EVEN) + shift * unit
        q = q.quantize(unit)
        return f"{abs(q) if q == 0 else q:f}"
    if kind == "integer":
        d = _decimal(answer)
        if d != d.to_integral_value():
            raise TypeError(f"expected a whole number (a count), got {answer!r}")
        return str(int(d))
    if kind == "choice":
        return _choice(answer)
    raise ValueError(f"unknown kind of answer {kind!r}: 'number', 'integer' or 'choice'")


@dataclass(frozen=True)
class Verdict:
    """The result of :func:`check`: true when correct; shown as its message."""

    label: str
    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return self.message

    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the message only
        p.text(self.message)


def _what(entry: dict[str, Any]) -> str:
    if entry["kind"] == "number":
        return (f"a number, compared to {entry['decimals']} decimals, give or take one in "
                "the last")
    if entry["kind"] == "integer":
        return "a whole number, compared exactly"
    return f"{entry['form']}"


def check(label: str, answer: Any) -> Verdict:
    """Check an answer to the exercise ``label``; the verdict prints *correct* or *not yet*.

    Parameters
    ----------
    label : str
        The exercise's label, as in its check block (``"ex-05-3"``).
    answer : number, str, bool or tuple
        Your answer; ``...`` (the placeholder of the check block) says what is expected.

    Returns
    -------
    Verdict
        True when the answer is correct; its text is ``"<label>: correct"`` or
        ``"<label>: not yet"`` with a hint.

    Raises
    ------
    KeyError
        ``label`` names no exercise with a self-check (the message lists those that have one).

    Examples
    --------
    >>> check("ex-05-3", ...)
    ex-05-3: replace ... with your answer (a number, compared to 3 decimals, give or take one in the last).
    >>> bool(check("ex-05-3", 0.5))
    False
    """
    from cbdt.book._selfcheck_answers import ANSWERS

    if label not in ANSWERS:
        raise KeyError(f"no self-check for {label!r}; exercises with one: "
                       f"{', '.join(sorted(ANSWERS))}")
    entry = ANSWERS[label]
    if answer is Ellipsis:
        return Verdict(label, False, f"{label}: replace ... with your answer ({_what(entry)}).")
    kind = entry["kind"]
    try:
        shifts = (0, -1, 1) if kind == "number" else (0,)
        forms = [canonical(kind, answer, entry.get("decimals", 0), s) for s in shifts]
    except TypeError as e:
        return Verdict(label, False, f"{label}: not yet: {e}; the answer is {_what(entry)}.")
    ok = any(hmac.compare_digest(digest(label, f), entry["digest"]) for f in forms)
    if ok:
        return Verdict(label, True, f"{label}: correct")
    return Verdict(label, False, f"{label}: not yet. Hint: {entry['hint']} (The answer is "
                                 f"{_what(entry)}.)")
