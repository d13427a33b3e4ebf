"""Markdown, text and CSV reports (analysis.report) of a small committed result."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd
import pytest

from dbench.analysis import report
from dbench.bench.results import load_result

GOLDEN = Path(__file__).resolve().parent / "golden"
SMALL = GOLDEN / "boundary-small-a.json"
# DBENCH_UPDATE_GOLDEN=1 rewrites the golden file (then read its diff before committing it).
UPDATE = os.environ.get("DBENCH_UPDATE_GOLDEN") == "1"


def test_markdown_report_matches_the_golden_file() -> None:
    text = report.markdown(load_result(SMALL), SMALL.name)
    golden = GOLDEN / "boundary-small-a.md"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text()


def test_markdown_report_has_the_environment_tables_and_notes() -> None:
    doc = load_result(SMALL)
    text = report.markdown(doc, SMALL.name)
    assert text.splitlines()[0] == "## boundary · NVIDIA H200 (cuda:0) · torch 2.11.0+cu130 · 2026-11-29 09:44 UTC"
    assert text.count("| variant ") == 6  # muladd and l2norm: CPU, GPU, C++
    assert "- n/a define_impl: " in text and "- ~ noisy (" in text
    assert "machine speed varied" in text  # this run's speed probe spread
    for row in doc["rows"]:
        assert f"| {row['variant']} " in text


def test_text_report_keeps_names_whole_and_csv_holds_the_data() -> None:
    doc = load_result(SMALL)
    text = report.text(doc, SMALL.name)
    assert "…" not in text and all(r["variant"] in text for r in doc["rows"])
    frame = pd.read_csv(io.StringIO(report.report([SMALL], "csv")))
    cells = [r for r in doc["rows"] if r["metric"] in ("cpu_us", "gpu_us")]
    assert len(frame) == len(cells)
    assert {"source", "op", "variant", "mode", "median", "ci_low", "ci_high", "noisy", "floor", "reason"} <= set(frame)
    ok = frame[(frame["variant"] == "cpp_autograd") & (frame["mode"] == "fwd_bwd") & (frame["metric"] == "cpu_us")]
    row = next(r for r in cells if (r["variant"], r["mode"], r["metric"], r["op"]) ==
               ("cpp_autograd", "fwd_bwd", "cpu_us", ok["op"].iloc[0]))
    assert ok["median"].iloc[0] == pytest.approx(row["median"])


def test_cli_prints_markdown_and_refuses_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert report.main([str(SMALL)]) == 0
    assert capsys.readouterr().out == report.markdown(load_result(SMALL), SMALL.name)
    missing = tmp_path / "missing.json"
    assert report.main([str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "cannot read the result file" in err and len(err.strip().splitlines()) == 1
