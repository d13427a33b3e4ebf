"""run.py: argument errors name the valid choices and exit non-zero; a short real run writes a complete result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from dbench.bench.io.results import REQUIRED_ROW_FIELDS, load_result
from dbench.ops.specs import MODES

ROOT = Path(__file__).resolve().parent.parent


def run_py(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """run.py in a subprocess; without --out it writes under `cwd` (never give the checkout)."""
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--scenario", "nope"], "valid scenarios: boundary"),
        (["--scenario", "boundary", "--ops", "muladd,bogus"], "valid ops: noop, muladd, l2norm"),
        (["--scenario", "boundary", "--variants", "raw,fastest"], "valid variants: raw, define_impl"),
        (["--scenario", "boundary", "--device", "tpu"], "--device must be cpu, cuda or cuda:N"),
    ],
)
def test_bad_names_list_the_valid_ones(args: list[str], expected: str) -> None:
    proc = run_py(*args)
    assert proc.returncode == 2
    assert expected in proc.stderr


def test_a_bad_mm_kernel_setting_fails_before_any_work(tmp_path: Path) -> None:
    import os

    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "roofline", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "DBENCH_MM_KERNEL": "cublas"})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "DBENCH_MM_KERNEL='cublas': valid values are auto, wgmma, mma_sync (unset: auto)" in proc.stderr
    assert not list(tmp_path.glob("*.json"))


def test_missing_scenario_is_an_error() -> None:
    proc = run_py()
    assert proc.returncode == 2 and "--scenario" in proc.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_request_without_cuda_is_an_error(tmp_path: Path) -> None:
    proc = run_py("--scenario", "boundary", "--device", "cuda", cwd=tmp_path)
    assert proc.returncode == 2 and "CUDA is not available" in proc.stderr
    assert not list(tmp_path.rglob("*.json"))


def test_short_run_writes_every_row_with_its_samples(tmp_path: Path) -> None:
    proc = run_py("--scenario", "boundary", "--device", "cpu", "--ops", "muladd",
                  "--variants", "raw,define_impl,function_raw,cpp_autograd", "--rounds", "3", "--block-ms", "0.5",
                  "--no-cpp", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (json_path,) = tmp_path.glob("boundary-cpu-*.json")
    doc = load_result(json_path)
    assert doc["status"] == "complete" and doc["config"]["rounds_done"] == 3
    phases = doc["config"]["phase_seconds"]  # where the run's time went (no GPU pass, no C++ here)
    assert list(phases) == ["start", "build", "cpu_rounds"] and all(v >= 0 for v in phases.values())
    assert phases["cpu_rounds"] >= 0.9 * doc["config"]["seconds"]
    env = doc["env"]
    for key in ("time", "git", "command", "torch", "torch_git", "cuda_runtime", "cuda_driver", "python", "hostname",
                "cpu_model"):
        assert key in env
    rows = {(r["variant"], r["mode"]): r for r in doc["rows"]}
    assert len(rows) == 4 * len(MODES), "every variant appears in every mode"
    for row in doc["rows"]:
        assert all(f in row for f in REQUIRED_ROW_FIELDS)
        assert row["metric"] == "cpu_us" and row["unit"] == "us" and row["driver"] == "python"
    ok = rows[("define_impl", "inference")]
    assert ok["status"] == "ok" and len(ok["samples"]) == 3
    assert ok["ci_low"] <= ok["median"] <= ok["ci_high"] and ok["q1"] <= ok["median"] <= ok["q3"]
    assert ok["baseline"] == "muladd/raw/inference" and ok["delta_median"] is not None
    base = rows[("raw", "inference")]
    assert ok["ratio_median"] == pytest.approx(
        float(np.median(np.array(ok["samples"]) / np.array(base["samples"]))), rel=1e-4)
    probe = doc["speed_probe"]  # timed in every round, not a row
    assert probe["n"] == 3 and len(probe["samples"]) == 3 and probe["median"] > 0
    assert not any(r["variant"] == "speed_probe" for r in doc["rows"])
    na = rows[("define_impl", "fwd_bwd")]
    assert na["status"] == "n/a" and "autograd" in na["reason"] and na["samples"] == []
    assert rows[("cpp_autograd", "fwd_bwd")]["baseline"] == "muladd/function_raw/fwd_bwd"
    csv = json_path.with_suffix(".csv").read_text().splitlines()
    assert len(csv) == 1 + len(doc["rows"]) and "samples" not in csv[0]
    assert "define_impl" in proc.stdout and "n/a" in proc.stdout
    json.dumps(doc)  # round-trips


def test_load_result_rejects_a_file_without_the_contract(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"env": {}, "rows": [{"op": "noop"}]}))
    with pytest.raises(ValueError, match="missing env or row fields"):
        load_result(bad)


def test_redact_paths_hides_machine_locations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import tempfile

    from dbench.bench.io.env import REPO_ROOT, redact_paths

    monkeypatch.setenv("DBENCH_BUILD_DIR", str(tmp_path / "bld"))
    home, tmp = str(Path.home()), tempfile.gettempdir()
    doc = {"command": f"run.py --out {home}/out", "cpp": [f"{tmp_path}/bld/bench/cpp/dbench_cpp_driver"],
           "file": f"{REPO_ROOT}/ops/catalog.py", "scratch": f"{tmp}/gv/run1", "n": 3}
    out = redact_paths(doc)
    assert out["command"] == "run.py --out ~/out"
    assert out["cpp"] == ["<build>/bench/cpp/dbench_cpp_driver"]
    assert out["file"] == "ops/catalog.py" and out["scratch"] == "<tmp>/gv/run1" and out["n"] == 3


def test_source_digest_follows_code_not_results(tmp_path: Path) -> None:
    from dbench.bench.io.env import source_digest

    (tmp_path / "ops").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "run.py").write_text("print(1)\n")
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    (tmp_path / "ops" / "k.cpp").write_text("int f();\n")
    first = source_digest(tmp_path)
    (tmp_path / "results" / "r.json").write_text("{}")
    (tmp_path / "ops" / "notes.md").write_text("docs")
    assert source_digest(tmp_path) == first  # results and docs do not count
    (tmp_path / "ops" / "k.cpp").write_text("int f(); // changed\n")
    assert source_digest(tmp_path) != first


@pytest.mark.parametrize("command", sorted(__import__("dbench.main", fromlist=["COMMANDS"]).COMMANDS))
def test_every_command_prints_its_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`dbench COMMAND --help` prints and exits 0 (argparse formats every help string only then)."""
    from dbench.main import main

    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0 and "usage" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# Every numeric option has a range, refused at parse time: a value accepted there is one the run can
