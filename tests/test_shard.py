"""bench/children/shard/: the shard plan, the child command line, the merge; run.py --shards end to end."""

from __future__ import annotations

import dataclasses

import io
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.io.results import REQUIRED_ROW_FIELDS, load_result, write_result
from dbench.bench.children.shard import (
    ShardUsageError,
    default_weight,
    merge_results,
    plan_shards,
    resolve_shards,
    shard_cores,
    shard_loads,
    shard_options,
    variant_weights,
)
from dbench.bench.io.shard_merge import empty_merge
from dbench.ops.variants import MODES, SPECS, VARIANT_NAMES, Mode
from dbench.scenarios import SCENARIOS
from tests.stopping import interrupt, started

ROOT = Path(__file__).resolve().parent.parent
BOUNDARY_BASELINES = SCENARIOS["boundary"].baseline_variants
NON_BASELINE = [v for v in VARIANT_NAMES if v not in BOUNDARY_BASELINES]


# ---------------------------------------------------------------------------
# The plan.


def test_boundary_baselines_are_the_scenarios() -> None:
    assert BOUNDARY_BASELINES == ("raw", "function_raw")
    assert SCENARIOS["compile"].baseline_variants == ()


@pytest.mark.parametrize("n", range(1, 9))
def test_plan_runs_every_variant_once_and_the_baselines_everywhere(n: int) -> None:
    plan = plan_shards(VARIANT_NAMES, n, BOUNDARY_BASELINES)
    assert len(plan) == n
    for shard in plan:
        assert set(BOUNDARY_BASELINES) <= set(shard)
        assert list(shard) == [v for v in VARIANT_NAMES if v in shard], "declaration order within a shard"
        assert len(shard) > len(BOUNDARY_BASELINES), "no shard runs only the baselines"
    placed = [v for shard in plan for v in shard if v not in BOUNDARY_BASELINES]
    assert sorted(placed) == sorted(NON_BASELINE), "each non-baseline variant in exactly one shard"


@pytest.mark.parametrize("n", range(1, 9))
def test_plan_is_balanced_within_one_variant_weight_and_as_short_as_possible(n: int) -> None:
    """Loads differ by at most one variant's weight (the modes it is timed in: all five with
    autograd, the three that record nothing without), and the heaviest shard, which sets the
    wall-clock, is within one variant's weight of the lower bound (the mean load, or the heavy
    variants spread evenly)."""
    loads = shard_loads(plan_shards(VARIANT_NAMES, n, BOUNDARY_BASELINES), BOUNDARY_BASELINES)
    weights = [default_weight(v) for v in NON_BASELINE]
    assert max(loads) - min(loads) <= max(weights), loads
    heavy = sum(w == max(weights) for w in weights)
    bound = max(math.ceil(sum(weights) / n), max(weights) * math.ceil(heavy / n))
    assert bound <= max(loads) <= bound + min(weights), loads
    assert sum(loads) == sum(weights)


def test_default_weight_counts_the_modes_a_variant_runs_in() -> None:
    forward_only = sum(not Mode(m).records_graph for m in MODES)  # inference, no_grad, inference_mode
    assert default_weight("cpp_autograd") == len(MODES) == 5 and default_weight("custom_op") == forward_only == 3
    assert all(default_weight(v) == (len(MODES) if SPECS[v].differentiable else forward_only) for v in VARIANT_NAMES)


def test_plan_with_any_weights_differs_by_at_most_one_variant() -> None:
    rng = random.Random(0)
    for _ in range(200):
        names = [f"v{i}" for i in range(rng.randint(1, 30))]
        weights = {v: rng.choice([0, 1, 2, 3, 5, 8]) for v in names}
        n = rng.randint(1, 9)
        plan = plan_shards(names, n, baselines=(), weights=weights)
        loads = shard_loads(plan, (), weights)
        assert len(plan) == min(n, len(names))
        assert sorted(v for s in plan for v in s) == sorted(names)
        assert max(loads) - min(loads) <= max(weights.values()), (weights, plan)


def test_plan_is_deterministic() -> None:
    for n in (2, 3, 5):
        assert (plan_shards(VARIANT_NAMES, n, BOUNDARY_BASELINES)
                == plan_shards(list(VARIANT_NAMES), n, BOUNDARY_BASELINES))
    assert plan_shards(VARIANT_NAMES, 2, BOUNDARY_BASELINES) == [  # loads 31 and 32
        ("raw", "custom_op_autograd", "function_raw", "function_define_impl", "function_cpp", "nested_define_impl",
         "cpp", "triton_op", "aten"),
        ("raw", "define_impl", "custom_op", "autograd_key_py", "function_raw", "function_custom_op",
         "nested_custom_op", "cpp_autograd", "stable", "registered"),
    ]


