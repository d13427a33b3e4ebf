"""No user mistake gets past the first second, and no measured round is ever lost.

Covers: the command-line checks (exit 2, one line naming the option, before
torch is imported), result files that never collide and follow the umask, a
case that raises in warm-up or in a round (FAILED, the run goes on), a C++
driver that crashes (FAILED rows, not a skip), Ctrl-C twice (a valid
`interrupted` file), and analysis.compare's exit codes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.harness import cli
from dbench.bench.core.defaults import DEFAULTS
from dbench.bench.io.results import load_result, reserve_result_path, write_result
from dbench.bench.core.runner import Case, RunConfig, run
from tests.stopping import interrupt, started

ROOT = Path(__file__).resolve().parent.parent
QUICK = ["--device", "cpu", "--ops", "muladd", "--no-cpp", "--no-pin", "--block-ms", "0.2", "--rounds", "3"]


def run_py(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


# ---------------------------------------------------------------------------
# The command line.

BAD_COMMAND_LINES = [
    (["--rounds", "0"], "--rounds"),
    (["--rounds", "-1"], "--rounds"),
    (["--rounds", "2.5"], "--rounds"),
    (["--block-ms", "0"], "--block-ms"),
    (["--block-ms", "-5"], "--block-ms"),
    (["--block-ms", "nan"], "--block-ms"),
    (["--time-budget", "0"], "--time-budget"),
    (["--time-budget", "inf"], "--time-budget"),
    (["--cpp-repetitions", "0"], "--cpp-repetitions"),
    (["--cpp-repetitions", "-1"], "--cpp-repetitions"),
    (["--cpp-min-time", "0"], "--cpp-min-time"),
    (["--gpu-rounds", "0"], "--gpu-rounds"),
    (["--adaptive", "--precision", "0"], "--precision"),
    (["--adaptive", "--precision", "1"], "--precision"),
    (["--pin-cores", "-1"], "--pin-cores"),
    (["--pin-offset", "-2"], "--pin-offset"),
    (["--seed", "-3"], "--seed"),
    (["--shards", "0"], "--shards"),
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "two"], "--gpus"),
    (["--ops", ""], "--ops"),
    (["--ops", ","], "--ops"),
    (["--ops", "muladd,"], "--ops"),
    (["--ops", "muladd,muladd"], "--ops"),
    (["--variants", "raw,raw"], "--variants"),
    (["--variants", "raw,fastest"], "--variants"),
    (["--device", "tpu"], "--device"),
    (["--device", "cuda:x"], "--device"),
    (["--shards", "2", "--device", "cuda"], "--shards"),
    (["--out", "/proc/no/such/folder"], "--out"),
    (["--cache", "hot"], "--cache"),
    (["--scenario", ""], "--scenario"),  # never the default scenario in silence
    (["--cache", "warm,warm"], "--cache"),
    # repeated processes, A/B runs and the gate's baseline
    (["--processes", "1"], "--processes"),
    (["--processes", "0"], "--processes"),
    (["--processes", "2", "--shards", "2"], "--processes"),
    (["--processes", "2", "--gpus", "all"], "--processes"),
    (["--processes", "2", "--ab", "env:", "env:"], "--processes"),
    (["--ab", "env:", "env:X"], "--ab"),
    (["--ab", "env:", "env:1X=2"], "--ab"),
    (["--ab", "/no/such/python", "env:"], "--ab"),
    (["--ab", "env:", "build:/no/such/build"], "--ab"),
    (["--ab", "env:", "env:", "--shards", "2"], "--ab"),
    (["--ab", "env:", "env:", "--pairs", "0"], "--pairs"),
    (["--pairs", "2"], "--pairs"),
    (["--baseline", "/no/such/results"], "--baseline"),
    (["--baseline", "tests", "--ab", "env:", "env:"], "--baseline"),
]


@pytest.mark.parametrize(("extra", "option"), BAD_COMMAND_LINES,
                         ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_bad_values_exit_2_with_one_line_naming_the_option(extra: list[str], option: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import SCENARIO_NAMES

    with pytest.raises(SystemExit) as info:
        cli.parse(["--scenario", "boundary", *extra], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, ROOT / "results")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"argument {option}" in err, err


def test_unwritable_out_folders_are_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(cli.UsageError, match="exists and is not a folder"):
        cli.check_out_dir(a_file)
    with pytest.raises(cli.UsageError, match="cannot write result files"):
        cli.check_out_dir(a_file / "below")
    if os.geteuid() != 0:  # root writes into read-only folders: the probe itself is what is tested then
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(cli.UsageError, match="cannot write result files"):
            cli.check_out_dir(locked)
    fresh = cli.check_out_dir(tmp_path / "new" / "folder")  # created, and the probe file removed
    assert fresh.is_dir() and list(fresh.iterdir()) == []


@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--ab", "env:", "env:X"]])
def test_command_line_is_checked_before_torch_is_imported(bad: list[str]) -> None:
    code = (f"import sys, runpy; sys.argv = ['run.py', '--scenario', 'boundary', *{bad!r}];\n"
            "try:\n    runpy.run_path('run.py', run_name='__main__')\n"
            "except SystemExit as e:\n    print('torch' in sys.modules, e.code)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.stdout.split() == ["False", "2"], proc.stdout + proc.stderr


def _resolved(argv: list[str], device: str) -> Any:
    """run.py's options for this command line on `device` (bench/harness/options.py resolve)."""
    from dbench.bench.harness.options import resolve
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES

    args = cli.parse(["--scenario", "boundary", *argv], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, ROOT / "results",
                     DECLARATIONS)
    return resolve(args, DECLARATIONS[args.scenario], device)


