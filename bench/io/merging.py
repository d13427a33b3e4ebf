"""One merge for every run made of several processes, told how their rows pair.

Every way to run in several processes ends the same way: the children's result documents (None for
one that wrote none) and what the parent knows of each child (meta: name, status, seconds, log...)
become one result document, whose status settles from the children's (bench/io/shard_merge.py
`settle`). What differs is how a row of one child relates to the rows of the others, the pairing:

- SHARDS: the children timed disjoint shares of the cases; a row keeps the pairing it had in its own
  shard (each shard times its baselines), and the rows are the union (bench/io/shard_merge.py).
- PROCESSES: every child timed the same cases one after another; a row's statistics are taken over
  the processes, the unit of a repeated run's noise (bench/io/process_merge.py).
- AB: the children are the two sides of an A/B run in ABBA pairs; each row of side B gets the paired
  ratio B/A over the pairs, with its CI (bench/io/ab.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Pairing(str, Enum):
    SHARDS = "shard"
    PROCESSES = "process"
    AB = "ab"


@dataclass(frozen=True)
class AbPlan:
    """An A/B run's order: the slot of each child (side and pair), the two sides' specs, the pairs."""

    slots: Sequence[Any]
    specs: tuple[str, str]
    pairs: int


def merge(docs: Sequence[Mapping[str, Any] | None], meta: Sequence[Mapping[str, Any]], pairing: Pairing, *,
          config: Mapping[str, Any], env: Mapping[str, Any], ab: AbPlan | None = None) -> dict[str, Any]:
    """The merged document, the parent's `config` and `env` laid over the merge's. At least one child
    must have written a result (ValueError otherwise: the caller's empty document names every child)."""
    if pairing is Pairing.SHARDS:
        from dbench.bench.io.shard_merge import merge_results

        merged = merge_results(docs, meta)
    elif pairing is Pairing.AB:
        from dbench.bench.io.ab import merge_ab

        if ab is None:
            raise ValueError("an A/B merge needs its plan (slots, sides, pairs)")
        merged = merge_ab(docs, meta, ab.slots, ab.specs, ab.pairs)
    else:
        from dbench.bench.io.process_merge import merge_processes

        merged = merge_processes(docs, meta)
    merged["config"].update(config)
    merged["env"].update(env)
    return merged