def test_plan_has_no_more_shards_than_variants_to_split() -> None:
    assert (plan_shards(["raw", "define_impl", "function_raw"], 4, BOUNDARY_BASELINES)
            == [("raw", "define_impl", "function_raw")])
    assert plan_shards(["raw", "function_raw"], 3, BOUNDARY_BASELINES) == [("raw", "function_raw")]
    assert plan_shards(["cpp", "stable"], 2, BOUNDARY_BASELINES) == [("cpp",), ("stable",)], \
        "no baseline selected: none added"
    with pytest.raises(ValueError):
        plan_shards(VARIANT_NAMES, 0, BOUNDARY_BASELINES)


def test_preload_steers_work_away_from_a_busy_shard() -> None:
    plan = plan_shards(VARIANT_NAMES, 2, BOUNDARY_BASELINES, preload=[0, 20])
    loads = shard_loads(plan, BOUNDARY_BASELINES)
    assert loads[0] > loads[1] and len(plan[1]) > len(BOUNDARY_BASELINES)
    assert abs((loads[0]) - (loads[1] + 20)) <= 3


def test_variant_weights_leave_out_what_the_device_lacks() -> None:
    w = variant_weights(VARIANT_NAMES, ["noop", "muladd"], "cpu", MODES)
    assert w["triton_op"] == 0, "triton_op has no CPU case"
    assert w["cpp_autograd"] == 5 * 2 and w["cpp"] == 3 * 2 and w["function_raw"] == 5 * 2
    compile_modes = ("eager", "compiled", "cudagraph")
    assert variant_weights(["cpp"], ["noop"], "cpu", compile_modes)["cpp"] == 3


# ---------------------------------------------------------------------------
# Devices, cores, the child command line.


def test_resolve_shards() -> None:
    assert resolve_shards(None, None, None, 4) == []
    assert resolve_shards("all", None, None, 3) == ["cuda:0", "cuda:1", "cuda:2"]
    assert resolve_shards("2", None, "cuda", 8) == ["cuda:0", "cuda:1"]
    assert resolve_shards(None, 3, None, 0) == ["cpu"] * 3
    assert resolve_shards(None, 2, "cpu", 2) == ["cpu", "cpu"]
    for gpus, shards, device, count, message in [
        ("4", None, None, 2, "this machine has 2 CUDA device"),
        ("all", None, None, 0, "CUDA is not available"),
        ("two", None, None, 2, "'all' or a number"),
        ("0", None, None, 2, "at least 1"),
        ("2", None, "cuda:1", 2, "drop --device cuda:1"),
        (None, 2, "cuda", 2, "use --gpus"),
        (None, 0, None, 0, "at least 1"),
    ]:
        with pytest.raises(ShardUsageError, match=message):
            resolve_shards(gpus, shards, device, count)


def test_shard_cores_are_disjoint_and_from_the_end() -> None:
    allowed = [0, 1, 2, 3, 4, 5, 6, 7]
    assert shard_cores(allowed, 0, 1) == [7] and shard_cores(allowed, 1, 1) == [6]
    assert shard_cores(allowed, 0, 2) == [6, 7] and shard_cores(allowed, 3, 2) == [0, 1]
    assert shard_cores(allowed, 2, 0) == []
    with pytest.raises(ShardUsageError):
        shard_cores(allowed, 4, 2)


def test_shard_options_replace_device_variants_out_and_drop_gpus() -> None:
    from dbench.bench.harness.options import RunOptions

    parent = RunOptions("boundary", "cuda:0", ops=("muladd",), variants=("raw", "cpp"), rounds=5, pin_cores=2,
                        gpus="all", out=Path("results/x"))
    child = shard_options(parent, 1, "cuda:1", Path("/tmp/o/shard-1"), ("raw", "function_raw", "stable"), cpp=False)
    assert (child.device, child.variants, child.out, child.pin_offset) == (
        "cuda:1", ("raw", "function_raw", "stable"), Path("/tmp/o/shard-1"), 1)
    assert child.gpus is None and child.shard_child
    assert (child.ops, child.rounds, child.pin_cores) == (("muladd",), 5, 2)
    # the C++ driver on shard 0 only; a parent's --no-cpp holds for every shard
    assert child.no_cpp and not shard_options(parent, 0, "cuda:0", Path("o"), ("raw",), cpp=True).no_cpp
    assert shard_options(dataclasses.replace(parent, no_cpp=True), 0, "cuda:0", Path("o"), ("raw",), cpp=True).no_cpp


