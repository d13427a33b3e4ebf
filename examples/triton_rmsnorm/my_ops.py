"""A user's Triton op (CUDA): RMSNorm whose forward returns the normalised rows and the per-row
inverse RMS it saves for the backward, whose backward kernel reads that statistic. Declared once for
dbench; `triton=True` adds the torch.library.triton_op row (its launchers call the kernels through
wrap_triton, so torch.compile can trace into them). Called eagerly, wrap_triton dispatches a
higher-order op for each kernel; only the triton_op row turns that off, so the other rows time the
launchers as an eager caller of yours would call them (docs/extending.md, "What `wrap_triton` costs").

    dbench run --scenario boundary --op my_ops.py:rmsnorm          # on a CUDA machine
    dbench run --scenario launch --op my_ops.py:rmsnorm
    dbench run --scenario roofline --op my_ops.py:rmsnorm
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from dbench import Op, Work


@triton.jit
def _fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, cols, eps, BLOCK: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(ACC)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(ACC)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    tl.store(y_ptr + row * cols + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _bwd_kernel(g_ptr, x_ptr, w_ptr, rstd_ptr, gx_ptr, gw_part_ptr, cols, BLOCK: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    g = tl.load(g_ptr + row * cols + offs, mask=mask, other=0.0).to(ACC)
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(ACC)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(ACC)
    rstd = tl.load(rstd_ptr + row)
    xhat = x * rstd
    dot = tl.sum(g * w * xhat, axis=0) / cols
    tl.store(gx_ptr + row * cols + offs, (rstd * (g * w - xhat * dot)).to(gx_ptr.dtype.element_ty), mask=mask)
    tl.store(gw_part_ptr + row * cols + offs, g * xhat, mask=mask)  # per-row partial of grad_w


def _acc(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _stat_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def rmsnorm_fwd(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    torch._check(x.shape[-1] == w.shape[0], lambda: "rmsnorm: w must be [x.size(-1)]")
    x, w = x.contiguous(), w.contiguous()
    cols = x.shape[-1]
    rows = x.numel() // cols if cols else 0
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rstd = torch.empty((*x.shape[:-1], 1), dtype=_stat_dtype(x.dtype), device=x.device)
    if rows:
        torch.library.wrap_triton(_fwd_kernel)[(rows,)](x, w, y, rstd, cols, eps,
                                                        BLOCK=triton.next_power_of_2(cols), ACC=_acc(x.dtype))
    return y, rstd


def rmsnorm_bwd(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor,
                eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    g, x, w, rstd = g.contiguous(), x.contiguous(), w.contiguous(), rstd.contiguous()
    cols = x.shape[-1]
    rows = x.numel() // cols if cols else 0
    gx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    part = torch.empty((rows, cols), dtype=_stat_dtype(x.dtype), device=x.device)
    if rows:
        torch.library.wrap_triton(_bwd_kernel)[(rows,)](g, x, w, rstd, gx, part, cols,
                                                        BLOCK=triton.next_power_of_2(cols), ACC=_acc(x.dtype))
    return gx, part.sum(0).to(w.dtype)


def reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * rstd * w, rstd


def fake(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape), x.new_empty((*x.shape[:-1], 1), dtype=_stat_dtype(x.dtype))


def work(args) -> Work:
    """Forward: read x and w, write y and one statistic per row; 4 FLOPs per element."""
    x, w, _ = args
    stat = _stat_dtype(x.dtype).itemsize * (x.numel() // x.shape[-1])
    return Work(bytes_read=x.nbytes + w.nbytes, bytes_written=x.nbytes + stat, flops=4 * x.numel())


def backward_work(args) -> Work:
    """The whole backward call: the kernel reads g, x, w and the statistic and writes grad_x and the
    per-row partials of grad_w; the reduction then reads the partials and writes grad_w."""
    x, w, _ = args
    stat = _stat_dtype(x.dtype).itemsize
    rows = x.numel() // x.shape[-1]
    partials = x.numel() * stat
    return Work(bytes_read=2 * x.nbytes + w.nbytes + rows * stat + partials,
                bytes_written=x.nbytes + partials + w.nbytes, flops=9 * x.numel())


rmsnorm = Op(
    name="triton_rmsnorm",
    forward=rmsnorm_fwd,
    inputs=("x", "w"),
    scalars={"eps": 1e-6},
    outputs=("y", "rstd"),
    nondifferentiable_outputs=("rstd",),
    shapes=lambda shape: (shape, shape[-1:]),
    rowwise=True,
    shape=(8, 1024),
    dtypes=(torch.float16, torch.bfloat16, torch.float32, torch.float64),
    backward=rmsnorm_bwd,
    saves=("x", "w", "rstd"),
    reference=reference,
    fake=fake,
    work=work,
    backward_work=backward_work,
    native=reference,
    triton=True,
    description="RMSNorm with weight in Triton: multi-output forward, backward reading the saved statistic",
)
