"""`roofline`: how close each kernel runs to the machine's roofs, by size.

Cases: ops x variants x modes x the axes `size` (bytes per tensor, powers of
4 from 64 KiB; for mm the side n of an n x n x n product, in bfloat16 on a
GPU) and `cache` (warm, or cold: the L2 flushed before every call).
Variants: `raw` (the suite's kernel, called through its launcher), `aten`
(PyTorch's native op of the same semantics) and `compiled` (the aten form
under torch.compile, GPU only: one dynamic graph per op, first called, and so
autotuned, on the op's largest inputs of the run; kernels.compile_tuned).
Modes: `forward`, and `backward` for ops with a backward kernel (l2norm).
Each case's GPU time (CUPTI) is set against its declared work and the roofs
measured in the same run (bench/harness/roofline.py).

Every case is checked at its full size before it is timed: raw and compiled
against aten on the same inputs, aten against the fp64 reference.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from dbench.bench.core.identity import check_unique_labels
from dbench.bench.core.case import Case
from dbench.ops import OPS, OpContract

from . import DECLARATIONS
from .base import Axis, Planned, Scenario, Selection, axis_points, case_key, declared_tolerance
from .kernels import InputPool, check_against, compile_tuned, elements_for, l2_flush, shape_for

VARIANTS: tuple[str, ...] = DECLARATIONS["roofline"].variants or ()
MODES: tuple[str, ...] = DECLARATIONS["roofline"].modes
SIZES_CUDA = tuple(64 * 1024 * 4**k for k in range(9))  # 64 KiB .. 4 GiB per tensor
SIZES_CPU = tuple(64 * 1024 * 4**k for k in range(7))  # 64 KiB .. 256 MiB
ROW = 1024  # l2norm rows of 1024 elements
DEFAULT_OPS: tuple[str, ...] = DECLARATIONS["roofline"].default_ops or ()
# An op sized by its side (OpContract.size_axis "side": a square matrix product, n x n times n x n).
SIDES_CUDA = (256, 512, 1024, 2048, 4096, 8192)
SIDES_CPU = (64, 128, 256, 512)


def sizes(sel: Selection, op: str = "") -> tuple[int, ...]:
    on_gpu = sel.device.startswith("cuda")
    if OPS[op].size_axis == "side":
        full = SIDES_CUDA if on_gpu else SIDES_CPU
    else:
        full = SIZES_CUDA if on_gpu else SIZES_CPU
    return full[::2] if sel.quick else full


# The cache state is the selection's (--cache); `size` is bytes per tensor, or the side n.
AXES = (Axis("size", sizes), Axis("cache", lambda sel, op: tuple(sel.cache)))


def op_dtype(sel: Selection, op: str) -> torch.dtype:
    """The run's dtype, or on a GPU the one the op declares for it (mm: bfloat16, its tensor cores)."""
    gpu_dtype = OPS[op].gpu_dtype
    return gpu_dtype if gpu_dtype is not None and sel.device.startswith("cuda") else sel.dtype


def op_shape(contract: OpContract, size: int, dtype: torch.dtype) -> tuple[int, ...]:
    if contract.size_axis == "side":
        return (size, size, size)
    return shape_for(contract, elements_for(size, dtype), ROW)


def _skip(contract: OpContract, variant: str, mode: str, cache: str, device: str) -> str | None:
    if cache == "cold" and not device.startswith("cuda"):  # first: it rules out the whole cache state here
        return "cold-cache timing flushes a GPU's L2"
    if mode == "backward" and contract.backward_op is None:
        return f"{contract.name} has no backward kernel of its own"
    if variant in ("aten", "compiled") and contract.aten is None:
        return f"{contract.name} declares no native form"
    if variant == "compiled" and not device.startswith("cuda"):
        return "compiled rows are GPU-only here (Inductor's CPU build for every size would dominate the run)"
    if variant == "compiled" and mode == "backward":
        return "a compiled backward recomputes the forward: not the same work"
    if variant == "compiled" and contract.no_compiled_reason:
        return contract.no_compiled_reason
    return None


