"""The ``cbdt`` command line (issue 9, item 5)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pandas as pd
import pytest

from cbdt import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_list_names_every_artifact_and_its_chapter(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    for art in cli.ARTIFACTS.values():
        assert art.name in out and art.chapter in out
        assert f"notebooks/{art.chapter}" in toc


def test_bad_arguments_say_what_to_do(tmp_path):
    with pytest.raises(SystemExit, match="unknown artifact.*table9.*cbdt list"):
        cli.reproduce(["table9"], out=tmp_path, progress=False)
    with pytest.raises(SystemExit, match="at least 2"):
        cli.reproduce(["table1"], seeds=1, out=tmp_path, progress=False)


def test_python_m_cbdt_reproduces_table1(tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "cbdt", "reproduce", "--only", "table1", "--seeds", "2",
         "--out", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Wrote 5 files" in proc.stdout
    d = tmp_path / "table1"
    table = pd.read_csv(d / "table1_attribution.csv", index_col=0)
    per_seed = pd.read_csv(d / "per_seed.csv", index_col=0)
    assert sorted(per_seed["seed"].unique()) == [0, 1]
    # the table is the seeds' mean, and lists the paper's values beside it
    means = per_seed.groupby("method")["top30"].mean()
    for method, row in table.iterrows():
        assert row["top30_mean"] == pytest.approx(means[method], abs=1e-12)
    assert table.loc["Ours (alpha)", "paper_top30"] == pytest.approx(0.941)
    md = (d / "table1_attribution.md").read_text(encoding="utf-8")
    assert md.splitlines()[0].startswith("| method | top30_mean")
    assert (d / "figC5_attribution.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "table1" in (tmp_path / "summary.md").read_text(encoding="utf-8")
