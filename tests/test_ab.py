"""run.py --ab A B --pairs K: the sides, the ABBA order, the paired ratio, the merged file (CPU)."""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

from dbench.bench.io.ab import abba, ab_fields, merge_ab, order_text, paired_ratio
from dbench.bench.io.results import REQUIRED_ROW_FIELDS, load_result
from dbench.bench.harness.sides import BUILD_ENV, SideError, parse_side

ROOT = Path(__file__).resolve().parent.parent
# On the CPU wherever the tests run (the file names and timings they check are the CPU run's).
# One mode: these tests are about the processes, not the modes (tests/test_modes.py).
SMALL = ["--scenario", "boundary", "--ops", "noop", "--variants", "raw,cpp", "--modes", "inference", "--no-cpp",
         "--quick", "--rounds", "2", "--device", "cpu"]


def run_py(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, check=False)


# ---------------------------------------------------------------------------
# Sides.


def test_env_sides() -> None:
    assert parse_side("env:").env == {} and parse_side("env:").python == sys.executable
    assert parse_side("env:DBENCH_INJECT_NS=300").env == {"DBENCH_INJECT_NS": "300"}
    assert parse_side("env:A=1,B=x=y,C=").env == {"A": "1", "B": "x=y", "C": ""}


@pytest.mark.parametrize(("spec", "message"), [
    ("", "empty side"),
    ("env:A", "malformed env: item 'A'"),
    ("env:1A=2", "malformed env"),
    ("env:A=1,", "malformed env: item ''"),
    ("env:A=1+env:A=2", "A given twice"),
    ("/no/such/python", "does not exist"),
    ("no-such-interpreter-here", "not on the PATH"),
    ("build:/no/such/build", "does not exist"),
    ("build:", "needs a folder"),
    (f"{sys.executable}+python:{sys.executable}", "two interpreters"),
])
def test_bad_sides_say_why(spec: str, message: str) -> None:
    with pytest.raises(SideError, match=message):
        parse_side(spec)


def test_interpreter_and_build_sides(tmp_path: Path) -> None:
    not_a_build = tmp_path / "b"
    not_a_build.mkdir()
    with pytest.raises(SideError, match="not a build folder"):
        parse_side(f"build:{not_a_build}")
    (not_a_build / "lib").mkdir()
    side = parse_side(f"{sys.executable}+build:{not_a_build}+env:X=1")
    assert side.python == str(Path(sys.executable).absolute())
    assert side.env == {BUILD_ENV: str(not_a_build.resolve()), "X": "1"} and side.build == str(not_a_build.resolve())
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(SideError, match="not executable"):
        parse_side(str(script))
    # A '+' in a path is not a part separator: this Python's environment reached through a folder
    # named so. (A link to the interpreter alone would not do where that is a virtual environment's:
    # Python finds the environment, and its torch, beside the path it was started by.)
    plus = tmp_path / "venv-2.11+cu130"
    plus.symlink_to(sys.prefix, target_is_directory=True)
    exe = plus / Path(sys.executable).relative_to(sys.prefix)
    assert parse_side(str(exe)).python == str(exe)
    assert parse_side("python3").python.endswith("python3")


# ---------------------------------------------------------------------------
# Order and statistics.


def test_abba_order() -> None:
    slots = abba(4)
    assert order_text(slots) == "ABBAABBA"
    assert [s.index for s in slots] == list(range(8))
    for side in "ab":
        assert [s.pair for s in slots if s.side == side] == [0, 1, 2, 3]
    for p in range(4):  # the two processes of a pair are adjacent in time
        a, b = (next(s.index for s in slots if s.side == x and s.pair == p) for x in "ab")
        assert abs(a - b) == 1
    assert order_text(abba(1)) == "AB"
    with pytest.raises(ValueError):
        abba(0)


