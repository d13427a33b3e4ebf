"""The analysis commands on bad input: never a false PASS, never a traceback, a fast one-line refusal.

Every command (analysis.gate, compare, report, figures, calibrate, history) reads result documents
through analysis.load.read_result; these tests feed them what users have fed them: empty and
undecidable runs, non-finite medians, oddly shaped JSON, device files, unwritable output paths, a
calibration beside the runs, interrupted kernel runs, a missing matplotlib."""

from __future__ import annotations

import errno
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from dbench.analysis import calibrate, compare, figures, gate, history, load, report
from dbench.bench.io.document import read_json
from test_gate import make_doc, make_row, noisy, two_runs, write

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
SMALL = GOLDEN / "boundary-small-a.json"
CALIBRATION = ROOT / "results" / "h200" / "gate-calibration.json"
ROOFLINE = ROOT / "results" / "h200" / "roofline-cuda0-20261202T132652Z-8755d5.json.gz"


def one_line_error(err: str, *needles: str) -> None:
    """stderr is exactly one line, an error, with no traceback, naming each needle."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error:" in lines[0] and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ---------------------------------------------------------------------------------------------
# The reader


def test_every_committed_result_reads_and_other_json_is_named_not_a_result() -> None:
    files = sorted((ROOT / "results").rglob("*.json")) + sorted((ROOT / "results").rglob("*.json.gz")) \
        + sorted(GOLDEN.glob("*.json"))
    refused = {}
    for path in files:
        try:
            load.read_result(path)
        except load.NotAResultError as exc:
            refused[path] = str(exc)
    assert CALIBRATION in refused and "dbench-calibration" in refused[CALIBRATION]
    assert all(p.parts[-2] != "h200" or "calibration" in p.name for p in refused)  # every H200 run reads
    assert len(refused) < len(files) / 2


def test_the_one_reader_is_the_one_bench_and_run_py_import() -> None:
    from dbench.bench.io import results

    assert results.load_result is load.read_result and results.ResultFileError is load.ResultFileError
    assert results.REQUIRED_ROW_FIELDS is load.REQUIRED_ROW_FIELDS


def _row(**fields: Any) -> dict[str, Any]:
    return {**make_row("muladd", "cpp", absolute=[5.0, 5.1], ratio=[1.3, 1.31]), **fields}


BAD_DOCUMENTS: list[tuple[str, Any, str]] = [
    ("top-level list", [1, 2], "a JSON list, not an object"),
    ("env as a list", {**make_doc([_row()]), "env": ["cpu"]}, "env is a list"),
    ("rows as an object", {**make_doc([]), "rows": {"a": 1}}, "no list of rows"),
    ("config as a list", {**make_doc([_row()]), "config": [1]}, "config is a list"),
    ("unknown status", {**make_doc([_row()]), "status": "done"}, "status is \"done\""),
    ("unknown row status", make_doc([_row(status="skipped")]), "status is \"skipped\""),
    ("string median", make_doc([_row(median="6.3")]), "median is str"),
    ("boolean median", make_doc([_row(median=True)]), "median is bool"),
    ("NaN median", make_doc([_row(median=math.nan)]), "median is nan"),
    ("infinite median", make_doc([_row(median=math.inf)]), "median is inf"),
    ("zero median", make_doc([_row(median=0.0)]), "median is 0.0, not positive"),
    ("negative median", make_doc([_row(median=-1.5)]), "median is -1.5, not positive"),
    ("huge integer median", make_doc([_row(median=10 ** 400)]), "out of range"),
    ("NaN process median", make_doc([_row(process_medians=[5.0, math.nan])]), "process_medians[1] is nan"),
    ("negative ratio", make_doc([_row(process_ratio_medians=[1.3, -1.0])]), "process_ratio_medians[1]"),
    ("samples not a list", make_doc([_row(samples="1,2")]), "samples is"),
    ("shape an object", make_doc([_row(shape={"n": 4})]), "shape is"),
    ("axis without a field", make_doc([_row(axes=["size"])]), "axes is"),
    ("row not an object", {**make_doc([]), "rows": [3]}, "not objects"),
]


@pytest.mark.parametrize(("name", "document", "message"), BAD_DOCUMENTS, ids=[b[0] for b in BAD_DOCUMENTS])
def test_the_reader_refuses_a_bad_document_in_one_line(tmp_path: Path, name: str, document: Any,
                                                       message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(load.ResultFileError) as caught:
        load.read_result(path)
    text = str(caught.value)
    assert str(path) in text and message in text and "\n" not in text, text


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"rows": ' + "[" * 40 + "]" * 40 + "}", "nested too deeply"),
    ('{"env": {}, "rows": [], "n": ' + "7" * 5000 + "}", "not valid JSON"),
    ("\xff\xfe{}", "not UTF-8"),
    ("", "empty file"),
])
def test_the_reader_refuses_unparseable_text(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(load.ResultFileError, match=message):
        load.read_result(path)


def test_a_failed_or_na_row_may_hold_any_number_and_a_stopped_run_reads(tmp_path: Path) -> None:
    failed = make_row("muladd", "cpp", status="failed")
    failed.update(median=math.nan, ci_low=-math.inf)
    na = {**make_row("muladd", "raw", status="n/a"), "median": math.nan}
    assert load.read_result(write(tmp_path / "f.json", make_doc([failed, na])))["rows"][0]["status"] == "failed"
    placeholder = {"schema_version": 2, "scenario": "roofline", "status": "running", "config": {},
                   "env": {"device": "cpu"}, "rows": [], "failures": []}
    assert load.read_result(write(tmp_path / "p.json", placeholder))["rows"] == []
    stopped = {**placeholder, "status": "failed", "error": "RuntimeError: no process wrote a result"}
    assert load.read_result(write(tmp_path / "s.json", stopped))["status"] == "failed"


def test_load_results_walks_a_folder_of_machine_folders(tmp_path: Path) -> None:
    """dbench.load_results(["dbench-results"]): the runs of every machine's folder below it, without
    companions, hidden files or folders, links, or a --processes/--shards run's children (merged)."""
    import shutil

    import dbench

    golden = Path(__file__).resolve().parent / "golden"
    top = tmp_path / "dbench-results"
    for machine, name in (("host-a", "boundary-small-a.json"), ("host-b/old", "boundary-small-b.json")):
        (top / machine).mkdir(parents=True)
        shutil.copy(golden / name, top / machine / name)
    (top / "host-a" / "boundary-small-a.gbench.json").write_text("{}")  # the C++ driver's: not a result
    for skipped in ("host-a/boundary-small-a.processes/process-0", ".hidden"):  # merged already; hidden
        (top / skipped).mkdir(parents=True)
        shutil.copy(golden / "boundary-small-a.json", top / skipped / "child.json")
    (top / "loop").symlink_to(top)
    frame = dbench.load_results([top])
    alone = [len(dbench.load_results([golden / n])) for n in ("boundary-small-a.json", "boundary-small-b.json")]
    assert len(frame) == sum(alone)
    (top / "empty" / "below").mkdir(parents=True)
    with pytest.raises(load.ResultFileError, match="holds no result files .* in it or below it"):
        dbench.load_results([top / "empty"])