# use (once: a seed every row FAILED on, a block size that overflowed, a warm-up that hung).

def _parse(*argv: str) -> Any:
    from dbench.bench.harness import cli
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES

    return cli.parse(["--scenario", "boundary", *argv], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES,
                     declarations=DECLARATIONS)


OUT_OF_RANGE = [
    ("--seed", "99999999999999999999999", "a whole number from 0 to 4294967295"),
    ("--seed", "-1", "a whole number from 0 to 4294967295"),
    ("--block-ms", "1e300", "a number of milliseconds > 0 and at most 60000"),
    ("--warmup-ms", "1e12", "a number of milliseconds > 0 and at most 60000"),
    ("--rounds", "1000001", "a whole number from 1 to 1000000"),
    ("--gpu-rounds", "0", "a whole number from 1 to 1000000"),
    ("--cpp-repetitions", "2147483648", "a whole number from 1 to 1000000"),
    ("--cpp-min-time", "10", "a number of seconds > 0 and below 10"),
    ("--time-budget", "1e300", "a number of seconds > 0 and at most 604800"),
    ("--precision", "1", "a number between 0 and 1 (exclusive)"),
    ("--pin-cores", "99999999999", "a whole number from 0 to 65536"),
    ("--pin-offset", "99999999999", "a whole number from 0 to 65536"),
    ("--processes", "1001", "a whole number from 2 to 1000"),
    ("--pairs", "501", "a whole number from 1 to 500"),
    ("--shards", "1001", "a whole number from 1 to 1000"),
    ("--gpus", "1001", "'all' or a number of GPUs from 1 to 1000"),
    ("--shape", "65536,65536", "at most 2147483647 elements in all"),
]


@pytest.mark.parametrize(("option", "value", "expected"), OUT_OF_RANGE, ids=lambda x: str(x)[:20])
def test_a_numeric_option_out_of_its_range_is_one_line_at_parse_time(
        option: str, value: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        _parse(option, value)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"run.py: error: argument {option}: expected {expected}, got {value!r}"), err