def test_paired_ratio_is_the_geometric_mean_with_a_t_interval() -> None:
    a = [10.0, 12.0, 9.0, 11.0]
    b = [11.0, 13.5, 9.6, 12.4]
    logs = np.log(np.array(b) / np.array(a))
    half = scipy.stats.t.ppf(0.975, 3) * logs.std(ddof=1) / math.sqrt(4)
    got = paired_ratio(a, b)
    assert got["median"] == pytest.approx(math.exp(logs.mean()))
    assert got["ci_low"] == pytest.approx(math.exp(logs.mean() - half))
    assert got["ci_high"] == pytest.approx(math.exp(logs.mean() + half)) and got["pairs"] == 4
    assert paired_ratio([2.0, None], [3.0, 5.0]) == {"median": 1.5, "ci_low": None, "ci_high": None, "pairs": 1}
    assert paired_ratio([None], [1.0])["median"] is None
    same = paired_ratio([1.0, 2.0], [1.1, 2.2])
    assert same["ci_low"] == pytest.approx(1.1) and same["ci_high"] == pytest.approx(1.1)


def test_a_wide_interval_keeps_its_positive_bounds() -> None:
    """Two pairs 20x apart (a loaded machine): t(0.975, 1) = 12.7 puts the low end near 2.4e-8.
    It is written as a positive number, not rounded to 0."""
    row = ab_fields({"process_medians": [1.0, 1.0]}, {"process_medians": [1.0, 20.0]}, 2)
    assert 0 < row["ab_ratio_ci_low"] < 1e-7 < row["ab_ratio_median"] < row["ab_ratio_ci_high"]
    assert row["ab_ratio_median"] == pytest.approx(20 ** 0.5, rel=1e-5)


def test_ab_fields_of_a_row_only_one_side_has() -> None:
    fields = ab_fields(None, {"process_medians": [1.0, 2.0], "process_ratio_medians": [None, None]}, 2)
    assert fields["a_status"] == "n/a" and fields["a_process_medians"] == [None, None]
    assert fields["ab_ratio_median"] is None and fields["ab_pairs"] == 0


def _row(variant: str, median: float) -> dict[str, Any]:
    return {"scenario": "boundary", "op": "noop", "variant": variant, "mode": "inference", "device": "cpu",
            "driver": "python", "metric": "cpu_us", "unit": "us", "timer": "t", "status": "ok", "reason": None,
            "median": median, "q1": median, "q3": median, "ci_low": median, "ci_high": median, "samples": [median],
            "ratio_median": None, "delta_median": None}


def test_merge_pairs_element_i_of_both_sides() -> None:
    slots = abba(2)  # A B B A
    medians = {(0, "a"): 1.0, (0, "b"): 1.5, (1, "b"): 2.4, (1, "a"): 2.0}
    docs = [{"scenario": "boundary", "config": {"rounds_done": 1}, "env": {"device": "cpu"},
             "speed_probe": {"samples": [1.0]}, "rows": [_row("raw", medians[(s.pair, s.side)])]} for s in slots]
    metas = [{"index": s.index, "side": s.side, "pair": s.pair, "status": "complete"} for s in slots]
    doc = merge_ab(docs, metas, slots, ("env:", "env:X=1"), 2)
    assert doc["ab"] == {"a": "env:", "b": "env:X=1", "pairs": 2, "order": "ABBA"} and doc["status"] == "complete"
    (row,) = doc["rows"]
    assert row["a_process_medians"] == [1.0, 2.0] and row["process_medians"] == [1.5, 2.4]
    assert row["ab_ratio_median"] == pytest.approx(math.sqrt(1.5 * 1.2))
    assert [p["side"] for p in doc["env"]["processes"]] == ["a", "b", "b", "a"]


