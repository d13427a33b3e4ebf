#!/usr/bin/env python3
"""Entry point: python run.py --scenario boundary [--device cpu|cuda] [...]"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
from pathlib import Path
from typing import Any, Sequence

REPO_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO_ROOT))


def _names(value: str | None, valid: Sequence[str], what: str, parser: argparse.ArgumentParser) -> tuple[str, ...]:
    if not value:
        return tuple(valid)
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in valid]
    if unknown:
        parser.error(f"unknown {what} {', '.join(map(repr, unknown))}; valid {what}s: {', '.join(valid)}")
    return names


def build_parser(scenarios: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="PyTorch operator boundary benchmarks")
    p.add_argument("--scenario", required=True, help=f"one of: {', '.join(scenarios)}")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    p.add_argument("--ops", help="comma-separated ops (default: all)")
    p.add_argument("--variants", help="comma-separated variants (default: all)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 30; --quick 6)")
    p.add_argument("--quick", action="store_true", help="short run: fewer rounds, shorter blocks")
    p.add_argument("--adaptive", action="store_true",
                   help="stop once every median's 95%% CI half-width is within --precision (rounds becomes a cap)")
    p.add_argument("--precision", type=float, default=0.01, help="adaptive target: CI half-width / median")
    p.add_argument("--time-budget", type=float, help="stop after this many seconds of rounds")
    p.add_argument("--block-ms", type=float, help="target duration of one timed block (default 10 ms; --quick 2 ms)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpu-timer", default="cupti", choices=["cupti", "events", "off"],
                   help="GPU time per call on CUDA: CUPTI kernel records (falls back to events with a warning)")
    p.add_argument("--gpu-rounds", type=int, help="rounds of the GPU pass (default 8; --quick 3)")
    p.add_argument("--pin-cores", type=int, default=1,
                   help="pin the process to the last N allowed cores (default 1; 0 = no pinning)")
    p.add_argument("--no-pin", action="store_true", help="same as --pin-cores 0")
    p.add_argument("--pin-offset", type=int, default=0,
                   help="skip the last K x pin-cores allowed cores before pinning (each --gpus/--shards child gets its own K)")
    shard = p.add_mutually_exclusive_group()
    shard.add_argument("--gpus", metavar="all|N",
                       help="CUDA: shard the cases over N GPUs of this host (all: every visible one), one process "
                            "per GPU, each pinned to its own cores; one merged result, rows tagged with gpu_index")
    shard.add_argument("--shards", type=int, metavar="N",
                       help="the CPU form of --gpus: N processes on the CPU, each pinned to its own cores")
    p.add_argument("--out", type=Path, help="output folder (default: results/<machine>/)")
    p.add_argument("--no-cpp", action="store_true",
                   help="boundary: skip the 'called from C++' section (Google Benchmark driver)")
    p.add_argument("--cpp-repetitions", type=int, help="C++ driver repetitions per benchmark (default 9; --quick 3)")
    p.add_argument("--cpp-min-time", type=float, help="C++ driver seconds per repetition (default 0.1; --quick 0.01)")
    return p


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


def result_path(out: Path | None, env: dict[str, Any], scenario: str, device: str) -> Path:
    from bench import env as envmod

    out_dir = out or REPO_ROOT / "results" / envmod.machine_slug(env)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return out_dir / f"{scenario}-{device.replace(':', '')}-{stamp}.json"


def run_custom(scenario: Any, device: str, args: argparse.Namespace, console: Any) -> int:
    """Scenarios that make their own table (e.g. timer_validation)."""
    from bench import env as envmod
    from bench.results import write_result

    env = envmod.capture(device)
    rows, extra = scenario.custom_run(device)
    env.update(extra)
    json_path = result_path(args.out, env, scenario.name, device)
    write_result(json_path, {"scenario": scenario.name, "status": "complete", "config": {},
                             "env": envmod.redact_paths(env), "rows": rows})
    code = scenario.custom_report(rows, console)
    console.print(f"wrote {json_path}")
    return code


def run_cpp_section(device: str, ops: Sequence[str], args: argparse.Namespace, env: dict[str, Any],
                    console: Any) -> list[dict[str, Any]]:
    """The same ops called from C++ (Google Benchmark driver), as rows with driver "cpp"."""
    from bench.cpp_results import run_cpp_driver

    console.print(f"C++ driver: {', '.join(ops)} on {device}")
    try:
        rows, env["cpp_driver_context"] = run_cpp_driver(
            device,
            repetitions=args.cpp_repetitions or (3 if args.quick else 9),
            min_time=args.cpp_min_time or (0.01 if args.quick else 0.1),
            extra_args=[f"--benchmark_filter=^({'|'.join(ops)})/", *(["--dbench_no_pin"] if args.no_pin or args.pin_cores == 0 else [])],
        )
    except RuntimeError as exc:
        console.print(f"[yellow]C++ driver skipped:[/yellow] {exc}")
        env["cpp_driver_context"] = {"error": str(exc)}
        return []
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from scenarios import SCENARIOS

    parser = build_parser(list(SCENARIOS))
    args = parser.parse_args(argv)
    if args.scenario not in SCENARIOS:
        parser.error(f"unknown scenario {args.scenario!r}; valid scenarios: {', '.join(SCENARIOS)}")

    import torch
    from rich.console import Console

    from analysis.table import print_tables
    from bench import env as envmod
    from bench.gputimer import gpu_rows, make_gpu_timer
    from bench.results import case_rows, mark_gpu_bound, write_result
    from bench.probe import instability_note, probe_case, probe_summary
    from bench.runner import RunConfig, run, run_gpu
    from ops import OPS, VARIANT_NAMES
    from ops.native import NativeBuildMissing
    from scenarios import Selection

    ops = _names(args.ops, list(OPS), "op", parser)
    variants = _names(args.variants, list(VARIANT_NAMES), "variant", parser)
    shard_devices: list[str] = []  # --gpus / --shards: one child process per entry
    if args.gpus is not None or args.shards is not None:
        from bench.shard import ShardUsageError, resolve_shards

        try:
            shard_devices = resolve_shards(args.gpus, args.shards, args.device,
                                           torch.cuda.device_count() if torch.cuda.is_available() else 0)
        except ShardUsageError as exc:
            parser.error(str(exc))
    device = args.device or (shard_devices[0] if shard_devices else "cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {device}: CUDA is not available on this machine (torch {torch.__version__})")
    if not (device == "cpu" or device.startswith("cuda")):
        parser.error(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    if device == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"
    if device.startswith("cuda") and len(shard_devices) <= 1:
        # Time cuda:N from a thread whose current device is cuda:N: no device switch inside each call,
        # so a --gpus shard on cuda:3 measures what a one-GPU run on cuda:0 measures.
        torch.cuda.set_device(torch.device(device))

    console = Console()
    scenario = SCENARIOS[args.scenario]
    if scenario.requires_cuda and not device.startswith("cuda"):
        console.print(f"scenario [bold]{scenario.name}[/bold] needs a CUDA device ({scenario.description}); "
                      f"this machine has none (torch {torch.__version__}), so nothing was run.")
        return 0
    if len(shard_devices) > 1:
        if scenario.custom_run is not None:
            parser.error(f"--gpus/--shards: scenario {scenario.name} makes its own table; run it without sharding")
        from bench.shard import ShardUsageError, run_sharded

        argv = list(sys.argv[1:] if argv is None else argv)
        label = f"{'cuda' if device.startswith('cuda') else 'cpu'}-x{len(shard_devices)}"
        try:
            return run_sharded(argv=argv, options=[s for a in parser._actions for s in a.option_strings],
                               scenario=scenario, ops=ops, variants=variants, devices=shard_devices, args=args,
                               json_path=result_path(args.out, envmod.capture(shard_devices[0]), scenario.name, label),
                               console=console)
        except ShardUsageError as exc:
            parser.error(str(exc))
    if scenario.custom_run is not None:
        return run_custom(scenario, device, args, console)
    torch.set_num_threads(1)  # CPU kernels are single-threaded; keep the pool out of the timing
    try:
        pinned = None if args.no_pin else pin_cpus(args.pin_cores, args.pin_offset)
    except ValueError as exc:
        parser.error(str(exc))
    config = RunConfig(
        rounds=args.rounds or (6 if args.quick else 30),
        block_seconds=(args.block_ms or (2.0 if args.quick else 10.0)) / 1e3,
        warmup_seconds=0.005 if args.quick else 0.02,
        seed=args.seed,
        adaptive=args.adaptive,
        rel_precision=args.precision,
        max_seconds=args.time_budget,
    )
    sel = Selection(ops=ops, variants=variants, device=device, dtype=getattr(torch, args.dtype), seed=args.seed)
    try:
        cases = scenario.build(sel)
    except NativeBuildMissing as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    env = envmod.capture(device, {"pinned_cpu": pinned})
    json_path = result_path(args.out, env, scenario.name, device)
    runnable = sum(c.runnable for c in cases)
    console.print(f"[bold]{scenario.name}[/bold]: {len(cases)} cases ({runnable} timed) on {device}, "
                  f"{config.rounds} rounds{' max' if config.adaptive else ''}")

    extra_rows: list[dict[str, Any]] = []  # GPU and C++ rows, added after the CPU pass
    probe = probe_case()  # timed in every round beside the cases; not a row (bench/probe.py)

    def document(status: str, rounds_done: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        rows = case_rows(cases) + extra_rows
        mark_gpu_bound(rows)
        return {
            "scenario": scenario.name,
            "status": status,
            "config": {**vars(config), "rounds_done": rounds_done, "dtype": args.dtype, **(extra or {})},
            "env": envmod.redact_paths(env),
            "speed_probe": probe_summary(probe.samples),
            "rows": rows,
        }

    def checkpoint(rounds_done: int) -> None:
        write_result(json_path, document("running", rounds_done))

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    outcome = run(cases + [probe], config, on_round=checkpoint)
    status = "interrupted" if outcome.stop_reason == "interrupted" else "complete"
    gpu_rounds = 0
    if status == "complete" and device.startswith("cuda") and args.gpu_timer != "off":
        checkpoint(outcome.rounds_done)
        timer = make_gpu_timer(device, prefer=args.gpu_timer)
        if timer is not None:
            try:
                gpu_rounds, interrupted = run_gpu(cases, config, timer, args.gpu_rounds or (3 if args.quick else 8))
                status = "interrupted" if interrupted else status
                extra_rows.extend(gpu_rows(cases, timer))
                env.update(timer.meta())
            finally:
                timer.close()
    if status == "complete" and scenario.name == "boundary" and not args.no_cpp:
        extra_rows.extend(run_cpp_section(device, ops, args, env, console))
    doc = document(status, outcome.rounds_done, {
        "stop_reason": outcome.stop_reason,
        "seconds": round(outcome.seconds, 2),
        "timer_overhead_ns": outcome.timer_overhead_ns,
        "gpu_rounds_done": gpu_rounds,
    })
    csv_path = write_result(json_path, doc)

    import pandas as pd

    print_tables(pd.DataFrame(doc["rows"]), env, console, note=scenario.table_note)
    unstable = instability_note(doc["speed_probe"])
    if unstable:
        console.print(f"[yellow]warning:[/yellow] {unstable}")
    console.print(f"{status}: {outcome.rounds_done} rounds in {outcome.seconds:.1f} s ({outcome.stop_reason})")
    console.print(f"wrote {json_path.relative_to(REPO_ROOT) if json_path.is_relative_to(REPO_ROOT) else json_path}"
                  f" and {csv_path.name}")
    failed = [r for r in doc["rows"] if r["status"] == "failed"]
    if failed:
        console.print(f"[red]{len(failed)} case(s) failed their pre-flight check[/red]")
        return 1
    return 130 if status == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
