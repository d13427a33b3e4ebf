"""The C++ pass: the scenario's ops called from C++ (the Google Benchmark driver), as rows with driver
"cpp", and on a CUDA device its GPU rows from a second run of the driver under CUPTI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from dbench.bench.harness.gpu_turn import gpu_turn

if TYPE_CHECKING:
    from dbench.bench.io.cpp_results import CppRequest
    from dbench.bench.harness.options import RunOptions


def cpp_section(device: str, request: CppRequest, options: RunOptions, env: dict[str, Any],
                console: Any, json_path: Path, gpu: bool = True,
                waited: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The scenario's ops called from C++ (Google Benchmark driver), as rows with driver "cpp"; the
    driver's own JSON stays beside the result file (bench.io.cpp_results.gbench_path). In the grouped
    order (--order) the driver runs --cpp-repetitions rounds of --cpp-min-time blocks, a case beside
    its floor; shuffled, Google Benchmark's randomly interleaved repetitions. `gpu`: on a CUDA
    device, also the driver's GPU pass (a scenario that makes a GPU pass; cpp_gpu_section).

    A driver that is not built is skipped (said on the console and in env); one that crashes,
    exits non-zero or writes unreadable JSON gives FAILED rows, with its output's tail in env.
    """
    from dbench.bench.io.cpp_results import CppDriverFailed, CppDriverMissing, failed_rows, gbench_path, run_cpp_driver

    ops = request.ops
    extra_args = _driver_args(request, options)
    if extra_args is None:
        why = f"--modes {','.join(options.modes or ())}: the driver times {', '.join(request.modes)} only"
        console.print(f"C++ driver skipped: {why}")
        env["cpp_driver_context"] = {"skipped": why}
        return []
    console.print(f"C++ driver: {_listed(ops)} on {device}")
    try:
        rows, env["cpp_driver_context"] = run_cpp_driver(
            device, repetitions=options.cpp_repetitions, min_time=options.cpp_min_time, extra_args=extra_args,
            keep=gbench_path(json_path), op_keys=request.op_keys,
            rounds=options.order == "grouped", seed=options.seed,
        )
    except CppDriverMissing as exc:
        console.print(f"[yellow]C++ driver skipped:[/yellow] {exc}")
        env["cpp_driver_context"] = {"skipped": str(exc)}
        return []
    except CppDriverFailed as exc:
        console.print(f"[red]C++ driver FAILED:[/red] {exc}")
        console.print(exc.output_tail, markup=False, highlight=False)
        env["cpp_driver_context"] = {"error": str(exc), "output_tail": exc.output_tail}
        return failed_rows(ops, device, str(exc), scenario=request.scenario)
    if gpu:
        rows += cpp_gpu_section(device, request, options, env, console, json_path, waited)
    return rows


def cpp_gpu_section(device: str, request: CppRequest, options: RunOptions, env: dict[str, Any], console: Any,
                    json_path: Path, waited: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The driver's GPU pass on a CUDA device, after its CPU run (none when that was skipped or
    failed), in the duet pair's GPU turn (bench/harness/gpu_turn.py; `waited` adds the seconds it
    waited for it)."""
    context = env.get("cpp_driver_context") or {}
    extra_args = _driver_args(request, options)
    if not device.startswith("cuda") or extra_args is None or "skipped" in context or "error" in context:
        return []
    with gpu_turn(options.gpu_turn, waited):
        return cpp_gpu_pass(device, request, extra_args, options, env, console, json_path)


def _driver_args(request: CppRequest, options: RunOptions) -> list[str] | None:
    """The driver's arguments for the request's ops in the run's modes (None: it times none of them)."""
    modes = [m for m in request.modes if options.modes is None or m in options.modes]
    if not modes:
        return None
    return [*request.driver_args, f"--benchmark_filter=^({'|'.join(request.ops)})/[^/]+/({'|'.join(modes)})(/|$)",
            *(["--dbench_no_pin"] if options.pin_cores == 0 else [])]


def _listed(ops: Sequence[str], most: int = 6) -> str:
    return ", ".join(ops) if len(ops) <= most else f"{', '.join(ops[:most])} and {len(ops) - most} more ops"


def cpp_gpu_pass(device: str, request: CppRequest, extra_args: list[str], options: Any,
                 env: dict[str, Any], console: Any, json_path: Path) -> list[dict[str, Any]]:
    """The C++ driver's GPU rows (gpu_us, kernels_per_call; CUPTI) from a separate run of it, so CUPTI's
    per-launch cost stays out of its CPU rows. CUPTI unavailable: no rows, a warning and the reason in
    env; a crashed pass: FAILED gpu_us rows."""
    from dbench.bench.io.cpp_results import (CppDriverFailed, failed_rows, gbench_path, gpu_timer_problem,
                                             run_cpp_gpu_pass)

    if options.gpu_timer != "cupti":
        env["cpp_driver_gpu_context"] = {"skipped": f"--gpu-timer {options.gpu_timer}: the C++ driver times GPU "
                                                    "with CUPTI only"}
        return []
    try:
        rows, env["cpp_driver_gpu_context"] = run_cpp_gpu_pass(device, repetitions=options.gpu_rounds,
                                                               extra_args=extra_args,
                                                               keep=gbench_path(json_path, gpu=True),
                                                               op_keys=request.op_keys)
    except CppDriverFailed as exc:
        console.print(f"[red]C++ driver GPU pass FAILED:[/red] {exc}")
        console.print(exc.output_tail, markup=False, highlight=False)
        env["cpp_driver_gpu_context"] = {"error": str(exc), "output_tail": exc.output_tail}
        return failed_rows(request.ops, device, str(exc), metric="gpu_us", scenario=request.scenario)
    problem = gpu_timer_problem(env["cpp_driver_gpu_context"])
    if problem:
        console.print(f"[yellow]warning:[/yellow] C++ driver: no GPU rows, CUPTI unavailable: {problem}")
    return rows
