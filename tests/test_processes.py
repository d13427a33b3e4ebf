"""run.py --processes N / --baseline: option checks, the children's command lines, the merge, end to end (CPU)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.harness import cli
from dbench.bench.io.process_merge import merge_processes, merge_row
from dbench.bench.children.processes import child_options, share, slots
from dbench.bench.io.results import REQUIRED_ROW_FIELDS, load_result, write_result
from tests.stopping import interrupt, started

ROOT = Path(__file__).resolve().parent.parent
# On the CPU wherever the tests run (the file names and timings they check are the CPU run's).
# One mode: these tests are about the processes, not the modes (tests/test_modes.py).
SMALL = ["--scenario", "boundary", "--ops", "noop", "--variants", "raw,cpp", "--modes", "inference", "--no-cpp",
         "--device", "cpu"]


def run_py(*args: str, timeout: float = 180, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, check=False)


# ---------------------------------------------------------------------------
# The command line (checked before torch, exit 2, one line naming the option).

# Bad --processes / --ab / --pairs / --baseline values are in test_robustness.py's BAD_COMMAND_LINES.


def test_a_baseline_folder_needs_result_files(tmp_path: Path) -> None:
    with pytest.raises(cli.UsageError, match="holds no result files"):
        cli.check_baseline(tmp_path)
    write_result(tmp_path / "a.json", {"scenario": "boundary", "env": {}, "rows": [_row("raw", [1.0])]})
    assert cli.check_baseline(tmp_path) == [tmp_path / "a.json"]
    assert cli.check_baseline(tmp_path / "a.json") == [tmp_path / "a.json"]


def _options(argv: list[str], device: str = "cpu") -> Any:
    from dbench.bench.harness.options import resolve
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES

    args = cli.parse(argv, SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, ROOT / "results", DECLARATIONS)
    return resolve(args, DECLARATIONS[args.scenario], device)


def test_plain_runs_keep_their_defaults() -> None:
    options = _options(["--scenario", "boundary"])
    assert options.processes is None and options.ab is None and options.pairs is None and options.baseline is None
    assert not options.repeated


# ---------------------------------------------------------------------------
# The children: the parent's resolved options, as a file (never a rewritten command line).


def test_each_child_runs_a_share_without_the_parent_only_options(tmp_path: Path) -> None:
    from dbench.bench.harness.options import RunOptions

    result = tmp_path / "b.json"
    write_result(result, {"scenario": "boundary", "env": {}, "rows": [_row("raw", [1.0])]})
    parent = _options(["--scenario", "boundary", "--processes", "4", "--rounds", "30", "--baseline", str(result),
                       "--plot", "--seed", "3", "--ops", "noop", "--out", str(tmp_path), "--device", "cpu",
                       "--order", "shuffled", "--block-ms", "2.5", "--cpp-min-time", "0.03"])
    got = child_options(parent, per_side=4, seed=5, out_dir=Path("o"))
    assert (got.rounds, got.gpu_rounds, got.cpp_repetitions, got.seed, got.out) == (8, 2, 3, 5, Path("o"))
    # The parent's design travels whole: a child is a single run and would take a single run's defaults.
    design = ("block_ms", "warmup_ms", "order", "cpp_min_time", "ops", "device", "scenario")
    assert all(getattr(got, k) == getattr(parent, k) for k in design)
    assert got.processes is None and got.baseline is None and not got.baseline_files and not got.plot
    assert RunOptions.from_json(got.to_json()) == got  # what the child reads is what was meant
    ab = child_options(_options(["--scenario", "boundary", "--ab", "env:", "env:X=1", "--pairs", "2",
                                 "--time-budget", "10"], "cuda:0"), per_side=2, seed=0, out_dir=Path("o"))
    assert ab.ab is None and ab.pairs is None and not ab.ab_sides
    assert ab.time_budget == 5.0 and ab.rounds == 45  # the nightly design's 90 rounds, a half each


def test_a_childs_command_line_is_its_options_file(tmp_path: Path) -> None:
    """`run.py --options-file FILE` and nothing else; a file that is not a run's options is one line, exit 2."""
    bad = tmp_path / "o.json"
    bad.write_text('{"schema": "dbench-options/1", "options": {"scenario": "boundary"}}')
    for argv, said in ((["--options-file", str(bad)], "missing ['device']"),
                       (["--options-file", str(bad), "--quick"], "is a child process's whole command line"),
                       (["--options-file", str(tmp_path / "gone.json")], "No such file")):
        proc = run_py(*argv)
        assert proc.returncode == 2 and said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_shares_and_slots() -> None:
    assert [share(30, n) for n in (1, 2, 4, 7, 40)] == [30, 15, 8, 5, 1]
    assert [(s.index, s.side, s.pair) for s in slots(3, None)] == [(0, None, 0), (1, None, 1), (2, None, 2)]


