"""run.py checks everything it can before any work, and says so instead of timing nothing.

Covers: a selection that can time nothing on the device (exit 2, one line, no result file), one
that can time part of it (the rest runs, the skipped names said once), the plan each scenario
declares against the cases it builds, --pin-cores above the allowed cores, --baseline files that
are not valid results, --out folders that cannot be written (a name too long, a file in the way),
path options made absolute, the default output folder outside the checkout, the console tables of
an interrupted run, and the result an interrupt leaves before the run reserved one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from dbench.analysis.load import read_result
from dbench.bench.harness import cli
from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES
from dbench.scenarios.base import Planned, not_runnable

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "cpu-intel-r-xeon-r-processor" / "boundary-cpu-20261129T084325Z.json.gz"
FAST = ["--device", "cpu", "--no-cpp", "--no-pin", "--rounds", "2", "--block-ms", "0.2"]


def parse(*argv: str) -> argparse.Namespace:
    return cli.parse(["--scenario", "boundary", *argv], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES,
                     declarations=DECLARATIONS)


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line cli.parse exits 2 with."""
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------------------
# What the selection can time on this device.


@pytest.mark.parametrize(("argv", "says"), [
    (["--scenario", "boundary", "--variants", "triton_op"], "variant triton_op (triton_op runs on CUDA devices only)"),
    (["--scenario", "launch", "--ops", "muladd", "--variants", "triton_op"], "variant triton_op"),
    (["--scenario", "roofline", "--cache", "cold"], "cache cold (cold-cache timing flushes a GPU's L2)"),
    (["--scenario", "roofline", "--variants", "compiled"], "variant compiled (compiled rows are GPU-only here"),
    (["--scenario", "fusion", "--variants", "compiled,triton"], "variant compiled (compiled rows are GPU-only here); "
                                                                "variant triton (triton rows are GPU-only here)"),
    (["--scenario", "compile"], "scenario compile needs a CUDA device"),
    (["--scenario", "timer_validation"], "scenario timer_validation needs a CUDA device"),
    (["--scenario", "boundary", "--cache", "cold"], "argument --cache: scenario boundary has no cache axis"),
], ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_a_selection_that_can_time_nothing_here_exits_2_before_any_work(
        run_main: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    out = tmp_path / "out"
    assert run_main.main([*argv, *FAST, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and captured.err.startswith("run.py: error: "), captured.err
    assert says in captured.err, captured.err
    assert not out.exists(), "nothing may be reserved or written, and no folder made"
    assert "rounds" not in captured.out  # no case built, nothing timed


def test_a_selection_that_can_time_part_of_it_runs_that_part_and_names_the_rest_once(
        run_main: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main.main(["--scenario", "boundary", "--ops", "muladd", "--variants", "raw,triton_op", *FAST,
                          "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("not timed on cpu: variant triton_op (triton_op runs on CUDA devices only)") == 1, out
    (path,) = tmp_path.glob("*.json")
    rows = {(r["variant"], r["mode"]): r for r in read_result(path)["rows"]}
    assert rows[("raw", "inference")]["status"] == "ok" and len(rows[("raw", "inference")]["samples"]) == 2
    assert {r["status"] for (v, _), r in rows.items() if v == "triton_op"} == {"n/a"}


def test_the_boundary_plan_says_what_building_the_cases_finds() -> None:
    """One definition: a case the plan calls n/a is built n/a with the same reason, and one it calls
    runnable is built runnable (or FAILED by its pre-flight check, never n/a)."""
    from dbench.scenarios import SCENARIOS, Selection

    boundary = SCENARIOS["boundary"]
    sel = Selection(ops=("muladd", "mm"), variants=VARIANT_NAMES, device="cpu")
    planned = {(p.op, p.variant, p.mode): p.na_reason for p in boundary.plan(sel)}
    built = {(c.key["op"], c.key["variant"], c.key["mode"]): c.na_reason for c in boundary.build(sel)}
    assert planned == built
    assert any(r is None for r in planned.values()) and any(r is not None for r in planned.values())


def test_every_scenario_that_builds_cases_plans_them() -> None:
    from dbench.scenarios import SCENARIOS

    assert [n for n, s in SCENARIOS.items() if s.plan is None] == ["breakdown", "timer_validation"]  # their own tables


def _plan(variants: tuple[str, ...], caches: tuple[str, ...], na: dict[tuple[str, str], str]) -> list[Planned]:
    return [Planned(op, v, "forward", na.get((v, c)), c) for op in ("a", "b") for v in variants for c in caches]


@pytest.mark.parametrize(("planned", "given", "notes"), [
    # a cache state and a variant, each the cause of its own cases: both named, nothing twice
    (_plan(("raw", "compiled"), ("warm", "cold"), {("raw", "cold"): "cold needs a GPU",
                                                    ("compiled", "cold"): "cold needs a GPU",
                                                    ("compiled", "warm"): "GPU only"}),
     [], ["cache cold (cold needs a GPU)", "variant compiled (GPU only)"]),
    # the only variant, given by the user, is the cause: the default cache state is not blamed
    (_plan(("compiled",), ("warm",), {("compiled", "warm"): "GPU only"}), ["variant"], ["variant compiled (GPU only)"]),
    # everything runs: nothing to say
    (_plan(("raw",), ("warm",), {}), [], []),
    # only some combinations cannot run: no name is skipped (the table's n/a cells say why)
    ([Planned("a", "x", "m", "no a/x"), Planned("a", "y", "m", None), Planned("b", "x", "m", None),
      Planned("b", "y", "m", "no b/y")], [], []),
])
def test_not_runnable_names_each_cause_once(planned: list[Planned], given: list[str], notes: list[str]) -> None:
    assert not_runnable(planned, given) == notes


def test_when_nothing_runs_every_variant_is_named_with_its_most_common_reason() -> None:
    planned = [Planned("a", "x", "m", "no a/x"), Planned("a", "y", "m", "no a/y"), Planned("b", "x", "m", "no b/x"),
               Planned("b", "y", "m", "no a/y")]
    assert not_runnable(planned) == ["variant x (no a/x)", "variant y (no a/y)"]


# ---------------------------------------------------------------------------
# --pin-cores.


def test_more_cores_than_allowed_is_an_error_naming_the_allowed_count(capsys: pytest.CaptureFixture[str]) -> None:
    allowed = len(os.sched_getaffinity(0))
    err = refused(capsys, "--pin-cores", str(allowed + 62))
    assert f"argument --pin-cores: {allowed + 62} needs {allowed + 62} cores, but this process may run on {allowed}; " \
           f"give at most {allowed}" in err
    err = refused(capsys, "--pin-cores", "1", "--pin-offset", str(allowed))
    assert f"needs {allowed + 1} cores" in err and f"--pin-offset {allowed} leaves no core" in err
    assert parse("--pin-cores", str(allowed)).pin_cores == allowed  # all of them: fine
    assert parse("--pin-cores", str(allowed + 62), "--no-pin").no_pin  # not checked: resolve makes it 0 cores


def test_pinning_never_clamps_silently() -> None:
    from dbench.bench.harness.device import pin_cpus

    allowed = len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="cores"):
        pin_cpus(allowed + 1)


# ---------------------------------------------------------------------------
# --baseline: every file read and checked before any work.


def _baseline_cases(tmp: Path) -> list[tuple[Path, str]]:
    def write(name: str, text: str) -> Path:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    (tmp / "with-a-folder" / "x.json").mkdir(parents=True)
    (tmp / "empty-folder").mkdir()
    (tmp / "mixed").mkdir()
    shutil.copy(COMMITTED, tmp / "mixed" / "good.json")  # a folder is refused for any bad file in it
    return [
        (write("empty.json", ""), "empty"),
        (write("truncated.json", '{"env": {}, "rows": ['), "not valid JSON"),
        (write("list.json", "[1, 2]"), "not a result file"),
        (write("rows.json", '{"env": {}, "rows": [{"op": "muladd"}]}'), "not a result file"),
        (write("mixed/bad.json", "{"), "mixed/bad.json: not valid JSON"),
        (tmp / "with-a-folder", "x.json is not a regular file"),
        (tmp / "empty-folder", "holds no result files"),
        (Path("/dev/null"), "is neither a regular file nor a folder"),
        (tmp / "absent.json", "does not exist"),
    ]


def test_every_baseline_file_is_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path, says in _baseline_cases(tmp_path):
        err = refused(capsys, "--baseline", str(path), "--out", str(tmp_path / "out"))
        assert err.startswith("run.py: error: argument --baseline: ") and says in err, (path, err)
    args = parse("--baseline", str(COMMITTED), "--out", str(tmp_path / "out"))
    assert args.baseline_files == [COMMITTED]


def test_a_bad_baseline_stops_the_run_before_it_starts(run_main: Any, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "base.json"
    bad.write_text('{"env": {}, "rows": [')
    with pytest.raises(SystemExit) as info:
        run_main.main(["--scenario", "boundary", "--ops", "muladd", "--variants", "raw", *FAST,
                       "--baseline", str(bad), "--out", str(tmp_path / "out")])
    assert info.value.code == 2 and "not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # a refused run leaves no folder behind


# ---------------------------------------------------------------------------
# --out, and where results go without it.


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_an_out_name_too_long_is_one_line_in_every_scenario(tmp_path: Path, scenario: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.parse(["--scenario", scenario, "--out", str(tmp_path / ("x" * 300))], SCENARIO_NAMES, OP_NAMES,
                  VARIANT_NAMES, declarations=DECLARATIONS)
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "argument --out: cannot write result files in" in err and "File name too long" in err


def test_an_out_folder_whose_files_names_would_be_too_long_is_refused(tmp_path: Path) -> None:
    """A folder name that fits (255 bytes) inside which no result file name could (the probe's name
    is as long as the longest a run writes; the limit counts the whole path here: PATH_MAX)."""
    limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    deep = tmp_path
    while len(str(deep)) < limit - cli.LONGEST_NAME:
        deep = deep / ("d" * min(200, max(1, limit - cli.LONGEST_NAME - len(str(deep)) - 1)))
    with pytest.raises(cli.UsageError, match="cannot write result files"):
        cli.check_out_dir(deep)


@pytest.mark.parametrize("make", ["file-in-the-way", "under-a-file", "read-only"])
def test_an_unwritable_out_is_refused_before_any_work(run_main: Any, tmp_path: Path, make: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    if make == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    blocker = tmp_path / "blocker"
    if make == "read-only":
        blocker.mkdir(mode=0o500)
        out = blocker / "out"
    else:
        blocker.write_text("x")
        out = blocker if make == "file-in-the-way" else blocker / "out"
    with pytest.raises(SystemExit) as info:
        run_main.main(["--scenario", "roofline", *FAST, "--out", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and "argument --out" in err, err


def test_path_options_are_absolute_once_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(COMMITTED, tmp_path / "base.json")
    args = parse("--out", "rel/out", "--baseline", "base.json")
    assert args.out == tmp_path / "rel" / "out" and args.baseline == tmp_path / "base.json"
    assert args.baseline_files == [tmp_path / "base.json"]
    assert args.default_out == tmp_path / "dbench-results"
    assert all(p.is_absolute() for p in (args.out, args.baseline, args.default_out, *args.baseline_files))


@pytest.mark.slow
def test_a_relative_out_from_another_folder_keeps_a_sharded_run(tmp_path: Path) -> None:
    """The children run with the checkout as their folder: a relative --out must reach them absolute."""
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--ops", "noop",
                           "--variants", "raw,cpp", "--shards", "2", "--quick", *FAST, "--out", "rel"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    (path,) = (tmp_path / "rel").glob("boundary-cpu-x2-*.json")
    doc = read_result(path)
    assert doc["status"] == "complete" and {r["variant"] for r in doc["rows"]} == {"raw", "cpp"}


def test_results_go_under_the_current_folder_never_into_the_checkout(
        run_main: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    committed = sorted((ROOT / "results").rglob("*.json"))
    monkeypatch.chdir(tmp_path)
    assert run_main.main(["--scenario", "boundary", "--ops", "muladd", "--variants", "raw", *FAST]) == 0
    (path,) = (tmp_path / "dbench-results").glob("*/boundary-cpu-*.json")
    assert path.parent.name.startswith("cpu-") and read_result(path)["status"] == "complete"
    assert sorted((ROOT / "results").rglob("*.json")) == committed


def test_results_are_ignored_by_git() -> None:
    assert "dbench-results/" in (ROOT / ".gitignore").read_text().splitlines()


# ---------------------------------------------------------------------------
# Interrupts: the tables of a partial run, and the result when none was reserved yet.


@pytest.mark.parametrize(("rows", "status", "shown"), [
    ([], "interrupted", "no table: nothing was timed before the interrupt"),
    ([{"samples": [1.0]}], "interrupted", "no table for the rows timed before the interrupt (KeyError: 'metric')"),
])
def test_an_interrupted_run_prints_a_line_where_its_tables_cannot_be_made(rows: list[dict[str, Any]],
                                                                          status: str, shown: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from dbench.analysis import kernels
    from dbench.analysis.console import report
    from dbench.scenarios import SCENARIOS

    def breaks(doc: dict[str, Any], console: Any) -> None:
        raise KeyError("metric")

    monkeypatch.setitem(kernels.TABLES, "roofline", kernels.TABLES["roofline"]._replace(print=breaks))
    scenario = SCENARIOS["roofline"]
    console = Console(record=True, width=300)
    report(scenario, {"status": status, "rows": rows}, {}, console)
    assert shown in console.export_text()
    with pytest.raises(KeyError):  # a complete run's broken table is a bug, shown as one
        report(scenario, {"status": "complete", "rows": [{"samples": [1.0]}]}, {}, console)


def test_an_interrupt_before_the_result_was_reserved_leaves_one(tmp_path: Path) -> None:
    from dbench.bench.harness import interrupts

    args = argparse.Namespace(out=None, default_out=tmp_path / "dbench-results", scenario="roofline", device=None)
    interrupts.RESERVED.clear()
    path = interrupts.mark_interrupted(args)
    assert path is not None and path.parent == args.default_out and path.name.startswith("roofline-unknown-")
    doc = read_result(path)
    assert doc["status"] == "interrupted" and doc["rows"] == [] and doc["scenario"] == "roofline"
    assert [p.name for p in args.default_out.iterdir()] == [path.name]  # its scratch copy is gone


def test_an_interrupt_marks_a_reserved_running_file_and_leaves_a_final_one(tmp_path: Path) -> None:
    from dbench.bench.harness import interrupts

    running, final = tmp_path / "running.json", tmp_path / "final.json"
    running.write_text(json.dumps({"scenario": "boundary", "status": "running", "config": {}, "env": {"device": "cpu"},
                                   "rows": []}))
    final_text = json.dumps({"scenario": "boundary", "status": "interrupted", "config": {"rounds_done": 3},
                             "env": {}, "rows": []})
    final.write_text(final_text)
    for path in (running, final):
        interrupts.RESERVED[:] = [path]
        assert interrupts.mark_interrupted(None) == path
    assert read_result(running)["status"] == "interrupted" and read_result(running)["env"] == {"device": "cpu"}
    assert final.read_text() == final_text  # its way to run wrote its final status: left as it is
    interrupts.RESERVED.clear()


@pytest.mark.parametrize("receiver", ["process", "another thread"])
def test_a_signal_while_the_result_is_reserved_is_handled_once_it_is_remembered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: str) -> None:
    """A Ctrl-C between the reserved file's creation and its being remembered left it `running`, and
    mark_interrupted made a second file beside it (a probe campaign under load saw two). The kernel
    may hand a signal sent to the process to any thread (torch starts several; the main thread's
    signal mask then held nothing back, and this test failed on some runs): `another thread` sends it
    to one on purpose."""
    import signal
    import threading
    import time

    from dbench.bench.harness import interrupts
    from dbench.bench.io import results

    made = tmp_path / "boundary-cpu-reserved.json"
    done = threading.Event()
    other = threading.Thread(target=done.wait, daemon=True)
    other.start()

    def made_then_signalled(folder: Path, scenario: str, device: str) -> Path:
        made.write_text("{}")
        # the file exists; reserve has not remembered it yet
        if receiver == "process":
            os.kill(os.getpid(), signal.SIGINT)
        else:
            assert other.ident is not None
            signal.pthread_kill(other.ident, signal.SIGINT)
        time.sleep(0.2)  # delivery to another thread is asynchronous: let it land while reserve runs
        return made

    monkeypatch.setattr(results, "reserve_result_path", made_then_signalled)
    monkeypatch.setattr(interrupts, "RESERVED", [])
    before = signal.getsignal(signal.SIGINT)
    try:
        interrupts.GracefulStop(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            interrupts.reserve(tmp_path, "boundary", "cpu")
        assert interrupts.RESERVED == [made]  # so mark_interrupted marks this file, and makes none
    finally:
        signal.signal(signal.SIGINT, before)
        done.set()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # nothing left blocked


def test_plot_without_matplotlib_is_refused_before_the_run(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert "--plot: matplotlib is not installed" in refused(capsys, "--plot", "--out", str(tmp_path))
    monkeypatch.undo()
    assert parse("--plot", "--out", str(tmp_path)).plot  # with matplotlib: accepted