# ---------------------------------------------------------------------------
# Merging.


def row(op: str, variant: str, mode: str, device: str, median: float = 1.0, metric: str = "cpu_us",
        driver: str = "python") -> dict[str, Any]:
    base = {"inference": "raw"}.get(mode, "function_raw")
    return {
        "scenario": "boundary", "op": op, "variant": variant, "mode": mode, "device": device, "shape": [4, 32],
        "dtype": "float32", "driver": driver, "metric": metric, "unit": "us", "timer": "perf_counter_ns",
        "status": "ok", "reason": None, "n": 3, "median": median, "q1": median, "q3": median, "ci_low": median,
        "ci_high": median, "baseline": None if variant == base else f"{op}/{base}/{mode}",
        "delta_median": None, "samples": [median] * 3,
    }


def doc(device: str, variants: tuple[str, ...], *, status: str = "complete", rounds_done: int = 3,
        median: float = 1.0, ops: tuple[str, ...] = ("noop", "muladd"),
        extra_rows: list[dict[str, Any]] = ()) -> dict[str, Any]:
    rows = [row(op, v, m, device, median) for op in ops for v in variants for m in MODES]
    return {
        "scenario": "boundary", "status": status,
        "config": {"rounds": 3, "rounds_done": rounds_done, "seconds": 2.0 * len(variants), "stop_reason": "rounds",
                   "gpu_rounds_done": 0},
        "env": {"device": device, "torch": "x", "cpu_model": "c", "command": "run.py ...", "pinned_cpu": [7],
                "gpu_index": int(device[5:]) if device.startswith("cuda:") else None},
        "rows": rows + list(extra_rows),
    }


SHARD0 = ("raw", "define_impl", "function_raw", "cpp_autograd")
SHARD1 = ("raw", "custom_op", "function_raw", "stable")


def test_merge_takes_the_union_with_the_gpu_index_on_every_row() -> None:
    merged = merge_results([doc("cuda:0", SHARD0), doc("cuda:1", SHARD1, median=2.0)])
    keys = [(r["op"], r["variant"], r["mode"]) for r in merged["rows"]]
    want_variants = [v for v in VARIANT_NAMES if v in SHARD0 + SHARD1]
    assert keys == [(op, v, m) for op in ("noop", "muladd") for v in want_variants for m in MODES], "one-process order"
    for r in merged["rows"]:
        assert r["gpu_index"] == r["shard"] == int(r["device"][5:])
        assert all(f in r for f in REQUIRED_ROW_FIELDS) and "duplicate_baseline" not in r
    assert {r["shard"] for r in merged["rows"] if r["variant"] in BOUNDARY_BASELINES} == {0}, "shard 0's baselines"
    assert merged["status"] == "complete" and merged["config"]["shards"] == 2
    env = merged["env"]
    assert env["device"] == "cuda:0,cuda:1" and env["gpu_index"] is None
    assert [s["gpu_index"] for s in env["shards"]] == [0, 1]
    assert [s["device"] for s in env["shards"]] == ["cuda:0", "cuda:1"]
    assert env["shards"][1]["variants"] == list(SHARD1) and env["shards"][1]["status"] == "complete"
    assert "shard_warnings" not in env


def test_merge_keeps_the_other_shards_baselines_marked_as_duplicates() -> None:
    merged = merge_results([doc("cuda:0", SHARD0), doc("cuda:1", SHARD1, median=2.0), doc("cuda:2", ("raw", "cpp"))])
    dups = merged["duplicate_baseline_rows"]
    assert {(r["shard"], r["variant"]) for r in dups} == {(1, "raw"), (1, "function_raw"), (2, "raw")}
    assert all(r["duplicate_baseline"] is True and r["gpu_index"] == r["shard"] for r in dups)
    assert all(r["median"] == 2.0 for r in dups if r["shard"] == 1), "each shard's own baseline samples are kept"
    assert len(dups) == 2 * len(MODES) * 2 + 2 * len(MODES)
    identities = [(r["op"], r["variant"], r["mode"], r["metric"], r["driver"]) for r in merged["rows"]]
    assert len(identities) == len(set(identities)), "rows are unique per key"


