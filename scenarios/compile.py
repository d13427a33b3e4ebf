"""`compile`: what torch.compile and CUDA graphs do to each boundary's per-call cost.

Modes (inference inputs): `eager` (the variant called directly), `compiled`
(inside torch.compile(fullgraph=True)), `cudagraph` (one call captured into a
CUDA graph after warm-up, with static buffers, and replayed). Each case is
paired with the same variant's `eager` case. A boundary that cannot compile
or capture is listed with the error instead of being dropped.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import torch
from torch import Tensor

from dbench.bench.core.case import Case
from dbench.ops import InputSpec, OpContract, Variant

from . import DECLARATIONS
from .base import Scenario, Selection, agree, case_grid, grid_plan

MODES: tuple[str, ...] = DECLARATIONS["compile"].modes
_uid = itertools.count()
CUDA_GRAPHS_NEED_CUDA = "CUDA graphs need a CUDA device"


def fresh_function(fn: Callable[..., Tensor], nargs: int, calls: int = 1, first_output: bool = False
                   ) -> Callable[..., Tensor]:
    """A wrapper with its own code object, so every variant gets its own Dynamo
    cache entry (a shared code object would chain guards across variants and
    inflate the compiled cost of later ones). `calls` > 1: a chain of that many
    calls as straight-line code, each output the next call's first argument (the
    regions scenario: Dynamo breaks the graph at each call it cannot trace, where
    a graph break inside a `for` loop would make it skip the whole frame). first_output: the chain
    passes on the first of several outputs."""
    params = ", ".join(f"a{i}" for i in range(nargs))
    name = f"boundary_{next(_uid)}"
    namespace: dict[str, Any] = {"fn": fn}
    pick = "[0]" if first_output else ""
    body = (f"    return fn({params}){pick}\n" if calls == 1
            else f"    a0 = fn({params}){pick}\n" * calls + "    return a0\n")
    exec(f"def {name}({params}):\n{body}", namespace)  # noqa: S102
    return namespace[name]


def exception_line(exc: BaseException) -> str:
    """An exception as a row's reason: its type and the first line of its message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:180]}" if text else type(exc).__name__


def recompiles_on_repeat(compiled: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """Call `compiled` again with the same inputs under Dynamo's fail_on_recompile stance.

    A timed call must hit the cache: a guard that fails on a repeated call (or
    guards chained with another variant's) would make every call recompile or
    walk a long guard list. Returns the reason when it does, else None. (Dynamo's
    cache-entry introspection is not stable across versions; the stance is.)
    """
    try:
        with torch.compiler.set_stance("fail_on_recompile"):
            compiled(*args)
    except Exception as exc:  # noqa: BLE001
        return f"recompiles when called again with the same inputs: {exception_line(exc)}"
    return None


def _compiled_call(variant: Variant,
                   args: tuple[Any, ...]) -> tuple[Callable[[], Any] | None, Tensor | None, str | None]:
    wrapper = fresh_function(variant.fn, len(args))
    try:
        compiled = torch.compile(wrapper, fullgraph=True, dynamic=False)
        out = compiled(*args)
    except Exception as exc:  # noqa: BLE001  # reported in the table, never dropped
        return None, None, f"torch.compile(fullgraph=True) failed: {exception_line(exc)}"
    reason = recompiles_on_repeat(compiled, args)
    if reason is not None:
        return None, None, reason
    return (lambda: compiled(*args)), out, None


def cudagraph_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Callable[[], Any] | None, Any, str | None]:
    """`fn(*args)` captured into a CUDA graph after warm-up (its inputs and output are the graph's
    static buffers): (replay, static output, None), or (None, None, why not)."""
    if not args[0].is_cuda:
        return None, None, CUDA_GRAPHS_NEED_CUDA
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture: lazy init, allocator, JIT
            for _ in range(3):
                fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = fn(*args)
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        torch.cuda.synchronize()
        return None, None, f"CUDA graph capture failed: {exception_line(exc)}"
    return graph.replay, static_out, None


def _check(out: Tensor, contract: OpContract, args: tuple[Any, ...], dtype: torch.dtype) -> str | None:
    try:
        for name, o, e in zip(contract.outputs, contract.outputs_of(out),
                              contract.outputs_of(contract.reference_fp64(args))):
            agree(contract, name, o, e, dtype, f"output {name!r}" if contract.n_outputs > 1 else "")
    except AssertionError as exc:
        return f"result differs from the fp64 reference: {str(exc).splitlines()[0]}"
    return None


def prepare_dynamo() -> None:
    """A clean Dynamo before a scenario compiles its cases. Every variant compiles its own wrapper
    (no recompiles, checked above), but torch 2.11 on the H200 reported FailOnRecompileLimitHit after
    the eighth variant: the limits are raised so the count cannot cut the table short."""
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 4096)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 4096)


def build(sel: Selection) -> list[Case]:
    prepare_dynamo()
    return case_grid(sel, "compile", sel.modes_of(MODES), _baseline, _fill)


def _baseline(op: str, variant: str, mode: str) -> tuple[str, str] | None:
    return None if mode == "eager" else (variant, "eager")


def _fill(case: Case, variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> None:
    case.na_reason = variant.na_reason("inference")
    if case.na_reason is not None:
        return
    args = contract.make_inputs(spec)
    fn = variant.fn
    call: Callable[[], Any] | None
    if mode == "eager":
        call, out, reason = (lambda: fn(*args)), fn(*args), None
    elif mode == "compiled":
        call, out, reason = _compiled_call(variant, args)
    else:
        call, out, reason = cudagraph_call(variant.fn, args)
    case.na_reason = reason
    if out is not None:
        case.error = _check(out, contract, args, spec.dtype)
    if case.na_reason is None and case.error is None:
        case.call = call


SCENARIO = Scenario(
    DECLARATIONS["compile"],
    build=build,
    # Every mode takes inference inputs.
    plan=lambda sel: grid_plan(sel, sel.modes_of(MODES), variant_mode=lambda mode: "inference"),
)