def test_non_regular_and_oversized_files_are_refused_before_reading(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(load.ResultFileError, match="is a folder"):
        load.read_result(tmp_path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opening it would block: it must not be opened
    with pytest.raises(load.ResultFileError, match="not a regular file"):
        load.read_result(fifo)
    if Path("/dev/zero").exists():
        with pytest.raises(load.ResultFileError, match="not a regular file"):
            load.read_result("/dev/zero")
    from dbench.bench.io import document

    monkeypatch.setattr(document, "MAX_BYTES", 1000)  # where the reader lives
    big = write(tmp_path / "big.json", make_doc([_row()] * 5))
    with pytest.raises(load.ResultFileError, match="larger than any result file"):
        load.read_result(big)


def test_a_gzip_result_reads_as_its_json_and_a_folder_lists_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from dbench.bench.io import document

    doc = make_doc([_row()] * 3)
    plain = write(tmp_path / "a.json", doc)
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    (tmp_path / "b.gbench.json.gz").write_bytes(gzip.compress(b"{}"))  # a companion: not a result
    assert load.read_result(tmp_path / "b.json.gz") == load.read_result(plain)
    assert [p.name for p in document.result_files(tmp_path)] == ["a.json", "b.json.gz"]
    assert [document.result_stem(p) for p in ("b.json.gz", "a.json", "c.csv")] == ["b", "a", "c"]  # figures' names
    assert [p.name for p, _ in load.read_results([tmp_path])] == ["a.json", "b.json.gz"]
    damaged = tmp_path / "c.json.gz"
    damaged.write_bytes(gzip.compress(plain.read_bytes())[:40])
    with pytest.raises(load.ResultFileError, match="truncated gzip"):
        load.read_result(damaged)
    damaged.write_bytes(b"\x1f\x8b" + b"\x00" * 30)
    with pytest.raises(load.ResultFileError, match="damaged gzip"):
        load.read_result(damaged)
    monkeypatch.setattr(document, "MAX_BYTES", 1000)  # a small file that inflates past any result
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 100_000))
    assert bomb.stat().st_size < 1000
    with pytest.raises(load.ResultFileError, match="inflates past any result file"):
        load.read_result(bomb)