def test_shard_children_never_gate_or_repeat(tmp_path: Path) -> None:
    from dbench.bench.children.shard import shard_options

    result = tmp_path / "b.json"
    write_result(result, {"scenario": "boundary", "env": {}, "rows": [_row("raw", [1.0])]})
    parent = _options(["--scenario", "boundary", "--baseline", str(result), "--shards", "2", "--out", str(tmp_path)])
    child = shard_options(parent, 0, "cpu", Path("o"), ("raw",), cpp=True)
    assert child.baseline is None and not child.baseline_files and child.shards is None and child.shard_child


# ---------------------------------------------------------------------------
# The merge.


def _row(variant: str, samples: list[float], ratio: float | None = None, status: str = "ok") -> dict[str, Any]:
    med = sorted(samples)[len(samples) // 2] if samples else None
    return {"scenario": "boundary", "op": "noop", "variant": variant, "mode": "inference", "device": "cpu",
            "driver": "python", "metric": "cpu_us", "unit": "us", "timer": "t", "status": status, "reason": None,
            "median": med, "q1": med, "q3": med, "ci_low": med, "ci_high": med, "samples": samples,
            "ratio_median": ratio, "delta_median": None if ratio is None else 0.1, "baseline": None}


def _doc(rows: list[dict[str, Any]], probe: float) -> dict[str, Any]:
    return {"scenario": "boundary", "status": "complete", "config": {"rounds": 3, "rounds_done": 3, "seconds": 1.0,
                                                                     "stop_reason": "rounds"},
            "env": {"device": "cpu", "time": "t", "torch": "x"},
            "speed_probe": {"median": probe, "samples": [probe] * 3},
            "rows": rows}


def test_a_merged_row_is_the_median_of_the_process_medians() -> None:
    per = [_row("cpp", [1.0, 1.1, 1.2], 2.0), None, _row("cpp", [3.0, 3.1, 3.2], 2.2),
           _row("cpp", [2.0, 2.1, 2.2], 2.1)]
    row = merge_row(per)
    assert row["process_medians"] == [1.1, None, 3.1, 2.1] and row["median"] == pytest.approx(2.1)
    assert row["process_ratio_medians"] == [2.0, None, 2.2, 2.1] and row["ratio_median"] == pytest.approx(2.1)
    assert row["process_n"] == [3, 0, 3, 3] and row["n"] == 9 and row["samples"][:3] == [1.0, 1.1, 1.2]
    assert row["ci_low"] == pytest.approx(1.1) and row["ci_high"] == pytest.approx(3.1)  # the range below 6
    failed = merge_row([_row("cpp", [1.0]), {**_row("cpp", []), "status": "failed", "reason": "boom"}])
    assert failed["status"] == "failed" and "process 1: boom" in failed["reason"]


def test_a_failed_process_is_named_with_its_rows_kept() -> None:
    docs = [_doc([_row("raw", [1.0]), _row("cpp", [2.0])], 3.0), _doc([_row("raw", [1.2])], 3.5)]
    meta = [{"index": 0, "name": "process 1 of 2", "status": "complete"},
            {"index": 1, "name": "process 2 of 2", "status": "failed", "returncode": 1,
             "reason": "exit 1: run.py: error: cannot write x.json: No space left on device", "tail": "t"}]
    doc = merge_processes(docs, meta)
    assert doc["status"] == "failed" and "process 2 of 2 failed (exit 1: run.py: error: cannot write" in doc["error"]
    assert [(f["child"], f["returncode"], f["tail"]) for f in doc["failures"]] == [("process 2 of 2", 1, "t")]
    assert [r["variant"] for r in doc["rows"]] == ["raw", "cpp"] and doc["rows"][0]["process_medians"] == [1.0, 1.2]
    rowless = merge_processes([_doc([], 3.0)], [{"index": 0, "name": "process 1 of 1", "status": "interrupted"}])
    # A signalled stop before any round is interrupted, not failed (its children are named).
    assert rowless["status"] == "interrupted" and rowless["error"] == "no rows were merged: process 1 of 1: interrupted"


def test_a_process_whose_result_is_gone_since_it_ended_is_failed(tmp_path: Path) -> None:
    """--out removed after process 1 ended: the merge must not call complete what lost its data."""
    from dbench.bench.children.shard.process import Child, exit_code

    from dbench.bench.harness.options import RunOptions

    kept, lost = (Child(i, f"process {i + 1} of 2", "python", tmp_path / f"process-{i}", tmp_path / f"process-{i}.log",
                        options=RunOptions("boundary", "cpu")) for i in range(2))
    kept.out_dir.mkdir()
    write_result(kept.out_dir / "r.json", _doc([_row("raw", [1.0])], 3.0))
    for child in (kept, lost):
        child.status, child.result = "complete", next(child.out_dir.glob("*.json"), None)
    meta = [kept.meta(tmp_path), lost.meta(tmp_path)]
    assert meta[0]["status"] == "complete"
    assert meta[1]["status"] == "failed" and "process-1 is gone or unreadable" in lost.reason
    doc = merge_processes([load_result(kept.result), None], meta)
    assert doc["status"] == "failed" and "process 2 of 2 failed" in doc["error"]
    assert exit_code([kept, lost], False, doc["rows"]) == 1


def test_merge_processes_keeps_every_row_and_process(tmp_path: Path) -> None:
    docs = [_doc([_row("raw", [1.0]), _row("cpp", [2.0], 2.0)], 3.0), None,
            _doc([_row("raw", [1.2]), _row("cpp", [2.6], 2.1)], 3.5)]
    meta = [{"index": 0, "pid": 11, "status": "complete"}, {"index": 1, "pid": None, "status": "not run"},
            {"index": 2, "pid": 13, "status": "complete"}]
    doc = merge_processes(docs, meta)
    assert doc["status"] == "interrupted" and doc["config"]["processes"] == 3 and doc["config"]["rounds_done"] == 6
    assert [p["pid"] for p in doc["env"]["processes"]] == [11, None, 13]
    assert [p["probe"] for p in doc["env"]["processes"]] == [3.0, None, 3.5]
    assert all({"time", "sm_clock_mhz", "probe", "pid"} <= set(p) for p in doc["env"]["processes"])
    assert [r["variant"] for r in doc["rows"]] == ["raw", "cpp"]
    assert doc["rows"][1]["process_medians"] == [2.0, None, 2.6]
    assert doc["speed_probe"]["n"] == 6
    write_result(tmp_path / "m.json", doc)
    assert load_result(tmp_path / "m.json")["rows"][0]["process_medians"] == [1.0, None, 1.2]


# ---------------------------------------------------------------------------
# End to end (CPU).


@pytest.mark.slow
def test_two_processes_write_one_file_with_each_process_median(tmp_path: Path) -> None:
    """Started from another folder with a relative --out: the children (which run elsewhere) get
    absolute paths, and the merge finds what they wrote."""
    (tmp_path / "cwd").mkdir()
    proc = run_py(*SMALL, "--quick", "--rounds", "2", "--processes", "2", "--out", "rel", cwd=tmp_path / "cwd")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = (tmp_path / "cwd" / "rel").glob("*.json")
    assert not (ROOT / "rel").exists(), "a child wrote relative to its own folder"
    assert path.name.startswith("boundary-cpu-x2-")
    doc = load_result(path)
    assert doc["status"] == "complete" and doc["config"]["processes"] == 2 and doc["config"]["rounds_done"] == 2
    assert [p["status"] for p in doc["env"]["processes"]] == ["complete", "complete"]
    assert len({p["pid"] for p in doc["env"]["processes"]}) == 2
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    assert {(r["variant"], r["mode"]) for r in ok} == {("raw", "inference"), ("cpp", "inference")}
    for row in doc["rows"]:
        assert all(f in row for f in REQUIRED_ROW_FIELDS)
        assert len(row["process_medians"]) == 2 and len(row["process_ratio_medians"]) == 2
    cpp = next(r for r in ok if r["variant"] == "cpp")
    assert None not in cpp["process_ratio_medians"] and cpp["ratio_median"] is not None
    assert "process 2 of 2 complete" in proc.stdout and "noop: CPU µs/call" in proc.stdout


@pytest.mark.slow
def test_interrupting_a_repeated_run_leaves_a_valid_file(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "run.py"), *SMALL, "--rounds", "300000", "--block-ms", "0.2", "--processes", "3",
           "--out", str(tmp_path)]
    deadline = time.monotonic() + 90
    with started(cmd, cwd=ROOT) as proc:
        while time.monotonic() < deadline:  # the first process has checkpointed a round
            done = []
            for p in tmp_path.glob("*.processes/process-0/*.json"):
                try:
                    done.append(json.loads(p.read_text())["config"].get("rounds_done", 0))
                except ValueError:
                    pass
            if done and max(done) >= 1:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the first process did not start")
        (running,) = tmp_path.glob("*.json")  # valid from the start, rewritten after each process
        assert load_result(running)["status"] == "running"
        _, _, doc = interrupt(proc, tmp_path)
    assert doc["status"] == "interrupted" and doc["config"]["rounds_done"] >= 1
    assert [p["status"] for p in doc["env"]["processes"]] == ["interrupted", "not run", "not run"]
    row = next(r for r in doc["rows"] if r["variant"] == "raw" and r["mode"] == "inference")
    assert row["process_medians"][0] is not None and row["process_medians"][1:] == [None, None]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_as_the_first_process_starts_leaves_an_interrupted_file(tmp_path: Path, sig: int) -> None:
    """Stopped before any process timed a round: interrupted (not failed), and readable."""
    cmd = [sys.executable, str(ROOT / "run.py"), *SMALL, "--rounds", "300000", "--block-ms", "0.2", "--processes", "2",
           "--out", str(tmp_path)]
    with started(cmd, cwd=ROOT) as proc:
        deadline = time.monotonic() + 60
        while not _started(tmp_path, "process-0") and time.monotonic() < deadline:
            time.sleep(0.02)
        _, _, doc = interrupt(proc, tmp_path, sig)
    assert doc["status"] == "interrupted", doc.get("error")
    assert [p["status"] for p in doc["env"]["processes"]] == ["interrupted", "not run"]


