"""bench/cpp (dbench_cpp_driver) and bench/io/cpp_results.py: JSON -> rows, and short real runs on the CPU.

The GPU pass (--dbench_gpu_timer=cupti): its counters -> gpu_us / kernels_per_call rows (hand-written JSON,
and a stand-in driver through run.py's C++ section); on a CUDA machine, a real GPU pass.

The driver is built by scripts/setup.sh with the rest of the CMake project. The
real-run tests skip only when CMake did not find Google Benchmark (then the
driver is not built by design); a missing driver in any other case fails.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.io import cpp_results
from dbench.bench.io.cpp_results import CPP_VARIANT_NAMES, convert, driver_path, parse_name, run_cpp_driver
from dbench.bench.core.identity import case_identity
from dbench.bench.io.results import REQUIRED_ROW_FIELDS
from dbench.ops.libraries import build_dir

OPS = ("noop", "muladd", "l2norm")
ROW_FIELDS = (*REQUIRED_ROW_FIELDS, "status", "reason", "n", "block_calls", "baseline",
              "delta_median", "delta_ci_low", "delta_ci_high", "shape", "dtype")


def _benchmark_found() -> tuple[bool, str]:
    cache = build_dir() / "CMakeCache.txt"
    if not cache.is_file():
        return True, f"{cache} missing: run `bash scripts/setup.sh` first"
    for line in cache.read_text().splitlines():
        if line.startswith("benchmark_DIR:"):
            return not line.endswith("NOTFOUND"), line
    return False, "benchmark_DIR not in the CMake cache"


@pytest.fixture(scope="module")
def driver() -> Path:
    path = driver_path()
    if not path.is_file():
        found, why = _benchmark_found()
        if not found:
            pytest.skip(f"Google Benchmark not found by CMake ({why}): dbench_cpp_driver is not built")
        pytest.fail(f"{path} is missing although Google Benchmark was found ({why}): {cpp_results.BUILD_HINT}")
    return path


# ---------------------------------------------------------------------------
# JSON -> rows, on a hand-written Google Benchmark document.


def _run(name: str, rep: int, real_time: float, unit: str = "us", iterations: int = 1000, **extra: Any) -> dict:
    return {
        "name": f"{name}/real_time", "run_name": f"{name}/real_time", "run_type": "iteration",
        "repetitions": 3, "repetition_index": rep, "threads": 1, "iterations": iterations,
        "real_time": real_time, "cpu_time": real_time, "time_unit": unit, **extra,
    }


HAND_WRITTEN = {
    "context": {"host_name": "box", "num_cpus": 2, "mhz_per_cpu": 2600, "caches": [], "load_avg": [0.1, 0.2, 0.3],
                "library_build_type": "release", "dbench_device": "cpu", "dbench_shape": "4x32",
                "dbench_dtype": "float32"},
    "benchmarks": [
        # interleaved, out of repetition order, mixed time units
        _run("muladd/typed/inference", 2, 3500.0, "ns"),
        _run("muladd/direct/inference", 0, 1.0),
        _run("muladd/typed/inference", 0, 1500.0, "ns"),
        _run("muladd/direct/inference", 2, 3.0),
        _run("muladd/direct/inference", 1, 2.0),
        _run("muladd/typed/inference", 1, 2500.0, "ns"),
        {"name": "muladd/direct/inference/real_time_median", "run_name": "muladd/direct/inference/real_time",
         "run_type": "aggregate", "aggregate_name": "median", "real_time": 99.0, "time_unit": "us", "iterations": 3},
        _run("muladd/autograd/fwd_bwd", 0, 0.01, "ms"),
        _run("muladd/autograd/fwd_bwd", 1, 0.012, "ms"),
        _run("muladd/autograd/fwd_bwd", 2, 0.011, "ms"),
        _run("muladd/stable/inference", 0, 0.0, error_occurred=True, error_message="pre-flight check failed: boom"),
    ],
}


def _by_variant(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    return {(r["op"], r["variant"], r["mode"]): r for r in rows}


def test_convert_hand_written_json() -> None:
    rows, context = convert(HAND_WRITTEN)
    got = _by_variant(rows)
    assert set(got) == {("muladd", "cpp_direct", "inference"), ("muladd", "cpp_typed", "inference"),
                        ("muladd", "cpp_autograd_typed", "fwd_bwd"), ("muladd", "cpp_stable_typed", "inference")}
    assert context["host_name"] == "box" and context["load_avg"] == [0.1, 0.2, 0.3]

    direct = got[("muladd", "cpp_direct", "inference")]
    assert direct["samples"] == [1.0, 2.0, 3.0]  # ordered by repetition_index; the aggregate is ignored
    assert (direct["median"], direct["q1"], direct["q3"], direct["n"]) == (2.0, 1.5, 2.5, 3)
    assert (direct["ci_low"], direct["ci_high"]) == (1.0, 3.0)  # n < 6: the sample range
    assert direct["baseline"] is None and direct["delta_median"] is None

    typed = got[("muladd", "cpp_typed", "inference")]
    assert typed["samples"] == [1.5, 2.5, 3.5]  # ns -> µs
    assert typed["median"] == 2.5
    assert typed["baseline"] == "muladd/cpp_direct/inference"
    assert (typed["delta_median"], typed["delta_ci_low"], typed["delta_ci_high"]) == (0.5, 0.5, 0.5)

    fwd_bwd = got[("muladd", "cpp_autograd_typed", "fwd_bwd")]
    assert fwd_bwd["samples"] == [10.0, 12.0, 11.0] and fwd_bwd["median"] == 11.0  # ms -> µs
    assert fwd_bwd["baseline"] is None  # no C++ floor with gradients

    failed = got[("muladd", "cpp_stable_typed", "inference")]
    assert failed["status"] == "failed" and failed["reason"] == "pre-flight check failed: boom"
    assert failed["samples"] == [] and failed["median"] is None and failed["n"] == 0

    for row in rows:
        assert all(f in row for f in ROW_FIELDS), set(ROW_FIELDS) - set(row)
        assert (row["driver"], row["metric"], row["unit"], row["scenario"]) == ("cpp", "cpu_us", "us", "boundary")
        assert row["device"] == "cpu" and row["shape"] == [4, 32] and row["dtype"] == "float32"
    assert [r["variant"] for r in rows] == ["cpp_direct", "cpp_typed", "cpp_stable_typed", "cpp_autograd_typed"]


def test_convert_pairs_the_rounds_schedule_by_round() -> None:
    """The rounds schedule runs each registration once (repetition_index 0): a name's runs pair by
    their order in the file, which is the order they ran in."""
    def one(name: str, real_time: float) -> dict:
        run = _run(f"{name}/iterations:1000/repeats:1", 0, real_time)
        return {**run, "repetitions": 1}

    document = {"context": {**HAND_WRITTEN["context"], "dbench_rounds": "3"}, "benchmarks": [
        one("muladd/typed/inference", 1.5), one("muladd/direct/inference", 1.0),
        one("muladd/direct/inference", 3.0), one("muladd/typed/inference", 3.25),
        one("muladd/typed/inference", 2.5), one("muladd/direct/inference", 2.0)]}
    rows, _ = convert(document)
    got = _by_variant(rows)
    typed = got[("muladd", "cpp_typed", "inference")]
    assert got[("muladd", "cpp_direct", "inference")]["samples"] == [1.0, 3.0, 2.0]
    assert typed["samples"] == [1.5, 3.25, 2.5] and typed["n"] == 3
    assert (typed["delta_median"], typed["delta_ci_low"], typed["delta_ci_high"]) == (0.5, 0.25, 0.5)
    assert typed["delta_pairing"] == cpp_results.ROUND_PAIRING
    assert convert(HAND_WRITTEN)[0][1]["delta_pairing"] == cpp_results.DELTA_PAIRING


def test_convert_uses_the_given_device() -> None:
    rows, _ = convert(HAND_WRITTEN, device="cuda:0")
    assert {r["device"] for r in rows} == {"cuda:0"}


def test_convert_keys_rows_by_the_scenario_the_driver_ran_and_the_fields_it_is_given() -> None:
    """The args scenario's driver rows: the scenario and shape the driver names in its context, and
    each op's axes and source digest from the scenario (CppRequest.op_keys), in natural op order."""
    doc = {"context": {**HAND_WRITTEN["context"], "dbench_scenario": "args", "dbench_shape": "16"},
           "benchmarks": [_run(f"args_tensor_{n}/{kind}/inference", 0, 1.0 + n)
                          for n in (16, 2) for kind in ("direct", "typed")]}
    keys = {f"args_tensor_{n}": {"arg_kind": "tensor", "arity": n, "axes": ["arg_kind", "arity"],
                                 "op_source": f"m:args_tensor_{n}@abc"} for n in (2, 16)}
    rows, _ = convert(doc, op_keys=keys)
    assert [(r["op"], r["variant"]) for r in rows] == [
        ("args_tensor_2", "cpp_direct"), ("args_tensor_2", "cpp_typed"),
        ("args_tensor_16", "cpp_direct"), ("args_tensor_16", "cpp_typed")]
    for r in rows:
        assert (r["scenario"], r["shape"], r["driver"]) == ("args", [16], "cpp")
        assert {k: r[k] for k in keys[r["op"]]} == keys[r["op"]]
    assert case_identity(rows[0]) != case_identity({**rows[0], "op_source": "m:args_tensor_2@another"})
    assert {r["scenario"] for r in convert(HAND_WRITTEN)[0]} == {"boundary"}  # a driver that names none