# ---------------------------------------------------------------------------------------------
# The gate: NO DECISION, never a false PASS


def _pair(n: int, level: float, rng: np.random.Generator, sigma: float = 0.01) -> dict[str, list[float]]:
    return {"absolute": noisy(rng, level * 4, sigma, n), "ratio": noisy(rng, level, sigma, n)}


def _cpu_na(variant: str) -> dict[str, Any]:
    return make_row("muladd", variant, status="n/a") | {"reason": "triton_op needs CUDA"}


def _scenarios() -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str, int, str]]:
    """name -> (new rows, baseline rows, outcome, exit status, headline tail)."""
    rng = np.random.default_rng(31)
    same = [make_row("muladd", v, **_pair(6, 1.0 + i, rng)) for i, v in enumerate(("cpp", "custom_op"))]
    base_same = [make_row("muladd", v, **_pair(6, 1.0 + i, rng)) for i, v in enumerate(("cpp", "custom_op"))]
    slower = make_row("muladd", "cpp", absolute=noisy(rng, 5.0, 0.01, 6), ratio=noisy(rng, 1.3, 0.01, 6))
    faster_base = make_row("muladd", "cpp", absolute=noisy(rng, 4.0, 0.01, 6), ratio=noisy(rng, 1.0, 0.01, 6))
    gone = make_row("muladd", "stable", **_pair(6, 2.0, rng))
    untimed = make_row("muladd", "stable")  # ok, but without a value
    one = [make_row("l2norm", f"v{i}", absolute=[5.0], ratio=[1.0 + i / 100]) for i in range(31)]
    one_base = [make_row("l2norm", f"v{i}", absolute=[5.1], ratio=[1.01 + i / 100]) for i in range(38)]
    return {
        "no rows tonight": ([], base_same, gate.NO_DECISION, 3, "2 rows — 0 decided, 2 missing"),
        "nothing on either side": ([], [], gate.NO_DECISION, 3, "0 rows — 0 decided"),
        "every row n/a tonight": ([_cpu_na("cpp"), _cpu_na("custom_op")], base_same, gate.NO_DECISION, 3,
                                  "2 rows — 0 decided, 2 missing"),
        "ok rows without values": ([make_row("muladd", "cpp"), make_row("muladd", "custom_op")], base_same,
                                   gate.NO_DECISION, 3, "2 rows — 0 decided, 2 missing"),
        "one process per side": (one, one_base, gate.NO_DECISION, 3,
                                 "38 rows — 0 decided (CPU time, Python 0/31 advisory), 7 missing, 31 inconclusive"),
        "new rows only": (same, [_cpu_na("cpp"), _cpu_na("custom_op")], gate.NO_DECISION, 3,
                          "2 rows — 0 decided, 2 new"),
        "decided but a row gone": (same, [*base_same, gone], gate.NO_DECISION, 3,
                                   "3 rows — 2 decided (CPU time, Python 2/2), 1 missing, 2 same"),
        "decided but a row untimed": ([*same, untimed], [*base_same, gone], gate.NO_DECISION, 3,
                                      "3 rows — 2 decided (CPU time, Python 2/2), 1 missing, 2 same"),
        "a regression wins": ([slower], [faster_base, gone], gate.FAIL, 1,
                              "2 rows — 1 decided (CPU time, Python 1/1), 1 regression, 1 missing"),
        "every row failed": ([make_row("muladd", "cpp", status="failed")], base_same[:1], gate.FAIL, 1,
                             "1 rows — 0 decided, 1 failed"),
        "all decided": (same, base_same, gate.PASS, 0, "2 rows — 2 decided (CPU time, Python 2/2), 2 same"),
    }