def test_a_failed_process_is_named_and_every_row_any_side_made_is_kept() -> None:
    slots = abba(2)  # A B B A; the second B fails after its first process wrote a row only it has
    docs: list[dict[str, Any] | None] = [
        {"scenario": "boundary", "config": {"rounds_done": 1}, "env": {"device": "cpu"}, "speed_probe": {},
         "rows": [_row("raw", 1.0)] + ([_row("cpp", 2.0)] if s.index == 1 else [])} for s in slots]
    docs[2] = None
    metas = [{"index": s.index, "side": s.side, "pair": s.pair, "name": f"process {s.index + 1} of 4",
              "status": "failed" if s.index == 2 else "complete"} for s in slots]
    metas[2].update(returncode=-9, reason="exit -9, no result file: no output")
    doc = merge_ab(docs, metas, slots, ("env:", "env:X=1"), 2)
    assert doc["status"] == "failed" and doc["error"] == "process 3 of 4 failed (exit -9, no result file: no output)"
    assert [(f["child"], f["returncode"]) for f in doc["failures"]] == [("process 3 of 4", -9)]
    assert sorted(r["variant"] for r in doc["rows"]) == ["cpp", "raw"]
    interrupted = merge_ab(docs[:2] + [None, None], [{**m, "status": s} for m, s in
                                                     zip(metas, ("complete", "interrupted", "not run", "not run"))],
                           slots, ("env:", "env:X=1"), 2)
    assert interrupted["status"] == "interrupted" and interrupted["failures"] == [] and "error" not in interrupted


# ---------------------------------------------------------------------------
# End to end (CPU).


