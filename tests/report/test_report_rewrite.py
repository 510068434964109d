"""The report stage, run again on the committed results with this checkout's code, writes the
committed report: the same Markdown, HTML and verdict table, and figures with the same pixels. Only
what names when and from which commit it was made may differ (the header's date and workspace state,
the commits in provenance lines and PNG metadata). A change to how the report is put together
(modules split, tables moved) must leave every byte a reader sees as it was."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

MASKS = (  # what says when, and from which commit, a report was made
    (
        r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC from code at commit (`|<code>)[0-9a-f]+(`|</code>) \([^)]*\)",
        "on D",
    ),
    (r"code: git [0-9a-f]{10}", "code: git C"),
    (r"made on \S+ at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", "made on H at T"),  # a figure's caption
    (r"committed at (`|<code>)[0-9a-f]+", "committed at C"),
    (r"base64,[A-Za-z0-9+/=]+", "base64,PNG"),  # figures carry their commit in PNG text: compared as pixels
)


def masked(text: str) -> str:
    for pattern, into in MASKS:
        text = re.sub(pattern, into, text)
    return text


def test_masks_hide_only_dates_and_commits():
    line = "Made by stage `report` on 2026-12-02 09:09 UTC from code at commit `4a6488c` (as committed); x"
    assert masked(line) == "Made by stage `report` on D; x"
    assert masked("· code: git 29445218f1 |") == "· code: git C |"
    assert masked("(code: git 29445218f1, made on vm at 2026-12-02T19:26:46+00:00) from") == (
        "(code: git C, made on H at T) from"
    )
    assert masked("0.52 [0.49, 0.55] (16 chains)") == "0.52 [0.49, 0.55] (16 chains)"


@pytest.mark.slow
def test_the_report_stage_rewrites_the_committed_report(tmp_path):
    from PIL import Image

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    for code in ("rlvr", "experiments"):  # the code under test, on the committed results
        shutil.rmtree(clone / code)
        shutil.copytree(ROOT / code, clone / code, ignore=shutil.ignore_patterns("__pycache__"))
    committed = tmp_path / "committed"
    shutil.copytree(clone / "reports", committed)
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    run = subprocess.run(
        [sys.executable, "-m", "rlvr.pipeline", "report"],
        cwd=clone,
        env={**env, "PYTHONPATH": str(clone)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    fresh = clone / "reports"
    assert (fresh / "report.json").read_text() == (committed / "report.json").read_text()
    for name in ("report.md", "report.html"):
        assert masked((fresh / name).read_text()) == masked((committed / name).read_text()), name
    figures = sorted(p.name for p in (committed / "report-figures").glob("*.png"))
    assert figures == sorted(p.name for p in (fresh / "report-figures").glob("*.png"))
    for name in figures:
        with (
            Image.open(committed / "report-figures" / name) as a,
            Image.open(fresh / "report-figures" / name) as b,
        ):
            assert a.size == b.size and a.tobytes() == b.tobytes(), name