@pytest.mark.parametrize("name", list(_scenarios()))
def test_the_outcome_and_its_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    new_rows, base_rows, outcome, code, tail = _scenarios()[name]
    result = gate.gate([make_doc(new_rows)], [make_doc(base_rows)])
    assert result.outcome == outcome and result.exit_code == code
    assert result.summary() == f"{outcome}: {tail}"
    assert result.passed == (outcome == gate.PASS)
    new, base = write(tmp_path / "new.json", make_doc(new_rows)), write(tmp_path / "base.json", make_doc(base_rows))
    assert gate.main([str(new), str(base), "--format", "md"]) == code
    out = capsys.readouterr().out
    assert f"### Regression gate — {outcome}: {tail}" in out
    assert ("**no decision:**" in out) == (outcome == gate.NO_DECISION)


def test_an_ab_run_without_rows_or_with_side_b_missing_decides_nothing() -> None:
    ab = {"a": "env:", "b": "env:", "pairs": 4, "order": "ABBAABBA"}
    assert gate.gate([make_doc([], ab=ab)]).summary() == "NO DECISION: 0 rows — 0 decided"
    gone = make_row("muladd", "cpp", status="n/a", a_absolute=[5.0, 5.1, 5.0, 5.2])
    result = gate.gate([make_doc([gone], ab=ab)])
    assert result.rows[0].verdict == "missing" and result.exit_code == gate.EXIT_NO_DECISION
    only_b = make_row("muladd", "cpp", absolute=[5.0, 5.1, 5.0, 5.2])
    assert gate.gate([make_doc([only_b], ab=ab)]).rows[0].verdict == "new"


def test_a_bad_median_is_bad_input_naming_file_and_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = two_runs()
    base_path = write(tmp_path / "base.json", base)
    for value in (math.nan, math.inf, 0.0, -3.0, "5.9"):
        rows = [dict(r) for r in new["rows"]]
        rows[0]["median"] = value
        bad = write(tmp_path / "new.json", {**new, "rows": rows})
        assert gate.main([str(bad), str(base_path)]) == gate.EXIT_BAD_INPUT
        one_line_error(capsys.readouterr().err, str(bad), "row 0 (muladd/raw/inference cpu_us)", "median is")


def test_values_of_failed_and_na_rows_are_not_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(32)
    base = make_doc([make_row("muladd", v, **_pair(6, 1.2, rng)) for v in ("cpp", "custom_op")])
    failed = {**make_row("muladd", "cpp", status="failed"), "median": math.nan}
    na = {**_cpu_na("custom_op"), "median": -1.0, "process_medians": [math.nan]}
    new = write(tmp_path / "new.json", make_doc([failed, na]))
    assert gate.main([str(new), str(write(tmp_path / "b.json", base))]) == gate.EXIT_FAIL
    assert "FAIL: 2 rows — 0 decided, 1 failed, 1 missing" in capsys.readouterr().out


@pytest.mark.parametrize(("option", "value"), [
    ("--delta", "inf"), ("--delta", "nan"), ("--delta", "0"), ("--delta", "-0.05"), ("--delta", "1"),
    ("--delta", "1e9"), ("--alpha", "0"), ("--alpha", "0.5"), ("--alpha", "nan"), ("--alpha", "-1"),
    ("--same-delta", "0"), ("--same-delta", "nan"), ("--same-delta", "1"),
])
def test_delta_and_alpha_out_of_range_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  option: str, value: str) -> None:
    base, new = two_runs()
    args = [str(write(tmp_path / "new.json", new)), str(write(tmp_path / "base.json", base)), option, value]
    assert gate.main(args) == gate.EXIT_BAD_INPUT
    one_line_error(capsys.readouterr().err, option, "must lie in")
    with pytest.raises(gate.GateInputError):
        gate.gate([new], [base], **{option.lstrip("-").replace("-", "_"): float(value)})


