"""Repeated runs: the scenario in several fresh processes, one after another (run.py --processes N, --ab).

On a shared host whole processes land in slow or fast states, so one process's medians are one
draw of that offset. Here each child is a complete, fresh run.py process of the scenario that
runs a share of the rounds (and of the GPU rounds and C++ repetitions), so N processes cost about
what one run does, plus N start-ups and warm-ups. The children run one at a time, so none competes
with another for the cores or the GPU, and a slowdown of the machine lands on whichever children
it overlaps (in an A/B run, on both sides of the pairs it overlaps: bench/io/ab.py). With --duet an
A/B run starts each pair's two children together, each pinned to its own cores (duet benchmarking:
L. Bulej et al., "Duet Benchmarking: Improving Measurement Accuracy in the Cloud", Empirical
Software Engineering 25, 2020): a slowdown of the host that reaches both cores then lands on both
sides of the pair during the same rounds, and a night fits twice the rounds.

Each child writes into <result stem>.processes/process-<i>/ and logs to process-<i>.log (both
kept); the parent merges their results into one file (bench/io/process_merge.py) and prints it.
Ctrl-C or SIGTERM stops the running child after its current round (one SIGTERM, as for shards),
starts no further one, and writes the merge of what finished, status ``interrupted`` (exit 130).
A child that fails ends the sequence (the others would fail alike): the merge is ``failed`` and
names it under ``failures`` (exit status, the tail of its output). A checkpoint of the merged file
that cannot be written (full disk) stops the run: exit 1, the file left as its last complete write.
No child outlives the parent (bench/children/shard/process.py: die_with_parent, reap).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dbench.bench.children import bytecode
from dbench.bench.io.ab import Slot, abba, order_text
from dbench.bench.harness.cli import MAX_SEED
from dbench.bench.harness import common
from dbench.bench.io.merging import AbPlan, Pairing, merge
from dbench.bench.harness.options import RunOptions
from dbench.bench.children.shard.command import REPO_ROOT
from dbench.bench.harness.placement import shard_cores
from dbench.bench.io.shard_merge import empty_merge
from dbench.bench.children.schedule import batches, run_groups
from dbench.bench.children.shard.process import (
    Show,
    Child,
    exit_code,
    latest_result,
    new_folder,
    read_doc,
    rel,
    write_merged,
)
from dbench.bench.harness.sides import Side

def share(total: int, parts: int) -> int:
    """Each of `parts` processes' share of `total` rounds (or repetitions): at least one."""
    return max(1, math.ceil(total / parts))


def child_options(options: RunOptions, *, per_side: int, seed: int, out_dir: Path) -> RunOptions:
    """A child's options: the parent's, resolved (so its design: block, warm-up, order, C++ seconds
    per repetition, which a child that is not itself an --ab or --processes run would not take),
    with its share of the rounds, GPU rounds, C++ repetitions and time budget, its seed and folder,
    and none of what only the parent does (repeat, pair, gate, plot)."""
    return options.for_child(
        rounds=share(options.rounds, per_side), gpu_rounds=share(options.gpu_rounds, per_side),
        cpp_repetitions=share(options.cpp_repetitions, per_side), seed=seed, out=out_dir,
        time_budget=options.time_budget / per_side if options.time_budget else None)


def slots(processes: int | None, pairs: int | None) -> list[Slot]:
    return abba(pairs) if pairs else [Slot(i, None, i) for i in range(processes or 0)]


def _name(slot: Slot, total: int) -> str:
    side = f" ({slot.side.upper()}, pair {slot.pair + 1})" if slot.side else ""
    return f"process {slot.index + 1} of {total}{side}"