def test_defaults_have_one_source() -> None:
    from dbench.bench.harness.options import RunOptions, defaults_for

    plain, quick = defaults_for(None, "cpu", False, False), defaults_for(None, "cpu", True, False)
    for name, (full, short) in DEFAULTS.items():
        assert plain[name] == full and quick[name] == short
        assert getattr(RunOptions("boundary", "cpu"), name) == full  # the dataclass's defaults are the same table
    assert RunConfig().rounds == DEFAULTS["rounds"][0]
    given = _resolved(["--quick", "--rounds", "4", "--no-pin"], "cpu")
    assert given.rounds == 4 and given.block_ms == DEFAULTS["block_ms"][1] and given.pin_cores == 0


def test_parse_leaves_the_run_defaults_to_resolve() -> None:
    """The command line fills nothing the device decides: bench/harness/options.py resolve does, once."""
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES

    args = cli.parse(["--scenario", "boundary"], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, ROOT / "results",
                     DECLARATIONS)
    assert all(getattr(args, name) is None for name in DEFAULTS)


@pytest.mark.parametrize(("argv", "device", "rounds", "block_ms"), [
    ([], "cuda:0", 30, 2.5),
    ([], "cpu", 30, 10.0),
    (["--quick"], "cuda:1", 6, 2.0),
    (["--rounds", "7", "--block-ms", "3"], "cuda:0", 7, 3.0),  # what is given is kept
])
def test_boundary_takes_its_cuda_schedule_once_the_device_is_known(argv: list[str], device: str,
                                                                    rounds: int, block_ms: float) -> None:
    from dbench.scenarios import DECLARATIONS

    boundary = DECLARATIONS["boundary"]
    options = _resolved(argv, device)
    assert (options.rounds, options.block_ms) == (rounds, block_ms)
    table = boundary.cuda_defaults if "cuda" in device else DEFAULTS
    assert options.gpu_rounds == table["gpu_rounds"][1 if "--quick" in argv else 0]