@pytest.mark.slow
def test_ab_run_writes_the_paired_fields_in_abba_order(tmp_path: Path) -> None:
    proc = run_py(*SMALL, "--ab", "env:", "env:FOO=1", "--pairs", "2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = tmp_path.glob("*.json")
    assert path.name.startswith("boundary-cpu-ab-")
    doc = load_result(path)
    assert doc["status"] == "complete"
    assert doc["ab"] == {"a": "env:", "b": "env:FOO=1", "pairs": 2, "order": "ABBA"}
    assert doc["config"]["processes"] == 4
    processes = doc["env"]["processes"]
    assert [(p["side"], p["pair"]) for p in processes] == [("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    assert [p["side_env"] for p in processes] == [{}, {"FOO": "1"}, {"FOO": "1"}, {}]
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    assert len(ok) == 2
    for row in doc["rows"]:
        assert all(f in row for f in REQUIRED_ROW_FIELDS)
        for field in ("process_medians", "process_ratio_medians", "a_process_medians", "a_process_ratio_medians"):
            assert len(row[field]) == 2, field
    for row in ok:
        assert 0 < row["ab_ratio_ci_low"] <= row["ab_ratio_median"] <= row["ab_ratio_ci_high"]
        ratios = [b / a for a, b in zip(row["a_process_medians"], row["process_medians"])]
        assert row["ab_ratio_median"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]), rel=1e-4)
    assert "A/B: B/A per row" in proc.stdout and "noop/cpp/inference" in proc.stdout


def test_a_side_that_fails_ends_the_run_with_its_reason(tmp_path: Path) -> None:
    """The side's environment reaches its processes: a build folder without the libraries fails B."""
    empty_build = tmp_path / "empty-build"
    (empty_build / "lib").mkdir(parents=True)
    out = tmp_path / "out"
    proc = run_py(*SMALL, "--ab", "env:", f"build:{empty_build}", "--pairs", "2", "--out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr  # the child's status: native build missing
    assert "process 2 of 4 (B, pair 1) failed" in proc.stdout and "empty-build" in proc.stdout
    (path,) = out.glob("*.json")
    doc = load_result(path)
    assert doc["status"] == "failed" and doc["error"].startswith("process 2 of 4 (B, pair 1) failed (exit 2: ")
    assert [p["status"] for p in doc["env"]["processes"]] == ["complete", "failed", "not run", "not run"]
    (failure,) = doc["failures"]  # the failed process, named, with its exit status and its output's tail
    assert failure["child"] == "process 2 of 4 (B, pair 1)" and failure["returncode"] == 2
    assert "empty-build" in failure["tail"]
    assert os.path.basename(doc["env"]["processes"][1]["side_env"]["DBENCH_BUILD_DIR"]) == "empty-build"


# ---------------------------------------------------------------------------
# --duet: a pair's two processes at once.


@pytest.mark.parametrize(("extra", "message"), [
    (("--duet",), "argument --duet: only with --ab (it runs the two sides of each pair at once)"),
    (("--ab", "env:", "env:", "--duet", "--no-pin"), "argument --duet: each side needs its own cores"),
    (("--ab", "env:", "env:", "--duet", "--pin-cores", "0"), "argument --duet: each side needs its own cores"),
])
def test_duet_without_its_conditions_is_one_line_before_any_work(extra: tuple[str, ...], message: str,
                                                                 tmp_path: Path) -> None:
    proc = run_py(*SMALL, *extra, "--out", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert message in proc.stderr and not (tmp_path / "out").exists()


def test_duet_asks_two_sides_worth_of_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """--pin-cores counts a side's cores: a duet needs twice as many, and says so."""
    from dbench.bench.harness import cli

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(4)), raising=False)
    args = cli.build_parser(["boundary"]).parse_args(["--pin-cores", "3", "--duet", "--ab", "env:", "env:"])
    with pytest.raises(cli.UsageError, match=r"--pin-cores: 3 for each side of --duet needs 6 cores, but this "
                                             r"process may run on 4; give at most 2"):
        cli.check_pinning(args)
    cli.check_pinning(cli.build_parser(["boundary"]).parse_args(["--pin-cores", "2", "--duet", "--ab", "env:", "env:"]))


def test_duet_batches_are_the_pairs_in_time_order() -> None:
    from dbench.bench.children.schedule import batches

    assert batches(list("ABBAAB"), duet=True) == [["A", "B"], ["B", "A"], ["A", "B"]]
    assert batches(list("ABBA"), duet=False) == [["A"], ["B"], ["B"], ["A"]]


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a duet pins its two sides to two cores")
def test_a_duet_runs_each_pair_at_once_on_two_cores(tmp_path: Path) -> None:
    """Both processes of a pair overlap in time, each pinned to its own core, the first of a pair in
    ABBA order on the last core; the pairs follow one another; the file says it was a duet."""
    proc = run_py(*SMALL, "--rounds", "4", "--ab", "env:", "env:FOO=1", "--pairs", "2", "--duet",
                  "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "each pair's two sides at once (duet)" in proc.stdout
    (path,) = tmp_path.glob("*.json")
    doc = load_result(path)
    assert doc["status"] == "complete" and doc["config"]["duet"] is True
    processes = doc["env"]["processes"]
    assert [(p["side"], p["pair"]) for p in processes] == [("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    last, second = sorted(os.sched_getaffinity(0))[-1], sorted(os.sched_getaffinity(0))[-2]
    assert [p["pinned_cpu"] for p in processes] == [[last], [second], [last], [second]]
    seconds = [p["seconds"] for p in processes]
    # from the first start to the last end: both pairs' longest process, and the gap between the pairs
    assert max(seconds[:2]) + max(seconds[2:]) - 0.02 <= doc["config"]["wall_seconds"] <= \
        max(seconds[:2]) + max(seconds[2:]) + 5
    # Each process's start (its env's time, to the second): the two of a pair overlap (each started
    # before the other could have ended), and the second pair starts once the first has ended.
    at = [dt.datetime.fromisoformat(p["time"]) for p in processes]
    for first, second in ((0, 1), (2, 3)):
        assert abs((at[second] - at[first]).total_seconds()) < min(seconds[first], seconds[second]) - 1, (at, seconds)
    assert (at[2] - at[0]).total_seconds() >= min(seconds[:2]) - 2, (at, seconds)
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    assert len(ok) == 2 and all(len(r["process_medians"]) == 2 for r in ok)