def _parent_cores(options: RunOptions) -> tuple[set[int], set[int]] | None:
    """(every allowed core, the cores off the ones the children pin to) when there are such cores:
    this (polling) process waits on those, and goes back to all of them only to start a child,
    which inherits the set and pins itself within it."""
    pin = options.pin_cores
    if pin <= 0 or not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    offsets = range(options.pin_offset, options.pin_offset + options.pin_slots)
    try:
        cores = {core for offset in offsets
                 for core in shard_cores(allowed, offset, min(pin, len(allowed)) if offset == 0 else pin)}
    except ValueError:
        return None  # the child says why it cannot pin
    spare = set(allowed) - cores
    return (set(allowed), spare) if spare else None


def wall_seconds(children: Sequence[Child]) -> float:
    """From the first child's start to the last one's end (now, for one still running): the run's
    wall-clock whether its children ran one after another, in pairs or overlapping."""
    started = [c for c in children if c.start]
    if not started:
        return 0.0
    return max(c.start + c.seconds for c in started) - min(c.start for c in started)


def _meta(child: Child, slot: Slot, seed: int, sides: Mapping[str, Side] | None, root: Path,
          final: bool) -> dict[str, Any]:
    child.result = latest_result(child.out_dir)
    meta = child.meta(root)
    if not final and child.status is None:  # a checkpoint: a started child is still running
        meta = {k: v for k, v in meta.items() if k not in ("reason", "tail")}
        meta["status"] = "running" if child.proc is not None else "not run"
    return {
        "index": slot.index, **({"side": slot.side, "pair": slot.pair} if slot.side else {}),
        "pid": None if child.proc is None else child.proc.pid,
        "seed": seed,
        **({"side_env": dict(sides[slot.side].env)} if sides and slot.side else {}),
        **meta,
    }


def _stop_on_write_error(exc: OSError, json_path: Path, document: Callable[[bool], dict[str, Any]],
                         fallback: Callable[[str], dict[str, Any]], console: Any) -> int:
    """A checkpoint of the merged file failed: no child runs on (reaped already); one last try to
    write what the children measured, status failed; exit 1 (a write failed once the file was reserved)."""
    print(f"{common.PROG}: error: {exc}", file=sys.stderr)
    _, csv_path = write_merged(json_path, lambda: {**document(True), "status": "failed", "error": str(exc)},
                               fallback, console)
    if csv_path is not None:
        console.print(f"[red]stopped: the result could not be checkpointed[/red]; what was measured is in "
                      f"{json_path}", soft_wrap=True)
    return 1


def run_repeated(
    *,
    argv: Sequence[str],
    scenario: Any,
    options: RunOptions,
    json_path: Path,
    console: Any,
    show: Show,
    repo_root: Path = REPO_ROOT,
) -> int:
    """--processes N, or --ab (options.ab_sides, options.pairs pairs): run, merge, write, print.
    argv: the command line as typed, recorded in the merged document.
    show(document, note) prints a --processes run's tables (run.py: the scenario's own report or the table)."""
    from dbench.bench.io.results import ResultWriteError, write_result

    sides: tuple[Side, Side] | None = (options.ab_sides[0], options.ab_sides[1]) if options.ab is not None else None
    plan = slots(None if sides else options.processes, options.pairs if sides else None)
    per_side = (options.pairs if sides else options.processes) or 1
    by_side = {"a": sides[0], "b": sides[1]} if sides else None
    json_path = Path(json_path).absolute()  # the children run elsewhere: every path they get is absolute
    work = json_path.parent / f"{json_path.stem}.processes"
    rounds = share(options.rounds, per_side)
    cache = bytecode.shared_folder(work)
    children, seeds = _children(plan, by_side, options, per_side, work, bytecode.child_env(cache))
    _announce(scenario.name, options, plan, sides, rounds, work, cache, console, repo_root)
    merger = _Merger(scenario.name, " ".join(["run.py", *argv]), children, plan, seeds, sides, options, repo_root,
                     cache)
    document, fallback = merger.document, merger.fallback
    try:
        write_result(json_path, document(final=False))  # valid from the start, rewritten after each process
        new_folder(work)  # never one that is there: its logs could be planted links (ResultWriteError)
        if cache is not None:
            new_folder(cache, mode=0o700)  # bytecode the children load: no one else writes in it
        interrupted = run_groups(batches(children, options.duet), rounds, console, repo_root, _parent_cores(options),
                                 on_done=lambda: write_result(json_path, document(final=False)),
                                 overlap=options.overlap_pairs)
    except ResultWriteError as exc:  # a full disk, a folder made read-only or removed: stop cleanly
        return _stop_on_write_error(exc, json_path, document, fallback, console)
    except BaseException as exc:  # an interrupt outside a child's wait, or a bug: the file still ends
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        error = f"{type(exc).__name__}: {exc}"
        write_merged(json_path, lambda: {**document(True), "status": status, "error": error}, fallback, console)
        raise
    merged, csv_path = write_merged(json_path, lambda: document(True), fallback, console)
    if csv_path is None:  # the final write failed (said on stderr): 1, as every failed result write
        return 1
    if not merged["rows"]:
        from rich.markup import escape

        console.print(f"[red]{escape(merged['error'])}[/red] (their logs: {rel(work, repo_root)})", soft_wrap=True)
        return exit_code(children, interrupted, [])
    show(merged, f"{scenario.table_note} Each figure is the median of {len(plan)} processes' medians; "
         "~ marks a row whose process medians spread by more than 10 %.".strip())
    _closing_lines(merged, children, json_path, csv_path, console, repo_root)
    return exit_code(children, interrupted, merged["rows"])


