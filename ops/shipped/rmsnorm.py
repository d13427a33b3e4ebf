"""rmsnorm: y = x * rsqrt(mean(x * x, last dim) + eps) * weight, the Python half of the shipped op.

Its native half (schema, body, CPU and CUDA kernels) is ops/native/rmsnorm.h; this is its contract
(reference, inputs, autograd formula over the backward kernel, work) and its Triton kernels for the
triton_op variant. The backward kernel returns (grad_x, grad_weight), recomputing each row's rstd.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from ..contract import Args, OpContract, OpKernels, Shape, Work

EPS = 1e-6
MAX_TRITON_COLS = 16384  # one Triton program holds a whole row


def _check(x: Tensor, weight: Tensor, eps: float) -> None:
    torch._check(eps > 0, lambda: f"rmsnorm: eps must be positive, got {eps}")
    torch._check(x.dim() >= 1, lambda: "rmsnorm: expected a tensor with at least 1 dimension, got a scalar")
    torch._check(weight.dim() == 1 and weight.shape[0] == x.shape[-1],
                 lambda: f"rmsnorm: argument 'weight' must be a 1-D tensor of the last dimension's size "
                         f"{x.shape[-1]}, got shape {list(weight.shape)}")


def reference(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def _aten(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


def _shapes(shape: Shape) -> tuple[Shape, ...]:
    """x as given, weight one value per column."""
    return tuple(shape), tuple(shape[-1:])


def _output_shape(x: Tensor, weight: Tensor) -> Shape:
    _check(x, weight, EPS)
    return tuple(x.shape)


def _save(ctx: Any, inputs: Args, output: Tensor) -> None:
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.scalar = eps


def _backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    assert kernels.bwd is not None, "rmsnorm's backward needs its backward kernel"
    x, weight = ctx.saved_tensors
    grad_x, grad_weight = kernels.bwd(grad, x, weight, ctx.scalar)
    return grad_x, grad_weight, None


def _backward_fake(grad: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    _check(x, weight, eps)
    torch._check(grad.shape == x.shape, lambda: f"rmsnorm_backward: arguments 'grad' and 'x' have mismatched "
                                                f"shapes {list(grad.shape)} vs {list(x.shape)}")
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _work(args: Args) -> Work:
    """Reads x and weight, writes y; x * x and the row sum, then x * rstd * weight."""
    x, weight = args[0], args[1]
    return Work(x.nbytes + weight.nbytes, x.nbytes, 4 * x.numel())


def _backward_work(args: Args) -> Work:
    """Reads grad, x and weight, writes grad_x and grad_weight; per element the two row sums (x * x,
    grad * weight * x), grad_x = rstd * (grad * weight - x * scale) and grad_weight's grad * x * rstd."""
    x, weight = args[0], args[1]
    return Work(2 * x.nbytes + weight.nbytes, x.nbytes + weight.nbytes, 12 * x.numel())


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    """The triton_op variant's kernels: a program per row (forward; backward's grad_x and rstd), then
    a program per block of columns adding grad_weight over the rows in order (deterministic)."""
    import triton
    import triton.language as tl

    @triton.jit
    def fwd_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr, ACC: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(ACC)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(ACC)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
        tl.store(y_ptr + row * cols + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def bwd_rows_kernel(g_ptr, x_ptr, w_ptr, gx_ptr, rstd_ptr, cols, eps, BLOCK: tl.constexpr, ACC: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        g = tl.load(g_ptr + row * cols + offs, mask=mask, other=0.0).to(ACC)
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(ACC)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(ACC)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
        scale = rstd * rstd * tl.sum(g * w * x, axis=0) / cols
        tl.store(gx_ptr + row * cols + offs, (rstd * (g * w - x * scale)).to(gx_ptr.dtype.element_ty), mask=mask)
        tl.store(rstd_ptr + row, rstd)

    @triton.jit
    def bwd_weight_kernel(g_ptr, x_ptr, rstd_ptr, gw_ptr, rows, cols, BLOCK: tl.constexpr, ACC: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < cols
        acc = tl.zeros((BLOCK,), dtype=ACC)
        for r in range(0, rows):
            at = r.to(tl.int64) * cols + offs  # type: ignore[attr-defined]  # in a kernel, range gives tl tensors
            g = tl.load(g_ptr + at, mask=mask, other=0.0).to(ACC)
            x = tl.load(x_ptr + at, mask=mask, other=0.0).to(ACC)
            acc += g * x * tl.load(rstd_ptr + r)
        tl.store(gw_ptr + offs, acc.to(gw_ptr.dtype.element_ty), mask=mask)

    return {"triton": triton, "fwd": fwd_kernel, "bwd_rows": bwd_rows_kernel, "bwd_weight": bwd_weight_kernel,
            "float32": tl.float32, "float64": tl.float64}


def _acc(k: dict[str, Any], dtype: torch.dtype) -> Any:
    """The kernels' accumulator: float64 for float64, float32 for the others."""
    return k["float64"] if dtype == torch.float64 else k["float32"]


def _rows_cols(op: str, x: Tensor, weight: Tensor, eps: float) -> tuple[int, int]:
    """The launchers' checks beyond the shared ones, with the C++ launcher's messages."""
    if x.dim() < 1:
        raise RuntimeError(f"{op}: expected a tensor with at least 1 dimension, got a scalar")
    if eps <= 0:
        raise RuntimeError(f"{op}: eps must be positive, got {eps}")
    cols = x.shape[-1]
    if weight.dim() != 1 or weight.shape[0] != cols:
        raise RuntimeError(f"{op}: argument 'weight' must be a 1-D tensor of the last dimension's size {cols}, "
                           f"got shape {list(weight.shape)}")
    if cols > MAX_TRITON_COLS:
        raise RuntimeError(f"{op}: rows longer than {MAX_TRITON_COLS} elements are not supported by the Triton kernel")
    return (x.numel() // cols if cols else 0), cols


def _triton_forward(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    from ..triton_ops import NS, check_inputs

    k = _triton_kernels()
    op = f"{NS}::rmsnorm"
    check_inputs(op, ("x", "weight"), (x, weight), same_shape=False)
    rows, cols = _rows_cols(op, x, weight, eps)
    x, weight = x.contiguous(), weight.contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if rows:
        with torch.cuda.device(x.device):
            torch.library.wrap_triton(k["fwd"])[(rows,)](x, weight, y, cols, eps,
                                                         BLOCK=k["triton"].next_power_of_2(cols), ACC=_acc(k, x.dtype))
    return y


def _triton_backward(grad: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    from ..triton_ops import NS, check_inputs

    k = _triton_kernels()
    op = f"{NS}::rmsnorm_backward"
    check_inputs(op, ("grad", "x", "weight"), (grad, x, weight), same_shape=False)
    if grad.shape != x.shape:
        raise RuntimeError(f"{op}: arguments 'grad' and 'x' have mismatched shapes "
                           f"{list(grad.shape)} vs {list(x.shape)}")
    rows, cols = _rows_cols(op, x, weight, eps)
    grad, x, weight = grad.contiguous(), x.contiguous(), weight.contiguous()
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    grad_weight = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    if cols == 0:
        return grad_x, grad_weight
    rstd = torch.empty((max(rows, 1),), dtype=torch.float64 if x.dtype == torch.float64 else torch.float32,
                       device=x.device)
    block = min(k["triton"].next_power_of_2(cols), 1024)
    with torch.cuda.device(x.device):
        if rows:
            torch.library.wrap_triton(k["bwd_rows"])[(rows,)](
                grad, x, weight, grad_x, rstd, cols, eps, BLOCK=k["triton"].next_power_of_2(cols), ACC=_acc(k, x.dtype))
        torch.library.wrap_triton(k["bwd_weight"])[(k["triton"].cdiv(cols, block),)](
            grad, x, rstd, grad_weight, rows, cols, BLOCK=block, ACC=_acc(k, x.dtype))
    return grad_x, grad_weight


def _triton_launchers() -> Mapping[str, Callable[..., Any]]:
    """The triton_op variant's launchers, by op name."""
    return {"rmsnorm": _triton_forward, "rmsnorm_backward": _triton_backward}


CONTRACT = OpContract(
    name="rmsnorm",
    tensor_args=("x", "weight"),
    scalars=(EPS,),
    differentiable=("x", "weight"),
    reference=reference,
    save=_save,
    backward=_backward,
    backward_op="rmsnorm_backward",
    check_args=_check,
    double_backward=False,  # rmsnorm_backward is a kernel without a derivative
    boundary_shape=(4, 32),
    rowwise=True,
    description="row-wise RMS normalisation with a weight, forward and backward kernels",
    aten=_aten,  # torch.nn.functional.rms_norm: PyTorch's op, its backward generated
    work=_work,
    backward_work=_backward_work,
    input_shapes=_shapes,
    output_shape=_output_shape,
    backward_fake_fn=_backward_fake,
    boundary=False,  # a kernel of the roofline; time its boundary with --ops rmsnorm
    triton_launchers=_triton_launchers,
)