def _started(out: Path, name: str) -> bool:
    """The parent has started child `name`: a process runs with its options file on its command line.
    (Its log exists a moment before: a signal in that moment leaves it rightly `not run`.)"""
    options = list(out.glob(f"*.processes/{name}.options"))
    if not options or not list(out.glob(f"*.processes/{name}.log")):
        return False
    if not Path("/proc").is_dir():  # no process table to read: the log must do
        return True
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(options[0]).encode() in cmdline.read_bytes():
                return True
    return False


LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process from /proc; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text.rpartition(")")[2].split()[:2]
    return state, int(ppid)


def _run_children(parent: int) -> list[int]:
    """The live run.py children of `parent` or of its worker (the command runs in a process its
    supervisor forks: bench/harness/supervisor.py), after their exec: their command line names their folder."""
    found = []
    states = {int(e.name): _proc_state(int(e.name)) for e in Path("/proc").iterdir() if e.name.isdigit()}
    parents = {parent} | {pid for pid, state in states.items() if state is not None and state[1] == parent}
    for pid, state in states.items():
        entry = Path(f"/proc/{pid}")
        if state is None or state[1] not in parents or state[0] == "Z":
            continue
        try:
            if b".processes/process-" in (entry / "cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


@LINUX
def test_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "run.py"), *SMALL, "--rounds", "300000", "--block-ms", "0.2", "--processes",
           "2", "--out", str(tmp_path)]
    parent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    children: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not children and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.1)
            children = _run_children(parent.pid)
        assert children, "the parent started no child"
        parent.kill()  # SIGKILL: no handler of the parent runs
        parent.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any((_proc_state(c) or ("Z",))[0] != "Z" for c in children):
            time.sleep(0.05)
        assert all((_proc_state(c) or ("Z",))[0] == "Z" for c in children), "a child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for c in children:
            with contextlib.suppress(OSError):
                os.kill(c, signal.SIGKILL)


