#!/usr/bin/env python3
"""Entry point: python run.py --scenario boundary [--device cpu|cuda] [...]

Phases: check the command line (no torch yet), pick the device, then one of
the four ways to run (repeated in fresh processes one after another, sharded
over processes, a scenario that makes its own table, or the interleaved rounds:
build cases, CPU rounds, GPU pass, C++ section, write, print), then, with
--baseline, the gate. A result file is reserved before any work and rewritten
after every round; whatever ends the run (its end, a failed case, Ctrl-C,
SIGTERM, an error) leaves it with a final status; a Ctrl-C before it was reserved leaves a
result saying so. Between picking the device and any work, the selection is checked against
what the scenario can time on that device: nothing timeable is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO_ROOT = Path(__file__).resolve().parent
STARTED = time.monotonic()  # the phase timings count from here (interpreter start-up excluded)
sys.path.insert(0, str(REPO_ROOT))

from dbench.bench.cli import UsageError  # noqa: E402  (torch-free)
from dbench.bench.passes import Pass  # noqa: E402  (torch-free)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
CHECKPOINT_SECONDS = 2.0  # the running result file is rewritten at most this often during the rounds
Outcome = tuple[int, "Path | None"]  # exit status, and the result file written (None: nothing run)
RESERVED: list[Path] = []  # the result files this process reserved (main marks one left `running` interrupted)


def pin_cpus(count: int, offset: int = 0) -> list[int] | None:
    """Pin to the last `count` allowed cores, skipping the last offset x count (recorded in env).

    Threads created later (CUDA driver, autograd's device thread) inherit the
    affinity. One core by default; on the H200 VM neither one core, four, nor
    no pinning removed its CPU speed states (results/h200/run-to-run).
    """
    if count <= 0 or not hasattr(os, "sched_setaffinity"):
        return None
    from dbench.bench.shard import shard_cores

    allowed = sorted(os.sched_getaffinity(0))
    cpus = shard_cores(allowed, offset, count)  # more than allowed: refused (bench/cli.py check_pinning)
    os.sched_setaffinity(0, set(cpus))
    return cpus


def out_folder(args: argparse.Namespace, env: dict[str, Any]) -> Path:
    """--out, else <cwd>/dbench-results/<machine>/ (both absolute since parsing, bench/cli.py)."""
    from dbench.bench import env as envmod

    return args.out or args.default_out / envmod.machine_slug(env)


def reserve(folder: Path, scenario: str, label: str) -> Path:
    """A new result file (bench/results.py), remembered so an interrupt can always mark it."""
    from dbench.bench.results import reserve_result_path

    path = reserve_result_path(folder, scenario, label)
    RESERVED.append(path)
    return path


def shown(path: Path) -> Path:
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


class GracefulStop:
    """SIGINT / SIGTERM: the first one stops the run (KeyboardInterrupt, so the runner drops its
    unfinished round), later ones are noted and ignored, so the final write cannot be cut short.
    main installs it for SIGINT before anything else (a Ctrl-C in any phase ends as an interrupted
    run); the ways to run that time in this process add SIGTERM."""

    def __init__(self, *signals: int) -> None:
        self.requested = False  # set by a signal, or by the run once its final write begins
        self.signalled = False  # a signal came
        self.install(*signals)

    def install(self, *signals: int) -> None:
        for sig in signals:
            signal.signal(sig, self._handle)

    @staticmethod
    def release() -> None:
        """SIGINT raising KeyboardInterrupt every time again: --processes, --ab and --shards count a
        second Ctrl-C themselves (bench/processes.py, bench/shard)."""
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.requested:
            # Plain stderr: rich may be in the middle of the import the first signal interrupted.
            sys.stderr.write("already stopping: writing the result\n")
            return
        self.requested = self.signalled = True
        raise KeyboardInterrupt


def resolve_device(args: argparse.Namespace, in_process: bool = True) -> tuple[str, list[str]]:
    """The device this process times on, and the shards' devices ([] unless --gpus / --shards).
    in_process False: child processes time it (--processes, --ab), so this one makes no CUDA context."""
    import torch

    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    shard_devices: list[str] = []
    if args.gpus is not None or args.shards is not None:
        from dbench.bench.shard import ShardUsageError, resolve_shards

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


def run_custom(scenario: Any, device: str, args: argparse.Namespace, console: Any, stop: GracefulStop) -> Outcome:
    """Scenarios that make their own table (e.g. timer_validation)."""
    from dbench.bench import env as envmod
    from dbench.bench.results import write_result

    stop.install(signal.SIGINT, signal.SIGTERM)
    env = envmod.capture(device)
    json_path = reserve(out_folder(args, env), scenario.name, device)
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
                console: Any, json_path: Path) -> list[dict[str, Any]]:
    """The same ops called from C++ (Google Benchmark driver), as rows with driver "cpp"; the
    driver's own JSON stays beside the result file (bench.cpp_results.gbench_path).

    A driver that is not built is skipped (said on the console and in env); one that crashes,
    exits non-zero or writes unreadable JSON gives FAILED rows, with its output's tail in env.
    """
    from dbench.bench.cpp_results import (CPP_MODES, CppDriverFailed, CppDriverMissing, failed_rows, gbench_path,
                                          run_cpp_driver)

    modes = [m for m in CPP_MODES if args.modes is None or m in args.modes]
    if not modes:
        why = f"--modes {','.join(args.modes)}: the driver times {', '.join(CPP_MODES)} only"
        console.print(f"C++ driver skipped: {why}")
        env["cpp_driver_context"] = {"skipped": why}
        return []
    console.print(f"C++ driver: {', '.join(ops)} on {device}")
    extra_args = [f"--benchmark_filter=^({'|'.join(ops)})/[^/]+/({'|'.join(modes)})(/|$)",
                  *(["--dbench_no_pin"] if args.pin_cores == 0 else [])]
    try:
        rows, env["cpp_driver_context"] = run_cpp_driver(
            device, repetitions=args.cpp_repetitions, min_time=args.cpp_min_time, extra_args=extra_args,
            keep=gbench_path(json_path),
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
        rows += cpp_gpu_pass(device, ops, extra_args, args, env, console, json_path)
    return rows


def cpp_gpu_pass(device: str, ops: Sequence[str], extra_args: list[str], args: argparse.Namespace,
                 env: dict[str, Any], console: Any, json_path: Path) -> list[dict[str, Any]]:
    """The C++ driver's GPU rows (gpu_us, kernels_per_call; CUPTI) from a separate run of it, so CUPTI's
    per-launch cost stays out of its CPU rows. CUPTI unavailable: no rows, a warning and the reason in
    env; a crashed pass: FAILED gpu_us rows."""
    from dbench.bench.cpp_results import CppDriverFailed, failed_rows, gbench_path, gpu_timer_problem, run_cpp_gpu_pass

    if args.gpu_timer != "cupti":
        env["cpp_driver_gpu_context"] = {"skipped": f"--gpu-timer {args.gpu_timer}: the C++ driver times GPU "
                                                    "with CUPTI only"}
        return []
    try:
        rows, env["cpp_driver_gpu_context"] = run_cpp_gpu_pass(device, repetitions=args.gpu_rounds,
                                                               extra_args=extra_args, keep=gbench_path(json_path, gpu=True))
    except CppDriverFailed as exc:
        console.print(f"[red]C++ driver GPU pass FAILED:[/red] {exc}")
        console.print(exc.output_tail, markup=False, highlight=False)
        env["cpp_driver_gpu_context"] = {"error": str(exc), "output_tail": exc.output_tail}
        return failed_rows(ops, device, str(exc), metric="gpu_us")
    problem = gpu_timer_problem(env["cpp_driver_gpu_context"])
    if problem:
        console.print(f"[yellow]warning:[/yellow] C++ driver: no GPU rows, CUPTI unavailable: {problem}")
    return rows


def report(scenario: Any, doc: dict[str, Any], env: dict[str, Any], console: Any) -> None:
    """The scenario's console tables. Of an interrupted run only what was measured, and at most a line
    when the tables cannot be made from it (a roofline stopped before its roofs): the result file,
    already written, is what counts."""
    if not any(r.get("samples") for r in doc["rows"]):
        if doc["status"] == "interrupted":
            console.print("no table: nothing was timed before the interrupt")
            return
    from dbench.analysis.views import print_document

    try:
        print_document({**doc, "env": env}, console)
    except Exception as exc:  # noqa: BLE001  # only an interrupted run's partial rows get here
        if doc["status"] != "interrupted":
            raise
        from rich.markup import escape

        console.print(f"[yellow]no table for the rows timed before the interrupt[/yellow] "
                      f"({escape(f'{type(exc).__name__}: {exc}')})", highlight=False)


def case_dtypes(cases: list[Any]) -> tuple[Any, ...]:
    """The dtypes the timed cases use (their compute roofs are measured)."""
    import torch

    return tuple(getattr(torch, d) for d in dict.fromkeys(c.key["dtype"] for c in cases if c.runnable))


def plot(doc: dict[str, Any], json_path: Path, console: Any) -> None:
    """--plot: the scenario's figures beside its result file."""
    from dbench.analysis.figures import scenario_figures

    if doc["rows"]:
        for figure in scenario_figures(doc, json_path.parent, json_path.stem):
            console.print(f"figure: {shown(figure)}")


def selection(scenario: Any, device: str, args: argparse.Namespace) -> Any:
    """What the command line selects of `scenario` on `device` (scenarios.Selection)."""
    import torch

    from dbench.ops import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import Selection

    return Selection(ops=selected_ops(scenario, args, OP_NAMES),
                     variants=args.variants or scenario.variants or VARIANT_NAMES, device=device,
                     dtype=getattr(torch, args.dtype), seed=args.seed, quick=args.quick, cache=tuple(args.cache),
                     explicit_ops=args.ops is not None or bool(args.op), shape=args.shape, modes=args.modes)


def selected_ops(scenario: Any, args: argparse.Namespace, every: Sequence[str]) -> tuple[str, ...]:
    """--ops, else the ops --op loaded, else the scenario's, else every shipped op."""
    return tuple(args.ops or getattr(args, "user_ops", None) or scenario.default_ops or every)


def check_selection(scenario: Any, device: str, args: argparse.Namespace, console: Any) -> None:
    """Before any case is built: can the selection time anything on this device? Nothing: a usage
    error naming what cannot run here and why. Only part of it: the rest runs, the parts that cannot
    are named once. (A shard's child times the share it was given: its parent checked the whole.)"""
    import torch

    from dbench.scenarios.base import not_runnable

    if scenario.requires_cuda and not device.startswith("cuda"):
        why = ("--device cpu was given" if args.device == "cpu"
               else f"this machine has none (torch {torch.__version__})")
        raise UsageError(f"scenario {scenario.name} needs a CUDA device ({scenario.description}); {why}: "
                         "nothing to run")
    if tuple(args.cache) != ("warm",) and not any(a.name == "cache" for a in scenario.axes):
        raise UsageError(f"argument --cache: scenario {scenario.name} has no cache axis (roofline has)")
    if scenario.plan is None or args.shard_child:
        return
    planned = scenario.plan(selection(scenario, device, args))
    given = [dim for dim, option in (("op", args.ops), ("variant", args.variants)) if option is not None]
    notes = not_runnable(planned, given + (["cache"] if tuple(args.cache) != ("warm",) else []))
    if not any(p.na_reason is None for p in planned):
        raise UsageError(f"nothing selected can be timed on {device}: {'; '.join(notes) or 'no cases'}")
    if notes:
        console.print(f"[yellow]not timed on {device}:[/yellow] {'; '.join(notes)}", soft_wrap=True)


def run_rounds(scenario: Any, device: str, args: argparse.Namespace, console: Any, stop: GracefulStop) -> Outcome:
    """The interleaved-rounds run of one process: the table's cases, timed and written."""
    import torch

    phases: dict[str, float] = {}  # seconds per phase, in order (config.phase_seconds)
    last = STARTED

    def phase(name: str) -> None:
        nonlocal last
        now = time.monotonic()
        phases[name] = round(now - last, 2)
        last = now

    from dbench.bench import env as envmod
    from dbench.bench.gputimer import gpu_rows, make_gpu_timer
    from dbench.bench.probe import instability_note, probe_case, probe_summary
    from dbench.bench.results import ResultWriteError, case_rows, mark_gpu_bound, write_result
    from dbench.bench.identity import case_identity
    from dbench.bench.roofline import attach, measure_roofs
    from dbench.bench.runner import RunConfig, Throttled, run, run_gpu
    from dbench.ops import OPS
    from dbench.ops.native import NativeBuildMissing

    torch.set_num_threads(1)  # CPU kernels are single-threaded; keep the pool out of the timing
    try:
        pinned = pin_cpus(args.pin_cores, args.pin_offset)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = RunConfig(rounds=args.rounds, block_seconds=args.block_ms / 1e3, warmup_seconds=args.warmup_ms / 1e3,
                       seed=args.seed, adaptive=args.adaptive, rel_precision=args.precision,
                       max_seconds=args.time_budget)
    sel = selection(scenario, device, args)
    stop.install(signal.SIGINT, signal.SIGTERM)
    env = envmod.capture(device, {"pinned_cpu": pinned})
    warn_env(env, console)
    json_path = reserve(out_folder(args, env), scenario.name, device)
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
            "config": {**vars(config), "dtype": args.dtype, **({"cache": list(args.cache)} if scenario.makes(Pass.ROOFS) else {}),
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
        try:
            cases = scenario.build(sel)
        except NativeBuildMissing as exc:
            write_result(json_path, {**document("failed"), "error": str(exc)})
            console.print(f"[red]error:[/red] {exc}")
            return EXIT_USAGE, json_path
        if not any(c.runnable or c.error for c in cases) and not args.shard_child:
            # The plan said something could run (check_selection); building found otherwise.
            why = f"nothing selected can be timed on {device}: " + \
                  ("; ".join(dict.fromkeys(str(c.na_reason) for c in cases)) or "no cases")
            write_result(json_path, {**document("failed"), "error": why})
            print(f"run.py: error: {why}", file=sys.stderr)
            return EXIT_USAGE, json_path
        console.print(f"[bold]{scenario.name}[/bold]: {len(cases)} cases ({sum(c.runnable for c in cases)} timed) "
                      f"on {device}, {config.rounds} rounds{' max' if config.adaptive else ''}")
        phase("build")  # the native build's loading, the cases and their pre-flight checks
        if stop.signalled:  # a Ctrl-C that the build (an extension's import, a compile) caught and dropped
            raise KeyboardInterrupt
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
        if scenario.makes(Pass.ROOFS) and not device.startswith("cuda"):
            measured["roofs"] = measure_roofs(device, case_dtypes(cases))
        if scenario.makes(Pass.GPU) and device.startswith("cuda") and args.gpu_timer != "off":
            write_result(json_path, document("running"))
            timer = make_gpu_timer(device, prefer=args.gpu_timer)
            if timer is not None:
                try:
                    gpu_done, interrupted = run_gpu(cases, config, timer, args.gpu_rounds)
                    run_info["gpu_rounds_done"] = gpu_done
                    extra_rows.extend(gpu_rows(cases, timer))
                    if scenario.makes(Pass.ROOFS) and not interrupted:
                        console.print("measuring the roofs (memcpy, copy kernel, cuBLAS)")
                        measured["roofs"] = measure_roofs(device, case_dtypes(cases), timer)
                    env.update(timer.meta())
                finally:
                    timer.close()
                if interrupted:
                    raise KeyboardInterrupt
            phase("gpu_pass")
        # The C++ driver times the boundary ops it was built with (ops with the C++ flavour).
        cpp_ops = [op for op in sel.ops if OPS[op].boundary and OPS[op].has_flavour("cpp")]
        if scenario.makes(Pass.CPP_DRIVER) and not args.no_cpp and cpp_ops:
            extra_rows.extend(cpp_section(device, cpp_ops, args, env, console, json_path))
            phase("cpp_driver")
    except ResultWriteError as exc:  # a checkpoint failed (full disk, folder read-only or gone): stop cleanly
        stop.requested = True
        return stop_on_write_error(exc, json_path, document("failed"), run_info["rounds_done"], console)
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
    try:
        csv_path = write_result(json_path, doc)
    except ResultWriteError as exc:
        return stop_on_write_error(exc, json_path, doc, run_info["rounds_done"], console)

    report(scenario, doc, env, console)
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


def stop_on_write_error(exc: OSError, json_path: Path, doc: dict[str, Any], rounds_done: int,
                        console: Any) -> Outcome:
    """A result write failed mid-run: one line naming the file and why, one last try to write what was
    measured (status failed; if that fails too, the file stays as its last complete write, never a
    partial one); exit 1, or 2 when no round had run. Not gated (json_path None)."""
    from dbench.bench.results import ResultWriteError, write_result

    print(f"run.py: error: {exc}", file=sys.stderr)
    try:
        write_result(json_path, {**doc, "status": "failed", "error": str(exc)})
        console.print(f"[red]stopped after {rounds_done} round(s); what was measured is in {shown(json_path)} "
                      "(status failed)[/red]")
    except ResultWriteError as again:
        print(f"run.py: error: the final result could not be written either ({again.strerror}); "
              f"{shown(json_path)} is left as its last complete write", file=sys.stderr)
    return (EXIT_FAILED if rounds_done else EXIT_USAGE), None


def parser_options() -> list[str]:
    """Every option string of run.py's parser (children's command lines resolve abbreviations with them)."""
    from dbench.bench.cli import build_parser
    from dbench.scenarios import SCENARIO_NAMES

    return [s for a in build_parser(SCENARIO_NAMES)._actions for s in a.option_strings]


def warn_env(env: dict[str, Any], console: Any) -> None:
    """The machine's state that makes figures move (busy CPU, other GPU processes, throttling...)."""
    from dbench.bench import env as envmod

    for line in envmod.warnings(env):
        console.print(f"[yellow]warning:[/yellow] {line}")


def run_repeated(scenario: Any, device: str, argv: Sequence[str] | None, args: argparse.Namespace,
                 console: Any) -> Outcome:
    """--processes N / --ab A B: the scenario in fresh processes, one after another, merged into one file."""
    from dbench.bench import env as envmod
    from dbench.bench.processes import run_repeated as run_in_turn
    from dbench.bench.results import load_result

    if scenario.makes(Pass.CUSTOM) or scenario.makes(Pass.ROOFS):
        why = "makes its own table" if scenario.makes(Pass.CUSTOM) else "derives its rates from the roofs its process measures"
        raise UsageError(f"argument {'--ab' if args.ab else '--processes'}: scenario {scenario.name} {why}; "
                         "run it in one process")
    env = envmod.capture(device)
    warn_env(env, console)
    label = f"{device.replace(':', '')}-{'ab' if args.ab else f'x{args.processes}'}"
    json_path = reserve(out_folder(args, env), scenario.name, label)
    code = run_in_turn(argv=list(sys.argv[1:] if argv is None else argv), options=parser_options(),
                       scenario=scenario, device=device, args=args, json_path=json_path, console=console,
                       show=lambda doc, note: show_merged(scenario, doc, console, note),
                       sides=getattr(args, "ab_sides", None))
    if args.plot:
        plot(load_result(json_path), json_path, console)
    return code, json_path


def show_merged(scenario: Any, doc: dict[str, Any], console: Any, note: str) -> None:
    """The tables of a run of several processes: the paired ratios of an A/B run, else the scenario's
    report or the standard tables."""
    if "ab" in doc:
        from dbench.analysis.table import print_ab_table

        print_ab_table(doc, console)
    else:
        from dbench.analysis.views import print_document

        print_document(doc, console, note)


def run_sharded(scenario: Any, shard_devices: list[str], argv: Sequence[str] | None, args: argparse.Namespace,
                console: Any) -> Outcome:
    from dbench.bench import env as envmod
    from dbench.bench.results import load_result
    from dbench.analysis.views import print_document
    from dbench.bench.shard import ShardUsageError, run_sharded as run_shards
    from dbench.ops import OP_NAMES, VARIANT_NAMES

    if scenario.makes(Pass.CUSTOM):
        raise UsageError(f"--gpus/--shards: scenario {scenario.name} makes its own table; run it without sharding")
    label = f"{'cuda' if shard_devices[0].startswith('cuda') else 'cpu'}-x{len(shard_devices)}"
    env = envmod.capture(shard_devices[0])
    warn_env(env, console)
    options = parser_options()
    json_path = reserve(out_folder(args, env), scenario.name, label)
    try:
        # --shard-child: each child times its share as given (this parent checked the whole selection).
        child_argv = [*(sys.argv[1:] if argv is None else argv), "--shard-child"]
        code = run_shards(argv=child_argv, options=options, scenario=scenario,
                          ops=selected_ops(scenario, args, OP_NAMES), variants=args.variants or VARIANT_NAMES,
                          devices=shard_devices,
                          args=args, json_path=json_path, console=console,
                          show=lambda rows, env, note: print_document({"scenario": scenario.name, "rows": rows,
                                                                       "env": env}, console, note))
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
    from dbench.bench.results import ResultFileError, load_result

    try:
        from dbench.analysis import gate as gate_module
    except ModuleNotFoundError as exc:
        if exc.name != "dbench.analysis.gate":
            raise
        console.print("[red]--baseline: dbench.analysis.gate is not in this checkout, so the run was not gated[/red] "
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


def dispatch(argv: Sequence[str] | None, args: argparse.Namespace, console: Any, stop: GracefulStop) -> Outcome:
    """Pick the device, check the selection can time something on it, and run it in its way."""
    from dbench.scenarios import SCENARIOS

    from dbench.bench.cli import apply_defaults
    from dbench.scenarios import DECLARATIONS

    if args.op:
        from dbench.scenarios.listing import load_user_ops

        args.user_ops = load_user_ops(args)
    if args.list:
        from dbench.scenarios.listing import print_list

        print_list(console)
        return EXIT_OK, None
    repeated = args.processes is not None or args.ab is not None
    device, shard_devices = resolve_device(args, in_process=not repeated)
    # The defaults that waited for the device (cli.apply_defaults fills only what is still unset).
    declared = DECLARATIONS[args.scenario]
    apply_defaults(args, declared.defaults, declared.cuda_defaults, device)
    scenario = SCENARIOS[args.scenario]
    check_selection(scenario, device, args, console)
    if stop.signalled:  # a Ctrl-C that an import caught and dropped: later ones would be ignored
        raise KeyboardInterrupt
    if repeated or len(shard_devices) > 1:
        stop.release()
        if repeated:
            return run_repeated(scenario, device, argv, args, console)
        return run_sharded(scenario, shard_devices, argv, args, console)
    if scenario.makes(Pass.CUSTOM):
        return run_custom(scenario, device, args, console, stop)
    return run_rounds(scenario, device, args, console, stop)


def mark_interrupted(args: argparse.Namespace | None) -> Path | None:
    """The result of a run whose Ctrl-C reached main: the file it reserved, while still `running`,
    marked interrupted; with none reserved yet (the machine's folder is not known before torch is),
    a new one in --out or the default folder. Standard library only: the interrupt may have cut an
    import short. None when there is nowhere to write (the command line was not read yet)."""
    from dbench.bench.atomic import create_unique, write_atomic

    note = {"status": "interrupted", "error": "interrupted before anything was measured"}
    try:
        if RESERVED:
            path = RESERVED[-1]
            text = path.read_text()
            doc = json.loads(text) if text.strip() else {}
            if doc.get("status") not in (None, "running"):
                return path  # its way to run wrote its final status
            if doc.get("rows"):
                note["error"] = "interrupted before the run wrote its final status"
            write_atomic(path, json.dumps({"config": {}, "env": {}, "rows": [], **doc, **note}, indent=1) + "\n")
            return path
        if args is None:
            return None
        folder = args.out or args.default_out
        folder.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc)
        doc = {"scenario": args.scenario, **note, "config": {},
               "env": {"time": now.isoformat(timespec="seconds"), "device": args.device}, "rows": [], "failures": []}
        stem = f"{args.scenario}-{(args.device or 'unknown').replace(':', '')}-{now.strftime('%Y%m%dT%H%M%SZ')}"
        return create_unique(folder, stem, ".json", json.dumps(doc, indent=1) + "\n")
    except (OSError, ValueError) as exc:
        print(f"run.py: error: the interrupted run's result could not be written: {exc}", file=sys.stderr)
    return None


def interrupted(args: argparse.Namespace | None) -> int:
    """Exit status 130, after mark_interrupted, with one line saying where the result is."""
    path = mark_interrupted(args)
    print(f"interrupted; {f'result: {shown(path)}' if path else 'no result written'}", file=sys.stderr)
    return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    return run_for_library(argv)[0]


def run_for_library(argv: Sequence[str] | None = None) -> tuple[int, Path | None]:
    """main's exit status and the result file it wrote (None: none), for dbench.run_scenario."""
    from dbench.bench import cli
    from dbench.ops.specs import OP_NAMES, USER_OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    RESERVED.clear()
    stop = GracefulStop(signal.SIGINT)  # from here on a Ctrl-C, in any phase, ends as an interrupted run
    args: argparse.Namespace | None = None
    try:
        args = cli.parse(argv, tuple(DECLARATIONS), (*OP_NAMES, *USER_OP_NAMES), VARIANT_NAMES,
                         declarations=DECLARATIONS)
        from rich.console import Console

        # A log keeps each message on one line; no emoji codes (a lazy import a signal could cut short).
        console = Console(soft_wrap=not sys.stdout.isatty(), emoji=False)
        code, json_path = dispatch(argv, args, console, stop)
        if args.baseline is None or json_path is None:
            return code, json_path
        if code not in (EXIT_OK, EXIT_FAILED):
            console.print(f"[yellow]not gated: the run ended with exit {code}[/yellow]")
            return code, json_path
        return max(code, gate(json_path, args, console)), json_path  # a FAILED case is never gated away
    except UsageError as exc:
        print(f"run.py: error: {exc} (see run.py --help)", file=sys.stderr)
        return EXIT_USAGE, None
    except KeyboardInterrupt:  # before a way to run took over: nothing was measured
        return interrupted(args), RESERVED[-1] if RESERVED else None
    except Exception as exc:
        if stop.signalled:  # a Ctrl-C an import (torch's, an extension's) re-raised as another error
            return interrupted(args), RESERVED[-1] if RESERVED else None
        if not isinstance(exc, OSError):
            raise
        # A result file that could not be made (the ways to run handle their later writes).
        from dbench.bench.results import ResultWriteError

        if not isinstance(exc, ResultWriteError):
            raise
        print(f"run.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE, None


if __name__ == "__main__":
    status = main()
    # The run is over and its result written: a late Ctrl-C must not turn its exit status into a kill
    # (Python's shutdown puts the default handlers back, an ignored signal stays ignored).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(status)
