#!/usr/bin/env python3
"""Entry point: python run.py --scenario boundary [--device cpu|cuda] [...]

Phases: check the command line (no torch yet), pick the device, then one of
the four ways to run (repeated in fresh processes one after another, sharded
over processes, a scenario that makes its own table, or the interleaved rounds:
build cases, CPU rounds, GPU pass, C++ section, write, print), then, with
--baseline, the gate. A result file is reserved before any work and rewritten
after every round; whatever ends the run (its end, a failed case, Ctrl-C,
SIGTERM, an error) leaves it with a final status.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO_ROOT = Path(__file__).resolve().parent
STARTED = time.monotonic()  # the phase timings count from here (interpreter start-up excluded)
sys.path.insert(0, str(REPO_ROOT))

from bench.cli import UsageError  # noqa: E402  (torch-free)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
CHECKPOINT_SECONDS = 2.0  # the running result file is rewritten at most this often during the rounds
Outcome = tuple[int, "Path | None"]  # exit status, and the result file written (None: nothing run)


def pin_cpus(count: int, offset: int = 0) -> list[int] | None:
    """Pin to the last `count` allowed cores, skipping the last offset x count (recorded in env).

    Threads created later (CUDA driver, autograd's device thread) inherit the
    affinity. One core by default; on the H200 VM neither one core, four, nor
    no pinning removed its CPU speed states (results/h200/run-to-run).
    """
    if count <= 0 or not hasattr(os, "sched_setaffinity"):
        return None
    from bench.shard import shard_cores

    allowed = sorted(os.sched_getaffinity(0))
    # One unsharded process asking for more cores than it is allowed gets all of them.
    cpus = shard_cores(allowed, offset, min(count, len(allowed)) if offset == 0 else count)
    os.sched_setaffinity(0, set(cpus))
    return cpus


def out_folder(args: argparse.Namespace, env: dict[str, Any]) -> Path:
    from bench import env as envmod

    return args.out or REPO_ROOT / "results" / envmod.machine_slug(env)


def shown(path: Path) -> Path:
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


class GracefulStop:
    """SIGINT / SIGTERM: the first one stops the run (KeyboardInterrupt, so the runner drops its
    unfinished round), later ones are noted and ignored, so the final write cannot be cut short."""

    def __init__(self, console: Any) -> None:
        self.console, self.requested = console, False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.requested:
            # Plain stderr: rich may be in the middle of the import the first signal interrupted.
            sys.stderr.write("already stopping: writing the result\n")
            return
        self.requested = True
        raise KeyboardInterrupt


def resolve_device(args: argparse.Namespace, in_process: bool = True) -> tuple[str, list[str]]:
    """The device this process times on, and the shards' devices ([] unless --gpus / --shards).
    in_process False: child processes time it (--processes, --ab), so this one makes no CUDA context."""
    import torch

    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    shard_devices: list[str] = []
    if args.gpus is not None or args.shards is not None:
        from bench.shard import ShardUsageError, resolve_shards

        try:
            shard_devices = resolve_shards(args.gpus, args.shards, args.device, cuda_count)
        except ShardUsageError as exc:
            raise UsageError(str(exc)) from None
    device = args.device or (shard_devices[0] if shard_devices else "cuda" if cuda_count else "cpu")
    if device.startswith("cuda"):
        if not cuda_count:
            raise UsageError(f"argument --device: {device}: CUDA is not available on this machine "
                             f"(torch {torch.__version__})")
        index = int(device.partition(":")[2] or torch.cuda.current_device())
        if index >= cuda_count:
            raise UsageError(f"argument --device: {device}: this machine has {cuda_count} CUDA device(s)")
        device = f"cuda:{index}"
        if len(shard_devices) <= 1 and in_process:
            # Time cuda:N from a thread whose current device is cuda:N: no device switch inside each
            # call, so a --gpus shard on cuda:3 measures what a one-GPU run on cuda:0 measures.
            torch.cuda.set_device(torch.device(device))
    return device, shard_devices


def run_custom(scenario: Any, device: str, args: argparse.Namespace, console: Any) -> Outcome:
    """Scenarios that make their own table (e.g. timer_validation)."""
    from bench import env as envmod
    from bench.results import reserve_result_path, write_result

    env = envmod.capture(device)
    json_path = reserve_result_path(out_folder(args, env), scenario.name, device)
    doc: dict[str, Any] = {"scenario": scenario.name, "status": "running", "config": {},
                           "env": envmod.redact_paths(env), "rows": []}
    write_result(json_path, doc)
    try:
        rows, extra = scenario.custom_run(device)
    except BaseException as exc:
        write_result(json_path, {**doc, "status": "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed",
                                 "error": f"{type(exc).__name__}: {exc}"})
        raise
    env.update(extra)
    write_result(json_path, {**doc, "status": "complete", "env": envmod.redact_paths(env), "rows": rows})
    code = scenario.custom_report(rows, console)
    console.print(f"wrote {shown(json_path)}")
    return code, json_path


def cpp_section(device: str, ops: Sequence[str], args: argparse.Namespace, env: dict[str, Any],
                console: Any) -> list[dict[str, Any]]:
    """The same ops called from C++ (Google Benchmark driver), as rows with driver "cpp".

    A driver that is not built is skipped (said on the console and in env); one that crashes,
    exits non-zero or writes unreadable JSON gives FAILED rows, with its output's tail in env.
    """
    from bench.cpp_results import CppDriverFailed, CppDriverMissing, failed_rows, run_cpp_driver

    console.print(f"C++ driver: {', '.join(ops)} on {device}")
    extra_args = [f"--benchmark_filter=^({'|'.join(ops)})/", *(["--dbench_no_pin"] if args.pin_cores == 0 else [])]
    try:
        rows, env["cpp_driver_context"] = run_cpp_driver(
            device, repetitions=args.cpp_repetitions, min_time=args.cpp_min_time, extra_args=extra_args,
        )
    except CppDriverMissing as exc:
        console.print(f"[yellow]C++ driver skipped:[/yellow] {exc}")
        env["cpp_driver_context"] = {"skipped": str(exc)}
        return []
    except CppDriverFailed as exc:
        console.print(f"[red]C++ driver FAILED:[/red] {exc}")
        console.print(exc.output_tail, markup=False, highlight=False)
        env["cpp_driver_context"] = {"error": str(exc), "output_tail": exc.output_tail}
        return failed_rows(ops, device, str(exc))
    if device.startswith("cuda"):
        rows += cpp_gpu_pass(device, ops, extra_args, args, env, console)
    return rows


def cpp_gpu_pass(device: str, ops: Sequence[str], extra_args: list[str], args: argparse.Namespace,
                 env: dict[str, Any], console: Any) -> list[dict[str, Any]]:
    """The C++ driver's GPU rows (gpu_us, kernels_per_call; CUPTI) from a separate run of it, so CUPTI's
    per-launch cost stays out of its CPU rows. CUPTI unavailable: no rows, a warning and the reason in
    env; a crashed pass: FAILED gpu_us rows."""
    from bench.cpp_results import CppDriverFailed, failed_rows, gpu_timer_problem, run_cpp_gpu_pass

    if args.gpu_timer != "cupti":
        env["cpp_driver_gpu_context"] = {"skipped": f"--gpu-timer {args.gpu_timer}: the C++ driver times GPU "
                                                    "with CUPTI only"}
        return []
    try:
        rows, env["cpp_driver_gpu_context"] = run_cpp_gpu_pass(device, repetitions=args.gpu_rounds,
                                                               extra_args=extra_args)
    except CppDriverFailed as exc:
        console.print(f"[red]C++ driver GPU pass FAILED:[/red] {exc}")
        console.print(exc.output_tail, markup=False, highlight=False)
        env["cpp_driver_gpu_context"] = {"error": str(exc), "output_tail": exc.output_tail}
        return failed_rows(ops, device, str(exc), metric="gpu_us")
    problem = gpu_timer_problem(env["cpp_driver_gpu_context"])
    if problem:
        console.print(f"[yellow]warning:[/yellow] C++ driver: no GPU rows, CUPTI unavailable: {problem}")
    return rows


def show_tables(rows: list[dict[str, Any]], env: dict[str, Any], console: Any, note: str) -> None:
    import pandas as pd

    from analysis.table import print_tables

    if rows:  # none when stopped before the cases were built
        print_tables(pd.DataFrame(rows), env, console, note=note)


def case_dtypes(cases: list[Any]) -> tuple[Any, ...]:
    """The dtypes the timed cases use (their compute roofs are measured)."""
    import torch

    return tuple(getattr(torch, d) for d in dict.fromkeys(c.key["dtype"] for c in cases if c.runnable))


def plot(doc: dict[str, Any], json_path: Path, console: Any) -> None:
    """--plot: the scenario's figures beside its result file."""
    from analysis.figures import scenario_figures

    if doc["rows"]:
        for figure in scenario_figures(doc, json_path.parent, json_path.stem):
            console.print(f"figure: {shown(figure)}")


def run_rounds(scenario: Any, device: str, args: argparse.Namespace, console: Any) -> Outcome:
    """The interleaved-rounds run of one process: the table's cases, timed and written."""
    import torch

    phases: dict[str, float] = {}  # seconds per phase, in order (config.phase_seconds)
    last = STARTED

    def phase(name: str) -> None:
        nonlocal last
        now = time.monotonic()
        phases[name] = round(now - last, 2)
        last = now

    from bench import env as envmod
    from bench.gputimer import gpu_rows, make_gpu_timer
    from bench.probe import instability_note, probe_case, probe_summary
    from bench.results import case_rows, mark_gpu_bound, reserve_result_path, write_result
    from bench.identity import case_identity
    from bench.roofline import attach, measure_roofs
    from bench.runner import RunConfig, Throttled, run, run_gpu
    from ops import OP_NAMES, OPS, VARIANT_NAMES
    from ops.native import NativeBuildMissing
    from scenarios import Selection

    torch.set_num_threads(1)  # CPU kernels are single-threaded; keep the pool out of the timing
    try:
        pinned = pin_cpus(args.pin_cores, args.pin_offset)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = RunConfig(rounds=args.rounds, block_seconds=args.block_ms / 1e3, warmup_seconds=args.warmup_ms / 1e3,
                       seed=args.seed, adaptive=args.adaptive, rel_precision=args.precision,
                       max_seconds=args.time_budget)
    ops = args.ops or scenario.default_ops or OP_NAMES
    env = envmod.capture(device, {"pinned_cpu": pinned})
    warn_env(env, console)
    stop = GracefulStop(console)
    json_path = reserve_result_path(out_folder(args, env), scenario.name, device)
    cases: list[Any] = []
    extra_rows: list[dict[str, Any]] = []  # GPU and C++ rows, added after the CPU pass
    probe = probe_case()  # timed in every round beside the cases; not a row (bench/probe.py)
    run_info: dict[str, Any] = {"rounds_done": 0}
    measured: dict[str, Any] = {}  # the machine's roofs (kernel scenarios)

    def document(status: str) -> dict[str, Any]:
        rows = case_rows(cases) + extra_rows
        mark_gpu_bound(rows)
        if "roofs" in measured:
            works = {case_identity(c.key): c.work for c in cases if c.work is not None}
            attach(rows, works, measured["roofs"], "gpu_us" if device.startswith("cuda") else "cpu_us")
        return {
            "scenario": scenario.name,
            "status": status,
            "config": {**vars(config), "dtype": args.dtype, **({"cache": list(args.cache)} if scenario.roofs else {}),
                       **run_info, "phase_seconds": dict(phases)},
            "env": envmod.redact_paths(env),
            "speed_probe": probe_summary(probe.samples),
            **measured,
            "rows": rows,
        }

    status = "complete"
    phase("start")  # imports (torch, the suite), pinning, environment capture
    try:
        write_result(json_path, document("running"))
        sel = Selection(ops=ops, variants=args.variants or scenario.variants or VARIANT_NAMES, device=device,
                        dtype=getattr(torch, args.dtype), seed=args.seed, quick=args.quick, cache=tuple(args.cache),
                        explicit_ops=args.ops is not None)
        try:
            cases = scenario.build(sel)
        except NativeBuildMissing as exc:
            write_result(json_path, {**document("failed"), "error": str(exc)})
            console.print(f"[red]error:[/red] {exc}")
            return EXIT_USAGE, json_path
        console.print(f"[bold]{scenario.name}[/bold]: {len(cases)} cases ({sum(c.runnable for c in cases)} timed) "
                      f"on {device}, {config.rounds} rounds{' max' if config.adaptive else ''}")
        phase("build")  # the native build's loading, the cases and their pre-flight checks
        # After a round, the result file with every finished round, at most every few seconds
        # (summarising all rows is not free); the end of the run always writes it.
        write_running = Throttled(lambda: write_result(json_path, document("running")), CHECKPOINT_SECONDS)
        outcome = run(cases + [probe], config,
                      on_round=lambda n: (run_info.update(rounds_done=n), write_running()))
        run_info.update(stop_reason=outcome.stop_reason, seconds=round(outcome.seconds, 2),
                        timer_overhead_ns=outcome.timer_overhead_ns, gpu_rounds_done=0)
        phase("cpu_rounds")
        if outcome.stop_reason == "interrupted":
            raise KeyboardInterrupt
        if scenario.roofs and not device.startswith("cuda"):
            measured["roofs"] = measure_roofs(device, case_dtypes(cases))
        if device.startswith("cuda") and args.gpu_timer != "off":
            write_result(json_path, document("running"))
            timer = make_gpu_timer(device, prefer=args.gpu_timer)
            if timer is not None:
                try:
                    gpu_done, interrupted = run_gpu(cases, config, timer, args.gpu_rounds)
                    run_info["gpu_rounds_done"] = gpu_done
                    extra_rows.extend(gpu_rows(cases, timer))
                    if scenario.roofs and not interrupted:
                        console.print("measuring the roofs (memcpy, copy kernel, cuBLAS)")
                        measured["roofs"] = measure_roofs(device, case_dtypes(cases), timer)
                    env.update(timer.meta())
                finally:
                    timer.close()
                if interrupted:
                    raise KeyboardInterrupt
            phase("gpu_pass")
        cpp_ops = [op for op in ops if OPS[op].boundary]  # the C++ driver times the boundary ops
        if scenario.name == "boundary" and not args.no_cpp and cpp_ops:
            extra_rows.extend(cpp_section(device, cpp_ops, args, env, console))
            phase("cpp_driver")
    except KeyboardInterrupt:
        status = "interrupted"
        run_info["stop_reason"] = "interrupted"
    except BaseException as exc:  # a bug: keep what was measured, then show the traceback
        if stop.requested:  # Ctrl-C inside code that re-raised it as another error (an extension's import)
            status = "interrupted"
            run_info["stop_reason"] = "interrupted"
        else:
            write_result(json_path, {**document("failed"), "error": f"{type(exc).__name__}: {exc}"})
            console.print(f"[red]run failed; what it measured is in {shown(json_path)}[/red]")
            raise
    stop.requested = True  # from here on a signal cannot cut the write short
    doc = document(status)
    csv_path = write_result(json_path, doc)

    if scenario.report is not None:
        scenario.report(doc, console)
    else:
        show_tables(doc["rows"], env, console, scenario.table_note)
    unstable = instability_note(doc["speed_probe"])
    if unstable:
        console.print(f"[yellow]warning:[/yellow] {unstable}")
    if args.plot:
        plot(doc, json_path, console)
    console.print(f"{status}: {run_info['rounds_done']} rounds in {run_info.get('seconds', 0):.1f} s "
                  f"({run_info.get('stop_reason')})")
    console.print(f"wrote {shown(json_path)} and {csv_path.name}")
    failed = [r for r in doc["rows"] if r["status"] == "failed"]
    if failed:
        console.print(f"[red]{len(failed)} row(s) FAILED (listed above and under 'failures' in the result)[/red]")
    if status == "interrupted":
        return EXIT_INTERRUPTED, json_path
    return (EXIT_FAILED if failed else EXIT_OK), json_path


def parser_options() -> list[str]:
    """Every option string of run.py's parser (children's command lines resolve abbreviations with them)."""
    from bench.cli import build_parser
    from scenarios import SCENARIO_NAMES

    return [s for a in build_parser(SCENARIO_NAMES)._actions for s in a.option_strings]


def warn_env(env: dict[str, Any], console: Any) -> None:
    """The machine's state that makes figures move (busy CPU, other GPU processes, throttling...)."""
    from bench import env as envmod

    for line in envmod.warnings(env):
        console.print(f"[yellow]warning:[/yellow] {line}")


def run_repeated(scenario: Any, device: str, argv: Sequence[str] | None, args: argparse.Namespace,
                 console: Any) -> Outcome:
    """--processes N / --ab A B: the scenario in fresh processes, one after another, merged into one file."""
    from bench import env as envmod
    from bench.processes import run_repeated as run_in_turn
    from bench.results import load_result, reserve_result_path

    if scenario.custom_run is not None or scenario.roofs:
        why = "makes its own table" if scenario.custom_run else "derives its rates from the roofs its process measures"
        raise UsageError(f"argument {'--ab' if args.ab else '--processes'}: scenario {scenario.name} {why}; "
                         "run it in one process")
    env = envmod.capture(device)
    warn_env(env, console)
    label = f"{device.replace(':', '')}-{'ab' if args.ab else f'x{args.processes}'}"
    json_path = reserve_result_path(out_folder(args, env), scenario.name, label)
    code = run_in_turn(argv=list(sys.argv[1:] if argv is None else argv), options=parser_options(),
                       scenario=scenario, device=device, args=args, json_path=json_path, console=console,
                       show=lambda doc, note: scenario.report(doc, console) if scenario.report is not None
                       else show_tables(doc["rows"], doc["env"], console, note),
                       sides=getattr(args, "ab_sides", None))
    if args.plot:
        plot(load_result(json_path), json_path, console)
    return code, json_path


def run_sharded(scenario: Any, shard_devices: list[str], argv: Sequence[str] | None, args: argparse.Namespace,
                console: Any) -> Outcome:
    from bench import env as envmod
    from bench.results import load_result, reserve_result_path
    from bench.shard import ShardUsageError, run_sharded as run_shards
    from ops import OP_NAMES, VARIANT_NAMES

    if scenario.custom_run is not None:
        raise UsageError(f"--gpus/--shards: scenario {scenario.name} makes its own table; run it without sharding")
    label = f"{'cuda' if shard_devices[0].startswith('cuda') else 'cpu'}-x{len(shard_devices)}"
    env = envmod.capture(shard_devices[0])
    warn_env(env, console)
    options = parser_options()
    json_path = reserve_result_path(out_folder(args, env), scenario.name, label)
    try:
        code = run_shards(argv=list(sys.argv[1:] if argv is None else argv), options=options, scenario=scenario,
                          ops=args.ops or OP_NAMES, variants=args.variants or VARIANT_NAMES, devices=shard_devices,
                          args=args, json_path=json_path, console=console,
                          show=lambda rows, env, note: show_tables(rows, env, console, note))
    except ShardUsageError as exc:
        json_path.unlink(missing_ok=True)  # refused before anything ran
        raise UsageError(str(exc)) from None
    if args.plot:
        plot(load_result(json_path), json_path, console)
    return code, json_path


def gate(json_path: Path, args: argparse.Namespace, console: Any) -> int:
    """--baseline: this run's result against the baseline files, by analysis.gate; its exit status.

    The one place run.py meets the gate: it is imported here, lazily, so a checkout without it
    runs everything else and says why it cannot gate (exit 2: nothing was compared)."""
    from bench.results import ResultFileError, load_result

    try:
        from analysis import gate as gate_module
    except ModuleNotFoundError as exc:
        if exc.name != "analysis.gate":
            raise
        console.print("[red]--baseline: analysis.gate is not in this checkout, so the run was not gated[/red] "
                      f"(its result: {shown(json_path)})")
        return EXIT_USAGE
    try:
        new_docs = [load_result(json_path)]
        baseline_docs = [load_result(p) for p in args.baseline_files]
        verdict = gate_module.gate(new_docs, baseline_docs, new_sources=[str(shown(json_path))],
                                   baseline_sources=[str(shown(p)) for p in args.baseline_files])
    except (ResultFileError, ValueError) as exc:  # the gate's input errors are ValueErrors: not comparable
        console.print(f"[red]gate: {exc}[/red]", soft_wrap=True)
        return EXIT_USAGE
    render = getattr(gate_module, "render", None)
    if render is not None:
        console.print(render(verdict, "txt"), markup=False, highlight=False, soft_wrap=True)
    code = verdict if isinstance(verdict, int) else getattr(verdict, "exit_code", None)
    if not isinstance(code, int):
        raise TypeError(f"analysis.gate.gate returned {verdict!r}: expected an exit status")
    return code


def dispatch(argv: Sequence[str] | None, args: argparse.Namespace, console: Any) -> Outcome:
    """Pick the device and the way to run; run it."""
    from scenarios import SCENARIOS

    from bench.cli import apply_defaults
    from scenarios import SCENARIO_CUDA_DEFAULTS, SCENARIO_DEFAULTS

    repeated = args.processes is not None or args.ab is not None
    device, shard_devices = resolve_device(args, in_process=not repeated)
    # The defaults that waited for the device (cli.apply_defaults fills only what is still unset).
    apply_defaults(args, SCENARIO_DEFAULTS.get(args.scenario), SCENARIO_CUDA_DEFAULTS.get(args.scenario), device)
    scenario = SCENARIOS[args.scenario]
    if scenario.requires_cuda and not device.startswith("cuda"):
        import torch

        console.print(f"scenario [bold]{scenario.name}[/bold] needs a CUDA device ({scenario.description}); "
                      f"this machine has none (torch {torch.__version__}), so nothing was run.")
        return EXIT_OK, None
    if repeated:
        return run_repeated(scenario, device, argv, args, console)
    if len(shard_devices) > 1:
        return run_sharded(scenario, shard_devices, argv, args, console)
    if scenario.custom_run is not None:
        return run_custom(scenario, device, args, console)
    return run_rounds(scenario, device, args, console)


def main(argv: Sequence[str] | None = None) -> int:
    from bench import cli
    from ops.specs import OP_NAMES, VARIANT_NAMES
    from scenarios import SCENARIO_CUDA_DEFAULTS, SCENARIO_DEFAULTS, SCENARIO_NAMES, SCENARIO_OPS, SCENARIO_VARIANTS

    args = cli.parse(argv, SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, default_out=REPO_ROOT / "results",
                     scenario_variants=SCENARIO_VARIANTS, scenario_defaults=SCENARIO_DEFAULTS,
                     scenario_ops=SCENARIO_OPS, scenario_cuda_defaults=SCENARIO_CUDA_DEFAULTS)
    try:
        from rich.console import Console

        # A log keeps each message on one line; no emoji codes (a lazy import a signal could cut short).
        console = Console(soft_wrap=not sys.stdout.isatty(), emoji=False)
        code, json_path = dispatch(argv, args, console)
        if args.baseline is None or json_path is None:
            return code
        if code not in (EXIT_OK, EXIT_FAILED):
            console.print(f"[yellow]not gated: the run ended with exit {code}[/yellow]")
            return code
        return max(code, gate(json_path, args, console))  # a FAILED case is never gated away
    except UsageError as exc:
        print(f"run.py: error: {exc} (see run.py --help)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before a result file existed: nothing was measured
        print("interrupted before the run started", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