def test_merge_of_cpu_shards_has_no_gpu_index_but_the_shard() -> None:
    merged = merge_results([doc("cpu", SHARD0), doc("cpu", SHARD1)])
    assert all(r["gpu_index"] is None and r["shard"] in (0, 1) for r in merged["rows"])
    assert merged["env"]["device"] == "cpu" and [s["gpu_index"] for s in merged["env"]["shards"]] == [None, None]


def test_merge_status_and_rounds() -> None:
    a, b = doc("cuda:0", SHARD0, rounds_done=5), doc("cuda:1", SHARD1, rounds_done=3, status="interrupted")
    merged = merge_results([a, b])
    assert merged["status"] == "interrupted" and merged["config"]["rounds_done"] == 3
    assert merged["config"]["seconds"] == max(a["config"]["seconds"], b["config"]["seconds"])
    running = doc("cuda:1", SHARD1, status="running")
    assert merge_results([a, running])["status"] == "interrupted", "a checkpoint is not a complete shard"
    failed = merge_results([a, None], [{"variants": list(SHARD0)}, {"variants": list(SHARD1), "status": "failed"}])
    assert failed["status"] == "failed" and failed["env"]["shards"][1]["status"] == "failed"
    assert failed["env"]["shards"][1]["variants"] == list(SHARD1)
    assert {r["shard"] for r in failed["rows"]} == {0}
    crashed = merge_results([a, doc("cuda:1", SHARD1)], [{}, {"status": "failed", "seconds": 9.5, "log": "l"}])
    assert crashed["status"] == "failed" and crashed["env"]["shards"][1]["seconds"] == 9.5
    assert crashed["env"]["shards"][1]["log"] == "l"
    assert {r["shard"] for r in crashed["rows"]} == {0, 1}, "a failed shard's rows are kept"
    first_missing = merge_results([None, doc("cuda:1", SHARD1)])
    assert first_missing["status"] == "failed" and {r["shard"] for r in first_missing["rows"]} == {1}
    with pytest.raises(ValueError):
        merge_results([None, None])


def test_a_failed_shard_is_a_named_failure_in_the_merged_file(tmp_path: Path) -> None:
    meta = [{"name": "shard 0 (cpu)", "status": "complete"},
            {"name": "shard 1 (cpu)", "status": "failed", "returncode": 2, "reason": "exit 2: error: boom",
             "tail": "...\nerror: boom", "log": "x.shards/shard-1.log"}]
    merged = merge_results([doc("cpu", SHARD0), None], meta)
    assert merged["status"] == "failed" and "shard 1 (cpu) failed (exit 2: error: boom)" in merged["error"]
    assert merged["failures"] == [{"child": "shard 1 (cpu)", "returncode": 2, "reason": "exit 2: error: boom",
                                   "log": "x.shards/shard-1.log", "tail": "...\nerror: boom"}]
    assert merged["env"]["shards"][1]["reason"] == "exit 2: error: boom"
    write_result(tmp_path / "m.json", merged)  # the named failure stays beside the failed rows
    failed_row = {**row("noop", "raw", "inference", "cpu", 1.0), "status": "failed", "reason": "r"}
    write_result(tmp_path / "m.json", {**merged, "rows": [*merged["rows"], failed_row]})
    children = [f for f in load_result(tmp_path / "m.json")["failures"] if "child" in f]
    rows = [f for f in load_result(tmp_path / "m.json")["failures"] if "row" in f]
    assert [f["child"] for f in children] == ["shard 1 (cpu)"] and [f["row"] for f in rows] == ["noop/raw/inference"]


def test_a_merge_that_breaks_still_ends_the_file_with_a_final_status(tmp_path: Path) -> None:
    from rich.console import Console

    from dbench.bench.io.results import reserve_result_path
    from dbench.bench.children.shard.process import write_merged

    path = reserve_result_path(tmp_path, "boundary", "cpu-x2")
    meta = [{"name": "shard 0 (cpu)", "status": "complete"}]

    def fallback(error: str) -> dict[str, Any]:
        return {**empty_merge("boundary", "shard", meta, {}, {}), "error": error}

    with pytest.raises(KeyError):
        write_merged(path, lambda: {}["rows"], fallback, Console(file=io.StringIO()))
    doc = load_result(path)
    assert doc["status"] == "failed" and doc["error"] == "merge failed: KeyError: 'rows'"