def _announce(name: str, options: RunOptions, plan: Sequence[Slot], sides: tuple[Side, Side] | None, rounds: int,
              work: Path, cache: Path | None, console: Any, repo_root: Path) -> None:
    """The run's first lines: its processes, in which order, where they write, and their shared bytecode."""
    what = (f"A/B, {options.pairs} pairs in the order {order_text(plan)}: A = {sides[0].spec}, B = {sides[1].spec}"
            if sides else f"{len(plan)} processes")
    when = ("one after another" if not options.duet else "each pair's two sides at once (duet), "
            + ("each pair from the end of the previous one's CPU passes" if options.overlap_pairs
               else "the pairs one after another"))
    console.print(f"[bold]{name}[/bold] on {options.device}: {what}, {when}, {rounds} rounds each; "
                  f"logs and each process's result in {rel(work, repo_root)}")
    if cache is not None:
        console.print(f"most modules this process imported have no bytecode on disk: the processes share one cache "
                      f"in {rel(cache, repo_root)} (the first compiles, the others load)")


class _Merger:
    """The one document of a run in processes: the merge of what its children wrote so far."""

    def __init__(self, scenario: str, command: str, children: Sequence[Child], plan: Sequence[Slot],
                 seeds: Sequence[int], sides: tuple[Side, Side] | None, options: RunOptions,
                 repo_root: Path, cache: Path | None) -> None:
        self.scenario, self.command, self.children, self.plan, self.seeds = scenario, command, children, plan, seeds
        self.sides, self.options, self.repo_root = sides, options, repo_root
        # The run's own env entries (each child's result keeps its own env, bytecode_uncached included).
        self.env = {"command": command, **({"bytecode_shared": rel(cache, repo_root)} if cache is not None else {})}
        self.by_side = {"a": sides[0], "b": sides[1]} if sides else None

    def _metas(self, final: bool) -> list[dict[str, Any]]:
        return [_meta(c, s, seed, self.by_side, self.repo_root, final)
                for c, s, seed in zip(self.children, self.plan, self.seeds)]

    def _empty(self, metas: list[dict[str, Any]]) -> dict[str, Any]:
        return empty_merge(self.scenario, "process", metas, {"processes": len(self.plan)},
                           {**self.env, "processes": metas})

    def document(self, final: bool) -> dict[str, Any]:
        """The merge so far: status running until the end (the A/B merge with sides, else the processes')."""
        from dbench.bench.io.env import redact_paths

        docs = [read_doc(latest_result(c.out_dir)) for c in self.children]
        metas = self._metas(final)
        ab = (AbPlan(self.plan, (self.sides[0].spec, self.sides[1].spec), self.options.pairs or 0)
              if self.sides else None)
        if all(d is None for d in docs):
            merged = self._empty(metas)
        else:
            merged = merge(docs, metas, Pairing.AB if ab else Pairing.PROCESSES,
                           config={"rounds": self.options.rounds, "seed": self.options.seed,
                                   **({"duet": True} if self.options.duet else {}),
                                   **({"overlap_pairs": True} if self.options.overlap_pairs else {}),
                                   "wall_seconds": round(wall_seconds(self.children), 2)},
                           env=dict(self.env), ab=ab)
        if not final:
            merged["status"] = "running"
            merged.pop("error", None)
        return redact_paths(merged)

    def fallback(self, error: str) -> dict[str, Any]:
        """The final document when the merge itself breaks: failed, every process named."""
        return {**self._empty(self._metas(True)), "error": error}