@pytest.mark.parametrize("repeat", [["--ab", "env:", "env:"], ["--processes", "3"]])
def test_repeated_runs_on_cuda_keep_the_calibrated_design(repeat: list[str]) -> None:
    """--ab and --processes on CUDA (the nightly, its fallback, the gate's calibration) take the design
    the gate was calibrated with, whatever a single run's defaults are; what is given still wins; on
    the CPU nothing differs from a single run."""
    design = ("rounds", "block_ms", "warmup_ms", "order", "gpu_rounds", "cpp_repetitions", "cpp_min_time")
    nightly = _resolved(repeat, "cuda:0")
    assert {k: getattr(nightly, k) for k in design} == {
        "rounds": 90, "block_ms": 2.5, "warmup_ms": 5.0, "order": "grouped", "gpu_rounds": 5, "cpp_repetitions": 90,
        "cpp_min_time": 0.0025}
    single = _resolved([], "cuda:0")
    assert (single.rounds, single.cpp_repetitions) == (30, 30) != (nightly.rounds, nightly.cpp_repetitions)
    given = _resolved([*repeat, "--order", "shuffled", "--rounds", "60"], "cuda:0")
    assert (given.order, given.rounds) == ("shuffled", 60)
    on_cpu, single_cpu = _resolved(repeat, "cpu"), _resolved([], "cpu")
    assert all(getattr(on_cpu, k) == getattr(single_cpu, k) for k in design)


# ---------------------------------------------------------------------------
# Result files.


def test_result_names_never_collide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as real_dt
    import secrets
    import types

    from dbench.bench.io import results

    class _Frozen(real_dt.datetime):  # both names in the same second: only the suffix can tell them apart
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real_dt.datetime(2026, 12, 6, 3, 32, 10, tzinfo=real_dt.timezone.utc)

    monkeypatch.setattr(results, "dt", types.SimpleNamespace(datetime=_Frozen, timezone=real_dt.timezone))
    suffixes = iter(["aaaaaa", "aaaaaa", "bbbbbb"])  # the second draw collides with the first
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(suffixes))
    first = reserve_result_path(tmp_path, "boundary", "cuda:0")
    second = reserve_result_path(tmp_path, "boundary", "cuda:0")
    assert first != second and first.exists() and second.exists()
    assert first.name.startswith("boundary-cuda0-") and second.name.endswith("-bbbbbb.json")