@pytest.mark.parametrize(("entry", "message"), [
    ({"delta_ratio": -0.05}, "delta_ratio is -0.05, outside (0, 10]"),
    ({"delta_ratio": 1e9}, "delta_ratio is 1000000000.0, outside (0, 10]"),
    ({"delta": 0}, "delta is 0, outside (0, 10]"),
    ({"sigma_log_ratio": math.nan}, "sigma_log_ratio is nan, not finite"),
    ({"sigma_log_abs": -0.1}, "sigma_log_abs is -0.1, negative"),
    ({"df_ratio": "9"}, "df_ratio is '9', not a number"),
    ({"df_abs": 0}, "df_abs is 0, not positive"),
    ({"stable_absolute": "yes"}, "stable_absolute is 'yes', not true or false"),
    ({"params": {"alpha_row": 0.7}}, "params.alpha_row must lie in (0, 0.5)"),
    ({"params": {"alpha_row": math.inf}}, "params.alpha_row must lie in (0, 0.5)"),
    ({"rows": ["x"]}, "not a calibration file"),
    ({"rows": {"r": [1]}}, "row r: not an object"),
])
def test_calibration_values_out_of_range_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     entry: dict[str, Any], message: str) -> None:
    base, new = two_runs()
    cal: dict[str, Any] = {"kind": gate.CALIBRATION_KIND, "params": {"alpha_row": 0.01},
                           "rows": {"r": {"label": "muladd/cpp/inference", "delta_ratio": 0.05}}}
    if "params" in entry or "rows" in entry:
        cal.update(entry)
    else:
        cal["rows"]["r"].update(entry)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal))
    args = [str(write(tmp_path / "new.json", new)), str(write(tmp_path / "base.json", base)),
            "--calibration", str(path)]
    assert gate.main(args) == gate.EXIT_BAD_INPUT
    one_line_error(capsys.readouterr().err, str(path), message)


def test_the_committed_calibrations_are_in_range() -> None:
    for path in sorted((ROOT / "results").rglob("*calibration*.json")):
        assert gate.load_calibration(path)["kind"] == gate.CALIBRATION_KIND


def test_a_calibration_of_very_noisy_runs_is_one_the_gate_accepts(tmp_path: Path) -> None:
    rng = np.random.default_rng(33)
    runs = [write(tmp_path / f"aa{i}.json", make_doc([make_row("o", "v", absolute=noisy(rng, 5.0, 3.0, 3),
                                                                ratio=noisy(rng, 1.0, 3.0, 3))])) for i in range(2)]
    out = tmp_path / "cal.json"
    assert calibrate.main([*map(str, runs), "--out", str(out)]) == 0
    row = next(iter(gate.load_calibration(out)["rows"].values()))
    assert row["delta"] == gate.MAX_CALIBRATED_DELTA  # a band no wider than the gate reads


# ---------------------------------------------------------------------------------------------
# compare


def test_compare_refuses_a_nan_row_and_fails_an_untimed_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(SMALL.read_text())
    a = write(tmp_path / "a.json", doc)
    rows = [dict(r) for r in doc["rows"]]
    first_ok = next(i for i, r in enumerate(rows) if r["status"] == "ok")
    rows[first_ok]["median"] = math.nan
    nan = write(tmp_path / "nan.json", {**doc, "rows": rows})
    assert compare.main([str(a), str(nan)]) == compare.EXIT_BAD_INPUT
    one_line_error(capsys.readouterr().err, str(nan), f"row {first_ok}", "median is nan")
    rows[first_ok]["median"] = None  # marked ok, never timed
    untimed = write(tmp_path / "untimed.json", {**doc, "rows": rows})
    assert compare.main([str(a), str(untimed), "--max-spread", "1"]) == compare.EXIT_DIFFERENT
    assert "missing in B" in capsys.readouterr().out


@pytest.mark.parametrize(("make_csv", "message"), [
    (lambda d: d / "missing" / "out.csv", "does not exist"),
    (lambda d: d, "is a folder"),
    (lambda d: d / "afile" / "out.csv", "does not exist"),
    (lambda d: d / ("x" * 300 + ".csv"), "longer than"),
    (lambda d: d / "fifo", "is a device or pipe"),  # a rename over it would replace it
])
def test_compare_csv_path_problems_are_one_line_before_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            make_csv: Callable[[Path], Path], message: str) -> None:
    (tmp_path / "afile").write_text("")
    os.mkfifo(tmp_path / "fifo")
    csv = make_csv(tmp_path)
    assert compare.main([str(SMALL), str(SMALL), "--csv", str(csv)]) == compare.EXIT_BAD_INPUT
    captured = capsys.readouterr()
    one_line_error(captured.err, "--csv", message)
    assert captured.out == ""