def _children(plan: Sequence[Slot], by_side: Mapping[str, Side] | None, options: RunOptions, per_side: int,
              work: Path, cache_env: Mapping[str, str] | None = None) -> tuple[list[Child], list[int]]:
    """One child process of run.py per slot (its side's Python and environment in an A/B run, over
    `cache_env`: the run's shared bytecode, bench/children/bytecode.py), and each one's seed: both
    sides of a pair visit the cases in the same orders."""
    children, seeds = [], []
    for slot in plan:
        seed = (options.seed + slot.pair) % (MAX_SEED + 1)  # a seed near the top wraps, within --seed's range
        side = by_side[slot.side] if by_side and slot.side else None
        out_dir = work / f"process-{slot.index}"
        mine = child_options(options, per_side=per_side, seed=seed, out_dir=out_dir)
        if options.duet:  # the pair's second process pins to the cores next to the first's; overlapping
            # pairs, every other pair to the two slots after those (bench/children/schedule.py)
            slot_of_pair = 2 * (slot.pair % 2) if options.overlap_pairs else 0
            mine = dataclasses.replace(mine, pin_offset=options.pin_offset + slot_of_pair + slot.index % 2,
                                       cpu_done=work / f"process-{slot.index}.cpu-done" if options.overlap_pairs
                                       else None)
            if options.on_cuda:  # and times its GPU passes while no other process does (bench/harness/gpu_turn.py)
                mine = dataclasses.replace(mine, gpu_turn=work / "gpu.turn")
        children.append(Child(slot.index, _name(slot, len(plan)), side.python if side else sys.executable, out_dir,
                              work / f"process-{slot.index}.log", options=mine,
                              env={**(cache_env or {}), **(side.env if side else {})},
                              device=options.device, describe=f"side {side.spec}" if side else ""))
        seeds.append(seed)
    return children, seeds


def _closing_lines(merged: dict[str, Any], children: Sequence[Child], json_path: Path, csv_path: Path, console: Any,
                   repo_root: Path) -> None:
    """After the merged tables: the speed probe's warning and per process, the counts, the files."""
    from dbench.bench.core.probe import instability_note

    unstable = instability_note(merged.get("speed_probe"))
    if unstable:
        console.print(f"[yellow]warning:[/yellow] {unstable}")
    probes = ", ".join("—" if p.get("probe") is None else f"{p['probe']:.3f}" for p in merged["env"]["processes"])
    console.print(f"speed probe per process (µs, in time order): {probes}")
    console.print(f"{merged['status']}: {sum(c.status is not None for c in children)} of {len(children)} processes, "
                  f"{merged['config']['rounds_done']} rounds in all, {merged['config']['wall_seconds']:.1f} s")
    console.print(f"wrote {rel(json_path, repo_root)} and {csv_path.name}")