def plan(sel: Selection) -> list[Planned]:
    """Every op x mode x variant x cache state of the selection (the sizes change none of the reasons)."""
    return [Planned(op, variant, mode, _skip(OPS[op], variant, mode, cache, sel.device), cache)
            for op in sel.ops for mode in sel.modes_of(MODES) for variant in sel.variants for cache in sel.cache]


def _calls(contract: OpContract, args: tuple[Any, ...], mode: str, pool: InputPool,
           compiled: Callable[[str], Callable[..., Any]]) -> dict[str, Callable[[], Any]]:
    """variant -> a zero-argument call doing one call of that variant in `mode` on `args`."""
    from dbench.ops.libraries import raw

    if contract.launchers is not None:
        return _declared_calls(contract, args, mode, pool, compiled)
    if mode == "forward":
        launcher = getattr(raw(), contract.name)
        calls = {"raw": lambda: launcher(*args), "aten": lambda: contract.aten(*args)}
        if not contract.no_compiled_reason:
            calls["compiled"] = lambda: compiled(contract.name)(*args)
        return calls
    # A shipped op's backward kernel takes (grad, every forward argument) and returns one gradient per
    # differentiable tensor argument; grad is shaped like the output, the first argument's shape.
    grad = pool.grad(tuple(args[0].shape))
    backward = getattr(raw(), contract.backward_op or "")
    return {"raw": lambda: backward(grad, *args), "aten": _native_backward(contract, args, [grad])}


class _SavedFor:
    """What an op's setup_context saves, collected outside autograd (the backward kernel's inputs)."""

    saved_tensors: tuple[Any, ...] = ()
    scalars: tuple[Any, ...] = ()  # a declared op's save() keeps its scalar arguments here

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass


def _grads_of(contract: OpContract, outs: Any, pool: InputPool) -> list[torch.Tensor]:
    return [pool.grad(tuple(o.shape), o.dtype) for o in contract.differentiable_outputs(outs)]


def _declared_calls(contract: OpContract, args: tuple[Any, ...], mode: str, pool: InputPool,
                    compiled: Callable[[str], Callable[..., Any]]) -> dict[str, Callable[[], Any]]:
    """A declared op's calls: its own launchers, and its native form eager and compiled (_skip says
    where that runs); its backward kernel on what its forward saved."""
    fwd = contract.launcher(contract.name)
    native = contract.aten
    if mode == "forward":
        theirs = {"aten": lambda: native(*args), "compiled": lambda: compiled(contract.name)(*args)} if native else {}
        return {"raw": lambda: fwd(*args), **theirs}
    ctx = _SavedFor()
    outs = fwd(*args)
    contract.save(ctx, args, outs)
    grads, bwd, scalars = _grads_of(contract, outs, pool), contract.launcher(contract.backward_op or ""), ctx.scalars
    calls = {"raw": lambda: bwd(*grads, *ctx.saved_tensors, *scalars)}
    if native:
        calls["aten"] = _native_backward(contract, args, grads)
    return calls


def _leaves(contract: OpContract, tensors: Any) -> tuple[torch.Tensor, ...]:
    """The op's tensor arguments as autograd leaves, a gradient wanted for its differentiable ones."""
    return tuple(t.detach().requires_grad_(name in contract.differentiable)
                 for t, name in zip(tensors, contract.tensor_args))


def _one_or_all(grads: tuple[torch.Tensor, ...]) -> Any:
    return grads if len(grads) > 1 else grads[0]


def _native_backward(contract: OpContract, args: tuple[Any, ...], grads: list[torch.Tensor]) -> Callable[[], Any]:
    """The backward of the op's native form through autograd, on one recorded graph: the gradients
    the backward kernel computes, PyTorch's way."""
    n = len(contract.tensor_args)
    leaves = _leaves(contract, args[:n])
    outs = contract.differentiable_outputs(contract.aten(*leaves, *args[n:]))
    wrt = contract.grad_inputs(leaves)
    return lambda: _one_or_all(torch.autograd.grad(outs, wrt, grads, retain_graph=True))


