"""bench/cpp (dbench_cpp_driver) and bench/cpp_results.py: JSON -> rows, and short real runs on the CPU.

The driver is built by scripts/setup.sh with the rest of the CMake project. The
real-run tests skip only when CMake did not find Google Benchmark (then the
driver is not built by design); a missing driver in any other case fails.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench import cpp_results
from bench.cpp_results import CPP_VARIANT_NAMES, convert, driver_path, parse_name, run_cpp_driver
from bench.results import REQUIRED_ROW_FIELDS
from ops.native import build_dir

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


def test_convert_uses_the_given_device() -> None:
    rows, _ = convert(HAND_WRITTEN, device="cuda:0")
    assert {r["device"] for r in rows} == {"cuda:0"}


def test_parse_name() -> None:
    assert parse_name("l2norm/autograd/fwd_requires_grad/real_time") == ("l2norm", "autograd", "fwd_requires_grad")
    with pytest.raises(ValueError, match="not a dbench_cpp_driver benchmark"):
        parse_name("BM_Something/8")


def test_cpp_variants_do_not_collide_with_python_variants() -> None:
    from ops import VARIANT_NAMES

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
    for op in OPS:
        for variant in ("cpp_direct", "cpp_typed", "cpp_boxed", "cpp_stable_typed"):
            assert (op, variant, "inference") in got, (op, variant)
        for mode in ("inference", "fwd_requires_grad", "fwd_bwd"):
            assert (op, "cpp_autograd_typed", mode) in got, (op, mode)
    assert len(rows) == 3 * 7
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
        if row["mode"] == "inference" and row["variant"] != "cpp_direct":
            assert row["baseline"] == f"{row['op']}/cpp_direct/inference"
            assert row["delta_median"] is not None and math.isfinite(row["delta_median"])
    for op in OPS:  # recording a graph and running backward costs more than the plain forward
        assert got[(op, "cpp_autograd_typed", "fwd_bwd")]["median"] > got[(op, "cpp_direct", "inference")]["median"]
    for key in ("host_name", "num_cpus", "mhz_per_cpu", "caches", "load_avg", "library_build_type"):
        assert key in context, key
    assert context["dbench_device"] == "cpu" and context["dbench_threads"] == "1"
    assert context["dbench_command"][0] == "dbench_cpp_driver"


def test_driver_filter_selects_a_subset(driver: Path) -> None:
    rows, _ = run_cpp_driver("cpu", repetitions=2, min_time=0.001,
                             extra_args=["--benchmark_filter=^muladd/(direct|typed|boxed)/", "--dbench_no_pin"],
                             timeout=120)
    assert sorted(r["variant"] for r in rows) == ["cpp_boxed", "cpp_direct", "cpp_typed"]
    assert {r["op"] for r in rows} == {"muladd"} and all(r["status"] == "ok" for r in rows)
