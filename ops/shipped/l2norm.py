"""l2norm: y = x * rsqrt(sum(x * x, last dim) + eps), the Python half of the shipped op.

Its native half (schema, body, CPU and CUDA kernels, forward and backward) is ops/native/l2norm.h;
its Triton kernels are in ops/triton_ops.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..contract import OpContract, backward_kernel, same_shape_work, save_x_and_scalar

EPS = 1e-6


def _check(x: Tensor, eps: float) -> None:
    torch._check(eps > 0, lambda: f"l2norm: eps must be positive, got {eps}")
    torch._check(x.dim() >= 1, lambda: "l2norm: expected a tensor with at least 1 dimension, got a scalar")


def reference(x: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


CONTRACT = OpContract(
    name="l2norm",
    tensor_args=("x",),
    scalars=(EPS,),
    differentiable=("x",),
    reference=reference,
    save=save_x_and_scalar,
    backward=backward_kernel,
    backward_op="l2norm_backward",
    check_args=_check,
    double_backward=False,  # l2norm_backward is a kernel without a derivative
    boundary_shape=(4, 32),
    rowwise=True,
    triton_shape="rows",
    description="row-wise L2 normalisation, forward and backward kernels",
    aten=reference,  # the composite: PyTorch generates its backward
    work=same_shape_work(1, 1, 3),  # x*x, the row sum, the scale (the rsqrt per row is negligible)
    backward_work=same_shape_work(2, 1, 7),  # reads grad and x; recomputes y and rstd, then rstd * (g - y * sum(g*y))
)
