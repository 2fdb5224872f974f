"""The claims framework and the generated reproducibility page."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from cbdt.book import claims
from cbdt.book.claims import ChapterClaims, Claim, ClaimsOutOfDate

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLAIMS_DIR = ROOT / "book" / "_claims"
PAGE = ROOT / "book" / "reproducibility.md"


def _chapter(value="0.871", status="agrees"):
    return ChapterClaims(
        "05", "Synthetic", "notebooks/05_synthetic_recovery",
        [Claim("agreement $a$", "96.0%", value, status, "why"),
         Claim("support", "strong", "0.999", "agrees in shape")],
        intro=["The set-up."], notes=["Why it differs."],
        tables=[{"caption": "AUC", "columns": ["x", "y"], "rows": [["1", "2"]]}],
    )


def test_stored_page_is_the_rendering_of_the_stored_claims():
    chapters = claims.load_claims(CLAIMS_DIR)
    assert chapters, "book/_claims holds no chapter: the page would be empty"
    assert PAGE.read_text(encoding="utf-8") == claims.render_page(chapters), (
        "book/reproducibility.md differs from book/_claims/*.json; run "
        "python scripts/reproducibility_page.py (never edit the page by hand)"
    )


def test_every_stored_chapter_links_a_chapter_of_the_book_and_is_complete():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    for ch in claims.load_claims(CLAIMS_DIR):
        assert f"file: {ch.doc}" in toc, ch.doc
        assert (ROOT / f"{ch.doc}.ipynb").is_file()
        assert ch.doc.split("/")[-1].startswith(ch.chapter)
        nb = (ROOT / f"{ch.doc}.ipynb").read_text(encoding="utf-8")
        assert "claims.report(" in nb, f"{ch.doc} does not build its claims with claims.report"
        for c in ch.claims:
            assert c.status in claims.STATUSES


def test_report_checks_then_writes(tmp_path, monkeypatch):
    monkeypatch.delenv(claims.WRITE_ENV, raising=False)
    ch = _chapter()
    with pytest.raises(ClaimsOutOfDate, match="missing"):
        claims.report(ch, directory=tmp_path)
    monkeypatch.setenv(claims.WRITE_ENV, "1")
    assert claims.report(ch, directory=tmp_path) is ch
    stored = json.loads((tmp_path / "05.json").read_text(encoding="utf-8"))
    assert stored["claims"][0]["book"] == "0.871"
    monkeypatch.delenv(claims.WRITE_ENV)
    claims.report(ch, directory=tmp_path)  # same rows: passes
    with pytest.raises(ClaimsOutOfDate, match=r"claim 1: stored .*0\.871.*\n.*now.*0\.872"):
        claims.report(_chapter(value="0.872"), directory=tmp_path)


def _trained(value="0.871", support="0.999", status="agrees", tolerance=1):
    return ChapterClaims(
        "07", "PJM", "notebooks/07_pjm_audit",
        [Claim("agreement", "0.959", f"${value}\\pm0.011$ (2921 of 3358)", status, "why"),
         Claim("support", "strong", support, "agrees in shape")],
        tolerance=tolerance,
    )


def test_report_accepts_a_crossed_rounding_boundary_within_the_chapter_tolerance(
        tmp_path, monkeypatch):
    monkeypatch.setenv(claims.WRITE_ENV, "1")
    stored = _trained()
    claims.report(stored, directory=tmp_path)
    monkeypatch.delenv(claims.WRITE_ENV)
    assert json.loads((tmp_path / "07.json").read_text(encoding="utf-8"))["tolerance"] == 1
    # one unit of the last printed digit, in any number: the same result; the stored rows are shown
    for moved in (_trained(value="0.872"), _trained(value="0.870"), _trained(support="0.998")):
        assert claims.report(moved, directory=tmp_path) == stored
    # two units, a changed count beyond one, another verdict or other words: a moved result
    for moved, what in ((_trained(value="0.873"), "0.873"),
                        (_trained(support="1.001"), "1.001"),
                        (_trained(status="differs"), "differs"),
                        (_trained(value="0.87"), "0.87")):
        with pytest.raises(ClaimsOutOfDate, match="tolerance of 1 unit") as err:
            claims.report(moved, directory=tmp_path)
        assert what in str(err.value)  # the diff names the moved value
    # an exact chapter (tolerance 0) accepts no difference at all
    monkeypatch.setenv(claims.WRITE_ENV, "1")
    claims.report(_trained(tolerance=0), directory=tmp_path)
    monkeypatch.delenv(claims.WRITE_ENV)
    with pytest.raises(ClaimsOutOfDate):
        claims.report(_trained(value="0.872", tolerance=0), directory=tmp_path)
    # nor does a chapter whose tolerance differs from the stored one
    with pytest.raises(ClaimsOutOfDate):
        claims.report(_trained(value="0.872", tolerance=1), directory=tmp_path)


def test_tolerance_must_be_a_count_of_digits():
    for bad in (-1, 0.5, True):
        with pytest.raises(ValueError, match="tolerance"):
            _trained(tolerance=bad)


def test_report_outside_a_checkout_only_displays(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert claims.claims_dir() is None
    assert claims.report(_chapter()) is not None


def test_round_trip_and_rendering():
    ch = _chapter()
    back = ChapterClaims.from_dict(json.loads(json.dumps(ch.to_dict())))
    assert back == ch
    md = ch.markdown()
    assert md.startswith("## Synthetic (chapter 5)")
    assert "{doc}`../notebooks/05_synthetic_recovery`" in md
    assert "| 1 | agreement $a$ | 96.0% | 0.871 | agrees |" in md
    assert "- **(1)** why" in md
    page = claims.render_page([ch])
    assert "In all, 2 claims from 1 chapters: 1 agrees, 1 agrees in shape." in page
    shown = ch._repr_markdown_()  # what the chapter displays: the section without its heading
    assert md.endswith(shown) and not shown.startswith("#")
    assert repr(ch).splitlines()[0] == "Chapter 05: 2 claims 1 agrees, 1 agrees in shape"


def test_bad_claims_are_refused():
    with pytest.raises(ValueError, match="status must be one of"):
        Claim("x", "1", "2", "agrees (roughly)")
    with pytest.raises(ValueError, match="must not be empty"):
        Claim("x", "", "2", "agrees")
    with pytest.raises(ValueError, match="two digits"):
        ChapterClaims("5", "t", "d", [Claim("x", "1", "2", "agrees")])
    with pytest.raises(ValueError, match="one cell per column"):
        ChapterClaims("05", "t", "d", [Claim("x", "1", "2", "agrees")],
                      tables=[{"caption": "c", "columns": ["a"], "rows": [["1", "2"]]}])


def test_formatting_helpers_and_interval_rule():
    assert claims.fmt(0.87123) == "0.871"
    assert claims.fmt(14000) == "14,000"
    assert claims.fmt(float("nan")) == "-"
    assert claims.mean_ci_math(0.979, 0.014, 1, pct=True) == r"$97.9\pm1.4\%$"
    # the paper's 96.0% lies below 97.9 +- 1.4: that is not agreement
    assert claims.interval_status(0.960, 0.979, 0.014) == "differs"
    assert claims.interval_status(0.960, 0.970, 0.014) == "agrees"


def test_page_says_it_is_generated():
    text = PAGE.read_text(encoding="utf-8")
    assert re.search(r"Generated by scripts/reproducibility_page.py", text)


# ---------------------------------------------------------------------------------------
# the instructor page's generated blocks
# ---------------------------------------------------------------------------------------

INSTRUCTOR = ROOT / "book" / "instructor.md"


def _page_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "reproducibility_page", ROOT / "scripts" / "reproducibility_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stored_instructor_page_is_the_rendering_of_the_claims_and_exercises():
    script = _page_script()
    stored = INSTRUCTOR.read_text(encoding="utf-8")
    assert stored == script.fill(stored, script.blocks()), (
        "the generated blocks of book/instructor.md differ from book/_claims/*.json or from the "
        "chapters' exercises; run python scripts/reproducibility_page.py (never edit them by hand)"
    )
    for name in ("claims", "exercises"):
        assert f"<!-- BEGIN generated: {name} -->" in stored


def test_confirmations_group_every_claim_once():
    chapters = claims.load_claims(CLAIMS_DIR)
    md = claims.render_confirmations(chapters)
    bullets = [ln for ln in md.splitlines() if ln.startswith("- ")]
    assert len(bullets) == sum(len(ch.claims) for ch in chapters)
    heads = re.findall(r"^### (.*) \((\d+)\)$", md, re.M)
    assert [h for h, _ in heads][:2] == ["What the book confirms", "What the book does not confirm"]
    assert sum(int(n) for _, n in heads) == len(bullets)
    # the contradicted claims come first among those the book does not confirm
    md1 = claims.render_confirmations([_chapter(status="differs"),
                                       ChapterClaims("06", "t", "notebooks/06_x", [
                                           Claim("ours wins", "yes", "no", "does not hold")])])
    assert md1.index("ours wins *(does not hold)*") < md1.index("agreement $a$ *(differs)*")
    assert "- support *(agrees in shape)* ({doc}`ch. 5 <../notebooks/05_synthetic_recovery>`)" in md1


def test_exercise_classification_rules():
    script = _page_script()
    code = "~~~python\nprint(1)\n~~~"
    assert script.classify_exercise(":label: e\n\n*(pen and paper)* Show x.", code) == (
        "pen and paper", "tag")
    assert script.classify_exercise("*(coding)* Show that x.", "") == ("coding", "tag")
    assert script.classify_exercise("*(pen and paper, then code)* x", "") == ("both", "tag")
    assert script.classify_exercise("Show that $x$.", "Because.") == ("pen and paper", "content")
    assert script.classify_exercise("Prove it, then check.", "1. ok\n2. " + code) == (
        "both", "content")
    assert script.classify_exercise("Plot the curve.", "```python\nplt.plot()\n```") == (
        "coding", "content")
    assert script.classify_exercise("Why is it so?", "Because.") == ("pen and paper", "content")
    rows = script.collect_exercises()
    assert len({r["label"] for r in rows}) == len(rows) > 0
    nb_text = "".join(p.read_text(encoding="utf-8")
                      for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    proof = (ROOT / "book" / "proof_proposition1.md").read_text(encoding="utf-8")
    assert len(rows) == nb_text.count("{exercise}") + proof.count("{exercise}")
    # the proof page is a section of chapter 2: its exercises continue the chapter's numbers
    ch2 = [r for r in rows if r["chapter"] == "02"]
    assert [r["number"] for r in ch2] == [f"2.{i}" for i in range(1, len(ch2) + 1)]
    assert ch2[-1]["doc"] == "book/proof_proposition1" and len(ch2) == 6
