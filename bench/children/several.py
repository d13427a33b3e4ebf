"""The ways to run a scenario in several processes: in fresh processes one after another (--processes
N, --ab A B; bench/children/processes.py) or in shards side by side (--gpus, --shards;
bench/children/shard), each merged
into one result file. `show` prints the merged tables (the command layer's renderer)."""

from __future__ import annotations

from typing import Any, Sequence

from dbench.bench.harness.cli import UsageError
from dbench.bench.harness.options import RunOptions
from dbench.bench.core.passes import Pass
from dbench.bench.children.shard.process import Show

from dbench.bench.harness.common import Outcome
from dbench.bench.harness.device import open_result


def run_in_processes(scenario: Any, options: RunOptions, argv: Sequence[str], console: Any, show: Show) -> Outcome:
    """--processes N / --ab A B: the scenario in fresh processes, one after another, merged into one file."""
    from dbench.bench.children.processes import run_repeated

    if scenario.makes(Pass.CUSTOM) or scenario.makes(Pass.ROOFS):
        why = ("makes its own table" if scenario.makes(Pass.CUSTOM)
               else "derives its rates from the roofs its process measures")
        raise UsageError(f"argument {'--ab' if options.ab else '--processes'}: scenario {scenario.name} {why}; "
                         "run it in one process")
    device = options.device
    label = f"{device.replace(':', '')}-{'ab' if options.ab else f'x{options.processes}'}"
    _, json_path = open_result(scenario.name, device, label, options, console)
    merged: list[dict[str, Any]] = []
    code = run_repeated(argv=argv, scenario=scenario, options=options, json_path=json_path, console=console,
                        show=_keeping(show, merged))
    return Outcome(code, json_path, merged[-1] if merged else None)


def run_in_shards(scenario: Any, options: RunOptions, shard_devices: list[str], ops: Sequence[str],
                  argv: Sequence[str], console: Any, show: Show) -> Outcome:
    """--gpus / --shards: the selection split over processes side by side, merged into one file."""
    from dbench.bench.children.shard import ShardUsageError, run_sharded
    from dbench.ops import VARIANT_NAMES

    if scenario.makes(Pass.CUSTOM):
        raise UsageError(f"--gpus/--shards: scenario {scenario.name} makes its own table; run it without sharding")
    label = f"{'cuda' if shard_devices[0].startswith('cuda') else 'cpu'}-x{len(shard_devices)}"
    _, json_path = open_result(scenario.name, shard_devices[0], label, options, console)
    merged: list[dict[str, Any]] = []
    try:
        code = run_sharded(argv=argv, scenario=scenario, ops=tuple(ops),
                           variants=options.variants or VARIANT_NAMES, devices=shard_devices, options=options,
                           json_path=json_path, console=console, show=_keeping(show, merged))
    except ShardUsageError as exc:
        json_path.unlink(missing_ok=True)  # refused before anything ran
        raise UsageError(str(exc)) from None
    return Outcome(code, json_path, merged[-1] if merged else None)


def _keeping(show: Show, kept: list[dict[str, Any]]) -> Show:
    """`show` that also keeps the merged document it is given (the run's result, in memory)."""
    def both(doc: dict[str, Any], note: str) -> None:
        kept.append(doc)
        show(doc, note)
    return both