@LINUX
def test_a_child_gets_the_parent_death_signal_or_exits_when_its_parent_is_already_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dbench.bench.children.shard.process import die_with_parent

    read = "import ctypes; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); print(v.value)"
    got = subprocess.run([sys.executable, "-c", read], preexec_fn=die_with_parent(), capture_output=True, text=True,
                         check=True)
    assert int(got.stdout) == signal.SIGKILL  # PR_GET_PDEATHSIG
    monkeypatch.setattr(os, "getpid", lambda: 1)  # the parent it was made for is not the one that forks
    late = die_with_parent()
    monkeypatch.undo()
    assert subprocess.run([sys.executable, "-c", "pass"], preexec_fn=late, check=False).returncode == 1


def test_baseline_without_the_gate_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.py's one adapter to analysis.gate: a checkout without it runs, then says it could not gate."""
    from rich.console import Console

    from dbench.analysis.console import gate
    from dbench.bench.harness.common import EXIT_USAGE

    result = tmp_path / "r.json"
    write_result(result, {"scenario": "boundary", "env": {}, "rows": [_row("raw", [1.0])]})
    args = argparse.Namespace(baseline=result, baseline_files=[result])
    console = Console(record=True, width=200)
    from dbench import analysis

    monkeypatch.delattr(analysis, "gate", raising=False)  # as if analysis/gate.py were not there
    monkeypatch.setitem(sys.modules, "dbench.analysis.gate", None)
    assert gate(result, args.baseline_files, console) == EXIT_USAGE
    assert "dbench.analysis.gate is not in this checkout" in console.export_text()

    seen: dict[str, Any] = {}

    def fake_gate(new_docs: list[dict[str, Any]], baseline_docs: list[dict[str, Any]], **_: Any) -> Any:
        seen.update(new=new_docs, base=baseline_docs)
        if not baseline_docs[0]["rows"]:
            raise ValueError("the runs are not comparable")
        return argparse.Namespace(exit_code=1)

    monkeypatch.setitem(sys.modules, "dbench.analysis.gate", type(sys)("dbench.analysis.gate"))
    sys.modules["dbench.analysis.gate"].gate = fake_gate  # type: ignore[attr-defined]
    sys.modules["dbench.analysis.gate"].render = lambda verdict, fmt: "the fake verdict"  # type: ignore[attr-defined]
    monkeypatch.setattr(analysis, "gate", sys.modules["dbench.analysis.gate"], raising=False)
    assert gate(result, args.baseline_files, console) == 1
    assert len(seen["new"]) == 1 and len(seen["base"]) == 1 and "the fake verdict" in console.export_text()
    empty = tmp_path / "empty.json"
    write_result(empty, {"scenario": "boundary", "env": {}, "rows": []})
    assert gate(result, [empty], console) == EXIT_USAGE
    assert "not comparable" in console.export_text()


