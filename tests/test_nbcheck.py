"""The notebook check (tests/nbcheck.py): what it accepts, what it must reject, what it runs.

The comparison must accept what another CPU prints (a printed float one unit of its last digit
off, a table column padded differently) and reject what a changed experiment prints (a number
moved by two units or more, a changed word, a changed count, a redrawn curve).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import pathlib
import sys

import nbcheck
import nbformat
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(("token", "value", "unit"), [
    ("6.2890", 6.289, 1e-4), ("-0.0000", 0.0, 1e-4), ("1.5e-07", 1.5e-7, 1e-8),
    ("3e5", 3e5, 1e5), ("42", 42.0, 0.0), ("\u22121.25", -1.25, 1e-2), (".5", 0.5, 0.1),
])
def test_parse_number(token, value, unit):
    p = nbcheck.parse_number(token)
    assert float(p.value) == value
    assert float(p.unit) == pytest.approx(unit, rel=1e-12) if unit else p.unit == 0


def test_tokens_keep_words_and_identifiers_as_text():
    texts, numbers = nbcheck.tokens("ch02 H64 at n = 14,000: 1.07x faster (7adb61)")
    assert [n.text for n in numbers] == ["14", "000", "1.07", "7"]
    assert texts[0] == "ch02 H64 at n ="
    assert texts[3] == "x faster ("


@pytest.mark.parametrize(("stored", "now"), [
    ("mean 6.2890 sd 6.0765", "mean 6.2889 sd 6.0764"),  # the ch. 07 cells on AVX-512
    ("0.8733", "0.8734"),
    ("   a     b\n0  9.9999  1\n", "    a     b\n0  10.0000  1\n"),  # a column widens
    ("-0.0000", "0.0000"),
    ("9.99e-05", "1.00e-04"),
    ("ratio 1.07x", "ratio 1.08x"),
])
def test_accepts_one_unit_of_the_last_digit(stored, now):
    assert nbcheck.compare_text(stored, now) is None


@pytest.mark.parametrize(("stored", "now", "why"), [
    ("mean 6.2890", "mean 6.2887", "moved"),  # three units
    ("agreement 0.8733", "agreement 0.8699", "moved"),
    ("3221/3358 agree", "3220/3358 agree", "integer"),  # counts exactly
    ("the claim holds", "the claim does not hold", "text"),  # a word
    ("a 0.5 b", "a 0.5 b 0.25", "numbers"),
    ("value 3", "value 3.0", "integer"),
    ("n = 14 cases", "n = 15 cases", "integer"),
])
def test_rejects_real_changes(stored, now, why):
    msg = nbcheck.compare_text(stored, now)
    assert msg is not None and why in msg


def test_wider_tolerance_where_a_chapter_states_one():
    assert nbcheck.compare_text("0.123", "0.125") is not None
    assert nbcheck.compare_text("0.123", "0.125", units=2) is None


@given(x=st.floats(-1e6, 1e6, allow_nan=False), d=st.integers(0, 8),
       spread=st.floats(0, 0.999))
def test_any_spread_below_one_unit_passes(x, d, spread):
    """Two CPUs whose values differ by less than one unit of the last printed digit print
    values at most one unit apart: the check accepts every such pair, whatever rounding
    boundary lies between them (where an exact text comparison fails)."""
    unit = 10.0 ** -d
    y = x + spread * unit
    a, b = f"{x:.{d}f}", f"{y:.{d}f}"
    if d == 0:  # integers compare exactly: a float is printed with at least one decimal
        return
    assert nbcheck.compare_text(f"value {a}", f"value {b}") is None


@given(x=st.floats(-1e3, 1e3, allow_nan=False), d=st.integers(1, 6), k=st.integers(2, 50))
def test_two_units_or_more_fail(x, d, k):
    unit = 10.0 ** -d
    a = f"{x:.{d}f}"
    b = f"{float(a) + k * unit:.{d}f}"
    assert nbcheck.compare_text(a, b) is not None


# ----------------------------------------------------------------------------- figures


def _png(y: np.ndarray) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3), dpi=80)
    ax.plot(np.linspace(0, 1, y.size), y)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def test_figures_equal_up_to_rounding_pass_and_a_changed_curve_fails():
    x = np.linspace(0, 1, 200)
    ref = _png(np.sin(6 * x))
    assert nbcheck.compare_png(ref, _png(np.sin(6 * x))) is None
    assert nbcheck.compare_png(ref, _png(np.sin(6 * x) * (1 + 1e-9))) is None  # a CPU's spread
    for changed in (np.sin(6.3 * x), np.sin(6 * x) * 1.01):  # another curve; 1 % higher
        why = nbcheck.compare_png(ref, _png(changed))
        assert why is not None and "RMS" in why


# ----------------------------------------------------------------------------- exercises

MARKDOWN = """
```{exercise}
:label: ex-9-1

Compute it:

~~~python
print(1 + 1)
~~~
```