def test_compare_csv_is_written_whole_and_spread_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "spread.csv"
    assert compare.main([str(SMALL), str(SMALL), "--csv", str(csv)]) == compare.EXIT_OK
    assert csv.read_text().startswith("op,variant,mode") and sorted(p.name for p in tmp_path.iterdir()) == [csv.name]
    capsys.readouterr()
    assert compare.main([str(SMALL), str(SMALL), "--max-spread", "nan"]) == compare.EXIT_BAD_INPUT
    one_line_error(capsys.readouterr().err, "--max-spread")


# ---------------------------------------------------------------------------------------------
# report and figures: empty, interrupted and mixed inputs


def _empty(path: Path) -> Path:
    return write(path, {"schema_version": 2, "scenario": "boundary", "status": "failed", "config": {},
                        "env": {"device": "cpu", "time": "2026-12-01T00:00:00+00:00"}, "rows": [],
                        "error": "RuntimeError: stopped before the first case"})


def test_report_and_figures_of_a_result_without_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = _empty(tmp_path / "empty.json")
    for fmt in ("md", "txt", "csv"):
        assert report.main([str(empty), "--format", fmt]) == 0
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        assert fmt == "csv" or "no rows: the run measured nothing (status failed)" in captured.out
    out = tmp_path / "png"
    assert figures.main([str(empty), "--out", str(out)]) == 0
    assert "no figures: it has no rows" in capsys.readouterr().err and not list(out.iterdir())