@pytest.mark.slow
def test_two_runs_started_together_keep_both_results(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", *QUICK, "--variants", "raw",
           "--out", str(tmp_path)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = sorted(tmp_path.glob("boundary-cpu-*.json"))
    assert len(results) == 2, results
    assert all(load_result(p)["status"] == "complete" for p in results)


def test_result_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        path = reserve_result_path(tmp_path, "boundary", "cpu")
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
        csv = write_result(path, {"scenario": "boundary", "status": "complete", "env": {}, "rows": []})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and stat.S_IMODE(csv.stat().st_mode) == 0o640


# ---------------------------------------------------------------------------
# A case that raises.


def _case(name: str, call: Any, baseline: str | None = None) -> Case:
    return Case(key={"op": "op", "variant": name, "mode": "inference"}, call=call, baseline=baseline)


def test_a_case_raising_in_a_round_or_warm_up_fails_alone() -> None:
    state = {"broken": False}

    def breaks_later() -> None:
        if state["broken"]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore detail")

    def never_works() -> None:
        raise ValueError("bad shape")

    fine, later, never = _case("fine", lambda: None), _case("later", breaks_later), _case("never", never_works)
    config = RunConfig(rounds=5, block_seconds=2e-4, warmup_seconds=1e-3)
    outcome = run([fine, later, never], config, on_round=lambda n: state.update(broken=n >= 2))
    assert outcome.rounds_done == 5 and outcome.stop_reason == "rounds"
    assert len(fine.samples) == 5 and fine.error is None
    assert later.error == ("raised in round 3: RuntimeError: CUDA error: an illegal memory access was encountered")
    assert later.samples == [] and not later.runnable
    assert never.error == "raised during warm-up: ValueError: bad shape" and never.samples == []


def test_a_failed_baseline_says_why_its_dependents_have_no_delta() -> None:
    from dbench.bench.io.results import case_rows

    base = _case("raw", lambda: None)
    base.error = "raised in round 2: RuntimeError: boom"
    other = _case("cpp", lambda: None, baseline="op/raw/inference")
    other.samples = [1.0, 1.1, 0.9]
    rows = {r["variant"]: r for r in case_rows([base, other])}
    assert rows["raw"]["status"] == "failed" and rows["raw"]["reason"] == base.error
    assert rows["cpp"]["status"] == "ok" and rows["cpp"]["delta_median"] is None
    assert rows["cpp"]["delta_reason"] == f"no Δ: its baseline op/raw/inference failed ({base.error})"


def test_a_variant_raising_mid_run_leaves_a_complete_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import run as run_module
    from dbench import scenarios

    boundary = scenarios.SCENARIOS["boundary"]

    def build(sel: Any) -> list[Case]:
        cases = boundary.build(sel)
        victim = next(c for c in cases if c.label == "muladd/define_impl/inference")
        inner = victim.call

        def flaky() -> Any:
            if len(victim.samples) >= 2:  # in its third round
                raise RuntimeError("kernel launch failed")
            return inner()

        victim.call = flaky
        return cases

    monkeypatch.setitem(scenarios.SCENARIOS, "boundary", dataclasses.replace(boundary, build=build))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = run_module.main(["--scenario", "boundary", *QUICK, "--rounds", "40", "--variants",
                                "raw,define_impl,cpp", "--out", str(tmp_path)])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert code == 1
    (path,) = tmp_path.glob("*.json")
    doc = load_result(path)
    assert doc["status"] == "complete" and doc["config"]["rounds_done"] == 40
    rows = {r["variant"]: r for r in doc["rows"] if r["mode"] == "inference"}
    assert rows["define_impl"]["status"] == "failed"
    assert rows["define_impl"]["reason"] == "raised in round 3: RuntimeError: kernel launch failed"
    assert rows["raw"]["n"] == rows["cpp"]["n"] == 40
    assert doc["failures"] == [{"row": "muladd/define_impl/inference", "driver": "python", "metric": "cpu_us",
                                "reason": rows["define_impl"]["reason"]}]


# ---------------------------------------------------------------------------
# The C++ driver.


@pytest.mark.parametrize(("script", "expected"), [
    ("kill -SEGV $$", "killed by signal 11"),
    ("echo 'driver: bad thing happened' >&2; exit 3", "exited with status 3: driver: bad thing happened"),
    ('for a in "$@"; do case $a in --benchmark_out=*) echo "{not json" > "${a#*=}";; esac; done',
     "wrote no readable JSON"),
], ids=["crash", "exit-3", "bad-json"])
def test_a_broken_cpp_driver_fails_the_run(tmp_path: Path, script: str, expected: str) -> None:
    driver = tmp_path / "fake_driver"
    driver.write_text(f"#!/bin/sh\n{script}\n")
    driver.chmod(0o755)
    out = tmp_path / "out"
    proc = run_py("--scenario", "boundary", *[a for a in QUICK if a != "--no-cpp"], "--variants", "raw",
                  "--out", str(out), env={"DBENCH_CPP_DRIVER": str(driver)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (path,) = out.glob("*.json")
    doc = load_result(path)
    assert doc["status"] == "complete"
    (row,) = [r for r in doc["rows"] if r["driver"] == "cpp"]
    assert row["status"] == "failed" and expected in row["reason"] and row["variant"] == "cpp_driver"
    assert expected in doc["env"]["cpp_driver_context"]["error"]
    assert [f["row"] for f in doc["failures"]] == ["muladd/cpp_driver/inference"]


def test_a_missing_cpp_driver_is_a_skip_not_a_failure(tmp_path: Path) -> None:
    proc = run_py("--scenario", "boundary", *[a for a in QUICK if a != "--no-cpp"], "--variants", "raw",
                  "--out", str(tmp_path), env={"DBENCH_CPP_DRIVER": str(tmp_path / "absent")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "C++ driver skipped" in proc.stdout
    (path,) = tmp_path.glob("*.json")
    assert "not found" in load_result(path)["env"]["cpp_driver_context"]["skipped"]


# ---------------------------------------------------------------------------
# Interrupts.


def _wait_for(path_glob: Any, predicate: Any, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in path_glob():
            try:
                doc = json.loads(path.read_text())
            except ValueError:
                continue
            if predicate(doc):
                return doc
        time.sleep(0.02)
    raise AssertionError("the run never reached the expected state")


@pytest.mark.slow
@pytest.mark.parametrize("when", ["warm-up", "rounds"])
def test_two_quick_ctrl_c_leave_a_valid_interrupted_file(tmp_path: Path, when: str) -> None:
    cmd = [sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", *QUICK, "--rounds", "500",
           "--block-ms", "2", "--variants", "raw,define_impl,cpp", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wanted = (lambda d: d["status"] == "running") if when == "warm-up" else \
        (lambda d: d["config"].get("rounds_done", 0) >= 2)
    _wait_for(lambda: tmp_path.glob("*.json"), wanted)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    (path,) = tmp_path.glob("*.json")
    doc = load_result(path)
    assert doc["status"] == "interrupted"
    done = doc["config"]["rounds_done"]
    assert done >= (2 if when == "rounds" else 0)
    assert all(len(r["samples"]) == done for r in doc["rows"] if r["status"] == "ok")


def test_a_file_stopped_before_its_config_says_no_round_was_done(tmp_path: Path) -> None:
    """The race the Ctrl-C test above can hit: the stop comes between reserving the file and the
    run's first write. The placeholder and the supervisor's rewrite both say 0 rounds."""
    from dbench.bench.harness.supervisor import end_running

    path = reserve_result_path(tmp_path, "boundary", "cpu")
    assert load_result(path)["config"]["rounds_done"] == 0
    for doc in ({"status": "running", "config": {}, "rows": []}, {"status": "running"}):
        path.write_text(json.dumps(doc))
        assert end_running(path, "interrupted", "interrupted by SIGINT")
        ended = json.loads(path.read_text())
        assert ended["status"] == "interrupted" and ended["config"] == {"rounds_done": 0}
    measured = {"status": "running", "config": {"rounds_done": 3}, "rows": [{"samples": [1, 2, 3]}]}
    path.write_text(json.dumps(measured))
    assert end_running(path, "interrupted", "x")
    assert json.loads(path.read_text())["config"] == {"rounds_done": 3}


@pytest.mark.slow
@pytest.mark.parametrize("delay", [1.0, 3.0, 6.0])
def test_ctrl_c_in_any_early_phase_of_roofline_leaves_an_interrupted_result(tmp_path: Path, delay: float) -> None:
    """Imports, device choice, environment capture, the cases' build: a Ctrl-C in each ends with exit
    130, no traceback (once: KeyError 'metric' in the console tables), and a valid result file."""
    cmd = [sys.executable, str(ROOT / "run.py"), "--scenario", "roofline", "--quick", "--device", "cpu",
           "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode in (130, 0), out[-2000:] + err
    assert "Traceback" not in err + out, out[-2000:] + err
    (path,) = tmp_path.glob("*.json")
    assert load_result(path)["status"] == ("interrupted" if proc.returncode == 130 else "complete")


@pytest.mark.slow
def test_an_interrupt_before_the_first_round_leaves_a_file_every_reader_takes(tmp_path: Path) -> None:
    """Its rows are "not run" (with why): report, gate and compare read it (never exit 2)."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", *QUICK, "--warmup-ms", "60000",
           "--variants", "raw", "--out", str(out)]
    with started(cmd, merged=False) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:  # the cases are built: the warm-up (a minute) has begun
            if " cases (" in line:
                break
        time.sleep(0.5)
        _, _, doc = interrupt(proc, out, timeout=60)
    (path,) = out.glob("*.json")
    not_run = [r for r in doc["rows"] if r["status"] == "not run"]
    assert doc["status"] == "interrupted" and not_run
    assert all(r["samples"] == [] and r["reason"] == "the run ended before its first round" for r in not_run)
    dbench = [sys.executable, "-m", "dbench"]
    for command, code in ((["report", str(path)], 0), (["gate", str(path), str(path)], 3),
                          (["compare", str(path), str(path)], 1)):  # 1: no row timed in both
        done = subprocess.run([*dbench, *command], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == code, (command, done.stdout[-1000:], done.stderr)
        assert "error" not in done.stderr, done.stderr


def test_a_signal_while_torch_is_imported_is_raised_after_the_import() -> None:
    """Inside stop.deferred() (run.py's `import torch`) a signal is noted, not raised: raised in one
    of torch's C++ initialisers it aborted the process (SIGABRT, no result); after the block it is
    the KeyboardInterrupt that ends the run as interrupted."""
    from dbench.bench.harness.interrupts import GracefulStop

    before = signal.getsignal(signal.SIGINT)
    stop = GracefulStop(signal.SIGINT)
    reached = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with stop.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler has run by now: it did not raise here
                reached = True
        assert reached and stop.signalled
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(("sig", "delay"), [(signal.SIGTERM, 0.3), (signal.SIGTERM, 1.5), (signal.SIGINT, 0.3)])
def test_a_signal_in_the_first_second_leaves_an_interrupted_result(tmp_path: Path, sig: int, delay: float) -> None:
    """Held from start-up until the command line is read (bench/harness/supervisor.py), never lost."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", *QUICK,
                             "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    # Before the rounds start, run.py says where the result is; on a loaded machine the signal can
    # land once the run object holds it, which ends the run itself (its closing lines on stdout).
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert "Traceback" not in err and (last.startswith("interrupted; result: ") or "interrupted" in out), err
    (path,) = tmp_path.glob("*.json")
    assert load_result(path)["status"] == "interrupted"


def test_a_crash_in_a_users_op_leaves_a_failed_result_naming_the_signal(tmp_path: Path) -> None:
    ops = tmp_path / "crash_ops.py"
    ops.write_text("import ctypes\nimport dbench\n\n\ndef forward(x):\n    ctypes.string_at(0)  # SIGSEGV\n"
                   "    return x\n\n\ncrash = dbench.Op(name='crash', forward=forward, reference=lambda x: x)\n")
    done = run_py("--scenario", "boundary", "--op", f"{ops}:crash", "--device", "cpu", "--no-cpp", "--no-pin",
                  "--rounds", "2", "--block-ms", "0.2", "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr
    (path,) = (tmp_path / "out").glob("*.json")
    doc = load_result(path)
    assert doc["status"] == "failed" and doc["error"] == "killed by signal SIGSEGV"
    assert done.stderr.strip().splitlines()[-1] == (f"run.py: error: the run was killed by signal SIGSEGV; "
                                                    f"result: {path} (status failed)")


def test_an_op_file_that_exits_at_import_is_refused(tmp_path: Path) -> None:
    ops = tmp_path / "exits.py"
    ops.write_text("import sys\nsys.exit(0)\n")
    done = run_py("--scenario", "boundary", "--op", str(ops), "--device", "cpu", "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"run.py: error: argument --op: --op {ops}: importing it failed: it called "
                                   "sys.exit(0) (see run.py --help)")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ---------------------------------------------------------------------------
# analysis.compare.


def _doc(rows: list[dict[str, Any]], **env: Any) -> dict[str, Any]:
    return {"scenario": "boundary", "config": {"dtype": "float32"},
            "env": {"device": "cpu", "torch": "2.13.0", "gpu_name": None, **env}, "rows": rows}


def _row(variant: str, median: float | None, status: str = "ok", reason: str | None = None) -> dict[str, Any]:
    return {"scenario": "boundary", "op": "muladd", "variant": variant, "mode": "inference", "device": "cpu",
            "driver": "python", "metric": "cpu_us", "unit": "us", "timer": "t", "status": status, "reason": reason,
            "median": median, "q1": median, "q3": median, "ci_low": median, "ci_high": median,
            "samples": [] if median is None else [median]}


def _write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.mark.parametrize(("content", "message"), [
    ("", "empty file"),
    ('{"env": {}, "rows": [', "not valid JSON"),
    ("[1, 2]", "not a result file"),
    ('{"env": {}, "rows": [{"op": "muladd"}]}', "missing env or row fields"),
], ids=["empty", "truncated", "not-a-result", "rows-without-fields"])
def test_compare_names_a_broken_file_and_exits_2(tmp_path: Path, content: str, message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.analysis import compare

    good = _write(tmp_path / "good.json", _doc([_row("raw", 1.0)]))
    bad = _write(tmp_path / "bad.json", content)
    assert compare.main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and message in err and len(err.strip().splitlines()) == 1


def test_compare_fails_on_failed_and_missing_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.analysis import compare

    a = _write(tmp_path / "a.json", _doc([_row("raw", 1.0), _row("cpp", 2.0), _row("stable", 3.0),
                                         _row("triton_op", None, "n/a", "no triton")]))
    b = _write(tmp_path / "b.json", _doc([_row("raw", 1.0), _row("cpp", None, "failed", "raised in round 2: boom"),
                                         _row("triton_op", None, "n/a", "no triton")]))
    assert compare.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "failed: muladd/cpp/inference cpu_us (python) — raised in round 2: boom" in out
    assert "missing in B: muladd/stable/inference" in out
    assert "triton_op" not in out.split("not compared")[1]  # n/a in both: not a problem
    same = _write(tmp_path / "c.json", _doc([_row("raw", 1.0)]))
    assert compare.main([str(same), str(same)]) == 0


def test_compare_refuses_different_environments_unless_allowed(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.analysis import compare

    cpu = _write(tmp_path / "cpu.json", _doc([_row("raw", 1.0)]))
    gpu = _write(tmp_path / "gpu.json", _doc([_row("raw", 1.0)], device="cuda:0", gpu_name="NVIDIA H200",
                                             torch="2.11.0+cu130"))
    assert compare.main([str(cpu), str(gpu)]) == 2
    err = capsys.readouterr().err
    assert "not comparable" in err and "device: A 'cpu', B 'cuda'" in err and "gpu: A None, B 'NVIDIA H200'" in err
    assert compare.main([str(cpu), str(gpu), "--allow-different-env"]) == 0
    assert "warning: different environments, torch: A '2.13.0', B '2.11.0+cu130'" in capsys.readouterr().out


def test_a_scenario_with_variants_of_its_own_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES

    with pytest.raises(SystemExit) as info:
        cli.parse(["--scenario", "roofline", "--variants", "cpp"], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES,
                  ROOT / "results", DECLARATIONS)
    assert info.value.code == 2 and "valid variants: raw, aten, compiled" in capsys.readouterr().err
    from dbench.bench.harness.options import resolve

    args = cli.parse(["--scenario", "launch"], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, ROOT / "results",
                     DECLARATIONS)
    options = resolve(args, DECLARATIONS["launch"], "cpu")
    launch = DECLARATIONS["launch"].defaults
    assert (options.rounds, options.gpu_rounds) == (launch["rounds"][0], launch["gpu_rounds"][0])


@pytest.mark.parametrize(("scenario", "ops", "valid"), [
    ("offsets", "mm", "noop, muladd, l2norm, chain"),  # mm's kernel has no int32/int64 choice
    ("fusion", "muladd", "chain"),
])
def test_a_scenario_that_takes_some_ops_refuses_the_others_before_torch(scenario: str, ops: str, valid: str) -> None:
    proc = subprocess.run([sys.executable, "-c", (
        "import sys, run\n"
        f"try:\n    run.main(['--scenario', '{scenario}', '--ops', '{ops}'])\n"
        "except SystemExit as e:\n    print('torch' in sys.modules, e.code)\n")],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["False", "2"], proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and f"argument --ops: unknown op '{ops}'; valid ops: {valid}" in err[0], err
