"""`fusion`: what fusing a chain of k memory-bound steps saves.

The chain (ops/chain.py) applies k cheap elementwise steps to one input. Its
implementations are this scenario's variants:

* `unfused`: k launches of the shared one-step kernels (raw launcher), each
  reading and writing the whole tensor;
* `fused`: one kernel of our own applying all k steps in registers (the
  `chain` op's raw launcher; one template instantiation per k);
* `aten`: the same k steps as eager torch ops (k kernels);
* `compiled`: the aten form under torch.compile (Inductor fuses it; GPU only);
* `triton`: one Triton kernel for the fused chain (the chain's triton_op
  variant; GPU only).

Axes: `k` (1..8) and `size` (bytes of the one input). Modelled traffic: a
fused chain reads and writes the tensor once, an unfused or eager one k times
(ops/chain.py work / unfused_work; eager_work counts the eager form's kernels, two per
multiply-add step), so at sizes far beyond the L2 the
unfused/fused time ratio should approach k; at small sizes every launch costs
its CPU time, and fusion wins by launch count instead. analysis/kernels.py
sets the measured speed-up beside the modelled k.

Before timing: fused, aten, compiled and triton against the fp64 reference;
unfused against fused bit for bit (each step rounds once in both).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import Tensor

from dbench.bench.core.identity import check_unique_labels
from dbench.bench.core.case import Case
from dbench.ops import OPS
from dbench.ops import chain as chain_def

from . import DECLARATIONS
from .base import Axis, Planned, Scenario, Selection, axis_points, case_key, device_sync, static_na_reason
from .kernels import InputPool, check_against, check_exact, compile_tuned, elements_for

VARIANTS: tuple[str, ...] = DECLARATIONS["fusion"].variants or ()
LENGTHS = tuple(range(1, chain_def.MAX_LENGTH + 1))
SIZES_CUDA = (16 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)  # bytes of the input
SIZES_CPU = (16 << 10, 1 << 20, 16 << 20)
(MODE,) = DECLARATIONS["fusion"].modes


def sizes(sel: Selection, op: str = "") -> tuple[int, ...]:
    full = SIZES_CUDA if sel.device.startswith("cuda") else SIZES_CPU
    return (full[0], full[-1]) if sel.quick else full


def lengths(sel: Selection, op: str = "") -> tuple[int, ...]:
    return (1, 2, 4, 8) if sel.quick else LENGTHS


AXES = (Axis("k", lengths), Axis("size", sizes))


def _skip(variant: str, device: str) -> str | None:
    if variant in ("compiled", "triton") and not device.startswith("cuda"):
        return f"{variant} rows are GPU-only here"
    return None


def plan(sel: Selection) -> list[Planned]:
    """Every variant of the chain (k and the sizes change none of the reasons); `triton` is the
    chain's triton_op variant, so it also needs what that one needs."""
    triton = static_na_reason("triton_op", "chain", sel.device, "inference")
    return [Planned("chain", variant, MODE, _skip(variant, sel.device) or (triton if variant == "triton" else None))
            for variant in sel.variants]


def implementations(sel: Selection, pool: InputPool) -> dict[str, Callable[[Tensor, int], Tensor]]:
    """variant -> fn(x, k). Built once per run; compiled keeps one graph per k, each tuned on the
    run's largest input (from `pool`) at its first use."""
    from dbench.ops import get_variant
    from dbench.ops.libraries import raw

    step = raw().kernel.chain
    fused = raw().chain

    def unfused(x: Tensor, k: int) -> Tensor:
        for i in range(k):
            x = step(x, 1, i)
        return x

    impls: dict[str, Callable[[Tensor, int], Tensor]] = {
        "unfused": unfused, "fused": fused, "aten": chain_def.aten_chain}
    if sel.device.startswith("cuda"):
        # One compiled function per k (k is a Python int: a graph each, all of one code object, so
        # Dynamo's per-code recompile limit must admit them); dynamic over the size.
        config = torch._dynamo.config
        limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
        setattr(config, limit, max(getattr(config, limit), 4 * len(LENGTHS)))
        largest = (elements_for(sizes(sel)[-1], sel.dtype),)

        @functools.cache
        def graph(k: int) -> Callable[[Tensor], Tensor]:
            return compile_tuned(functools.partial(chain_def.aten_chain, k=k),
                                 lambda: (pool.args(OPS["chain"], largest)[0],))

        impls["compiled"] = lambda x, k: graph(k)(x)
        triton = get_variant("triton_op", "chain", sel.device)
        if triton.available:
            impls["triton"] = triton.fn
    return impls


def reference(x: Tensor, k: int) -> Tensor:
    return chain_def.reference(x.double(), k).to(x.dtype)


def build(sel: Selection) -> list[Case]:
    contract = OPS["chain"]
    pool = InputPool(sel)
    sync = device_sync(sel.device)
    impls = implementations(sel, pool)
    cases: list[Case] = []
    for point in axis_points(AXES, sel, "chain"):
        k, shape = point["k"], (elements_for(point["size"], sel.dtype),)
        for variant in sel.variants:
            key = case_key("fusion", "chain", variant, MODE, sel.device, shape, sel.dtype, point)
            case = Case(key=key, call=None, sync=sync)
            cases.append(case)
            case.na_reason = _skip(variant, sel.device)
            if case.na_reason is None and variant not in impls:
                case.na_reason = "the triton_op variant is unavailable here"
            if case.na_reason:
                continue
            x = pool.args(contract, shape)[0]
            args = (x, k)
            fused_call = functools.partial(impls["fused"], x, k)
            call: Callable[[], Any] = functools.partial(impls[variant], x, k)
            # Traffic as each form moves it: one pass fused, k passes unfused, one per kernel eager.
            work = {"unfused": chain_def.unfused_work, "aten": chain_def.eager_work}.get(variant, chain_def.work)
            case.work = work(args)
            if variant == "unfused":
                check_exact(case, call, fused_call, "the fused kernel")
            else:
                check_against(case, call, functools.partial(reference, x, k), sel.dtype)
    check_unique_labels(c.key for c in cases)
    return cases


SCENARIO = Scenario(
    DECLARATIONS["fusion"],
    build=build,
    plan=plan,
    axes=AXES,
)
