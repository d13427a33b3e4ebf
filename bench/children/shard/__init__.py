"""Sharded runs (this package): one table, its cases spread over several processes (one per GPU).

``run.py --gpus all|N`` splits the variants of a run over N child processes,
child i running ``run.py`` with the parent's resolved options, its device
``cuda:i`` and its share of the variants (bench/children/shard/command.py, sent as a
file: bench/harness/options.py), pinned to its own CPU cores (pin offset i). The children are
independent (no NCCL, nothing shared); the parent waits for them, merges their
result files into one and prints the same table a one-GPU run prints.
``run.py --shards N`` is the CPU form of the same mechanism (N processes on the
CPU, each pinned to different cores), used to test it on machines without GPUs.

Plan: the non-baseline variants are spread over the shards by a cost weight
(the number of cases the variant times: a differentiable variant runs in three
modes, the others in inference only); every shard also runs the baseline
variants (boundary: ``raw`` and ``function_raw``), so every paired delta is
computed in one process, against a baseline timed in the same rounds.

Merge (``merge_results``):

* ``rows``: every shard's rows, each with ``shard`` (the shard's index) and
  ``gpu_index`` (the CUDA device index of the row, ``null`` for CPU shards).
  Rows are unique per row identity (bench/core/identity.py), in the
  order a one-process run writes them, so every reader of result files
  (analysis.table, analysis.compare, the CSV) works unchanged.
* The baseline rows of every shard but the first (shard 0 when it produced a
  result) are kept, whole, under ``duplicate_baseline_rows``, each marked
  ``"duplicate_baseline": true``: a row of shard k is paired with shard k's
  baseline, and its samples are needed to re-derive those deltas. They are
  not in ``rows`` because a key that appears twice there would be joined
  twice by analysis.compare and shown once, arbitrarily, by the table.
* ``status``: ``complete`` only when every shard completed; ``failed``
  when a shard failed (its rows, if it wrote any, are kept, and it is named
  under ``failures`` with its exit status and the tail of its output) or
  when nothing was merged (with an ``error`` saying why); else
  ``interrupted``.
* ``config``: shard 0's, with ``rounds_done`` and ``gpu_rounds_done`` the
  minimum over the shards, ``seconds`` the longest shard's CPU pass,
  ``shards`` N and (run.py) ``wall_seconds`` the sharded run's wall-clock.
* ``env``: shard 0's, with ``device`` listing every shard's device,
  ``pinned_cpu`` the union of the shards' cores, ``gpu_index`` null when the
  shards ran on several GPUs, and ``shards``: one entry per shard (index,
  gpu_index, device, variants, seconds (the child process, start to exit),
  rounds_seconds, status, rounds_done, pinned_cpu, speed_probe (its probe's
  median), returncode, command, log, result).
* ``speed_probe``: shard 0's (bench/core/probe.py).

Interrupting the parent (Ctrl-C, SIGTERM) sends SIGTERM to every child, which
run.py turns into a stop after the current round; the parent then merges what
the children wrote (status ``interrupted``, exit 130). The children run in
their own session, so a terminal's Ctrl-C reaches them only through the
parent. No child outlives the parent: on Linux the kernel kills each one
when the parent dies (SIGKILL included), and the parent kills each child's
process group on its own way out. Children get absolute paths only.
"""

from __future__ import annotations

from dbench.bench.children.shard.command import shard_options
from dbench.bench.io.shard_merge import merge_results
from dbench.bench.children.shard.plan import (
    cpp_seconds,
    default_weight,
    plan_shards,
    shard_loads,
    unit_seconds,
    variant_weights,
)
# Where shards run (devices, cores) is decided before any shard exists: bench/harness/placement.py.
from dbench.bench.harness.placement import ShardUsageError, resolve_shards, shard_cores
from dbench.bench.children.shard.process import latest_result, log_tail, read_doc, run_sharded

# plan: devices, variants and cores per shard; command: each child's command line;
# merge: one result from the shards' results; process: the children, their progress, the merged file.
__all__ = [
    "ShardUsageError", "cpp_seconds", "default_weight", "latest_result", "log_tail",
    "merge_results", "plan_shards", "read_doc", "resolve_shards", "run_sharded", "shard_cores", "shard_options",
    "shard_loads", "unit_seconds", "variant_weights",
]
