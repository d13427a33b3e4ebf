"""What a run's options select of a scenario on their device, and whether any of it can be timed there."""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from dbench.bench.harness.cli import UsageError
from dbench.bench.harness.options import RunOptions


def selected_ops(scenario: Any, options: RunOptions, every: Sequence[str]) -> tuple[str, ...]:
    """--ops, else the ops --op loaded, else the scenario's, else every shipped op."""
    return tuple(options.ops or options.user_ops or scenario.default_ops or every)


def selection(scenario: Any, options: RunOptions) -> Any:
    """What the options select of `scenario` on their device (scenarios.Selection)."""
    import torch

    from dbench.ops import OP_NAMES, VARIANT_NAMES

    from .base import Selection

    return Selection(ops=selected_ops(scenario, options, OP_NAMES),
                     variants=options.variants or scenario.variants or VARIANT_NAMES, device=options.device,
                     dtype=getattr(torch, options.dtype), seed=options.seed, quick=options.quick, cache=options.cache,
                     explicit_ops=options.ops is not None or bool(options.op_files), shapes=options.shapes,
                     axis_values=dict(options.axis_values),
                     modes=options.modes)


def check_selection(scenario: Any, options: RunOptions, console: Any) -> None:
    """Before any case is built: can the selection time anything on this device? Nothing: a usage
    error naming what cannot run here and why. Only part of it: the rest runs, the parts that cannot
    are named once. (A shard's child times the share it was given: its parent checked the whole.)"""
    import torch

    from .base import not_runnable

    device, args = options.device, options
    if scenario.requires_cuda and not device.startswith("cuda"):
        why = ("--device cpu was given" if args.device == "cpu"
               else f"this machine has none (torch {torch.__version__})")
        raise UsageError(f"scenario {scenario.name} needs a CUDA device ({scenario.description}); {why}: "
                         "nothing to run")
    if scenario.cpu_only and device != "cpu":
        raise UsageError(f"argument --device: scenario {scenario.name} runs on CPU tensors only "
                         f"({scenario.description}); {device} was given: leave --device out or pass --device cpu")
    if tuple(args.cache) != ("warm",) and not any(a.name == "cache" for a in scenario.axes):
        raise UsageError(f"argument --cache: scenario {scenario.name} has no cache axis (roofline has)")
    check_axis_values(scenario, options)
    if scenario.plan is None or args.shard_child:
        return
    planned = scenario.plan(selection(scenario, options))
    given = [dim for dim, option in (("op", args.ops), ("variant", args.variants)) if option is not None]
    notes = not_runnable(planned, given + (["cache"] if tuple(args.cache) != ("warm",) else []))
    if not any(p.na_reason is None for p in planned):
        raise UsageError(f"nothing selected can be timed on {device}: {'; '.join(notes) or 'no cases'}")
    if notes:
        console.print(f"[yellow]not timed on {device}:[/yellow] {'; '.join(notes)}", soft_wrap=True)


def check_axis_values(scenario: Any, options: RunOptions) -> None:
    """--axis names one of the scenario's axes, and values it takes for this selection (UsageError
    naming the ones there are, before any case is built)."""
    import dataclasses

    from dbench.bench.core.identity import axis_text

    if not options.axis_values:
        return
    axes = {a.name: a for a in scenario.axes}
    unfiltered = dataclasses.replace(selection(scenario, options), axis_values={})
    for name, wanted in options.axis_values:
        if name not in axes:
            has = f"its axes: {', '.join(axes)}" if axes else "it has none"
            raise UsageError(f"argument --axis: scenario {scenario.name} has no axis {name!r} ({has})")
        there = list(dict.fromkeys(axis_text(v) for op in unfiltered.ops or ("",)
                                   for v in axes[name].values_for(unfiltered, op)))
        missing = [v for v in wanted if v not in there]
        if missing:
            raise UsageError(f"argument --axis: {name} {', '.join(missing)} is not among {scenario.name}'s values "
                             f"here ({', '.join(there) or 'none'})")


def resolved(args: argparse.Namespace, console: Any) -> tuple[RunOptions | None, list[str]]:
    """The run's options from its checked command line (None after --list, which prints and stops),
    and the shards' devices ([] unless --gpus / --shards)."""
    from dbench.bench.harness.device import resolve_device
    from dbench.bench.harness.options import resolve
    from . import DECLARATIONS
    from .listing import load_user_ops, print_list

    user_ops = load_user_ops(args) if args.op else []
    if args.list:
        print_list(console)
        return None, []
    repeated = args.processes is not None or args.ab is not None
    declaration = DECLARATIONS[args.scenario]
    device, shard_devices = resolve_device(args, in_process=not repeated, default_cpu=declaration.cpu_only)
    return resolve(args, declaration, device, tuple(user_ops)), shard_devices
