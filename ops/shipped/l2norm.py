"""l2norm: y = x * rsqrt(sum(x * x, last dim) + eps), the Python half of the shipped op.

Its native half (schema, body, CPU and CUDA kernels, forward and backward) is ops/native/l2norm.h;
its Triton kernels are here.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from ..contract import OpContract, backward_kernel, same_shape_work, save_x_and_scalar

EPS = 1e-6
MAX_TRITON_COLS = 16384  # a program of the Triton kernels holds a whole row


def _check(x: Tensor, eps: float) -> None:
    torch._check(eps > 0, lambda: f"l2norm: eps must be positive, got {eps}")
    torch._check(x.dim() >= 1, lambda: "l2norm: expected a tensor with at least 1 dimension, got a scalar")


def reference(x: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    """The triton_op variant's kernels, a program per row; WIDE (float16/bfloat16 inputs): the
    arithmetic in float32, one rounding on store, as the CUDA kernels do."""
    import triton
    import triton.language as tl

    @triton.jit
    def fwd_kernel(x_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr, WIDE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        if WIDE:
            x = x.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) + eps)
        tl.store(y_ptr + row * cols + offs, (x * rstd).to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def bwd_kernel(g_ptr, x_ptr, gx_ptr, cols, eps, BLOCK: tl.constexpr, WIDE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        g = tl.load(g_ptr + row * cols + offs, mask=mask, other=0.0)
        if WIDE:
            x, g = x.to(tl.float32), g.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) + eps)
        dot = tl.sum(g * x, axis=0) * rstd
        tl.store(gx_ptr + row * cols + offs, (rstd * (g - x * rstd * dot)).to(gx_ptr.dtype.element_ty), mask=mask)

    return {"triton": triton, "l2norm": fwd_kernel, "l2norm_backward": bwd_kernel}


def _triton_launcher(op_name: str, arg_names: tuple[str, ...]) -> Callable[..., Tensor]:
    """l2norm(x, eps) and l2norm_backward(grad, x, eps): a program per row of the last dimension."""
    from ..triton_ops import HALF_DTYPES, NS, check_inputs

    qualified = f"{NS}::{op_name}"

    def launch(*args: Any) -> Tensor:
        k = _triton_kernels()
        tensors, eps = tuple(args[:-1]), float(args[-1])
        check_inputs(qualified, arg_names, tensors)
        x = tensors[-1]
        if x.dim() < 1:
            raise RuntimeError(f"{qualified}: expected a tensor with at least 1 dimension, got a scalar")
        if eps <= 0:
            raise RuntimeError(f"{qualified}: eps must be positive, got {eps}")
        cols = x.shape[-1]
        if cols > MAX_TRITON_COLS:
            raise RuntimeError(f"{qualified}: rows longer than {MAX_TRITON_COLS} elements are not supported "
                               "by the Triton kernel")
        tensors = tuple(t.contiguous() for t in tensors)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if out.numel() == 0:
            return out
        rows = out.numel() // cols
        with torch.cuda.device(out.device):
            torch.library.wrap_triton(k[op_name])[(rows,)](*tensors, out, cols, eps,
                                                           BLOCK=k["triton"].next_power_of_2(cols),
                                                           WIDE=out.dtype in HALF_DTYPES)
        return out

    return launch


def _triton_launchers() -> Mapping[str, Callable[..., Any]]:
    return {"l2norm": _triton_launcher("l2norm", ("x",)),
            "l2norm_backward": _triton_launcher("l2norm_backward", ("grad", "x"))}


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
    triton_launchers=_triton_launchers,
    description="row-wise L2 normalisation, forward and backward kernels",
    aten=reference,  # the composite: PyTorch generates its backward
    work=same_shape_work(1, 1, 3),  # x*x, the row sum, the scale (the rsqrt per row is negligible)
    backward_work=same_shape_work(2, 1, 7),  # reads grad and x; recomputes y and rstd, then rstd * (g - y * sum(g*y))
)