@pytest.fixture(scope="module")
def interrupted_roofline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A roofline run stopped before its roofs were measured: no roofs, no rates, some rows untimed."""
    doc = read_json(ROOFLINE)
    doc["status"] = "interrupted"
    doc.pop("roofs", None)
    for i, row in enumerate(doc["rows"]):
        row.update(gbps=None, tflops=None, pct_of_roof=None, bound=None, intensity=None, above_roof=None)
        if i % 3 == 0 and row["status"] == "ok":
            row.update(median=None, q1=None, q3=None, ci_low=None, ci_high=None, samples=[])
    return write(tmp_path_factory.mktemp("roofline") / "roofline-stopped.json", doc)


@pytest.mark.parametrize("fmt", ["md", "txt", "csv"])
def test_report_of_an_interrupted_roofline_run(interrupted_roofline: Path, capsys: pytest.CaptureFixture[str],
                                               fmt: str) -> None:
    assert report.main([str(interrupted_roofline), "--format", fmt]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out
    if fmt == "md":
        assert "interrupted" in captured.out and " µs " in captured.out


def test_report_and_figures_skip_what_is_not_a_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "gate-calibration.json").write_bytes(CALIBRATION.read_bytes())
    (folder / SMALL.name).write_bytes(SMALL.read_bytes())
    assert report.main([str(folder)]) == 0
    captured = capsys.readouterr()
    assert "## boundary" in captured.out
    assert captured.err.strip() == f"report: skipped {folder / 'gate-calibration.json'}: not a result file " \
                                   '(a "dbench-calibration" file)'
    out = tmp_path / "png"
    assert figures.main([*map(str, sorted(folder.iterdir())), "--out", str(out), "--kinds", "cpu"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [f"{SMALL.stem}-l2norm-cpu.png", f"{SMALL.stem}-muladd-cpu.png"]
    assert "skipped" in capsys.readouterr().err
    (folder / SMALL.name).unlink()
    (folder / "other-calibration.json").write_bytes(CALIBRATION.read_bytes())
    assert report.main([str(folder)]) == 2
    assert "no result files among" in capsys.readouterr().err.splitlines()[-1]


def test_figures_out_problems_and_missing_matplotlib_are_refused_before_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    assert figures.main([str(SMALL), "--out", str(afile / "png")]) == 2
    one_line_error(capsys.readouterr().err, "--out", str(afile))
    assert figures.main([str(SMALL), "--out", str(afile)]) == 2
    one_line_error(capsys.readouterr().err, "exists and is not a folder")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec then says it is not installed
    assert figures.main([str(SMALL), "--out", str(tmp_path / "png")]) == 2
    one_line_error(capsys.readouterr().err, "pip install matplotlib")
    assert not (tmp_path / "png").exists()


def test_a_figure_that_cannot_be_written_is_one_line_and_leaves_the_old_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.figure import Figure

    old = tmp_path / f"{SMALL.stem}-muladd-cpu.png"
    old.write_bytes(b"the previous figure")

    def full_disk(self: Figure, fname: Any, **kwargs: Any) -> None:
        Path(fname).write_bytes(b"\x89PNG partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", full_disk)
    assert figures.main([str(SMALL), "--out", str(tmp_path), "--kinds", "cpu"]) == 2
    one_line_error(capsys.readouterr().err, f"cannot write {old}", os.strerror(errno.ENOSPC))
    assert old.read_bytes() == b"the previous figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]  # no temporary file left behind


# ---------------------------------------------------------------------------------------------
# history


def _nights(folder: Path, nights: int = 5) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(34)
    for i in range(nights):
        doc = make_doc([make_row("muladd", "cpp", absolute=noisy(rng, 5.0, 0.01, 4), ratio=noisy(rng, 1.3, 0.01, 4))],
                       time=f"2026-12-{i + 1:02d}T02:17:00+00:00")
        write(folder / f"night-{i}.json", doc)
    return folder


# The change points need ruptures (optional where no package index is reachable: the history's tests skip).
needs_ruptures = pytest.mark.skipif(importlib.util.find_spec("ruptures") is None, reason="ruptures is not installed")


@needs_ruptures
def test_history_plot_into_a_folder_writes_inside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _nights(tmp_path / "nights")
    (folder / "gate-calibration.json").write_bytes(CALIBRATION.read_bytes())
    plots = tmp_path / "plots"
    plots.mkdir()
    assert history.main([str(folder), "--plot", str(plots)]) == 0
    captured = capsys.readouterr()
    target = plots / history.PLOT_NAME
    assert f"wrote {target}" in captured.out and target.read_bytes()[:4] == b"\x89PNG"
    assert not Path(f"{plots}.png").exists() and "skipped" in captured.err
    named = tmp_path / "series"  # a file name without .png is used as it is
    assert history.main([str(folder), "--plot", str(named)]) == 0
    assert named.read_bytes()[:4] == b"\x89PNG" and not Path(f"{named}.png").exists()


@needs_ruptures
def test_history_plot_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _nights(tmp_path / "nights")
    assert history.main([str(folder), "--plot", str(tmp_path / "missing" / "h.png")]) == 2
    captured = capsys.readouterr()
    one_line_error(captured.err, "--plot", "does not exist")
    assert captured.out == ""  # refused before the history was computed
    assert history.main([str(folder), "--penalty", "nan"]) == 2
    one_line_error(capsys.readouterr().err, "--penalty")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    png = tmp_path / "h.png"
    assert history.main([str(folder), "--plot", str(png)]) == 0  # the history stands; the figure is extra
    captured = capsys.readouterr()
    assert "nights" in captured.out and "warning: --plot needs matplotlib" in captured.err and not png.exists()


# ---------------------------------------------------------------------------------------------
# Every command on oddly shaped JSON and unwritable outputs


SHAPES: dict[str, str] = {
    "list at top level": "[1, 2, 3]",
    "env as a list": json.dumps({**make_doc([_row()]), "env": ["cpu"]}),
    "deep nesting": '{"env": {}, "rows": ' + "[" * 5000 + "]" * 5000 + "}",
    "huge integer": json.dumps({**make_doc([_row()]), "config": {"rounds": 1}}).replace('"rounds": 1', '"rounds": '
                                                                                        + "9" * 6000),
    "string median": json.dumps(make_doc([_row(median="fast")])),
    "speed_probe as a list": json.dumps({**make_doc([_row()]), "speed_probe": [1.0]}),
}


def _command(name: str, bad: Path, tmp: Path) -> tuple[Callable[[list[str]], int], list[str]]:
    good = write(tmp / "good.json", make_doc([_row()]))
    return {
        "gate": (gate.main, [str(bad), str(good)]),
        "compare": (compare.main, [str(good), str(bad)]),
        "report": (report.main, [str(bad)]),
        "figures": (figures.main, [str(bad), "--out", str(tmp / "png")]),
        "calibrate": (calibrate.main, [str(bad), "--out", str(tmp / "cal.json")]),
        "history": (history.main, [str(bad.parent)]),
    }[name]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("command", ["gate", "compare", "report", "figures", "calibrate", "history"])
def test_every_command_refuses_odd_json_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: str, shape: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    bad = folder / "odd.json"
    bad.write_text(SHAPES[shape])
    main, args = _command(command, bad, tmp_path)
    assert main(args) == 2
    one_line_error(capsys.readouterr().err, str(bad))
    assert not (tmp_path / "cal.json").exists()


@pytest.mark.parametrize("command", ["gate", "compare", "report", "figures", "calibrate"])
def test_every_command_refuses_a_device_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    main, args = _command(command, Path("/dev/zero"), tmp_path)
    started = time.monotonic()
    assert main(args) == 2
    assert time.monotonic() - started < 5
    one_line_error(capsys.readouterr().err, "/dev/zero", "not a regular file")


def test_calibrate_out_a_folder_or_under_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write(tmp_path / "aa.json", make_doc([_row()]))
    (tmp_path / "afile").write_text("")
    for out, message in ((tmp_path, "is a folder"), (tmp_path / "afile" / "c.json", "does not exist")):
        assert calibrate.main([str(run), "--out", str(out)]) == 2
        one_line_error(capsys.readouterr().err, "--out", message)


# ---------------------------------------------------------------------------------------------
# Fast: bad input is refused before pandas, numpy, scipy, matplotlib or torch load


def _missing_args(module: str, tmp: Path) -> list[str]:
    missing = str(tmp / "missing.json")
    return {"gate": [missing], "compare": [missing, missing], "report": [missing],
            "figures": [missing, "--out", str(tmp / "png")], "calibrate": [missing, "--out", str(tmp / "c.json")],
            "history": [str(tmp / "missing")]}[module]


MODULES = ("gate", "compare", "report", "figures", "calibrate", "history")


@pytest.mark.parametrize("module", MODULES)
def test_a_missing_file_is_refused_fast_in_one_line(tmp_path: Path, module: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"analysis.{module}", *_missing_args(module, tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    wall = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    one_line_error(done.stderr, "missing")
    assert done.stdout == ""
    assert wall < 1.5, f"analysis.{module} took {wall:.2f} s to refuse a missing file"


def test_no_heavy_library_is_loaded_to_refuse_bad_input(tmp_path: Path) -> None:
    calls = "\n".join(f"from analysis import {m}\nassert {m}.main({_missing_args(m, tmp_path)!r}) == 2"
                      for m in MODULES)
    script = f"import sys\n{calls}\nprint(sorted(m for m in ('numpy', 'pandas', 'scipy', 'matplotlib', " \
             "'torch', 'tabulate', 'rich') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["gate", "compare", "report", "figures", "calibrate", "history"])
def test_a_name_too_long_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    long_name = tmp_path / ("x" * 300 + ".json")
    main, args = _command(command, long_name, tmp_path)
    assert main([str(long_name)] if command == "history" else args) == 2
    one_line_error(capsys.readouterr().err, "x" * 30)
    long_out = {"figures": ["--out", str(tmp_path / ("o" * 300))], "calibrate": ["--out", str(tmp_path / ("o" * 300))],
                "compare": ["--csv", str(tmp_path / ("o" * 300))], "history": ["--plot", str(tmp_path / ("o" * 300))]}
    if command in long_out:
        good = [str(SMALL), str(SMALL)] if command == "compare" else [str(_nights(tmp_path / "n"))] \
            if command == "history" else [str(SMALL)]
        assert main([*good, *long_out[command]]) == 2
        one_line_error(capsys.readouterr().err, "o" * 30)


@pytest.mark.parametrize("module", MODULES)
def test_a_usage_error_is_one_line(capsys: pytest.CaptureFixture[str], module: str) -> None:
    main = {"gate": gate.main, "compare": compare.main, "report": report.main, "figures": figures.main,
            "calibrate": calibrate.main, "history": history.main}[module]
    with pytest.raises(SystemExit) as done:
        main(["--no-such-option"])
    assert done.value.code == 2
    one_line_error(capsys.readouterr().err, f"python -m dbench.analysis.{module}")
