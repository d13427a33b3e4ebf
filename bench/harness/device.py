"""The device a run times on, the cores it is pinned to, and the environment and result file of a run
on it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dbench.bench.harness.cli import UsageError


def pin_cpus(count: int, offset: int = 0) -> list[int] | None:
    """Pin to the last `count` allowed cores, skipping the last offset x count (recorded in env).

    Threads created later (CUDA driver, autograd's device thread) inherit the affinity. One core by
    default; on the H200 VM neither one core, four, nor no pinning removed its CPU speed states
    (results/h200/run-to-run).
    """
    if count <= 0 or not hasattr(os, "sched_setaffinity"):
        return None
    from dbench.bench.harness.placement import shard_cores

    allowed = sorted(os.sched_getaffinity(0))
    cpus = shard_cores(allowed, offset, count)  # more than allowed: refused (bench/harness/cli.py check_pinning)
    os.sched_setaffinity(0, set(cpus))
    return cpus


def resolve_device(args: Any, in_process: bool = True, default_cpu: bool = False) -> tuple[str, list[str]]:
    """The device this process times on, and the shards' devices ([] unless --gpus / --shards).
    in_process False: child processes time it (--processes, --ab), so this one makes no CUDA context.
    default_cpu: without --device, cpu even where CUDA is (a scenario of CPU tensors only)."""
    import torch

    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    shard_devices: list[str] = []
    if args.gpus is not None or args.shards is not None:
        from dbench.bench.harness.placement import ShardUsageError, resolve_shards

        try:
            shard_devices = resolve_shards(args.gpus, args.shards, args.device, cuda_count)
        except ShardUsageError as exc:
            raise UsageError(str(exc)) from None
    device = args.device or (shard_devices[0] if shard_devices else "cuda" if cuda_count and not default_cpu else "cpu")
    if not device.startswith("cuda"):
        return device, shard_devices
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


def out_folder(args: Any, env: dict[str, Any]) -> Path:
    """--out, else <cwd>/dbench-results/<machine>/ (both absolute since parsing, bench/harness/cli.py)."""
    from dbench.bench.io import env as envmod

    return args.out or args.default_out / envmod.machine_slug(env)


def warn_env(env: dict[str, Any], console: Any) -> None:
    """The machine's state that makes figures move (busy CPU, other GPU processes, throttling...)."""
    from dbench.bench.io import env as envmod

    for line in envmod.warnings(env):
        console.print(f"[yellow]warning:[/yellow] {line}")


def open_result(scenario: str, device: str, label: str, args: Any, console: Any,
                extra: dict[str, Any] | None = None, warn: bool = True) -> tuple[dict[str, Any], Path]:
    """The run's environment (with `extra`; its warnings printed unless `warn` is off) and its result
    file, reserved in --out or the machine's default folder."""
    from dbench.bench.io import env as envmod

    from dbench.bench.harness.interrupts import reserve

    env = envmod.capture(device, extra) if extra else envmod.capture(device)
    if warn:
        warn_env(env, console)
    return env, reserve(out_folder(args, env), scenario, label)