def test_a_run_that_merged_nothing_does_not_exit_0() -> None:
    from dbench.bench.children.shard.process import Child, exit_code

    from dbench.bench.harness.options import RunOptions

    done = Child(0, "shard 0 (cpu)", "python", Path("o"), Path("l"), options=RunOptions("boundary", "cpu"))
    done.status = "complete"
    assert exit_code([done], False, []) == 1 and exit_code([done], False, [row("noop", "raw", "inference", "cpu")]) == 0


def test_a_merge_without_rows_is_failed_never_complete() -> None:
    empty = {**doc("cpu", SHARD0), "rows": []}
    merged = merge_results([empty, empty], [{"name": "shard 0 (cpu)", "status": "complete"},
                                            {"name": "shard 1 (cpu)", "status": "complete"}])
    assert merged["status"] == "failed" and merged["error"].startswith("no rows were merged")
    assert "shard 1 (cpu): complete" in merged["error"]
    nothing = empty_merge("boundary", "shard", [{"name": "shard 0 (cpu)", "status": "failed", "returncode": -9,
                                                 "reason": "exit -9, no result file: no output"},
                                                {"name": "shard 1 (cpu)", "status": "interrupted"}], {}, {})
    assert nothing["status"] == "failed" and nothing["rows"] == []
    assert nothing["error"] == ("no shard wrote a result: shard 0 (cpu): exit -9, no result file: no output; "
                                "shard 1 (cpu): interrupted")
    assert [f["child"] for f in nothing["failures"]] == ["shard 0 (cpu)"]


def test_merge_flags_a_row_paired_with_a_baseline_its_shard_did_not_run() -> None:
    merged = merge_results([doc("cpu", SHARD0), doc("cpu", ("custom_op", "stable"))])
    assert any("shard 1: noop/custom_op/inference is paired with noop/raw/inference" in w
               for w in merged["env"]["shard_warnings"])


def test_merge_keeps_gpu_and_cpp_rows_after_the_cpu_rows() -> None:
    gpu = [row("noop", "cpp_autograd", "inference", "cuda:0", metric="gpu_us")]
    cpp = [row("noop", "cpp_direct", "inference", "cuda:1", driver="cpp")]
    merged = merge_results([doc("cuda:0", SHARD0, ops=("noop",), extra_rows=gpu),
                            doc("cuda:1", SHARD1, ops=("noop",), extra_rows=cpp)])
    tail = [(r["metric"], r["driver"], r["gpu_index"]) for r in merged["rows"][-2:]]
    assert tail == [("gpu_us", "python", 0), ("cpu_us", "cpp", 1)]


def test_a_merged_document_is_a_result_file(tmp_path: Path) -> None:
    merged = merge_results([doc("cpu", SHARD0), doc("cpu", SHARD1)])
    path = tmp_path / "merged.json"
    csv = write_result(path, merged)
    loaded = load_result(path)
    assert loaded["rows"] == json.loads(json.dumps(merged["rows"]))
    header = csv.read_text().splitlines()[0].split(",")
    assert "shard" in header and "gpu_index" in header and "samples" not in header


# ---------------------------------------------------------------------------
# run.py --shards, end to end (CPU). Turned on once run.py has --shards.


def run_py(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT, check=False)


def keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["op"], r["variant"], r["mode"], r["device"], r["driver"], r["metric"]) for r in rows]


