"""muladd: y = a * b + c, the Python half of the shipped op (its native half: ops/native/muladd.h)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..contract import Args, OpContract, OpKernels, same_shape_work


def _save(ctx: Any, inputs: Args, output: Tensor) -> None:
    a, b, _ = inputs
    ctx.save_for_backward(a, b)


def _backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    a, b = ctx.saved_tensors
    return grad * b, grad * a, grad


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
)
