"""noop: y = x.clone(), the Python half of the shipped op (its native half: ops/native/noop.h).

The least an op can do: allocate its output and copy its input, so its rows are the boundary's
cost alone.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ..contract import Args, OpContract, OpKernels, same_shape_work


def _save_nothing(ctx: Any, inputs: Args, output: Tensor) -> None:
    pass


def _backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    return (grad,)


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
)
