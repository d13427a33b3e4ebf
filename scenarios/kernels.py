"""What the kernel scenarios (roofline, launch, fusion) share: sizes, inputs shared across cases, the
compiled forms, the L2 flush, and the full-size check of each case against PyTorch's own op."""

from __future__ import annotations

import math

from typing import Any, Callable

import torch
from torch import Tensor

from dbench.bench.core.case import CASE_ERRORS, Case, first_line
from dbench.ops import InputSpec, OpContract

from .base import Point, Selection

MIN_FLUSH_BYTES = 256 << 20
# ||out - ref|| / ||ref|| bounds per dtype (half types: fp32 accumulation, rounded output).
REL_ERROR = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def elements_for(size_bytes: int, dtype: torch.dtype) -> int:
    return max(1, size_bytes // torch.empty((), dtype=dtype).element_size())


def shape_for(contract: OpContract, elements: int, row: int) -> tuple[int, ...]:
    """The shape of `elements` elements: the op's own `sized` when it declares one; rows of `row`
    elements (fewer when smaller) for row-wise ops; a user op's declared shape with its first
    dimension scaled (at least one of its trailing blocks); 1-D for the suite's elementwise ops."""
    if contract.sized is not None:
        shape = tuple(int(n) for n in contract.sized(elements))
        if not shape or any(n < 1 for n in shape):
            raise ValueError(f"{contract.name}: sized({elements}) gave {shape}, not a shape of positive sizes")
        return shape
    if contract.rowwise:
        cols = min(row, elements)
        return (max(1, elements // cols), cols)
    trailing = _trailing(contract)
    if trailing:
        return (max(1, elements // math.prod(trailing)), *trailing)
    return (elements,)


def _trailing(contract: OpContract) -> tuple[int, ...]:
    """A user op's declared shape past its first dimension (what shape_for keeps when it scales it)."""
    if contract.origin is None or contract.sized is not None or contract.rowwise:
        return ()
    return tuple(contract.boundary_shape[1:])


def below_one_block(contract: OpContract, elements: int) -> str | None:
    """Why `elements` cannot size the op (n/a): fewer than one block of its declared trailing shape."""
    trailing = _trailing(contract)
    if trailing and elements < math.prod(trailing):
        return (f"{elements} elements are fewer than one {trailing} block of {contract.name}'s declared shape "
                f"{tuple(contract.boundary_shape)} (declare sized= for another shape family)")
    return None


class InputPool:
    """One set of inputs per op x shape x dtype, shared by every case that uses it: the largest
    sizes are gigabytes, and a copy per variant, mode and cache state would not fit."""

    def __init__(self, sel: Selection) -> None:
        self.sel = sel
        self._args: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._grads: dict[tuple[Any, ...], Tensor] = {}

    def args(self, contract: OpContract, shape: tuple[int, ...], dtype: torch.dtype | None = None) -> tuple[Any, ...]:
        dtype = dtype or self.sel.dtype
        key = (contract.name, shape, dtype)
        if key not in self._args:
            spec = InputSpec(shape, dtype, self.sel.device, seed=self.sel.seed, on_device=True)
            self._args[key] = contract.make_inputs(spec)
        return self._args[key]

    def grad(self, shape: tuple[int, ...], dtype: torch.dtype | None = None) -> Tensor:
        dtype = dtype or self.sel.dtype
        if (shape, dtype) not in self._grads:
            gen = torch.Generator(device=self.sel.device).manual_seed(self.sel.seed + 1)
            self._grads[(shape, dtype)] = torch.randn(shape, generator=gen, dtype=dtype, device=self.sel.device)
        return self._grads[(shape, dtype)]


def compile_tuned(fn: Callable[..., Tensor], example: Callable[[], tuple[Any, ...]]) -> Callable[..., Tensor]:
    """torch.compile(fn, fullgraph=True, dynamic=True): one graph for every size, its first call made
    here on `example()` (the run's largest inputs) with Inductor's on-disk caches off.

    Inductor autotunes a dynamic kernel once, at its first call, and keeps the choice on disk for
    later processes. On the H200, compiled addcmul first called at 64 KiB ran 256 MiB at 2549 GB/s
    (XBLOCK 128, 4 warps); first called at 256 MiB, at 3516 GB/s (XBLOCK 512, 8 warps;
    scripts/inductor_first_call.py, results/h200/logs/inductor-first-call-*.log). A roofline
    row is about the large sizes, and it must not depend on what an earlier process compiled."""
    compiled = torch.compile(fn, fullgraph=True, dynamic=True)
    with torch._inductor.config.patch(fx_graph_cache=False, autotune_local_cache=False):
        compiled(*example())
    return compiled


def l2_flush(device: str) -> Callable[[], None]:
    """A write over more than the L2 (twice its size, at least 256 MiB), as nvbench flushes it."""
    props = torch.cuda.get_device_properties(torch.device(device))
    buffer = torch.empty(max(2 * props.L2_cache_size, MIN_FLUSH_BYTES) // 4, dtype=torch.float32, device=device)

    def flush() -> None:
        buffer.zero_()

    return flush


def check_against(case: Case, call: Callable[[], Tensor], expected: Callable[[], Tensor], dtype: torch.dtype,
                  bound: float | None = None) -> None:
    """The case's output at its full size against `expected()` (PyTorch's own op on the same inputs):
    a mismatch makes the case FAILED (never timed); its call is set only when it passes. bound: the
    relative error allowed (default REL_ERROR of the dtype; a declared op's own rtol)."""
    limit = REL_ERROR[dtype] if bound is None else bound

    def close(got: Tensor, want: Tensor) -> None:
        # Norm-wise (an elementwise rtol fails on a product's cancelled entries); NaN never passes.
        rel = float((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30))
        if not rel < limit:
            raise AssertionError(f"relative error {rel:.2e}, bound {limit:.0e}"
                                 + ("" if bound is None else " (the op's declared rtol)"))

    _checked(case, call, expected, close, "full-size check against PyTorch failed")


def check_exact(case: Case, call: Callable[[], Tensor], twin: Callable[[], Tensor], what: str) -> None:
    """`call` must equal `twin()` bit for bit (e.g. int64 offsets against int32, unfused against
    fused); only then is the case timed."""
    def equal(got: Tensor, want: Tensor) -> None:
        if not torch.equal(got, want):
            raise AssertionError(f"differs from {what} ({int((got != want).sum())} elements)")

    _checked(case, call, twin, equal, "exactness check failed")


def _checked(case: Case, call: Callable[[], Tensor], expected: Callable[[], Tensor],
             compare: Callable[[Tensor, Tensor], None], failure: str) -> None:
    try:
        got, want = call(), expected()
        pairs = zip(got, want) if isinstance(got, tuple) else ((got, want),)  # each output of a multi-output op
        for g, w in pairs:
            if g.shape != w.shape:
                raise AssertionError(f"shape {list(g.shape)} instead of {list(w.shape)}")
            compare(g, w)
    except torch.OutOfMemoryError as exc:
        # Not a fault of the case: this device cannot hold its inputs, outputs and check at once (a
        # roofline's largest sizes on a smaller GPU). n/a, as nvbench skips such a state, saying so.
        case.na_reason = f"does not fit in this GPU's memory ({failure.removesuffix(' failed')}): {_oom_text(exc)}"
    except CASE_ERRORS as exc:  # any failure disqualifies the case from timing
        case.error = f"{failure}: {first_line(exc)}"
        return
    else:
        case.call = call
        return
    torch.cuda.empty_cache()  # what the failed allocation's neighbours held, for the next (smaller) cases


def _oom_text(exc: BaseException) -> str:
    """The allocator's message up to the memory in use (the rest is advice on its settings)."""
    sentences = first_line(exc).split(". ")
    kept = [s for s in sentences[:4] if not s.startswith("Of the allocated")]
    return ". ".join(kept).rstrip(".")


def point_of(case: Case) -> Point:
    return {a: case.key[a] for a in case.key.get("axes", [])}
