"""The breakdown's timed windows (bench/instructions/timed_windows.py, analysis/windows.py): a window
times its function's outermost calls inclusively and takes the wrapper's own cost off; a known
wait inside a registered op lands in the window that holds it and in the overhead over the floor;
the comparison with callgrind converts at the case's own speed; bad input is one line, exit 2,
before any work or folder."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from dbench.analysis import windows as aw
from dbench.bench.core.case import Case
from dbench.bench.instructions import timed_windows as tw
from dbench.bench.instructions.python_functions import Hook

ROOT = Path(__file__).resolve().parents[1]


def _spin(ns: int) -> None:
    until = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < until:
        pass


def test_the_stopwatch_sums_only_the_time_between_toggles() -> None:
    watch = tw.Stopwatch()
    watch.toggle()
    _spin(200_000)
    watch.toggle()
    _spin(1_000_000)  # switched off: not counted
    watch.toggle()
    _spin(300_000)
    watch.toggle()
    assert 500_000 <= watch.total_ns < 1_000_000


def _module_case(wait_ns: int) -> tuple[Case, Hook, types.SimpleNamespace]:
    """A case whose one call goes through `mod.slow(x, scale=2)`, which waits wait_ns."""
    mod = types.SimpleNamespace()

    def slow(x: int, scale: int = 1) -> int:
        _spin(wait_ns)
        return x * scale

    mod.slow = slow
    case = Case(key={"op": "t", "variant": "v", "mode": "inference"}, call=lambda: mod.slow(3, scale=2))
    return case, Hook("slow", mod, "slow", slow), mod


def test_a_window_holds_its_function_and_the_wrapper_is_taken_off() -> None:
    case, hook, mod = _module_case(50_000)
    per_call_ns, calls = tw.window_ns(case, hook, 40)
    assert calls == 1.0
    # the wait is inside (less the calibration's own frame, tens of ns); a stall of the host could only add
    assert 49_500 <= per_call_ns < 100_000
    assert mod.slow is hook.original  # restored


def test_the_calibration_passes_a_real_calls_arguments() -> None:
    case, hook, _ = _module_case(0)
    args, kwargs = tw.arguments_of(case, hook)
    assert args == (3,) and kwargs == {"scale": 2}
    assert tw.calibration_ns(50, args, kwargs) > 0


def test_a_case_that_never_calls_the_function_has_no_window() -> None:
    case, hook, _ = _module_case(0)
    case.call = lambda: 1
    assert tw.window_ns(case, hook, 10) == (0.0, 0.0)


def test_measure_pairs_the_floor_round_by_round_and_times_each_called_function() -> None:
    case, hook, _ = _module_case(20_000)
    floor = Case(key={"op": "t", "variant": "raw", "mode": "inference"}, call=lambda: 3 * 2)
    measured = tw.measure(case, floor, [hook], calls=50, rounds=3)
    assert len(measured.total) == len(measured.delta) == 3 and measured.calls == {"slow": 1.0}
    row = tw.case_row(case.key, "raw", measured)
    # medians: one round's floor or calibration may meet a stall of the host, which moves it either way
    assert row["delta_us"] >= 19.5 and row["python_functions"][0]["us"] >= 19.5, row
    assert row["delta_us_ci_low"] <= row["delta_us"] <= row["delta_us_ci_high"] and row["floor_us"] < 19.5
    assert [f["function"] for f in row["python_functions"]] == ["slow"]


def test_each_window_is_set_beside_the_floors_window_of_the_same_function() -> None:
    rows = [{"op": "o", "variant": "raw", "mode": "inference", "status": None,
             "python_functions": [{"function": "f", "us": 1.0}]},
            {"op": "o", "variant": "v", "mode": "inference", "status": None,
             "python_functions": [{"function": "f", "us": 4.0}, {"function": "g", "us": 2.0}]}]
    tw.with_floor_windows(rows, lambda r: None if r["variant"] == "raw" else {**r, "variant": "raw"})
    assert [f["delta_us"] for f in rows[1]["python_functions"]] == [3.0, 2.0]
    assert "delta_us" not in rows[0]["python_functions"][0]  # a floor is over nothing


def test_callgrind_is_converted_at_the_cases_own_speed_in_the_timed_run() -> None:
    windows = {"rows": [{"op": "o", "variant": "v", "mode": "inference", "status": None, "total_us": 10.0,
                         "python_functions": [{"function": "f", "us": 6.0}, {"function": "g", "us": 1.0}]}]}
    breakdown = {"rows": [{"op": "o", "variant": "v", "mode": "inference", "status": None, "layer": "python",
                           "instructions_total": 100_000.0,
                           "python_functions": [{"function": "f", "instructions": 50_000.0, "calls": 1.0},
                                                {"function": "g", "instructions": 20_000.0, "calls": 1.0}]},
                          {"op": "o", "variant": "v", "mode": "inference", "status": None, "layer": "binding",
                           "instructions_total": 100_000.0}]}
    compared = {c["function"]: c for c in aw.agreement(windows, breakdown)}
    # f: 60 % of the time, 50 % of the instructions: 6 µs against 5; g: 10 % against 20 %.
    assert compared["f"]["callgrind_us"] == 5.0 and compared["f"]["ratio"] == 1.2 and compared["f"]["agrees"]
    assert compared["g"]["ratio"] == 0.5 and not compared["g"]["agrees"]
    assert "1 of 2 within ±20 %" in aw.table({"config": {"device": "cpu", "rounds": 3, "calls": 5},
                                              "rows": []}, list(compared.values()))


def _cli(*argv: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dbench.analysis.windows", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv, said", [
    (["--device", "cpu", "--ops", "no_such_op"], "unknown ops no_such_op"),
    (["--device", "cpu", "--ops", "noop", "--rounds", "2"], "--rounds >= 3"),
    (["--from", "absent.windows.json"], "cannot be read"),
    (["--from", "absent.windows.json", "--flames", "flames"], "--flames needs a timed run"),
])
def test_bad_input_is_one_line_and_makes_no_folder(tmp_path: Path, argv: list[str], said: str) -> None:
    out = tmp_path / "out"
    done = _cli(*argv, "--out", str(out))
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_flames_folder_others_can_write_is_refused_before_any_work(tmp_path: Path) -> None:
    """Another local user could plant or swap the flame graphs' names there before a root run writes
    them (analysis/outputs.py check_output_dir, as run.py's --out)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    done = _cli("--device", "cpu", "--ops", "noop", "--out", str(tmp_path / "out"), "--flames", str(shared))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--flames: refusing the output folder" in done.stderr and "others can write" in done.stderr
    assert "Use --flames with a folder of yours" in done.stderr and not list(shared.iterdir())
    assert not (tmp_path / "out").exists(), "the --out folder is checked with --flames before either is made"


def test_cuda_without_a_gpu_is_refused_before_any_work(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = _cli("--device", "cuda", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "no CUDA device" in done.stderr and not (tmp_path / "out").exists()


def test_a_compare_file_that_is_not_a_breakdown_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "x.json.gz"
    other.write_bytes(gzip.compress(json.dumps({"schema": "nope", "rows": []}).encode()))
    done = _cli("--device", "cpu", "--ops", "noop", "--compare", str(other), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "not a breakdown document" in done.stderr


@pytest.mark.slow
def test_a_known_wait_in_a_registered_ops_kernel_lands_in_its_window(tmp_path: Path) -> None:
    """DBENCH_INJECT_PY_NS: define_impl's Python kernel waits 20 µs; the dispatcher calls it inside
    OpOverload.__call__, so that window and the overhead over raw grow by the wait, and the
    rendered files read back."""
    out = tmp_path / "out"
    done = _cli("--device", "cpu", "--ops", "noop", "--variants", "raw,define_impl", "--rounds", "3", "--calls", "50",
                "--out", str(out), "--flames", str(tmp_path / "flames"), env={"DBENCH_INJECT_PY_NS": "20000"})
    assert done.returncode == 0, done.stderr
    flames = {p.name: p.read_text().splitlines() for p in (tmp_path / "flames").iterdir()}
    assert len(flames) == 6 and "stacks.noop.define_impl.inference" in flames, sorted(flames)
    spin_ns = sum(int(line.rsplit(" ", 1)[1]) for line in flames["stacks.noop.define_impl.inference"]
                  if "spun" in line)  # ops/variants.py's injected wait and its clock reads, inclusive
    assert spin_ns >= 0.95 * 20_000 * tw.FLAME_CALLS, flames["stacks.noop.define_impl.inference"]
    assert not any("spun" in line or "0x" in line for line in flames["stacks.noop.raw.inference"])
    document = json.loads((out / "windows-cpu.windows.json").read_text())
    flamed = next(r for r in document["rows"] if r["variant"] == "define_impl" and r["mode"] == "inference")
    assert flamed["flame"]["calls"] == tw.FLAME_CALLS and flamed["flame"]["median_call_us"] >= 20.0, flamed["flame"]
    assert len(flamed["flame"]["left_out_calls_us"]) == tw.FLAME_SETTLE_CALLS, flamed["flame"]
    assert min(flamed["flame"]["left_out_calls_us"]) >= 20.0, flamed["flame"]  # each waited, as the kept ones
    assert "flame graph of noop/define_impl/inference: 50 calls under the profiler" in done.stderr
    timed = [r for r in document["rows"] if r["status"] is None and r["variant"] == "define_impl"]
    assert {r["mode"] for r in timed} == {"inference", "no_grad", "inference_mode"}
    for row in timed:
        window = next(f for f in row["python_functions"] if f["function"] == "OpOverload.__call__")
        assert window["delta_us"] >= 19.5 and row["delta_us"] >= 19.5, row
        # The window also holds the kernel's own copy (the floor's work, outside any window of its
        # own), and each is a median of 3 rounds: a fresh clone's CI on a loaded 2-core host read
        # 1.205 once. A wait outside the window would read about 0.1.
        assert 0.75 <= window["delta_us"] / row["delta_us"] <= 1.35, row
    timings, against_flames = (out / "windows-cpu.md").read_text().split("## The flame graphs against the timed calls")
    assert timings.count("| noop | define_impl |") == 3 and against_flames.count("| noop | define_impl |") == 3
    assert (out / "windows-cpu-noop.png").stat().st_size > 10_000
    again = _cli("--from", str(out / "windows-cpu.windows.json"), "--out", str(tmp_path / "again"))
    assert again.returncode == 0 and (tmp_path / "again" / "windows-cpu.md").read_text() == \
        (out / "windows-cpu.md").read_text()


def _event(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_a_flame_graph_nests_events_by_time_per_thread_and_keeps_self_times() -> None:
    events = [_event("C", 5, 3), _event("A", 0, 10), _event("B", 0, 4), _event("D", 6, 1),
              _event("E", 0, 3, tid=2), _event("f;g of x object at 0xabc", 8, 1)]
    assert tw.fold(events) == {"A": 2.0, "A;B": 4.0, "A;C": 2.0, "A;C;D": 1.0, "A;f:g": 1.0, "E": 3.0}
    assert tw.fold(events, below="A") == {"B": 4.0, "C": 2.0, "C;D": 1.0, "f:g": 1.0}


def test_an_event_the_profiler_left_open_is_cut_at_its_callers_end_and_named() -> None:
    # As a CUDA host's trace had it: a C function under each call never closed (its end is the
    # trace's), so every later call nested inside it. Each call stays its own, and the cut is named.
    events = [_event("run", 0, 100), _event("call", 0, 10), _event("boxed", 2, 98), _event("call", 10, 10),
              _event("boxed", 12, 88), _event("kernel", 15, 1)]
    cut: list[str] = []
    assert tw.fold(events, below="run", cut=cut) == {"call": 4.0, "call;boxed": 15.0, "call;boxed;kernel": 1.0}
    assert cut == ["call;boxed"]  # each stack once, cut below `run` as the stacks are

    cut = []
    tw.fold(events + [_event("stop", 99, 5)], cut=cut)  # without `below`, whole stacks
    assert cut == ["run;call;boxed", "run;stop"]
    assert tw.fold(events) == {"run": 80.0, "run;call": 4.0, "run;call;boxed": 15.0, "run;call;boxed;kernel": 1.0}
    assert tw.cut_note(["call;boxed", "other;boxed", "x;open"]) == (
        "  flame graph: events on 3 stacks outlasted their caller (boxed, open): the profiler left them open; "
        "each was cut at its caller's end, and the frames below them are missing")


def test_the_calls_directly_under_the_profiled_loop_are_listed_with_their_durations() -> None:
    events = [_event("run", 0, 100), _event("call", 0, 10), _event("inner", 1, 5), _event("call", 10, 30),
              _event("sync", 40, 2), _event("other", 200, 5)]
    under: list[tuple[str, float]] = []
    tw.fold(events, below="run", under=under)
    assert under == [("call", 10.0), ("call", 30.0), ("sync", 2.0)]


def test_a_flame_sets_its_graph_beside_its_calls_and_the_table_beside_the_timed_calls() -> None:
    flame = tw.Flame("a;b 3000\na 1000\n", [1.0, 3.0, 2.0], calls=2, settle_us=[40.0, 1.5])
    fields = flame.fields()
    assert fields == {"calls": 2, "median_call_us": 2.0, "slowest_call_us": 3.0, "graph_us_per_call": 2.0,
                      "left_out_calls_us": [40.0, 1.5]}
    assert tw.flame_note("noop/raw/inference", fields, 0.5).endswith(
        "median 2.00 µs a call (slowest 3.00), the graph 2.00 µs a call; timed without the profiler 0.50 µs; "
        "the 2 calls before them, left out: 40.00, 1.50 µs")
    bare = tw.flame_note("x", tw.Flame("a 10\n", [], calls=1).fields(), 1.0)
    assert "median" not in bare and "left out" not in bare
    row = {"op": "noop", "variant": "raw", "mode": "inference", "status": None, "floor": None, "total_us": 0.5,
           "total_us_ci_low": 0.4, "total_us_ci_high": 0.6, "python_functions": [], "flame": fields}
    document = {"config": {"device": "cpu", "rounds": 3, "calls": 10}, "env": {}, "rows": [row]}
    assert "| noop | raw | inference | 0.50 | 2.00 (3.00) | 2.00 | 4.0× | 40.00 (40.00) |" in aw.table(document)
    del row["flame"]
    assert "flame graphs" not in aw.table(document)


def test_a_windows_document_is_not_read_as_a_result(tmp_path: Path) -> None:
    from dbench.bench.io.document import NOT_RESULT_SUFFIXES

    assert aw.SUFFIX in NOT_RESULT_SUFFIXES


def _row(**extra: Any) -> dict[str, Any]:
    return {"op": "o", "variant": "v", "mode": "inference", "status": None, "floor": "raw", "total_us": 5.0,
            "floor_us": 2.0, "delta_us": 3.0, "delta_us_ci_low": 2.5, "delta_us_ci_high": 3.5, **extra}


def test_the_table_names_the_functions_inclusive_and_the_uncovered_rest() -> None:
    row = _row(python_functions=[{"function": "CustomOpDef.__call__", "calls": 1.0, "us": 4.0, "delta_us": 4.0},
                                 {"function": "fill_defaults", "calls": 2.0, "us": 0.5, "delta_us": 0.5}])
    text = aw.table({"config": {"device": "cuda:0", "rounds": 15, "calls": 300}, "env": {"gpu_name": "G"},
                     "rows": [row, {"op": "o", "variant": "w", "mode": "inference", "status": "n/a", "reason": "x"}]})
    assert "| o | v | inference | raw | 5.00 | 2.00 | +3.00 [+2.50, +3.50] | `CustomOpDef.__call__` 4.00; " \
           "`fill_defaults` 0.50 (2) |" in text
    assert "Not timed: 1 cases" in text and "not named by this method" in text


def test_an_interrupt_keeps_the_cases_timed_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C or SIGTERM (the command raises KeyboardInterrupt) in the third case: the two timed
    cases are kept in a document marked interrupted that says where it stopped, and its files are
    written with that line in the table (an H100 run cut at case 45 of 50 once kept none)."""
    real, calls = tw.measure, []

    def measure(*args: Any, **kwargs: Any) -> tw.CaseWindows:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(tw, "measure", measure)
    try:
        document = tw.collect_windows(("noop",), ("raw", "define_impl"), "cpu", calls=20, rounds=3)
    except KeyboardInterrupt:
        pytest.fail("the interrupt left collect_windows: the cases it had timed are lost")
    timed = aw.timed_cases(document)
    assert [(r["variant"], r["mode"]) for r in timed] == [("raw", "inference"), ("raw", "no_grad")], timed
    assert document["status"] == "interrupted"
    assert document["error"] == ("interrupted during case 3 of 6, noop/raw/inference_mode: 2 of 6 cases timed and "
                                 "kept, the others not timed"), document["error"]
    paths = aw.write_outputs(document, tmp_path, "windows-cpu")
    assert f"**Interrupted**: {document['error']}." in (tmp_path / "windows-cpu.md").read_text()
    assert json.loads(paths[0].read_text())["status"] == "interrupted"


def test_a_sigint_to_the_command_writes_what_it_timed_and_exits_130(tmp_path: Path) -> None:
    """The command itself, stopped with SIGINT once its second case has begun: exit 130, the document
    marked interrupted, holding every case before the one the signal cut (the second, or a later one
    on a loaded host: each case takes over 0.1 s, so the signal lands before the last)."""
    import signal

    from tests.stopping import started

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "dbench.analysis.windows", "--device", "cpu", "--ops", "noop", "--variants",
           "raw,define_impl", "--rounds", "3", "--calls", "20000", "--out", str(out)]
    with started(cmd, cwd=ROOT) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("[windows] [2/6]"):
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, rest
    document = json.loads((out / "windows-cpu.windows.json").read_text())
    assert document["status"] == "interrupted", document
    cut = re.match(r"interrupted during case (\d) of 6, ", document["error"])
    assert cut is not None and int(cut.group(1)) >= 2, document["error"]
    assert len(aw.timed_cases(document)) == int(cut.group(1)) - 1