@pytest.mark.slow
def test_baseline_gates_the_finished_run(tmp_path: Path) -> None:
    """End to end with the real gate: a 2-process run judged against a 1-process baseline."""
    pytest.importorskip("dbench.analysis.gate")
    first = run_py(*SMALL, "--quick", "--rounds", "3", "--out", str(tmp_path / "base"))
    assert first.returncode == 0, first.stdout + first.stderr
    (base,) = (tmp_path / "base").glob("*.json")
    bad = run_py(*SMALL, "--baseline", str(tmp_path / "nothing"), "--out", str(tmp_path / "new"))
    assert bad.returncode == 2 and "argument --baseline" in bad.stderr, bad.stderr
    assert not list((tmp_path / "new").glob("*.json")), "nothing ran"  # (the --out check may make the folder)
    gated = run_py(*SMALL, "--quick", "--rounds", "3", "--processes", "2", "--baseline",
                   str(tmp_path / "base"), "--out", str(tmp_path / "new"))
    # the gate's verdict on 2 processes vs 1 (3: it decided nothing, one process on the baseline's side)
    assert gated.returncode in (0, 1, 3), gated.stdout + gated.stderr
    assert re.search(r"(PASS|FAIL|NO DECISION): \d+ rows", gated.stdout), gated.stdout


