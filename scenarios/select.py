"""What a command line selects of a scenario on a device, and whether any of it can be timed there."""

from __future__ import annotations

from typing import Any, Sequence

from dbench.bench.cli import UsageError


def selected_ops(scenario: Any, args: Any, every: Sequence[str]) -> tuple[str, ...]:
    """--ops, else the ops --op loaded, else the scenario's, else every shipped op."""
    return tuple(args.ops or getattr(args, "user_ops", None) or scenario.default_ops or every)


def selection(scenario: Any, device: str, args: Any) -> Any:
    """What the command line selects of `scenario` on `device` (scenarios.Selection)."""
    import torch

    from dbench.ops import OP_NAMES, VARIANT_NAMES

    from .base import Selection

    return Selection(ops=selected_ops(scenario, args, OP_NAMES),
                     variants=args.variants or scenario.variants or VARIANT_NAMES, device=device,
                     dtype=getattr(torch, args.dtype), seed=args.seed, quick=args.quick, cache=tuple(args.cache),
                     explicit_ops=args.ops is not None or bool(args.op), shape=args.shape, modes=args.modes)


def check_selection(scenario: Any, device: str, args: Any, console: Any) -> None:
    """Before any case is built: can the selection time anything on this device? Nothing: a usage
    error naming what cannot run here and why. Only part of it: the rest runs, the parts that cannot
    are named once. (A shard's child times the share it was given: its parent checked the whole.)"""
    import torch

    from .base import not_runnable

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