def _reference(contract: OpContract, args: tuple[Any, ...], mode: str, pool: InputPool) -> Any:
    """The fp64 reference of the forward, or of the gradient the backward kernel computes."""
    if contract.launchers is not None:
        return _declared_reference(contract, args, mode, pool)
    if mode == "forward":
        return contract.reference_fp64(args).to(args[0].dtype)
    n = len(contract.tensor_args)
    leaves = _leaves(contract, [a.double() for a in args[:n]])
    grad = pool.grad(tuple(args[0].shape))
    got = torch.autograd.grad(contract.reference(*leaves, *args[n:]), contract.grad_inputs(leaves), grad.double())
    wrt = [a for a, name in zip(args[:n], contract.tensor_args) if name in contract.differentiable]
    return _one_or_all(tuple(g.to(a.dtype) for g, a in zip(got, wrt)))


def _declared_reference(contract: OpContract, args: tuple[Any, ...], mode: str, pool: InputPool) -> Any:
    outs = contract.reference_fp64(args)
    if mode == "forward":
        return tuple(o.to(args[0].dtype) if o.dtype == torch.float64 else o for o in contract.outputs_of(outs)) \
            if contract.n_outputs > 1 else outs.to(args[0].dtype)
    grads = _grads_of(contract, contract.launcher(contract.name)(*args), pool)
    n = len(contract.tensor_args)
    a64 = _leaves(contract, [a.double() for a in args[:n]])
    ref = contract.differentiable_outputs(contract.reference(*a64, *args[n:]))
    got = torch.autograd.grad(ref, contract.grad_inputs(a64), [g.double() for g in grads])
    wrt = [a for a, name in zip(args[:n], contract.tensor_args) if name in contract.differentiable]
    return _one_or_all(tuple(g.to(a.dtype) for g, a in zip(got, wrt)))


def build(sel: Selection) -> list[Case]:
    from .base import device_sync

    pool = InputPool(sel)

    @functools.cache  # keyed by name: the lookup runs on every compiled call
    def compiled(op: str) -> Callable[..., Any]:
        """The op's aten form compiled, tuned on its largest inputs in this run (on first use)."""
        contract, dtype = OPS[op], op_dtype(sel, op)
        largest = op_shape(contract, sizes(sel, op)[-1], dtype)
        return compile_tuned(contract.aten, lambda: pool.args(contract, largest, dtype))

    flush = l2_flush(sel.device) if "cold" in sel.cache and sel.device.startswith("cuda") else None
    sync = device_sync(sel.device)
    cases: list[Case] = []
    for op in sel.ops:
        contract = OPS[op]
        dtype = op_dtype(sel, op)
        calls: dict[tuple[int, str], dict[str, Callable[[], Any]]] = {}  # (size, mode) -> variant -> call
        for point in axis_points(AXES, sel, op):
            size, cache = point["size"], point["cache"]
            shape = op_shape(contract, size, dtype)
            for mode in sel.modes_of(MODES):
                for variant in sel.variants:
                    key = case_key("roofline", op, variant, mode, sel.device, shape, dtype, point)
                    if contract.size_axis != "bytes":  # what `size` counts, for the tables (not identity)
                        key["size_axis"] = contract.size_axis
                    case = Case(key=key, call=None, sync=sync)
                    case.na_reason = _skip(contract, variant, mode, cache, sel.device)
                    cases.append(case)
                    if case.na_reason:
                        continue
                    sel.building(case.label)
                    args = pool.args(contract, shape, dtype)
                    if (size, mode) not in calls:
                        calls[(size, mode)] = _calls(contract, args, mode, pool, compiled)
                    made = calls[(size, mode)]
                    work = contract.work if mode == "forward" else contract.backward_work
                    case.work = work(args) if work else None
                    case.flush = flush if cache == "cold" else None
                    if contract.kernel_of is not None and variant == "raw":  # which of its kernels this row times
                        key["kernel"] = contract.kernel_of(*args)
                    # PyTorch's op against the fp64 reference; ours against PyTorch's, on the same inputs.
                    expected = functools.partial(_reference, contract, args, mode, pool) \
                        if variant == "aten" or "aten" not in made else made["aten"]
                    declared = declared_tolerance(contract, dtype)
                    check_against(case, made[variant], expected, dtype, declared[1] if declared else None)
    check_unique_labels(c.key for c in cases)
    return cases


SCENARIO = Scenario(
    DECLARATIONS["roofline"],
    build=build,
    plan=plan,
    axes=AXES,
)