def test_a_scenario_with_its_own_roofs_is_refused_before_any_work(tmp_path: Path) -> None:
    proc = run_py("--scenario", "roofline", "--device", "cpu", "--processes", "2", "--out", str(tmp_path))
    assert proc.returncode == 2 and "argument --processes: scenario roofline" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_one_merge_pairs_the_rows_as_it_is_told() -> None:
    """bench/io/merging.py: shards are a union (each row its own shard's), processes the same rows over
    processes, A/B the paired ratio over pairs; the parent's config and env are laid over each."""
    from dbench.bench.io.ab import abba
    from dbench.bench.io.merging import AbPlan, Pairing, merge

    meta = [{"name": f"p{i}", "status": "complete"} for i in range(2)]
    parent = {"config": {"wall_seconds": 9.0}, "env": {"command": "run.py x"}}
    shards = merge([_doc([_row("raw", [1.0, 1.0, 1.0])], 1.0), _doc([_row("cpp", [2.0, 2.0, 2.0])], 1.0)], meta,
                   Pairing.SHARDS, **parent)
    assert sorted(r["variant"] for r in shards["rows"]) == ["cpp", "raw"] and shards["status"] == "complete"
    assert shards["config"]["wall_seconds"] == 9.0 and shards["env"]["command"] == "run.py x"
    processes = merge([_doc([_row("raw", [1.0, 1.0, 1.0])], 1.0), _doc([_row("raw", [3.0, 3.0, 3.0])], 1.0)], meta,
                      Pairing.PROCESSES, **parent)
    (row,) = processes["rows"]
    assert row["process_medians"] == [1.0, 3.0] and row["median"] == 2.0
    slots = abba(1)
    docs = [_doc([_row("raw", [2.0 if s.side == "b" else 1.0] * 3)], 1.0) for s in slots]
    ab = merge(docs, meta, Pairing.AB, ab=AbPlan(slots, ("a", "b"), 1), **parent)
    assert ab["rows"][0]["ab_ratio_median"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="plan"):
        merge(docs, meta, Pairing.AB, **parent)
    with pytest.raises(ValueError, match="no process wrote a result"):  # the caller's empty document names them
        merge([None, None], meta, Pairing.PROCESSES, **parent)


# ---------------------------------------------------------------------------
# --duet on CUDA: the processes' GPU passes take turns (bench/harness/gpu_turn.py).


def test_a_duet_run_on_cuda_shares_one_gpu_turn_and_no_other_run_has_one(tmp_path: Path) -> None:
    import dataclasses

    from dbench.bench.children.processes import _children

    ab = ["--scenario", "boundary", "--ab", "env:", "env:X=1", "--pairs", "3"]
    duet = dataclasses.replace(_options(ab, "cuda:0"), duet=True)
    children, _ = _children(slots(None, 3), None, duet, per_side=3, work=tmp_path)
    assert [c.options.gpu_turn for c in children] == [tmp_path / "gpu.turn"] * 6  # every pair's, one at a time
    assert [c.options.pin_offset for c in children] == [0, 1] * 3  # a pair's two sides on cores side by side
    assert {c.options.cpu_done for c in children} == {None}  # pairs one after another: no one waits on it
    from dbench.bench.harness.options import RunOptions

    assert RunOptions.from_json(children[0].options.to_json()).gpu_turn == tmp_path / "gpu.turn"
    for options in (_options(ab, "cuda:0"), dataclasses.replace(_options(ab, "cpu"), duet=True)):
        children, _ = _children(slots(None, 3), None, options, per_side=3, work=tmp_path)
        assert {c.options.gpu_turn for c in children} == {None}  # one at a time, or no GPU pass to share


