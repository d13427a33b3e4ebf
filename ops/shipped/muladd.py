"""muladd: y = a * b + c, the Python half of the shipped op (its native half: ops/native/muladd.h)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from ..contract import Args, OpContract, OpKernels, same_shape_work


def _save(ctx: Any, inputs: Args, output: Tensor) -> None:
    a, b, _ = inputs
    ctx.save_for_backward(a, b)


def _backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    a, b = ctx.saved_tensors
    return grad * b, grad * a, grad


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    """The triton_op variant's kernel: a program per BLOCK elements; WIDE (float16/bfloat16 inputs):
    the arithmetic in float32, one rounding on store, as the CUDA kernel does."""
    import triton
    import triton.language as tl

    @triton.jit
    def muladd_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask)
        b = tl.load(b_ptr + offs, mask=mask)
        c = tl.load(c_ptr + offs, mask=mask)
        if WIDE:
            a, b, c = a.to(tl.float32), b.to(tl.float32), c.to(tl.float32)
        tl.store(out_ptr + offs, (a * b + c).to(out_ptr.dtype.element_ty), mask=mask)

    return {"triton": triton, "muladd": muladd_kernel}


def _triton_launchers() -> Mapping[str, Callable[..., Any]]:
    from ..triton_ops import elementwise_launcher, widened

    return {"muladd": elementwise_launcher("muladd", ("a", "b", "c"), _triton_kernels, widened)}


CONTRACT = OpContract(
    name="muladd",
    tensor_args=("a", "b", "c"),
    scalars=(),
    differentiable=("a", "b", "c"),
    reference=lambda a, b, c: a * b + c,
    save=_save,
    backward=_backward,
    boundary_shape=(4, 32),
    description="elementwise a * b + c",
    aten=lambda a, b, c: torch.addcmul(c, a, b),
    work=same_shape_work(3, 1, 2),
    triton_launchers=_triton_launchers,
)