def test_the_driver_refuses_a_malformed_args_op_before_any_work(driver: Path) -> None:
    for flag, says in (("--dbench_args_op=args_tensor_2|two|tensor|Tensor|(Tensor x0, Tensor x1) -> Tensor",
                        "bad --dbench_args_op 'args_tensor_2|two|tensor|Tensor|(Tensor x0, Tensor x1) -> Tensor': "
                        "ARITY must be a positive integer, got 'two'"),
                       ("--dbench_args_op=args_tensor_2|2|tensor", "expected NAME|ARITY|KIND|REST|SIGNATURE"),
                       ("--dbench_args_op=args_x_2|2|x|Tensor|(Tensor x0, Tensor x1) -> Tensor", "KIND must be one of"),
                       ("--dbench_args_shape=16x0", "bad --dbench_args_shape '16x0': a dimension must be a positive "
                                                    "integer, got '0'")):
        done = subprocess.run([str(driver), flag], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr and "Benchmark" not in done.stdout, done.stderr


def test_parse_name() -> None:
    assert parse_name("l2norm/autograd/fwd_requires_grad/real_time") == ("l2norm", "autograd", "fwd_requires_grad")
    with pytest.raises(ValueError, match="not a dbench_cpp_driver benchmark"):
        parse_name("BM_Something/8")


def test_cpp_variants_do_not_collide_with_python_variants() -> None:
    from dbench.ops import VARIANT_NAMES

    assert not set(CPP_VARIANT_NAMES) & set(VARIANT_NAMES)


def test_missing_driver_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "no_such_driver"
    monkeypatch.setenv("DBENCH_CPP_DRIVER", str(missing))
    with pytest.raises(cpp_results.CppDriverMissing, match="not found") as info:
        run_cpp_driver("cpu")
    assert str(missing) in str(info.value) and "cmake --build" in str(info.value)


# ---------------------------------------------------------------------------
# Real runs on the CPU (a few seconds each).


def test_bad_device_is_a_clear_error(driver: Path) -> None:
    with pytest.raises(cpp_results.CppDriverFailed, match="exited with status 2") as info:
        run_cpp_driver("tpu", repetitions=2, min_time=0.001)
    assert driver.name in str(info.value) and "--dbench_device must be cpu, cuda or cuda:N" in info.value.output_tail


def test_driver_runs_on_cpu(driver: Path) -> None:
    rows, context = run_cpp_driver("cpu", repetitions=3, min_time=0.005, timeout=120)
    got = _by_variant(rows)
    forward_only = ("inference", "no_grad", "inference_mode")
    for op in OPS:
        for variant in ("cpp_direct", "cpp_typed", "cpp_boxed", "cpp_stable_typed", "cpp_autograd_typed"):
            for mode in forward_only:
                assert (op, variant, mode) in got, (op, variant, mode)
        for mode in ("fwd_requires_grad", "fwd_bwd"):
            assert (op, "cpp_autograd_typed", mode) in got, (op, mode)
    assert len(rows) == 3 * (5 * 3 + 2)
    for row in rows:
        label = f"{row['op']}/{row['variant']}/{row['mode']}"
        assert all(f in row for f in ROW_FIELDS), (label, set(ROW_FIELDS) - set(row))
        assert row["status"] == "ok", (label, row["reason"])
        assert row["driver"] == "cpp" and row["device"] == "cpu" and row["timer"] == cpp_results.TIMER
        assert row["n"] == 3 and len(row["samples"]) == 3 and row["block_calls"] >= 1
        # a real call costs more than a few ns and (here) far less than a millisecond
        assert 0.005 < row["median"] < 1000, (label, row["median"])
        assert row["ci_low"] <= row["median"] <= row["ci_high"]
        assert row["q1"] <= row["median"] <= row["q3"]
        if row["mode"] in forward_only and row["variant"] != "cpp_direct":  # the floor of its own mode
            assert row["baseline"] == f"{row['op']}/cpp_direct/{row['mode']}"
            assert row["delta_median"] is not None and math.isfinite(row["delta_median"])
    for op in OPS:  # recording a graph and running backward costs more than the plain forward
        assert got[(op, "cpp_autograd_typed", "fwd_bwd")]["median"] > got[(op, "cpp_direct", "inference")]["median"]
    for key in ("host_name", "num_cpus", "mhz_per_cpu", "caches", "load_avg", "library_build_type"):
        assert key in context, key
    assert context["dbench_device"] == "cpu" and context["dbench_threads"] == "1"
    assert context["dbench_command"][0] == "dbench_cpp_driver"


def test_the_rounds_schedule_puts_each_case_beside_its_floor(driver: Path, tmp_path: Path) -> None:
    """--dbench_rounds: every benchmark once per round, the rounds one after another, each round's
    groups (an op's kinds in one mode) contiguous, in an order the seed fixes; rows paired by round."""
    def run(seed: int) -> tuple[list[dict], list[str]]:
        keep = tmp_path / f"seed{seed}.gbench.json"
        rows, context = run_cpp_driver(
            "cpu", repetitions=4, min_time=0.0005, timeout=120, keep=keep, rounds=True, seed=seed,
            extra_args=["--benchmark_filter=^(noop|muladd)/[^/]+/(inference|fwd_bwd)(/|$)", "--dbench_no_pin"])
        assert (context["dbench_rounds"], context["dbench_seed"]) == ("4", str(seed))
        # op/kind/mode: the calls in a block (its /iterations:N) are calibrated afresh in each run
        names = ["/".join(b["run_name"].split("/")[:3]) for b in json.loads(keep.read_text())["benchmarks"]]
        return rows, names

    rows, names = run(1)
    cases = sorted(set(names))
    assert len(cases) == 2 * 5 + 2 and len(names) == 4 * len(cases)  # 5 kinds inference, autograd fwd_bwd
    for r in range(4):
        chunk = names[r * len(cases):(r + 1) * len(cases)]
        assert sorted(chunk) == cases, f"round {r} must time every case once"
        groups = [f"{n.split('/')[0]}/{n.split('/')[2]}" for n in chunk]
        for group in set(groups):  # contiguous within the round
            at = [i for i, g in enumerate(groups) if g == group]
            assert at == list(range(at[0], at[-1] + 1)), (r, group, chunk)
    for row in rows:
        assert row["status"] == "ok" and row["n"] == 4 and row["block_calls"] >= 1, row
    typed = _by_variant(rows)[("noop", "cpp_typed", "inference")]
    assert typed["delta_pairing"] == cpp_results.ROUND_PAIRING and typed["baseline"] == "noop/cpp_direct/inference"
    assert run(1)[1] == names and run(2)[1] != names  # the seed decides the order


def test_the_rounds_schedule_is_the_cpu_runs(driver: Path) -> None:
    for flags, says in ((["--dbench_rounds=2", "--dbench_gpu_timer=cupti"], "the GPU pass"),
                        (["--dbench_rounds=0"], "bad value in --dbench_rounds=0"),
                        (["--dbench_rounds=2", "--dbench_block_time=-1"], "--dbench_block_time must lie in")):
        done = subprocess.run([str(driver), *flags], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr, done.stderr
    with pytest.raises(ValueError, match="rounds schedule"):
        run_cpp_driver("cuda", rounds=True, gpu_timer=cpp_results.GPU_PASS_TRACED)


def test_the_drivers_json_is_kept_whole_for_other_tools(driver: Path, tmp_path: Path) -> None:
    keep = tmp_path / "run.gbench.json"
    rows, context = run_cpp_driver("cpu", repetitions=2, min_time=0.001, timeout=120, keep=keep,
                                   extra_args=["--benchmark_filter=^muladd/direct/", "--dbench_no_pin"])
    document = json.loads(keep.read_text())  # google-benchmark's compare.py reads this format
    assert {"context", "benchmarks"} <= document.keys() and context["gbench_json"] == keep.name
    assert document["benchmarks"] and all(b["name"].startswith("muladd/direct") for b in document["benchmarks"])
    assert rows and all(r["status"] == "ok" for r in rows)
    # It travels with the result: no machine path in it (the driver built here is under <build>/).
    if "DBENCH_CPP_DRIVER" not in os.environ:
        assert document["context"]["executable"] == "<build>/bench/cpp/dbench_cpp_driver"
        assert str(driver.parent) not in keep.read_text()
    # A copy that cannot be written is said in the context; the rows stay.
    rows, context = run_cpp_driver("cpu", repetitions=2, min_time=0.001, timeout=120,
                                   keep=tmp_path / "missing-folder" / "x.gbench.json",
                                   extra_args=["--benchmark_filter=^muladd/direct/", "--dbench_no_pin"])
    assert rows and "could not keep" in context["gbench_json_error"]


def test_driver_filter_selects_a_subset(driver: Path) -> None:
    rows, _ = run_cpp_driver("cpu", repetitions=2, min_time=0.001,
                             extra_args=["--benchmark_filter=^muladd/(direct|typed|boxed)/inference/",
                                         "--dbench_no_pin"], timeout=120)
    assert sorted(r["variant"] for r in rows) == ["cpp_boxed", "cpp_direct", "cpp_typed"]
    assert {r["op"] for r in rows} == {"muladd"} and all(r["status"] == "ok" for r in rows)


# ---------------------------------------------------------------------------
# The GPU pass (--dbench_gpu_timer=cupti): counters -> gpu_us / kernels_per_call rows.

GPU_CONTEXT = {**HAND_WRITTEN["context"], "dbench_device": "cuda:0", "dbench_gpu_timer": "cupti"}


def _gpu_run(name: str, rep: int, gpu_us: float | None, kernels: float | None = 1.0, **extra: Any) -> dict:
    counters = {k: v for k, v in (("gpu_us", gpu_us), ("kernels_per_call", kernels)) if v is not None}
    # real_time is CUPTI-slowed wall clock: never a row of a GPU pass
    return _run(name, rep, 50.0 + rep, **counters, **extra)


GPU_PASS = {
    "context": GPU_CONTEXT,
    "benchmarks": [
        _gpu_run("muladd/direct/inference", 1, 1.25), _gpu_run("muladd/direct/inference", 0, 1.0),
        _gpu_run("muladd/direct/inference", 2, 1.5),
        _gpu_run("muladd/typed/inference", 0, 1.5), _gpu_run("muladd/typed/inference", 1, 1.75),
        _gpu_run("muladd/typed/inference", 2, 2.0),
        _gpu_run("muladd/autograd/fwd_bwd", 0, 2.5, 3.0), _gpu_run("muladd/autograd/fwd_bwd", 1, 2.75, 3.0),
        _gpu_run("muladd/autograd/fwd_bwd", 2, 3.0, 3.0),
        _gpu_run("muladd/boxed/inference", 0, None, None, error_occurred=True,
                 error_message="CUPTI: CUPTI dropped 3 activity records during the block (buffers full)"),
        {"name": "muladd/direct/inference/real_time_mean", "run_name": "muladd/direct/inference/real_time",
         "run_type": "aggregate", "aggregate_name": "mean", "real_time": 99.0, "time_unit": "us", "iterations": 3,
         "gpu_us": 99.0, "kernels_per_call": 99.0},
    ],
}


def _by_metric(rows: list[dict]) -> dict[tuple[str, str, str, str], dict]:
    return {(r["op"], r["variant"], r["mode"], r["metric"]): r for r in rows}


def test_gpu_pass_counters_become_gpu_rows() -> None:
    rows, context = convert(GPU_PASS)
    assert context["dbench_gpu_timer"] == "cupti"
    got = _by_metric(rows)
    assert {r["metric"] for r in rows} == {"gpu_us", "kernels_per_call"}  # no cpu_us row from a traced run
    assert len(rows) == 2 * 4

    direct = got[("muladd", "cpp_direct", "inference", "gpu_us")]
    assert direct["samples"] == [1.0, 1.25, 1.5]  # by repetition index; the aggregate is ignored
    assert (direct["median"], direct["n"], direct["status"]) == (1.25, 3, "ok")
    assert (direct["driver"], direct["unit"], direct["timer"], direct["device"]) == ("cpp", "us", "cupti", "cuda:0")
    assert direct["block_calls"] == 1000

    typed = got[("muladd", "cpp_typed", "inference", "gpu_us")]
    assert typed["median"] == 1.75 and typed["baseline"] == "muladd/cpp_direct/inference"
    assert (typed["delta_median"], typed["delta_ci_low"], typed["delta_ci_high"]) == (0.5, 0.5, 0.5)

    kernels = got[("muladd", "cpp_autograd_typed", "fwd_bwd", "kernels_per_call")]
    assert (kernels["median"], kernels["unit"], kernels["timer"]) == (3.0, "count", "cupti")
    assert got[("muladd", "cpp_autograd_typed", "fwd_bwd", "gpu_us")]["samples"] == [2.5, 2.75, 3.0]

    for metric in ("gpu_us", "kernels_per_call"):  # a block CUPTI could not time: FAILED, no number
        failed = got[("muladd", "cpp_boxed", "inference", metric)]
        assert failed["status"] == "failed" and "dropped 3" in failed["reason"]
        assert failed["samples"] == [] and failed["median"] is None
    for row in rows:
        assert all(f in row for f in REQUIRED_ROW_FIELDS), set(REQUIRED_ROW_FIELDS) - set(row)


def test_gpu_rows_share_the_cpu_rows_case_identity() -> None:
    from dbench.bench.core.identity import case_identity, row_identity

    cpu = _by_variant(convert(HAND_WRITTEN, device="cuda:0")[0])
    gpu = _by_metric(convert(GPU_PASS)[0])
    for (op, variant, mode, metric), row in gpu.items():
        if (op, variant, mode) not in cpu:
            continue
        twin = cpu[(op, variant, mode)]
        assert case_identity(row) == case_identity(twin)
        assert row_identity(row) != row_identity(twin) and row_identity(row)[-1] == metric
    python_row = {**gpu[("muladd", "cpp_typed", "inference", "gpu_us")], "driver": "python"}
    assert case_identity(python_row) != case_identity(gpu[("muladd", "cpp_typed", "inference", "gpu_us")])


def test_no_counter_no_gpu_rows() -> None:
    rows, _ = convert(HAND_WRITTEN)
    assert rows and {r["metric"] for r in rows} == {"cpu_us"}
    # counters in a run that did not trace (context off) are not read either
    plain = {**GPU_PASS, "context": {**GPU_CONTEXT, "dbench_gpu_timer": "off"}}
    assert {r["metric"] for r in convert(plain)[0]} == {"cpu_us"}


def test_cupti_unavailable_invents_no_rows() -> None:
    reason = "no CUDA driver: cannot load libcuda.so.1 (not found)"
    document = {"context": {**GPU_CONTEXT, "dbench_gpu_timer": "unavailable", "dbench_gpu_timer_error": reason},
                "benchmarks": [_run("muladd/direct/inference", i, 5.0) for i in range(3)]}
    rows, context = convert(document)
    assert rows == []
    assert cpp_results.gpu_timer_problem(context) == reason
    assert cpp_results.gpu_timer_problem(GPU_PASS["context"]) is None
    assert cpp_results.gpu_timer_problem(HAND_WRITTEN["context"]) is None


def test_a_repetition_without_the_counter_fails_the_row() -> None:
    document = {"context": GPU_CONTEXT,
                "benchmarks": [_gpu_run("noop/direct/inference", 0, 1.0), _gpu_run("noop/direct/inference", 1, None)]}
    rows = _by_metric(convert(document)[0])
    row = rows[("noop", "cpp_direct", "inference", "gpu_us")]
    assert row["status"] == "failed" and "repetition(s) [1]" in row["reason"] and row["samples"] == []
    assert rows[("noop", "cpp_direct", "inference", "kernels_per_call")]["status"] == "ok"


def test_unknown_gpu_pass_state_is_refused() -> None:
    with pytest.raises(ValueError, match="dbench_gpu_timer"):
        convert({"context": {"dbench_gpu_timer": "events"}, "benchmarks": []})


def test_gpu_rows_are_spelled_like_the_python_gpu_rows() -> None:
    from dbench.bench.core import gputimer
    from dbench.bench.core.rows import GPU_METRICS

    assert gputimer.GPU_METRICS is GPU_METRICS
    assert cpp_results.GPU_TIMER == gputimer.CuptiTimer.name


def test_gpu_rows_mark_gpu_bound_cpp_rows_and_get_their_own_table() -> None:
    import pandas as pd

    from dbench.analysis.table import table_data, tables
    from dbench.bench.io.results import mark_gpu_bound

    cpu, _ = convert(HAND_WRITTEN, device="cuda:0")  # direct 2 µs, typed 2.5 µs, fwd_bwd 11 µs of CPU
    gpu, _ = convert(GPU_PASS)  # direct 1.25 µs, typed 1.75 µs, fwd_bwd 2.75 µs of GPU
    slow = {**gpu[0], "variant": "cpp_stable_typed", "median": 5.0, "samples": [5.0]}  # stable: GPU 5 ≥ CPU
    rows = cpu + gpu + [slow]
    mark_gpu_bound(rows)
    flags = {r["variant"]: r["gpu_bound"] for r in rows if r["metric"] == "cpu_us" and r["mode"] == "inference"}
    assert flags == {"cpp_direct": False, "cpp_typed": False, "cpp_stable_typed": None}  # stable's CPU row failed

    frame = pd.DataFrame(rows)
    table = table_data(frame, "muladd", "gpu_us", "cpp")
    assert table is not None and table.timer == "cupti"
    assert table.variants[:3] == ["cpp_direct", "cpp_typed", "cpp_boxed"]
    fwd_bwd = table.data[(table.data["variant"] == "cpp_autograd_typed") & (table.data["mode"] == "fwd_bwd")].iloc[0]
    assert fwd_bwd["median"] == 2.75 and fwd_bwd["kernels_per_call"] == 3.0
    assert ("muladd", "cpp", "gpu_us") in [(t.op, t.driver, t.metric) for t in tables(frame)]


def test_failed_rows_of_a_crashed_gpu_pass() -> None:
    rows = cpp_results.failed_rows(["muladd"], "cuda:0", "C++ driver killed by signal 11", metric="gpu_us")
    assert [(r["metric"], r["timer"], r["status"], r["median"]) for r in rows] == [("gpu_us", "cupti", "failed", None)]


FAKE_DRIVER = """#!{python}
# A stand-in for dbench_cpp_driver: writes $FAKE_DOCUMENT (a GPU pass: $FAKE_GPU_DOCUMENT when set) where
# --benchmark_out says, with the command line it got in the context; a GPU pass exits 9 when $FAKE_GPU_CRASH is set.
import json, os, sys
gpu = "--dbench_gpu_timer=cupti" in sys.argv
if gpu and os.environ.get("FAKE_GPU_CRASH"):
    sys.exit("fake: CUPTI blew up")
doc = json.loads(os.environ.get("FAKE_GPU_DOCUMENT") if gpu and "FAKE_GPU_DOCUMENT" in os.environ
                 else os.environ["FAKE_DOCUMENT"])
doc["context"]["fake_argv"] = sys.argv[1:]
out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out="))
open(out, "w").write(json.dumps(doc))
"""


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import sys

    path = tmp_path / "dbench_cpp_driver"
    path.write_text(FAKE_DRIVER.format(python=sys.executable))
    path.chmod(0o755)
    monkeypatch.setenv("DBENCH_CPP_DRIVER", str(path))
    return path


def test_gpu_pass_runs_the_driver_with_cupti(fake_driver: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("FAKE_DOCUMENT", json.dumps(GPU_PASS))
    rows, context = cpp_results.run_cpp_gpu_pass("cuda:0", repetitions=5, extra_args=["--dbench_no_pin"])
    argv = context["fake_argv"]
    assert "--dbench_gpu_timer=cupti" in argv and "--benchmark_repetitions=5" in argv and "--dbench_no_pin" in argv
    from dbench.bench.core.runner import GPU_MIN_BLOCK_SECONDS

    assert f"--dbench_min_time={GPU_MIN_BLOCK_SECONDS}" in argv  # the Python GPU pass's block floor
    assert {r["metric"] for r in rows} == {"gpu_us", "kernels_per_call"} and len(rows) == 8

    monkeypatch.setenv("FAKE_DOCUMENT", json.dumps(HAND_WRITTEN))
    _, context = run_cpp_driver("cpu", repetitions=3)  # the plain run never asks for CUPTI
    assert not any(a.startswith("--dbench_gpu_timer") for a in context["fake_argv"])
    with pytest.raises(ValueError, match="gpu_timer"):
        run_cpp_driver("cuda", gpu_timer="events")


def _cpp_section(device: str, gpu_timer: str = "cupti", result: Path | None = None,
                 modes: tuple[str, ...] | None = None, order: str = "shuffled") -> tuple[list[dict], dict, str]:
    import io

    from rich.console import Console

    from dbench.bench.io.cpp_results import CppRequest
    from dbench.bench.harness.cpp_pass import cpp_section

    from dbench.bench.harness.options import RunOptions

    args = RunOptions(scenario="boundary", device=device, cpp_repetitions=3, cpp_min_time=0.01, pin_cores=1,
                      gpu_timer=gpu_timer, gpu_rounds=5, modes=modes, order=order, seed=4)
    out = io.StringIO()
    env: dict[str, Any] = {}
    result = result or Path(tempfile.mkdtemp()) / "boundary-cuda0-x.json"
    rows = cpp_section(device, CppRequest(("muladd",)), args, env, Console(file=out, width=300), result)
    return rows, env, out.getvalue()


def test_run_py_takes_cpu_rows_from_the_plain_run_and_gpu_rows_from_the_gpu_pass(
        fake_driver: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import json

    monkeypatch.setenv("FAKE_DOCUMENT", json.dumps({**HAND_WRITTEN, "context": {**HAND_WRITTEN["context"],
                                                                                 "dbench_device": "cuda:0"}}))
    monkeypatch.setenv("FAKE_GPU_DOCUMENT", json.dumps(GPU_PASS))
    result = tmp_path / "boundary-cuda0-20261203T000000Z-abcdef.json"
    rows, env, _ = _cpp_section("cuda:0", result=result)
    # Google Benchmark's own JSON of each pass stays beside the result, for tools that read it.
    kept = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("*.gbench*.json")}
    assert kept.keys() == {f"{result.stem}.gbench.json", f"{result.stem}.gbench-gpu.json"}
    assert kept[f"{result.stem}.gbench-gpu.json"]["benchmarks"] == GPU_PASS["benchmarks"]
    assert env["cpp_driver_context"]["gbench_json"] == f"{result.stem}.gbench.json"
    metrics = [r["metric"] for r in rows]
    assert metrics.count("cpu_us") == 4 and metrics.count("gpu_us") == 4 and metrics.count("kernels_per_call") == 4
    assert not any(a.startswith("--dbench_gpu_timer") for a in env["cpp_driver_context"]["fake_argv"])
    assert "--dbench_gpu_timer=cupti" in env["cpp_driver_gpu_context"]["fake_argv"]
    assert "--benchmark_repetitions=5" in env["cpp_driver_gpu_context"]["fake_argv"]  # --gpu-rounds

    rows, env, _ = _cpp_section("cpu")  # no GPU pass off CUDA
    assert {r["metric"] for r in rows} == {"cpu_us"} and "cpp_driver_gpu_context" not in env
    shuffled = env["cpp_driver_context"]["fake_argv"]
    assert {"--benchmark_repetitions=3", "--dbench_min_time=0.01", "--benchmark_enable_random_interleaving=true"} \
        <= set(shuffled) and not any(a.startswith("--dbench_rounds") for a in shuffled)
    # The grouped order: the CPU run in rounds (--cpp-repetitions of --cpp-min-time blocks, the run's
    # seed); the GPU pass keeps its repetitions.
    _, env, _ = _cpp_section("cuda:0", order="grouped")
    grouped, gpu = env["cpp_driver_context"]["fake_argv"], env["cpp_driver_gpu_context"]["fake_argv"]
    assert {"--dbench_rounds=3", "--dbench_block_time=0.01", "--dbench_seed=4"} <= set(grouped)
    assert not any(a.startswith(("--benchmark_repetitions", "--dbench_min_time")) for a in grouped)
    assert "--benchmark_repetitions=5" in gpu and not any(a.startswith("--dbench_rounds") for a in gpu)
    rows, env, _ = _cpp_section("cuda:0", gpu_timer="events")  # the driver has no event timer
    assert {r["metric"] for r in rows} == {"cpu_us"} and "CUPTI only" in env["cpp_driver_gpu_context"]["skipped"]


def test_run_py_without_cupti_warns_and_adds_no_gpu_rows(fake_driver: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    reason = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)"
    monkeypatch.setenv("FAKE_DOCUMENT", json.dumps(HAND_WRITTEN))
    monkeypatch.setenv("FAKE_GPU_DOCUMENT", json.dumps({**HAND_WRITTEN, "context": {
        **GPU_CONTEXT, "dbench_gpu_timer": "unavailable", "dbench_gpu_timer_error": reason}}))
    rows, env, printed = _cpp_section("cuda:0")
    assert {r["metric"] for r in rows} == {"cpu_us"}
    assert reason in printed and env["cpp_driver_gpu_context"]["dbench_gpu_timer_error"] == reason

    monkeypatch.setenv("FAKE_GPU_CRASH", "1")
    rows, env, printed = _cpp_section("cuda:0")
    failed = [r for r in rows if r["metric"] == "gpu_us"]
    assert [(r["status"], r["variant"], r["median"]) for r in failed] == [("failed", "cpp_driver", None)]
    assert "exited with status 1" in failed[0]["reason"] and "GPU pass FAILED" in printed
    assert "CUPTI blew up" in env["cpp_driver_gpu_context"]["output_tail"]


def test_gpu_timer_needs_a_cuda_device(driver: Path) -> None:
    with pytest.raises(cpp_results.CppDriverFailed, match="exited with status 2") as info:
        cpp_results.run_cpp_gpu_pass("cpu", repetitions=2, min_time=0.001, timeout=120)
    assert "--dbench_gpu_timer=cupti times GPU work: it needs --dbench_device=cuda" in info.value.output_tail
    with pytest.raises(cpp_results.CppDriverFailed, match="exited with status 2") as info:
        run_cpp_driver("cpu", repetitions=2, min_time=0.001, extra_args=["--dbench_gpu_timer=events"], timeout=120)
    assert "--dbench_gpu_timer must be cupti or off" in info.value.output_tail


def test_cpu_run_says_it_is_not_a_gpu_pass(driver: Path) -> None:
    rows, context = run_cpp_driver("cpu", repetitions=2, min_time=0.001,
                                   extra_args=["--benchmark_filter=^noop/direct/inference/", "--dbench_no_pin"],
                                   timeout=120)
    assert context["dbench_gpu_timer"] == "off" and [r["metric"] for r in rows] == ["cpu_us"]


@pytest.mark.gpu
def test_gpu_pass_on_cuda(driver: Path) -> None:
    """On a CUDA machine: the real GPU pass gives one ok gpu_us and kernels_per_call row per case."""
    import torch

    from dbench.ops.libraries import has_cuda_kernels

    if not torch.cuda.is_available() or not has_cuda_kernels():
        pytest.skip("needs a CUDA device and the dbench CUDA kernels")
    rows, context = cpp_results.run_cpp_gpu_pass("cuda", repetitions=2, extra_args=["--benchmark_filter=^muladd/"],
                                                 timeout=300)
    problem = cpp_results.gpu_timer_problem(context)
    if problem:
        pytest.skip(f"CUPTI unavailable on this GPU machine: {problem}")
    assert context["dbench_gpu_timer"] == "cupti" and context["dbench_cupti_library"]
    got = _by_metric(rows)
    assert {r["metric"] for r in rows} == {"gpu_us", "kernels_per_call"} and len(rows) == 2 * 17
    for (_op, variant, mode, metric), row in got.items():
        assert row["status"] == "ok" and row["n"] == 2, (variant, mode, row["reason"])
        assert row["timer"] == "cupti" and row["driver"] == "cpp" and row["device"].startswith("cuda")
        if metric == "gpu_us":
            assert 0 < row["median"] < 1000, (variant, mode, row["median"])  # a (4, 32) kernel: about 1 µs
        elif mode == "fwd_bwd":
            assert row["median"] >= 2, (variant, row["median"])  # forward + backward kernels
        else:
            assert row["median"] == 1.0, (variant, mode, row["median"])  # one muladd kernel per call


def test_a_folder_with_the_drivers_json_beside_its_result_still_reads_as_one_result(tmp_path: Path) -> None:
    """gate, report, --baseline and a child's latest result read results, never the companion files."""
    from dbench.bench.harness.cli import check_baseline
    from dbench.bench.io.document import result_files
    from dbench.bench.children.shard.process import latest_result
    from test_gate import make_doc, make_row

    result = tmp_path / "boundary-cpu-20261203T000000Z-abcdef.json"
    result.write_text(json.dumps(make_doc([make_row("muladd", "raw", absolute=[5.0])])))
    for gpu in (False, True):
        cpp_results.gbench_path(result, gpu=gpu).write_text(json.dumps(HAND_WRITTEN))  # written after it
    assert result_files(tmp_path) == [result]
    assert latest_result(tmp_path) == result
    assert check_baseline(tmp_path) == [result]


def test_the_cpp_section_times_the_selected_modes_it_has(fake_driver: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--modes reaches the driver as its benchmark filter; a selection of modes it lacks skips it."""
    import json

    monkeypatch.setenv("FAKE_DOCUMENT", json.dumps(HAND_WRITTEN))
    _, env, _ = _cpp_section("cpu", modes=("fwd_bwd", "inference_mode", "inference"))
    assert "--benchmark_filter=^(muladd)/[^/]+/(inference|inference_mode|fwd_bwd)(/|$)" in \
        env["cpp_driver_context"]["fake_argv"]
    _, env, _ = _cpp_section("cpu")
    assert "--benchmark_filter=^(muladd)/[^/]+/(inference|no_grad|inference_mode|fwd_requires_grad|fwd_bwd)(/|$)" \
        in env["cpp_driver_context"]["fake_argv"]
    rows, env, out = _cpp_section("cpu", modes=("compiled",))  # a mode the driver has no form of
    assert rows == [] and "C++ driver skipped: --modes compiled" in out
    assert env["cpp_driver_context"] == {"skipped": "--modes compiled: the driver times inference, no_grad, "
                                                    "inference_mode, fwd_requires_grad, fwd_bwd only"}


def test_the_drivers_gpu_pass_alone_follows_only_a_cpu_run_that_ran(tmp_path: Path) -> None:
    """A duet process runs the driver's GPU pass as its own step (bench/harness/rounds.py steps):
    none after a skipped or failed CPU run, none off CUDA, none for modes the driver does not time."""
    from dbench.bench.harness.cpp_pass import cpp_gpu_section
    from dbench.bench.harness.options import RunOptions
    from dbench.bench.io.cpp_results import CppRequest

    options = RunOptions(scenario="boundary", device="cuda:0")
    for device, context, modes in (("cuda:0", {"skipped": "not built"}, None), ("cuda:0", {"error": "exit 1"}, None),
                                   ("cpu", {}, None), ("cuda:0", {}, ("compiled",))):
        env: dict[str, Any] = {"cpp_driver_context": context}
        opts = RunOptions(scenario="boundary", device=device, modes=modes) if modes else options
        assert cpp_gpu_section(device, CppRequest(("muladd",)), opts, env, None, tmp_path / "r.json") == []
        assert env == {"cpp_driver_context": context}