def test_overlapping_pairs_alternate_between_two_sets_of_cores_and_each_process_says_when_its_cpu_passes_end(
        tmp_path: Path) -> None:
    import dataclasses

    from dbench.bench.children.processes import _children
    from dbench.bench.harness.options import RunOptions

    ab = ["--scenario", "boundary", "--ab", "env:", "env:X=1", "--pairs", "3", "--pin-offset", "1"]
    overlapping = dataclasses.replace(_options(ab, "cuda:0"), duet=True, overlap_pairs=True)
    assert overlapping.pin_slots == 4
    children, _ = _children(slots(None, 3), None, overlapping, per_side=3, work=tmp_path)
    # pair 0 on slots 1 and 2, pair 1 on 3 and 4 (beside pair 0, which may still take its GPU turns), pair 2 on 1, 2
    assert [c.options.pin_offset for c in children] == [1, 2, 3, 4, 1, 2]
    assert [c.options.cpu_done for c in children] == [tmp_path / f"process-{i}.cpu-done" for i in range(6)]
    assert [c.options.gpu_turn for c in children] == [tmp_path / "gpu.turn"] * 6
    child = RunOptions.from_json(children[3].options.to_json())
    assert child.cpu_done == tmp_path / "process-3.cpu-done" and not child.overlap_pairs and child.pin_slots == 1


def test_a_gpu_turn_waits_for_the_partner_and_says_how_long(tmp_path: Path) -> None:
    import threading
    import time

    from dbench.bench.harness.gpu_turn import gpu_turn

    lock = tmp_path / "gpu.turn"
    holding, release = threading.Event(), threading.Event()

    def partner() -> None:
        with gpu_turn(lock):
            holding.set()
            release.wait(10)

    other = threading.Thread(target=partner)
    other.start()
    assert holding.wait(10)
    waited: dict[str, float] = {}
    threading.Timer(0.3, release.set).start()
    start = time.monotonic()
    with gpu_turn(lock, waited):
        took = time.monotonic() - start
    other.join(10)
    assert took >= 0.25 and waited["gpu_turn_wait_s"] >= 0.25
    with gpu_turn(lock, waited):  # free now: no wait, and the total only grows
        pass
    assert waited["gpu_turn_wait_s"] >= 0.25
    with gpu_turn(None, waited):  # no pair: nothing to take
        pass


def test_a_gpu_turn_refuses_a_planted_link(tmp_path: Path) -> None:
    from dbench.bench.harness.gpu_turn import gpu_turn

    target = tmp_path / "victim"
    target.write_text("kept")
    (tmp_path / "gpu.turn").symlink_to(target)
    with pytest.raises(OSError):
        with gpu_turn(tmp_path / "gpu.turn"):
            pass
    assert target.read_text() == "kept"


def test_a_duet_process_entry_says_how_long_it_waited_for_its_gpu_turn() -> None:
    from dbench.bench.io.process_merge import process_entry

    waited = process_entry({"env": {}, "config": {"rounds_done": 3, "gpu_turn_wait_s": 4.5}}, {"name": "p1"})
    assert waited["gpu_turn_wait_s"] == 4.5 and waited["name"] == "p1"
    assert "gpu_turn_wait_s" not in process_entry({"env": {}, "config": {"rounds_done": 3}}, {"name": "p2"})


def test_a_duet_process_makes_its_cpu_passes_first_and_its_gpu_passes_last() -> None:
    """With a GPU turn, both processes of a pair time their CPU rows (Python, then the C++ driver's)
    side by side, then take turns for the GPU; without one, the declared order."""
    import dataclasses

    from dbench.bench.harness.rounds import Run
    from dbench.scenarios import SCENARIOS

    def steps(options: Any) -> list[str]:
        run = object.__new__(Run)
        run.scenario, run.options, run.cuda = SCENARIOS["boundary"], options, True
        return [step.__name__ for step in run.steps()]

    plain = _options(["--scenario", "boundary"], "cuda:0")
    assert steps(plain) == ["cpu_rounds", "gpu_pass", "cpp_pass"]
    turns = dataclasses.replace(plain, gpu_turn=Path("gpu.turn"))
    assert steps(turns) == ["cpu_rounds", "cpp_cpu_pass", "gpu_pass", "cpp_gpu_pass"]
    assert steps(dataclasses.replace(turns, no_cpp=True)) == ["cpu_rounds", "gpu_pass"]
    # --overlap-pairs: the parent is told between the two, and may start the next pair
    told = dataclasses.replace(turns, cpu_done=Path("process-0.cpu-done"))
    assert steps(told) == ["cpu_rounds", "cpp_cpu_pass", "cpu_passes_done", "gpu_pass", "cpp_gpu_pass"]


