"""What a scenario is, as data: its names, defaults, passes and presentation, declared once
(scenarios/__init__.py registers every declaration) and free of torch, so that a command line is
checked against it before torch is imported. The scenario's module adds what needs torch: how its
cases are built and planned (scenarios/base.py Scenario)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from dbench.bench.core.passes import TABLE_PASSES, Pass

# Run options a scenario sets for itself: option -> (full run, --quick). bench/harness/cli.py DEFAULTS holds
# the values every scenario starts from.
Defaults = Mapping[str, tuple[object, object]]


@dataclass(frozen=True, eq=False)  # compared by identity: each scenario has one
class Declaration:
    name: str
    description: str  # one line: what it measures (run.py --list)
    passes: tuple[Pass, ...] = TABLE_PASSES
    # The modes its cases are called in (the columns of its tables); --modes selects among them.
    modes: tuple[str, ...] = ()
    requires_cuda: bool = False
    # Its cases run on CPU tensors only (breakdown: under callgrind): the device is cpu unless
    # --device names another, which is refused before any work.
    cpu_only: bool = False
    # Its own variant names (None: the variant factory's, ops/specs.py).
    variants: tuple[str, ...] | None = None
    # The only ops it takes (None: every op, a user's too), and those it runs when --ops is not
    # given (None: `ops`, or every op).
    ops: tuple[str, ...] | None = None
    default_ops: tuple[str, ...] | None = None
    # Where `ops` is None: ops it takes beside every op (the breakdown: the args scenario's generated ops).
    also_ops: tuple[str, ...] = ()
    defaults: Defaults = field(default_factory=dict)  # on every device
    cuda_defaults: Defaults = field(default_factory=dict)  # on a CUDA device, over `defaults`
    # On a CUDA device in --ab and --processes runs (the nightly, its --processes fallback, the gate's
    # calibration), over `cuda_defaults`: the design the gate was calibrated with, kept apart so that
    # a faster single run does not change what those runs measure. (The pull-request check and bisect
    # gate single runs of each checkout, in turn: scripts/interleave.sh.)
    repeated_cuda_defaults: Defaults = field(default_factory=dict)
    # Presentation. table_note: printed under its tables (what a bracketed Δ is against). tables:
    # the kernel tables of analysis/kernels.py it makes (TABLES there) in place of the boundary
    # table. figures: the figure kinds of analysis/figures.py its results get.
    table_note: str = ""
    tables: str | None = None
    figures: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        passes = tuple(Pass(p) for p in self.passes)  # a misspelt pass fails here, at import
        object.__setattr__(self, "passes", passes)
        if Pass.CUSTOM in passes and len(passes) > 1:
            raise ValueError(f"scenario {self.name}: a custom scenario makes no other pass, got {passes}")
        if Pass.CUSTOM not in passes and Pass.CPU_ROUNDS not in passes:
            raise ValueError(f"scenario {self.name}: cases are built and checked in the CPU rounds' pass: declare it")
        if self.cpu_only and self.requires_cuda:
            raise ValueError(f"scenario {self.name}: cpu_only and requires_cuda exclude each other")
        if self.ops is not None and self.also_ops:
            raise ValueError(f"scenario {self.name}: also_ops adds to every op; with `ops` name them there")
        if self.ops is not None and self.default_ops is not None and not set(self.default_ops) <= set(self.ops):
            raise ValueError(f"scenario {self.name}: default_ops {self.default_ops} outside its ops {self.ops}")
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))
        object.__setattr__(self, "cuda_defaults", MappingProxyType(dict(self.cuda_defaults)))
        object.__setattr__(self, "repeated_cuda_defaults", MappingProxyType(dict(self.repeated_cuda_defaults)))

    def makes(self, p: Pass) -> bool:
        """Whether a run of this scenario makes pass `p`."""
        return p in self.passes

    @property
    def ops_when_unnamed(self) -> tuple[str, ...] | None:
        """The ops a run takes without --ops (None: every op)."""
        return self.default_ops if self.default_ops is not None else self.ops