def test_every_numeric_option_has_a_range_tested_here() -> None:
    """A numeric option added later gets its range, and a line in OUT_OF_RANGE."""
    from dbench.bench.harness import cli

    numeric = {a.option_strings[0] for a in cli.build_parser(["boundary"])._actions
               if getattr(a.type, "__name__", "").startswith(("a number", "a whole number"))}
    tested = {option for option, _, _ in OUT_OF_RANGE}
    assert numeric and numeric <= tested, numeric - tested
    assert tested - numeric == {"--gpus", "--shape"}  # their own converters, ranged too


def test_the_top_of_every_range_is_accepted() -> None:
    args = _parse("--seed", "4294967295", "--block-ms", "60000", "--warmup-ms", "60000", "--rounds", "1000000",
                  "--cpp-min-time", "9.5", "--time-budget", "604800", "--shape", "2147483647", "--list")
    assert (args.seed, args.block_ms, args.warmup_ms, args.rounds, args.shape) == \
        (4294967295, 60000.0, 60000.0, 1000000, [(2147483647,)])


def test_the_largest_seed_times_every_row(run_main: Any, tmp_path: Path) -> None:
    """torch's generators and the C++ driver (an unsigned 32-bit seed) both take it: no row FAILED."""
    assert run_main.main(["--scenario", "boundary", "--device", "cpu", "--ops", "noop", "--variants", "raw,cpp",
                          "--modes", "inference", "--rounds", "2", "--block-ms", "0.2", "--cpp-repetitions", "2",
                          "--cpp-min-time", "0.001", "--no-pin", "--seed", "4294967295", "--out", str(tmp_path)]) == 0
    (path,) = (p for p in tmp_path.glob("*.json") if not p.name.endswith(".gbench.json"))
    rows = load_result(path)["rows"]
    assert {r["driver"] for r in rows} == {"python", "cpp"} and all(r["status"] == "ok" for r in rows), rows


