"""Markdown, text and CSV reports (analysis.report) of a small committed result."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dbench.analysis import report
from dbench.bench.io.results import load_result

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


# ---------------------------------------------------------------------------
# Standard output that cannot be written (once: tracebacks): one line on stderr, exit 2.

ROOT = Path(__file__).resolve().parent.parent
NO_SPACE = os.strerror(__import__("errno").ENOSPC)


def _report(prog: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *prog, str(SMALL)], cwd=ROOT, text=True, stderr=subprocess.PIPE,
                          timeout=120, **kw)  # type: ignore[call-overload]


@pytest.mark.parametrize("prog", [["-m", "dbench", "report"], ["-m", "dbench.analysis.report"]], ids=" ".join)
def test_report_to_a_full_disk_or_a_closed_stdout_is_one_line(prog: list[str]) -> None:
    name = "dbench" if prog[1] == "dbench" else "report"
    with open("/dev/full", "w") as full:
        proc = _report(prog, stdout=full)
    assert (proc.returncode, proc.stderr) == (2, f"{name}: error: cannot write to standard output: {NO_SPACE}\n")
    proc = _report(prog, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    assert (proc.returncode, proc.stderr) == \
        (2, f"{name}: error: standard output is closed; give it somewhere to go (> FILE, or > /dev/null)\n")


def test_report_into_a_pipe_its_reader_closed_is_one_line() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dbench", "report", str(SMALL)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # before the command writes: its first write gets EPIPE
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (2, "dbench: error: cannot write to standard output: Broken pipe\n")


def test_run_with_a_closed_stdout_is_refused_before_any_work(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--device", "cpu",
                           "--out", str(tmp_path / "out")], cwd=tmp_path, text=True, stderr=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1), timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("run.py: error: standard output is closed"), proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", [99, "2", 2.0, True, None, 0])
def test_a_schema_version_this_reader_does_not_know_is_refused(version: object, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Exactly the whole numbers 1 to SCHEMA_VERSION; every reader goes through bench/io/document.py."""
    from dbench.bench.io.document import SCHEMA_VERSION, ResultFileError

    path = tmp_path / "r.json"
    path.write_text(json.dumps({**load_result(SMALL), "schema_version": version}))
    message = (f"{path}: schema_version {json.dumps(version)} is not one this dbench reads (the whole numbers 1 "
               f"to {SCHEMA_VERSION}); read it with the dbench that wrote it")
    with pytest.raises(ResultFileError) as raised:
        load_result(path)
    assert str(raised.value) == message
    assert report.main([str(path)]) == 2
    assert capsys.readouterr().err == f"python -m dbench.analysis.report: error: {message}\n"
    path.write_text(json.dumps({**load_result(SMALL), "schema_version": 1}))
    assert load_result(path)["schema_version"] == 1  # schema 1 reads as rows without axes
