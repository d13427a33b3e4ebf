"""run.py: argument errors name the valid choices and exit non-zero; a short real run writes a complete result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dbench.bench.results import REQUIRED_ROW_FIELDS, load_result
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
    proc = run_py("--scenario", "boundary", "--device", "cpu", "--ops", "muladd", "--variants", "raw,define_impl,function_raw,cpp_autograd",
                  "--rounds", "3", "--block-ms", "0.5", "--no-cpp", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (json_path,) = tmp_path.glob("boundary-cpu-*.json")
    doc = load_result(json_path)
    assert doc["status"] == "complete" and doc["config"]["rounds_done"] == 3
    phases = doc["config"]["phase_seconds"]  # where the run's time went (no GPU pass, no C++ here)
    assert list(phases) == ["start", "build", "cpu_rounds"] and all(v >= 0 for v in phases.values())
    assert phases["cpu_rounds"] >= 0.9 * doc["config"]["seconds"]
    env = doc["env"]
    for key in ("time", "git", "command", "torch", "torch_git", "cuda_runtime", "cuda_driver", "python", "hostname", "cpu_model"):
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

    from dbench.bench.env import REPO_ROOT, redact_paths

    monkeypatch.setenv("DBENCH_BUILD_DIR", str(tmp_path / "bld"))
    home, tmp = str(Path.home()), tempfile.gettempdir()
    doc = {"command": f"run.py --out {home}/out", "cpp": [f"{tmp_path}/bld/bench/cpp/dbench_cpp_driver"],
           "file": f"{REPO_ROOT}/ops/catalog.py", "scratch": f"{tmp}/gv/run1", "n": 3}
    out = redact_paths(doc)
    assert out["command"] == "run.py --out ~/out"
    assert out["cpp"] == ["<build>/bench/cpp/dbench_cpp_driver"]
    assert out["file"] == "ops/catalog.py" and out["scratch"] == "<tmp>/gv/run1" and out["n"] == 3


def test_source_digest_follows_code_not_results(tmp_path: Path) -> None:
    from dbench.bench.env import source_digest

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
