"""A run's options, typed and resolved once: what the harness, the scenarios and child processes read.

The command line (bench/harness/cli.py) parses and checks the words; `resolve` turns them, once the device
is known, into a frozen `RunOptions` by applying every layer of defaults in one place:

    the global defaults (bench/core/defaults.py)  <  the scenario's  <  on CUDA, the scenario's CUDA ones
    <  on CUDA in an --ab or --processes run, its repeated-run ones;  the --quick column of each.

A child process (--processes, --ab, --gpus, --shards) gets its options as JSON (`to_json`, read
back by `from_json`), never as a rewritten command line: the parent's resolved options with the
child's share and place replaced (`dataclasses.replace`). Standard library only: run.py builds the
options before torch is imported where it can.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbench.bench.core.defaults import DEFAULTS
from dbench.bench.harness.placement import pin_slots

Layer = Mapping[str, tuple[Any, Any]]  # option -> (full run, --quick)

OPTIONS_SCHEMA = "dbench-options/1"


@dataclass(frozen=True)
class RunOptions:
    """Every option of a run, each with one meaning. Tuples where the command line takes lists;
    None where the option was not given and nothing fills it (ops: the scenario's default ops)."""

    scenario: str
    device: str  # resolved: cpu, cuda:N (a parent of --gpus/--shards: its first shard's)
    # what is timed
    ops: tuple[str, ...] | None = None
    op_files: tuple[str, ...] = ()  # --op FILE.py[:NAME], resolved paths
    user_ops: tuple[str, ...] = ()  # the op names the --op files declare
    variants: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    dtype: str = "float32"
    shapes: tuple[tuple[int, ...], ...] = ()  # --shape, repeatable (empty: each op's own)
    axis_values: tuple[tuple[str, tuple[str, ...]], ...] = ()  # --axis NAME=V,...: the values of an axis kept
    cache: tuple[str, ...] = ("warm",)
    # how it is timed
    rounds: int = DEFAULTS["rounds"][0]
    quick: bool = False
    adaptive: bool = False
    precision: float = 0.01
    time_budget: float | None = None  # seconds
    block_ms: float = DEFAULTS["block_ms"][0]
    warmup_ms: float = DEFAULTS["warmup_ms"][0]
    order: str = DEFAULTS["order"][0]
    seed: int = 0
    gpu_timer: str = "cupti"
    gpu_rounds: int = DEFAULTS["gpu_rounds"][0]
    cpp_repetitions: int = DEFAULTS["cpp_repetitions"][0]
    cpp_min_time: float = DEFAULTS["cpp_min_time"][0]
    no_cpp: bool = False
    # where and in how many processes
    pin_cores: int = 1  # 0: no pinning (--no-pin)
    pin_offset: int = 0
    gpus: str | None = None
    shards: int | None = None
    processes: int | None = None
    ab: tuple[str, str] | None = None
    pairs: int | None = None  # --ab only: ABBA pairs
    duet: bool = False  # --ab only: a pair's two processes at once, each on its own cores
    overlap_pairs: bool = False  # --duet only: a pair starts when the one before has done its CPU passes
    # --ab's sides, checked (bench/harness/sides.py Side); the parent's alone: not sent to children
    ab_sides: tuple[Any, ...] = field(default=(), metadata={"json": False})
    shard_child: bool = False  # a sharded run's child: times its share as given
    gpu_turn: Path | None = None  # a duet run's lock file: its GPU passes take turns (bench/harness/gpu_turn.py)
    cpu_done: Path | None = None  # made once this child's CPU passes are over (bench/children/schedule.py)
    # what is done with the result
    out: Path | None = None
    default_out: Path = field(default_factory=lambda: Path("dbench-results").absolute())
    baseline: Path | None = None
    baseline_files: tuple[Path, ...] = ()
    plot: bool = False

    @property
    def repeated(self) -> bool:
        """An --ab or --processes run: this process starts children and times nothing itself."""
        return self.ab is not None or self.processes is not None

    @property
    def pin_slots(self) -> int:
        return pin_slots(self.duet, self.overlap_pairs)

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def for_child(self, **changes: Any) -> RunOptions:
        """A child process's options: these with `changes`, and none of what only the parent does
        (repeat, pair, shard, gate, plot)."""
        parent_only = dict(processes=None, ab=None, pairs=None, duet=False, overlap_pairs=False, ab_sides=(), gpus=None,
                           shards=None, baseline=None, baseline_files=(), plot=False)
        return dataclasses.replace(self, **{**parent_only, **changes})

    def to_json(self) -> str:
        values = {f.name: _plain(getattr(self, f.name))
                  for f in dataclasses.fields(self) if f.metadata.get("json", True)}
        return json.dumps({"schema": OPTIONS_SCHEMA, "options": values}, indent=1)

    @staticmethod
    def from_json(text: str) -> RunOptions:
        """Options a parent wrote (to_json); ValueError names what does not fit."""
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("schema") != OPTIONS_SCHEMA:
            raise ValueError(f"not a run's options (schema {OPTIONS_SCHEMA!r})")
        values = document.get("options")
        known = {f.name: f for f in dataclasses.fields(RunOptions) if f.metadata.get("json", True)}
        if not isinstance(values, dict):
            raise ValueError("its options are not an object")
        unknown, missing = sorted(set(values) - set(known)), sorted({"scenario", "device"} - set(values))
        if unknown or missing:  # written by another version of the suite
            raise ValueError(f"unknown options {unknown}, missing {missing}: the parent is another version")
        return RunOptions(**{k: _typed(known[k], v) for k, v in values.items()})


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _typed(f: dataclasses.Field[Any], value: Any) -> Any:
    """A JSON value back as the field's type: lists as tuples, path texts as Paths."""
    kind = str(f.type)
    if value is None:
        return None
    if "Path" in kind:
        return tuple(Path(v) for v in value) if isinstance(value, list) else Path(value)
    return _tupled(value)


def _tupled(value: Any) -> Any:
    """Lists as tuples, nested ones too (the shapes of --shape)."""
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value


def defaults_for(declared: Any, device: str, quick: bool, repeated: bool) -> dict[str, Any]:
    """Every layer of run defaults for this scenario, device and kind of run, as one mapping:
    later layers win. declared: the scenario's Declaration (None: the global defaults only)."""
    layers: list[Layer] = [DEFAULTS]
    if declared is not None:
        layers.append(declared.defaults)
        if device.startswith("cuda"):
            layers.append(declared.cuda_defaults)
            if repeated:
                layers.append(declared.repeated_cuda_defaults)
    column = 1 if quick else 0
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({name: values[column] for name, values in layer.items()})
    return merged


def resolve(args: argparse.Namespace, declared: Any, device: str, user_ops: tuple[str, ...] = ()) -> RunOptions:
    """The one place a run's options are made: the checked command line (bench/harness/cli.py parse), its
    unset options filled from `defaults_for`; device: the resolved device."""
    repeated = args.ab is not None or args.processes is not None
    defaults = defaults_for(declared, device, args.quick, repeated)
    given = {name: getattr(args, name) for name in defaults}
    timing = {name: defaults[name] if value is None else value for name, value in given.items()}
    return RunOptions(
        scenario=args.scenario, device=device, ops=_tuple(args.ops), op_files=tuple(args.op or ()),
        user_ops=tuple(user_ops), variants=_tuple(args.variants), modes=_tuple(getattr(args, "modes", None)),
        dtype=args.dtype, shapes=tuple(tuple(s) for s in args.shape or ()),
        axis_values=tuple((name, tuple(values)) for name, values in args.axis or ()), cache=tuple(args.cache),
        quick=args.quick, adaptive=args.adaptive, precision=args.precision, time_budget=args.time_budget,
        seed=args.seed, gpu_timer=args.gpu_timer, no_cpp=args.no_cpp, **timing,
        pin_cores=0 if args.no_pin else args.pin_cores, pin_offset=args.pin_offset, gpus=args.gpus,
        shards=args.shards, processes=args.processes, ab=_pair(args.ab),
        pairs=args.pairs if args.ab is not None else None, duet=args.duet,
        overlap_pairs=args.overlap_pairs,
        ab_sides=tuple(getattr(args, "ab_sides", ()) or ()),
        shard_child=args.shard_child, out=args.out, default_out=args.default_out, baseline=args.baseline,
        baseline_files=tuple(getattr(args, "baseline_files", ()) or ()), plot=args.plot)


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _pair(value: Any) -> tuple[str, str] | None:
    return None if value is None else (str(value[0]), str(value[1]))


# ---------------------------------------------------------------------------
# Child processes: the parent writes each child's options to a file of its run's folder, and the
# child's whole command line is `run.py --options-file FILE`.

CHILD_FLAG = "--options-file"


def child_command(python: str, script: Path | str, options_file: Path) -> list[str]:
    return [python, str(script), CHILD_FLAG, str(options_file)]


def write_child_options(options: RunOptions, path: Path) -> None:
    """A new file (never one that is there, never through a link: bench/core/trust.py open_new_file)."""
    import os

    from dbench.bench.core.trust import open_new_file

    with os.fdopen(open_new_file(path), "w") as out:
        out.write(options.to_json() + "\n")


def child_options_file(words: list[str]) -> Path | None:
    """The options file of a child's command line (None: a user's command line, which cli.parse reads)."""
    if words[:1] != [CHILD_FLAG]:
        return None
    if len(words) != 2:
        from dbench.bench.harness.cli import UsageError

        raise UsageError(f"{CHILD_FLAG} FILE is a child process's whole command line (its parent writes FILE); "
                         f"got {len(words) - 1} more word(s)")
    return Path(words[1])


def read_child_options(path: Path) -> RunOptions:
    """A child's options, as its parent resolved them (UsageError naming the file when it cannot)."""
    try:
        return RunOptions.from_json(path.read_text())
    except (OSError, ValueError, TypeError) as exc:
        from dbench.bench.harness.cli import UsageError

        raise UsageError(f"{CHILD_FLAG} {path}: {getattr(exc, 'strerror', None) or exc}") from None
