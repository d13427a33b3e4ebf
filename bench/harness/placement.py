"""Where a run's processes go: the device of every shard (--gpus / --shards) and the cores each
process pins to (--pin-cores / --pin-offset). Decided before any process starts, from the options and
the machine alone (no op or variant is imported here)."""

from __future__ import annotations

import os
from collections.abc import Sequence


class ShardUsageError(ValueError):
    """A --gpus / --shards request that cannot be honoured (run.py exits 2 with the message)."""


def pin_slots(duet: bool, overlap_pairs: bool) -> int:
    """How many children's worth of cores (--pin-cores each), from --pin-offset on, a run's children
    pin to: one at a time; a duet pair's two (side B one slot further); two overlapping pairs' four
    (every other pair two slots further still)."""
    return 4 if overlap_pairs else 2 if duet else 1


def resolve_shards(gpus: str | None, shards: int | None, device: str | None, cuda_count: int) -> list[str]:
    """The device of every shard ([] when neither --gpus nor --shards was given)."""
    if gpus is not None and shards is not None:
        raise ShardUsageError("--gpus and --shards are two forms of one option: give one")
    if gpus is not None:
        if device not in (None, "cuda"):
            raise ShardUsageError(f"--gpus runs shard i on cuda:i; drop --device {device}")
        if cuda_count < 1:
            raise ShardUsageError("--gpus: CUDA is not available on this machine (use --shards N for CPU shards)")
        if gpus == "all":
            n = cuda_count
        else:
            try:
                n = int(gpus)
            except ValueError:
                raise ShardUsageError(f"--gpus takes 'all' or a number of GPUs, got {gpus!r}") from None
            if n < 1:
                raise ShardUsageError(f"--gpus must be at least 1, got {n}")
            if n > cuda_count:
                raise ShardUsageError(f"--gpus {n}: this machine has {cuda_count} CUDA device(s) "
                                      f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})")
        return [f"cuda:{i}" for i in range(n)]
    if shards is not None:
        if device not in (None, "cpu"):
            raise ShardUsageError(f"--shards is the CPU form of --gpus and runs on the CPU only; "
                                  f"for {device} use --gpus")
        if shards < 1:
            raise ShardUsageError(f"--shards must be at least 1, got {shards}")
        return ["cpu"] * shards
    return []


def shard_cores(allowed: Sequence[int], index: int, pin_cores: int) -> list[int]:
    """The cores process `index` pins to with --pin-cores P --pin-offset index: the P allowed cores that
    end index x P cores from the last one (run.py pin_cpus pins to these)."""
    cpus = sorted(allowed)
    end = len(cpus) - index * pin_cores
    if pin_cores <= 0:
        return []
    if end - pin_cores < 0:
        raise ShardUsageError(f"shard {index} needs cores {index * pin_cores + 1}..{(index + 1) * pin_cores} "
                              f"from the end, but only {len(cpus)} are allowed")
    return cpus[end - pin_cores:end]