````{solution} ex-9-1
:class: dropdown

1. First step:
2. ~~~python
   x = 3
   print(x * 2)
   ~~~

~~~python
print("done")
~~~
````
"""


def test_exercise_blocks_found_in_exercises_solutions_and_list_items():
    blocks = nbcheck.exercise_blocks(MARKDOWN, "test")
    assert [b.key for b in blocks] == ["ex-9-1#0", "ex-9-1/solution#0", "ex-9-1/solution#1"]
    assert blocks[1].source == "x = 3\nprint(x * 2)"


def test_every_instructor_problem_with_code_runs_after_a_chapter():
    page = (ROOT / "book" / "instructor.md").read_text(encoding="utf-8")
    all_keys = {b.key for b in nbcheck.exercise_blocks(page, "instructor")}
    assigned = {b.key for nb in NOTEBOOKS
                for b in nbcheck.instructor_blocks(nb.relative_to(ROOT).as_posix())}
    assert all_keys, "the instructor page has problems with code"
    assert all_keys == assigned


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_block_has_its_output_stored(path):
    nb = nbformat.read(path, as_version=4)
    rel = path.relative_to(ROOT).as_posix()
    keys = [b.key for b in nbcheck.notebook_blocks(nb, rel) + nbcheck.instructor_blocks(rel)]
    stored = nbcheck.read_exercises(path)
    assert sorted(stored) == sorted(keys), (
        "book/_exercises is out of date: run `make exercises` and check what the blocks print")


def _student_edition():
    spec = importlib.util.spec_from_file_location("student_edition",
                                                  ROOT / "scripts" / "student_edition.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("student_edition", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_student_edition_keeps_every_exercise_block(path):
    """The student notebooks lose the solutions and keep the exercises' code, unchanged (it runs
    in make test through the instructor notebook)."""
    se = _student_edition()
    nb = json.loads(path.read_text(encoding="utf-8"))
    student = nbformat.from_dict(se.strip_notebook(nb))
    teacher = nbformat.read(path, as_version=4)
    def blocks(n):
        return [(b.key, b.source) for b in nbcheck.notebook_blocks(n, "")]
    assert blocks(student) == [b for b in blocks(teacher) if "/solution" not in b[0]]


def test_kernel_report_names_the_kernels():
    lines = nbcheck.kernel_report()
    assert lines[0].startswith("kernels: ")
    assert any("ATen CPU capability" in line for line in lines)


def test_glued_figures_are_compared_as_figures():
    """myst-nb's glue stores a figure under application/papermill.record/image/png: it is a
    figure (compared by RMS), not text."""
    assert nbcheck.is_image("image/png")
    assert nbcheck.is_image("application/papermill.record/image/png")
    assert not nbcheck.is_image("application/papermill.record/text/plain")


def test_exercise_outputs_left_uncompared_are_timings_and_exist():
    """The explicit list of exercise blocks whose output is not compared names existing
    blocks that time something, and nothing else."""
    blocks = {}
    for nb in NOTEBOOKS:
        rel = nb.relative_to(ROOT).as_posix()
        for b in (nbcheck.notebook_blocks(nbformat.read(nb, as_version=4), rel)
                  + nbcheck.instructor_blocks(rel)):
            blocks[b.key] = b.source
    for key, reason in nbcheck.IGNORE_OUTPUT.items():
        assert key in blocks, key
        assert "perf_counter" in blocks[key] and "time" in reason