def test_the_cpu_passes_marker_is_made_new_and_never_through_a_link(tmp_path: Path) -> None:
    import dataclasses

    from dbench.bench.harness.rounds import Run

    run = object.__new__(Run)
    run.options = dataclasses.replace(_options(["--scenario", "boundary"], "cuda:0"), cpu_done=tmp_path / "p.cpu-done")
    run.cpu_passes_done()
    assert (tmp_path / "p.cpu-done").is_file()
    target = tmp_path / "victim"
    target.write_text("kept")
    (tmp_path / "q.cpu-done").symlink_to(target)
    run.options = dataclasses.replace(run.options, cpu_done=tmp_path / "q.cpu-done")
    with pytest.raises(OSError):
        run.cpu_passes_done()
    assert target.read_text() == "kept"


# ---------------------------------------------------------------------------
# One bytecode cache for the children where the parent found its modules without one
# (bench/children/bytecode.py).


def test_children_share_a_private_bytecode_cache_only_where_the_modules_have_none(tmp_path: Path) -> None:
    from dbench.bench.children import bytecode
    from dbench.bench.children.processes import _children
    from dbench.bench.io.env import UNCACHED_WARN

    many = {"modules": UNCACHED_WARN, "of": 2691, "writes_disabled": True, "prefix": None}
    cache = bytecode.shared_folder(tmp_path, {"PYTHONDONTWRITEBYTECODE": "1"}, many)
    assert cache == tmp_path / "pycache"
    assert bytecode.child_env(cache) == {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"),
                                         "PYTHONDONTWRITEBYTECODE": ""}
    few = {**many, "modules": UNCACHED_WARN - 1}
    assert bytecode.shared_folder(tmp_path, {}, few) is None and bytecode.child_env(None) == {}
    # a prefix of the user's is theirs: the children inherit it
    assert bytecode.shared_folder(tmp_path, {"PYTHONPYCACHEPREFIX": "/theirs"}, many) is None
    ab = ["--scenario", "boundary", "--ab", "env:", "env:PYTHONDONTWRITEBYTECODE=1", "--pairs", "2"]
    options = _options(ab)
    by_side = {"a": options.ab_sides[0], "b": options.ab_sides[1]}
    children, _ = _children(slots(None, 2), by_side, options, per_side=2, work=tmp_path,
                            cache_env=bytecode.child_env(cache))
    # every child gets the cache; a side's own variables win over it
    assert {c.env["PYTHONPYCACHEPREFIX"] for c in children} == {str(tmp_path / "pycache")}
    assert sorted(c.env["PYTHONDONTWRITEBYTECODE"] for c in children) == ["", "", "1", "1"]


@pytest.mark.slow
def test_the_second_process_loads_the_bytecode_the_first_compiled(tmp_path: Path) -> None:
    """With the threshold lowered to 0 and bytecode writes disabled, as on a read-only image: the run's
    folder gets a private cache (mode 0700); the first child writes every module's bytecode there, and
    the second finds all of its modules there and writes none."""
    # The build folder's own cache off (bench/harness/pycache.py), as where it is not there or not trusted.
    script = ("import runpy, sys; import dbench.bench.io.env as e; e.UNCACHED_WARN = 0; "
              "import dbench.bench.harness.pycache as p; p.build_cache = lambda environ=None: None; "
              f"sys.argv = ['run.py', *sys.argv[1:]]; runpy.run_path({str(ROOT / 'run.py')!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", script, *SMALL, "--quick", "--rounds", "2", "--processes", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the processes share one cache" in proc.stdout
    (path,) = tmp_path.glob("*.json")
    work = tmp_path / f"{path.stem}.processes"
    cache = work / "pycache"
    assert load_result(path)["env"]["bytecode_shared"].endswith(f"{path.stem}.processes/pycache")
    assert (cache.stat().st_mode & 0o777) == 0o700
    written = [p.stat().st_mtime_ns for p in cache.rglob("*.pyc")]
    assert len(written) > 1000  # torch's modules too, not only this checkout's
    for i in range(2):
        uncached = load_result(next((work / f"process-{i}").glob("*.json")))["env"]["bytecode_uncached"]
        assert uncached["modules"] == 0 and uncached["prefix"].endswith(f"{path.stem}.processes/pycache")
    # none written after the second process started (its options file is written as it starts)
    assert max(written) < (work / "process-1.options").stat().st_mtime_ns
