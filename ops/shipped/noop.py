"""noop: y = x.clone(), the Python half of the shipped op (its native half: ops/native/noop.h).

The least an op can do: allocate its output and copy its input, so its rows are the boundary's
cost alone.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from torch import Tensor

from ..contract import Args, OpContract, OpKernels, same_shape_work


def _save_nothing(ctx: Any, inputs: Args, output: Tensor) -> None:
    pass


def _backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    return (grad,)


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    """The triton_op variant's kernel: a program per BLOCK elements copies them."""
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

    return {"triton": triton, "noop": copy_kernel}


def _triton_launchers() -> Mapping[str, Callable[..., Any]]:
    from ..triton_ops import elementwise_launcher

    return {"noop": elementwise_launcher("noop", ("x",), _triton_kernels)}


CONTRACT = OpContract(
    name="noop",
    tensor_args=("x",),
    scalars=(),
    differentiable=("x",),
    reference=lambda x: x.clone(),
    save=_save_nothing,
    backward=_backward,
    boundary_shape=(4, 32),
    description="allocate the output and copy the input: pure boundary cost",
    aten=lambda x: x.clone(),
    work=same_shape_work(1, 1, 0),
    triton_launchers=_triton_launchers,
)
