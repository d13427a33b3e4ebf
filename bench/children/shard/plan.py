"""The shard plan: which variants each shard times, and what that costs (run.py --gpus / --shards); which
devices and cores the shards get is bench/harness/placement.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NoReturn

# bench/cpp driver: direct, typed, boxed, stable, autograd x 3 forward-only modes + autograd x 2.
CPP_BENCHMARKS_PER_OP = 17


def default_weight(variant: str) -> float:
    """Cases a variant times per op in the boundary scenario: every mode with autograd, else the
    modes that record no graph."""
    from dbench.ops.variants import MODES, SPECS, needs_gradient

    spec = SPECS.get(variant)
    differentiable = spec is None or spec.differentiable
    return float(sum(differentiable or not needs_gradient(m) for m in MODES))


def _weighed_only(*args: object, **kwargs: object) -> NoReturn:
    """The function of a variant made only to weigh it (its na_reason): never called."""
    raise AssertionError("a variant made to weigh a shard is never called")


def variant_weights(variants: Sequence[str], ops: Sequence[str], device: str, modes: Sequence[str]) -> dict[str, float]:
    """Runnable cases per variant on `device` (a variant this machine lacks weighs 0)."""
    from dbench.ops.catalog import OPS
    from dbench.ops.variants import MODES, SPECS, Variant, unavailable_reason

    weights = {}
    for name in variants:
        spec = SPECS.get(name)
        if spec is None or not ops:
            weights[name] = default_weight(name) * max(1, len(ops))
            continue
        try:
            reason = unavailable_reason(spec, device)
        except Exception:  # noqa: BLE001  # e.g. the native build is missing: the children will say so
            reason = None
        v = Variant(spec, OPS[ops[0]], _weighed_only, reason)
        runs = sum(v.na_reason(m if m in MODES else MODES[0]) is None for m in modes)
        weights[name] = float(runs * len(ops))
    return weights


def plan_shards(
    variants: Sequence[str],
    n: int,
    baselines: Sequence[str],
    weights: Mapping[str, float] | None = None,
    preload: Sequence[float] | None = None,
) -> list[tuple[str, ...]]:
    """Split `variants` over at most `n` shards; each shard is a tuple of variant names.

    The non-baseline variants go to exactly one shard each, heaviest first to
    the least-loaded shard (ties: lower weight index, then lower shard index),
    so the loads differ by at most one variant's weight. Every shard also gets
    the selected baselines, so pairing stays within a process. `preload[i]` is
    work shard i already has (e.g. the C++ driver section), in weight units.
    There are never more shards than non-baseline variants (at least one shard);
    each shard lists its variants in the order of `variants`. Deterministic.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    variants = list(dict.fromkeys(variants))
    base = [v for v in variants if v in set(baselines)]
    rest = [v for v in variants if v not in set(baselines)]
    k = max(1, min(n, len(rest)))
    weight = {v: float(weights[v]) if weights is not None and v in weights else default_weight(v) for v in rest}
    loads = [float(preload[i]) if preload is not None and i < len(preload) else 0.0 for i in range(k)]
    members: list[set[str]] = [set() for _ in range(k)]
    for _, v in sorted(enumerate(rest), key=lambda iv: (-weight[iv[1]], iv[0])):
        target = min(range(k), key=lambda s: (loads[s], s))
        members[target].add(v)
        loads[target] += weight[v]
    return [tuple(v for v in variants if v in set(base) or v in members[s]) for s in range(k)]


def shard_loads(plan: Sequence[Sequence[str]], baselines: Sequence[str],
                weights: Mapping[str, float] | None = None) -> list[float]:
    """Weight of the non-baseline variants of every shard (what plan_shards balances)."""
    return [sum(float(weights[v]) if weights is not None and v in weights else default_weight(v)
                for v in shard if v not in set(baselines)) for shard in plan]


def unit_seconds(rounds: int, block_seconds: float, warmup_seconds: float, gpu_rounds: int = 0) -> float:
    """Rough seconds one runnable case costs a shard (rounds, warm-up, GPU pass; runner overhead ~1.6x)."""
    return 1.6 * block_seconds * (rounds + gpu_rounds) + warmup_seconds + 0.01


def cpp_seconds(n_ops: int, repetitions: int, min_time: float) -> float:
    """Rough seconds of the C++ driver section for n_ops ops."""
    return 1.3 * n_ops * CPP_BENCHMARKS_PER_OP * repetitions * min_time + 1.0