@pytest.mark.slow
def test_sharded_cpu_run_writes_the_rows_of_a_one_process_run(tmp_path: Path) -> None:
    common = ["--scenario", "boundary", "--ops", "noop", "--rounds", "3", "--block-ms", "0.5", "--no-cpp"]
    one = run_py(*common, "--device", "cpu", "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr + one.stdout
    proc = run_py(*common, "--shards", "2", "--out", str(tmp_path / "sharded"))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (single,) = (tmp_path / "one").glob("*.json")
    (merged_path,) = (tmp_path / "sharded").glob("*.json")  # one merged file; the shards' own are in a subfolder
    reference, merged = load_result(single), load_result(merged_path)
    assert merged["status"] == "complete" and merged["config"]["rounds_done"] == 3
    assert keys(merged["rows"]) == keys(reference["rows"]), "same rows, same order"
    assert all(r["shard"] in (0, 1) and r["gpu_index"] is None for r in merged["rows"])
    assert {r["shard"] for r in merged["rows"]} == {0, 1}
    for got, want in zip(merged["rows"], reference["rows"]):
        assert set(got) - set(want) == {"shard", "gpu_index"}
        assert ((got["status"], got["baseline"], len(got["samples"]))
                == (want["status"], want["baseline"], len(want["samples"])))
        assert (got["delta_median"] is None) == (want["delta_median"] is None)
    shards = merged["env"]["shards"]
    assert [s["status"] for s in shards] == ["complete", "complete"]
    assert len({tuple(s["pinned_cpu"] or ()) for s in shards}) == 2
    # Its paths written as every result's (bench.io.env.redact_paths: tmp_path is in the temp folder).
    assert all(s["log"].startswith("<tmp>/") and (merged_path.with_suffix(".shards") / Path(s["log"]).name).exists()
               for s in shards), shards
    assert {r["variant"] for r in merged["duplicate_baseline_rows"]} == set(BOUNDARY_BASELINES)
    assert "noop: CPU µs/call" in proc.stdout and "wall-clock" in proc.stdout
    assert "shard 1 (cpu) complete" in proc.stdout


@pytest.mark.slow
def test_a_failed_shard_is_reported_with_its_log(tmp_path: Path) -> None:
    env = {**os.environ, "DBENCH_BUILD_DIR": str(tmp_path / "no-build")}
    proc = run_py("--scenario", "boundary", "--ops", "noop", "--rounds", "1", "--no-cpp", "--shards", "2",
                  "--out", str(tmp_path), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # the children's exit status (native build missing)
    assert "shard 0 (cpu) failed" in proc.stdout and "shard 1 (cpu) failed" in proc.stdout
    assert "no-build" in proc.stdout, "the tail of the failed shard's log names the problem"
    (path,) = tmp_path.glob("*.json")  # each child wrote a failed result: merged, nothing measured
    doc = json.loads(path.read_text())
    assert doc["status"] == "failed" and doc["rows"] == []
    assert [s["status"] for s in doc["env"]["shards"]] == ["failed", "failed"]
    # each failed child is named, with its exit status and the tail of its output
    assert [(f["child"], f["returncode"]) for f in doc["failures"]] == [("shard 0 (cpu)", 2), ("shard 1 (cpu)", 2)]
    # (the build folder written <build>/, as in every result's paths)
    assert all("<build>/lib/_dbench_raw.so not found" in f["tail"] and f["reason"].startswith("exit 2: ")
               for f in doc["failures"])
    assert "shard 0 (cpu) failed (exit 2: " in doc["error"]


def test_more_shards_than_cores_to_pin_them_to_is_an_error(tmp_path: Path) -> None:
    # Two shards of `cores` cores each: more than allowed on any machine. (Asking for cores + 1
    # shards does not do it where there are more cores than variants: the plan makes fewer shards.)
    cores = len(os.sched_getaffinity(0))
    proc = run_py("--scenario", "boundary", "--shards", "2", "--pin-cores", str(cores), "--ops", "noop",
                  "--out", str(tmp_path))
    assert proc.returncode == 2 and "cores" in proc.stderr and "--no-pin" in proc.stderr, proc.stdout + proc.stderr


def _rounds_done(path: Path) -> int:
    """A shard's checkpointed rounds; 0 while its file is only reserved (created empty, not yet written)."""
    try:
        return int(json.loads(path.read_text())["config"].get("rounds_done") or 0)
    except ValueError:
        return 0


@pytest.mark.slow
def test_interrupting_a_sharded_run_merges_what_the_shards_finished(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--ops", "noop", "--variants",
           "raw,cpp,stable,function_raw", "--rounds", "100000", "--block-ms", "0.2", "--no-cpp", "--shards", "2",
           "--out", str(tmp_path)]
    deadline = time.monotonic() + 60
    with started(cmd, cwd=ROOT) as proc:
        while time.monotonic() < deadline:  # both shards have checkpointed at least one round
            done = [_rounds_done(p) for p in tmp_path.glob("*.shards/shard-*/*.json")]
            if len(done) == 2 and min(done) >= 1:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the shards did not start")
        _, _, merged = interrupt(proc, tmp_path, timeout=60)
    assert merged["status"] == "interrupted" and merged["config"]["rounds_done"] >= 1
    assert [s["status"] for s in merged["env"]["shards"]] == ["interrupted", "interrupted"]
    assert {r["shard"] for r in merged["rows"]} == {0, 1}
