"""`regions`: a chain of N calls of one registration variant, run eagerly, compiled as one region and
replayed from one CUDA graph: what each boundary costs per op inside a region, and from which N
compiling or capturing pays back.

Cases: op x variant x mode x the axis `length` (N, the chain length: 1, 4, 16, 64; --quick 1, 4,
16; not `n`, every row's count of samples), inference inputs. The chain is x = f(x, *rest) N times,
the output of each call (the first, of several) the first argument of the next: any op, a user's
too, whose first output has its first input's shape and dtype (chain_rule; others are n/a). Modes:

* `eager`: the chain called directly;
* `compiled`: the chain inside torch.compile(fullgraph=True). A chain Dynamo cannot trace as one
  graph is compiled again without fullgraph (what a model containing it gets) and timed as such:
  its row carries the graph breaks counted and the first one's reason, never dropped. Clean
  graphs have graph_breaks 0;
* `cudagraph`: the eager chain captured into one CUDA graph after warm-up (static buffers) and
  replayed (n/a without a CUDA device).

Compiled and cudagraph cases are paired with the same variant's eager case at the same N. Each
row's median is µs per chain call (analysis/kernels.py divides by N); compiled and cudagraph rows
also carry first_call_s, the compile (or warm-up and capture) timed once while the cases are
built, outside the rounds. Every chain's output is checked against the fp64 reference chain.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections import Counter
from dataclasses import replace
from typing import Any, Callable, Iterator

import torch
from torch import Tensor

from dbench.bench.core.case import Case
from dbench.ops import InputSpec, OpContract, Variant

from . import DECLARATIONS
from .base import TOLERANCES, Axis, Tolerance, Planned, Scenario, Selection, case_grid, grid_plan
from .compile import (CUDA_GRAPHS_NEED_CUDA, cudagraph_call, exception_line, fresh_function, prepare_dynamo,
                      recompiles_on_repeat)

MODES: tuple[str, ...] = DECLARATIONS["regions"].modes
CHAIN_LENGTHS = (1, 4, 16, 64)
QUICK_LENGTHS = (1, 4, 16)
# The other tensor arguments are scaled to at most this magnitude, so that 64 calls of
# x = x * b + c (muladd) contract instead of growing like |b|^64.
BOUND = 0.9

Call = Callable[[], Any]
Built = tuple[Call | None, Any, str | None]  # (the timed call, one output, why there is none)


def lengths(sel: Selection, op: str = "") -> tuple[int, ...]:
    return QUICK_LENGTHS if sel.quick else CHAIN_LENGTHS


AXES = (Axis("length", lengths),)


def chain_rule(contract: OpContract) -> str | None:
    """Why the op cannot be chained (None: it can): its first output must be able to stand in for its
    first input. Asked of its fake on the boundary inputs (metadata only: no kernel runs)."""
    args = contract.make_inputs(InputSpec(contract.boundary_shape))
    first = args[0]
    if not isinstance(first, Tensor):
        return f"{contract.name}'s first argument is a list: no output can take its place in a chain"
    try:
        out = contract.outputs_of(contract.fake(*args))[0]
    except Exception as exc:  # noqa: BLE001  # the op's own checks (boundary) say more; here: no chain
        return f"{contract.name}'s fake failed on its boundary inputs ({exception_line(exc)}): no chain"
    if out.shape != first.shape or out.dtype != first.dtype:
        return (f"{contract.name}'s first output ({tuple(out.shape)}, {str(out.dtype).removeprefix('torch.')}) cannot "
                f"be its next call's first input ({tuple(first.shape)}, {str(first.dtype).removeprefix('torch.')}): "
                "no chain")
    return None


def chain_inputs(contract: OpContract, spec: InputSpec) -> tuple[Any, ...]:
    """The op's inputs, the tensors after the first scaled to magnitude <= BOUND (the chain stays
    bounded); scalars as they are."""
    args = contract.make_inputs(spec)
    first, rest = args[0], args[1:]
    return (first, *(a * (BOUND / a.abs().max().clamp_min(1e-12)) if isinstance(a, Tensor) else a for a in rest))


def chain_reference(contract: OpContract, args: tuple[Any, ...], n: int) -> Tensor:
    """The chain in float64, from the same inputs."""
    ref = list(args)
    for _ in range(n):
        ref[0] = contract.outputs_of(contract.reference_fp64(tuple(ref)))[0]
    return ref[0]


def check_chain(out: Tensor, contract: OpContract, args: tuple[Any, ...], n: int) -> str | None:
    """The chain's output against the fp64 chain; the tolerance grows with n (n rounded calls)."""
    one = TOLERANCES[args[0].dtype]
    tol = Tolerance(atol=one["atol"] * n, rtol=one["rtol"] * n)
    try:
        torch.testing.assert_close(out.double().cpu(), chain_reference(contract, args, n).cpu(), **tol)
    except AssertionError as exc:
        return f"chain of {n} differs from the fp64 reference: {str(exc).splitlines()[0]}"
    return None


# ---------------------------------------------------------------- compiled: graphs, breaks, first call

@contextlib.contextmanager
def cold_compile() -> Iterator[None]:
    """Inductor's caches off for a first call: its seconds are a cold compile in every run, not what an
    earlier run happened to leave on disk."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(force_disable_caches=True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")  # what we asked for
        yield


def dynamo_counts() -> tuple[Counter[str], int]:
    """Dynamo's graph breaks so far (reason -> count) and the graphs it has compiled. torch._dynamo.explain
    cannot say this for a chain of untraceable calls: it reports no graph, -1 breaks and no reasons
    (torch 2.13), while Dynamo's counters record each break with its reason."""
    from torch._dynamo.utils import counters

    return Counter(counters["graph_break"]), int(counters["stats"]["unique_graphs"])