@pytest.mark.slow
def test_the_largest_seed_wraps_in_a_repeated_run(run_main: Any, tmp_path: Path) -> None:
    """Process k gets the seed N + k: past the top it wraps, so no child is refused its --seed."""
    assert run_main.main(["--scenario", "boundary", "--device", "cpu", "--ops", "noop", "--variants", "raw",
                          "--modes", "inference", "--rounds", "2", "--block-ms", "0.2", "--no-cpp", "--no-pin",
                          "--processes", "2", "--seed", "4294967295", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("*.json")
    assert [p["seed"] for p in load_result(path)["env"]["processes"]] == [4294967295, 0]


def test_list_creates_nothing(run_main: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """--list prints and stops: no ./dbench-results (in the checkout, when run there)."""
    monkeypatch.chdir(tmp_path)
    assert run_main.main(["--list"]) == 0
    assert "boundary" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_dbench_without_a_command_is_a_usage_error_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.main import main

    for argv, what in (([], "no command given"), (["bogus"], "unknown command 'bogus'"), ([""], "unknown command ''")):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith(f"dbench: error: {what}; one of run, list"), captured
        assert len(captured.err.splitlines()) == 1
    assert main(["--help"]) == 0 and capsys.readouterr().out.startswith("usage: dbench COMMAND")


def test_an_op_files_folder_is_redacted_in_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An --op file outside every named place (checkout, temp, home): its folder is written <op>/."""
    import tempfile

    from dbench.bench.io.env import redact_paths
    from dbench.ops import declare, specs

    folders: set[str] = set()
    for module in (specs, declare):
        monkeypatch.setattr(module, "USER_OP_FOLDERS", folders)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "elsewhere"))  # tmp_path stands for a machine path
    op = tmp_path / "team ops" / "my_ops.py"
    op.parent.mkdir()
    op.write_text("import torch\nfrom dbench import Op\n"
                  "redacted_op = Op(name='redacted_op', forward=lambda x: x.clone())\n")
    assert [c.name for c in declare.load(f"{op}:redacted_op")] == ["redacted_op"]
    command = f"run.py --op {op}:redacted_op --shape 4"
    assert redact_paths({"command": command}) == {"command": "run.py --op <op>/my_ops.py:redacted_op --shape 4"}
    folders.add("/")  # an op in the root folder: never every "/" replaced
    assert redact_paths("/usr/lib/x") == "/usr/lib/x"


def test_a_missing_native_build_is_one_line_on_stderr(tmp_path: Path) -> None:
    """DBENCH_BUILD_DIR naming no build (once: its error went to stdout): a refusal, exit 2."""
    import os

    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--device", "cpu",
                           "--ops", "noop", "--variants", "raw", "--rounds", "2", "--no-cpp", "--no-pin",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DBENCH_BUILD_DIR": str(tmp_path / "no-build")})
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"run.py: error: {tmp_path}/no-build/lib/_dbench_raw.so not found: build the "
                                "native libraries first"), proc.stderr
    assert "not found" not in proc.stdout and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------
# The analysis commands check their options as run.py does (once: `nights --seed -1` a traceback,
# `--nights 10^23` a hang, an empty --out the current folder, `gate --require ,` and `figures --kinds
# cpu,cpu` accepted): the same converters (bench/harness/cli.py), one line and exit 2 at parse time.

GOLDEN = ROOT / "tests" / "golden"
GATE_FILES = (str(GOLDEN / "gate-new.json"), str(GOLDEN / "gate-base.json"))
A_RESULT = str(GOLDEN / "boundary-small-a.json")
COMMAND_LINES = {  # a good command line of each, a bad value is added to (parsing stops before any file is read)
    "gate": GATE_FILES, "nights": GATE_FILES, "report": (A_RESULT,), "export": (A_RESULT, "--format", "bencher"),
    "figures": (A_RESULT, "--out", "figs"), "compare": GATE_FILES, "history": (str(GOLDEN),),
    "calibrate": GATE_FILES + ("--out", "cal.json"),
}
SEED_RANGE = "a whole number from 0 to 4294967295"
ANALYSIS_REFUSALS = [
    ("nights", ("--seed", "-1"), f"argument --seed: expected {SEED_RANGE}, got '-1'"),
    ("nights", ("--seed", "99999999999999999999999"), f"argument --seed: expected {SEED_RANGE}, got '9999"),
    ("nights", ("--nights", "99999999999999999999999"), "argument --nights: expected a whole number from 1 to 10000"),
    ("nights", ("--nights", "0"), "argument --nights: expected a whole number from 1 to 10000, got '0'"),
    ("nights", ("--nights", "2.5"), "argument --nights: expected a whole number from 1 to 10000, got '2.5'"),
    ("nights", ("--pairs", "1"), "argument --pairs: expected a whole number from 2 to 500, got '1'"),
    ("nights", ("--pairs", "501"), "argument --pairs: expected a whole number from 2 to 500, got '501'"),
    ("nights", ("--injected-pairs", "nan"), "argument --injected-pairs: expected a whole number from 2 to 500"),
    ("nights", ("--require", ""), "argument --require: expected one or more comma-separated names, got an empty"),
    ("nights", ("--require", "gpu,gpu"), "argument --require: 'gpu' given more than once"),
    ("gate", ("--require", ""), "argument --require: expected one or more comma-separated names, got an empty"),
    ("gate", ("--require", ","), "argument --require: expected one or more comma-separated names, got an empty"),
    ("gate", ("--require", "gpu,"), "argument --require: empty name in 'gpu,'"),
    ("figures", ("--kinds", "cpu,cpu"), "argument --kinds: 'cpu' given more than once"),
    ("figures", ("--kinds", ","), "argument --kinds: expected one or more comma-separated names, got an empty"),
    ("figures", ("--history-mode", "bogus"), "argument --history-mode: invalid choice: 'bogus' (choose from "
                                             "'inference', 'no_grad'"),
    ("figures", ("--history-mode", ""), "argument --history-mode: invalid choice: ''"),
]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """`dbench ARGV` in this process: exit 2 with one line on stderr (returned), nothing on stdout."""
    from dbench.main import main

    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert done.value.code == 2 and err.count("\n") == 1 and not out, (out, err)
    return err


@pytest.mark.parametrize(("command", "bad", "expected"), ANALYSIS_REFUSALS,
                         ids=[f"{c} {' '.join(map(repr, bad))}" for c, bad, _ in ANALYSIS_REFUSALS])
def test_an_analysis_option_out_of_its_range_is_one_line_at_parse_time(
        command: str, bad: tuple[str, ...], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    err = _refused([command, *COMMAND_LINES[command], *bad], capsys)
    assert err.startswith(f"dbench {command}: error: {expected}"), err
    assert list(tmp_path.iterdir()) == []


# Every path option and argument: (command, the line with '' in its place).
EMPTY_PATHS = [
    ("gate", ("", GATE_FILES[1])), ("gate", (GATE_FILES[0], "")), ("gate", (*GATE_FILES, "--calibration", "")),
    ("nights", ("",)), ("nights", (*GATE_FILES, "--out", "")), ("nights", (*GATE_FILES, "--calibration", "")),
    ("nights", (*GATE_FILES, "--injected", "")), ("nights", ("plot", GATE_FILES[0], "--out", "")),
    ("nights", ("plot", "", "--out", "x.png")),
    ("report", ("",)), ("export", ("", "--format", "bencher")),
    ("export", (A_RESULT, "--format", "bencher", "--out", "")),
    ("figures", (A_RESULT, "--out", "")), ("figures", ("", "--out", "figs")),
    ("compare", ("", GATE_FILES[1])), ("compare", (*GATE_FILES, "--csv", "")),
    ("history", ("",)), ("history", (str(GOLDEN), "--plot", "")),
    ("calibrate", ("", "--out", "cal.json")), ("calibrate", (GATE_FILES[0], "--out", "")),
    ("calibrate", (GATE_FILES[0], "--out", "cal.json", "--injected", "")),
    ("run", ("--scenario", "boundary", "--out", "")), ("run", ("--scenario", "boundary", "--baseline", " ")),
]


def _empty_at(command: str, line: tuple[str, ...]) -> str:
    """A test id: the command and the option (or argument's position) given ''."""
    i = next(i for i, arg in enumerate(line) if not arg.strip())
    command += " plot" if line[0] == "plot" else ""
    return f"{command} {line[i - 1] if i and line[i - 1].startswith('--') else f'argument {i + 1}'}"


@pytest.mark.parametrize(("command", "line"), EMPTY_PATHS, ids=[_empty_at(*case) for case in EMPTY_PATHS])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(
        command: str, line: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    err = _refused([command, *line], capsys)
    assert ": expected a non-empty path, got '" in err, err
    assert err.startswith(f"dbench {command}") and "error:" in err, err
    assert list(tmp_path.iterdir()) == []  # figures --out '' wrote its PNGs here


def test_every_path_option_takes_the_shared_converter() -> None:
    """A path option added later is refused empty too: none is parsed with a bare Path."""
    sources = [ROOT / "bench" / "harness" / "cli.py", *sorted((ROOT / "analysis").glob("*.py"))]
    bare = [p.name for p in sources if "type=Path" in p.read_text()]
    assert bare == []


def _status(command: Callable[[list[str]], int], argv: list[str]) -> Any:
    try:
        return command(argv)
    except SystemExit as exc:  # argparse's errors leave through the parser
        return exc.code


@pytest.mark.parametrize(("argv", "prog"), [
    (["run", "--scenario", "boundary", "--no-such-option"], "dbench run"),  # argparse's own
    (["run", "--scenario", "no_such_scenario"], "dbench run"),  # the checks after parsing
    (["run", "--scenario", "boundary", "--op", "OPS:absent"], "dbench run"),  # after loading --op (run.py's print)
    (["list", "--op", "missing.py"], "dbench list"),
])
def test_dbench_run_and_list_name_the_command_typed(argv: list[str], prog: str, run_main: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`dbench run` / `dbench list` messages say so, not run.py (which a pip user never typed); run.py's
    own are unchanged afterwards, in the same process."""
    from dbench.main import main

    ops = tmp_path / "ops.py"
    ops.write_text("x = 1\n")
    argv = [a.replace("OPS", str(ops)) for a in argv]
    assert _status(main, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: ") and f"(see {prog} --help)" in err, err
    assert "run.py" not in err
    assert _status(run_main.main, argv[1:]) == 2
    assert capsys.readouterr().err.startswith("run.py: error: ")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert capsys.readouterr().out.startswith("usage: dbench run ")


def test_the_supervisor_names_the_command_typed(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A worker of `dbench run` killed by a signal: the supervisor's line names `dbench run` (set before it forks)."""
    import signal

    from dbench.bench.harness import common, supervisor

    monkeypatch.setattr(common, "PROG", "dbench run")
    assert supervisor._killed(signal.SIGSEGV, []) == common.EXIT_FAILED
    assert capsys.readouterr().err == "dbench run: error: the run was killed by signal SIGSEGV; no result written\n"


def test_a_signal_after_the_result_was_written_names_that_result(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A worker stopped after its run wrote a final status (a timeout during the interpreter's exit):
    the line names the complete file, not "no result written", and leaves the file as it was."""
    import signal

    from dbench.bench.harness import common, supervisor

    done, running = tmp_path / "done.json", tmp_path / "running.json"
    done.write_text(json.dumps({"status": "complete", "config": {}, "rows": []}))
    running.write_text(json.dumps({"status": "running", "config": {}, "rows": []}))
    assert supervisor._killed(signal.SIGTERM, [done]) == common.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "no result written" not in err and "done.json (written before the signal" in err, err
    assert json.loads(done.read_text())["status"] == "complete"
    supervisor._killed(signal.SIGTERM, [running, done])
    err = capsys.readouterr().err
    assert "running.json (status interrupted)" in err and "done.json (written before the signal" in err, err


@pytest.mark.parametrize("later", [
    ["--op", "ops.py:nothing"],  # refused once the op file is read, after the folder was checked
    ["--ops", "no_such_op"],  # refused by the names' check
])
def test_a_refused_run_leaves_no_folder_behind(tmp_path: Path, later: list[str]) -> None:
    (tmp_path / "ops.py").write_text("from dbench import Op\nx2 = Op(name='x2', forward=lambda x: x * 2)\n")
    for out in ([], ["--out", str(tmp_path / "deep" / "er")]):
        done = run_py("--scenario", "boundary", "--device", "cpu", *later, *out, cwd=tmp_path)
        assert done.returncode == 2 and "run.py: error:" in done.stderr, done.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.py"], list(tmp_path.iterdir())
    kept = tmp_path / "kept"
    kept.mkdir()
    done = run_py("--scenario", "boundary", "--device", "cpu", "--op", "ops.py:nothing", "--out", str(kept),
                  cwd=tmp_path)
    assert done.returncode == 2 and kept.is_dir()  # a folder that was there stays


def test_a_later_refused_run_removes_only_its_own_folders(tmp_path: Path) -> None:
    """Several runs in one process (the API): a run's checks start from no made folder, so a later
    refusal never removes (even empty) folders an earlier run made and kept."""
    from dbench.bench.harness import cli

    first = tmp_path / "first" / "out"
    _parse("--device", "cpu", "--out", str(first))
    assert first.is_dir() and cli.MADE_FOLDERS == [(first, tmp_path / "first")]
    with pytest.raises(SystemExit):
        _parse("--device", "cpu", "--ops", "no_such_op", "--out", str(tmp_path / "second"))
    cli.remove_made_folders()  # what a refused run does
    assert first.is_dir()


@pytest.mark.parametrize("argv, said", [
    (["--scenario", "launch", "--axis", "size"], "expected NAME=VALUE[,VALUE...] such as size=4096,65536"),
    (["--scenario", "launch", "--axis", "size="], "expected one or more comma-separated names"),
    (["--scenario", "launch", "--axis", "sizes=256"], "scenario launch has no axis 'sizes' (its axes: size)"),
    (["--scenario", "boundary", "--axis", "size=256"], "scenario boundary has no axis 'size' (it has none)"),
    (["--scenario", "launch", "--axis", "size=256,99"], "size 99 is not among launch's values here (1, 16, 256,"),
])
def test_an_axis_the_scenario_does_not_have_is_refused_before_any_work(tmp_path: Path, argv: list[str],
                                                                      said: str) -> None:
    done = run_py(*argv, "--device", "cpu", "--ops", "muladd", "--quick", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_list_shows_each_scenarios_axes(tmp_path: Path) -> None:
    done = run_py("--list", cwd=tmp_path)
    assert done.returncode == 0 and "axes (--axis)" in done.stdout
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("roofline"))
    assert "size, cache" in line, line


OTHER_COMMANDS = sorted(set(__import__("dbench.main", fromlist=["COMMANDS"]).COMMANDS) - {"run", "list"})


@pytest.mark.parametrize("command", OTHER_COMMANDS)
def test_every_other_command_names_the_command_typed(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`dbench gate --no-such-option`: its usage error and help say `dbench gate`, not the module a pip
    user never typed."""
    from dbench.main import main

    assert _status(main, [command, "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dbench {command}") and "error:" in err and "python -m" not in err, err
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert capsys.readouterr().out.startswith(f"usage: dbench {command}")


def test_an_analysis_error_after_parsing_names_the_command_typed(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.main import main

    assert main(["gate", str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().err.startswith("dbench gate: error: ")