def first_call(compiled: Callable[..., Any], args: tuple[Any, ...], sync: Call) -> tuple[Any, dict[str, Any]]:
    """The compiled chain's first call (the compile), cold and timed, and what Dynamo made of it:
    graph_breaks, graphs, the first break's reason (graph_break_reason)."""
    breaks, graphs = dynamo_counts()
    start = time.perf_counter()
    with cold_compile():
        out = compiled(*args)
    sync()
    seconds = time.perf_counter() - start
    breaks_after, graphs_after = dynamo_counts()
    new = breaks_after - breaks
    reason = next(iter(new), None)
    facts = {"graph_breaks": sum(new.values()), "graphs": graphs_after - graphs, "first_call_s": round(seconds, 4),
             "graph_break_reason": " ".join(reason.split())[:240] if reason else None}
    return out, facts


def compiled_region(make: Callable[[], Callable[..., Any]], args: tuple[Any, ...], sync: Call
                    ) -> tuple[Built, dict[str, Any]]:
    """A fresh chain (make()) under torch.compile(fullgraph=True); where Dynamo refuses one graph, a
    fresh chain compiled without fullgraph, its breaks counted. ((call, output, reason), row facts)."""
    try:
        compiled = torch.compile(make(), fullgraph=True, dynamic=False)
        out, facts = first_call(compiled, args, sync)
    except Exception as exc:  # noqa: BLE001  # a graph break: compiled again below, and shown as broken
        refused = exception_line(exc)
        try:
            compiled = torch.compile(make(), dynamic=False)
            out, facts = first_call(compiled, args, sync)
        except Exception as again:  # noqa: BLE001  # reported in the table, never dropped
            return (None, None, f"torch.compile failed with and without fullgraph: {exception_line(again)}"), {}
        # The first break's own reason says more than fullgraph's error, which names it again.
        facts["graph_break_reason"] = facts["graph_break_reason"] or f"fullgraph=True refused it: {refused}"
    reason = recompiles_on_repeat(compiled, args)
    return ((None, None, reason) if reason else ((lambda: compiled(*args)), out, None)), facts


def captured_region(chain: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Built, dict[str, Any]]:
    """The eager chain in one CUDA graph; first_call_s: its warm-up, capture and first replay."""
    start = time.perf_counter()
    built = cudagraph_call(chain, args)
    return built, ({"first_call_s": round(time.perf_counter() - start, 4)} if built[0] is not None else {})


# ---------------------------------------------------------------- the cases

def na_reason(contract: OpContract, mode: str, device: str) -> str | None:
    """Why an op or a mode has no cases on this device (the plan and the cases say the same)."""
    if mode == "cudagraph" and not device.startswith("cuda"):
        return CUDA_GRAPHS_NEED_CUDA
    return _chain_rule(contract.name, contract.origin)


@functools.cache
def _chain_rule(name: str, origin: str) -> str | None:  # once per op (its fake runs once)
    from dbench.ops import OPS

    return chain_rule(OPS[name])


def _fill(case: Case, variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> None:
    case.na_reason = variant.na_reason("inference")
    if case.na_reason is not None:
        return
    n = case.key["length"]
    args = chain_inputs(contract, spec)

    def chain() -> Callable[..., Any]:  # a fresh code object each time (compile.fresh_function)
        return fresh_function(variant.fn, len(args), calls=n, first_output=contract.n_outputs > 1)

    facts: dict[str, Any] = {}
    if mode == "eager":
        eager = chain()
        built: Built = ((lambda: eager(*args)), eager(*args), None)
    elif mode == "compiled":
        built, facts = compiled_region(chain, args, case.sync)
    else:
        built, facts = captured_region(chain(), args)
    case.key.update(facts)  # row fields beside the key's identity (bench/core/identity.py reads only the axes)
    call, out, case.na_reason = built
    if out is not None:
        case.error = check_chain(out, contract, args, n)
    if case.na_reason is None and case.error is None:
        case.call = call


def warm_up_compiler(device: str) -> None:
    """One cold compile of a small elementwise function before the cases: the process's one-time
    compiler start-up (Inductor's imports, the C++ or Triton toolchain, its compile workers: 20 s on a
    2-core CPU) lands in no row's first_call_s, which would otherwise charge it to whichever chain
    compiles first."""
    x = torch.ones(8, device=device)
    with cold_compile():
        torch.compile(fresh_function(torch.mul, 2, calls=2), fullgraph=True, dynamic=False)(x, x)


def build(sel: Selection) -> list[Case]:
    prepare_dynamo()
    if "compiled" in sel.modes_of(MODES):
        warm_up_compiler(sel.device)
    return case_grid(sel, "regions", sel.modes_of(MODES), _baseline, _fill, axes=AXES,
                     skip=lambda contract, variant, mode, point: na_reason(contract, mode, sel.device))


def _baseline(op: str, variant: str, mode: str) -> tuple[str, str] | None:
    return None if mode == "eager" else (variant, "eager")


def plan(sel: Selection) -> list[Planned]:
    """Every mode takes inference inputs; cudagraph needs a CUDA device; an op must chain."""
    from dbench.ops import OPS

    planned = grid_plan(sel, sel.modes_of(MODES), variant_mode=lambda mode: "inference")
    return [replace(p, na_reason=p.na_reason or na_reason(OPS[p.op], p.mode, sel.device)) for p in planned]


SCENARIO = Scenario(
    DECLARATIONS["regions"],
    build=build,
    plan=plan,
    axes=AXES,
)
