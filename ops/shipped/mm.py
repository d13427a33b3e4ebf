"""mm: a @ b, the Python half of the shipped op (its native half: ops/native/mm.h).

The compute-bound end of the suite: tensor cores (float16/bfloat16 with fp32 accumulation) on
CUDA, whose kernel the launcher picks by the GPU and the shapes (wgmma, mma_sync, ... or cpu).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from ..contract import Args, OpContract, OpKernels, Shape, Work


def _shapes(shape: Shape) -> tuple[Shape, ...]:
    """(M, K, N) -> a (M, K), b (K, N). The shared tests' 2-D shapes (M, K) give b (K, M),
    so the output's shape (M, M) differs from every input's."""
    if len(shape) == 3:
        m, k, n = shape
    elif len(shape) == 2:
        m, k = shape
        n = m
    else:
        raise ValueError(f"mm inputs need a (M, K, N) or (M, K) shape, got {shape}")
    return (m, k), (k, n)


def _output_shape(a: Tensor, b: Tensor) -> tuple[int, int]:
    """The launchers' shape contract, with their messages."""
    for name, t in (("a", a), ("b", b)):
        torch._check(t.dim() == 2, lambda name=name, t=t: f"mm: argument '{name}' must be a 2-D tensor, "
                                                          f"got {t.dim()}-D shape {list(t.shape)}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"mm: inner dimensions do not match: 'a' is {list(a.shape)}, 'b' is {list(b.shape)} "
                         "(a.size(1) must equal b.size(0))")
    return a.shape[0], b.shape[1]


def _save(ctx: Any, inputs: Args, output: Tensor) -> None:
    a, b = inputs
    ctx.save_for_backward(a, b)


def _backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    """grad_a = g @ b^T, grad_b = a^T @ g, each one call of the variant's own mm."""
    a, b = ctx.saved_tensors
    grad_a = kernels.fwd(grad, b.t()) if ctx.needs_input_grad[0] else None
    grad_b = kernels.fwd(a.t(), grad) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _kernel(a: Tensor, b: Tensor) -> str:
    """The kernel the launcher runs on these inputs (wgmma, mma_sync, ... or cpu)."""
    from ..libraries import raw

    return str(raw().mm_kernel(a, b))


def _work(args: Args) -> Work:
    a, b = args
    (m, k), n = a.shape, b.shape[1]
    return Work((m * k + k * n) * a.element_size(), m * n * a.element_size(), 2 * m * n * k)


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    """The triton_op variant's kernel: a program per BLOCK_M x BLOCK_N tile of the output. KIND 0:
    16-bit inputs, tensor cores, fp32 accumulation; 1: float32 without tf32; 2: float64, a broadcast
    product (tl.dot has no float64 on every release)."""
    import triton
    import triton.language as tl

    @triton.jit
    def mm_kernel(a_ptr, b_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, KIND: tl.constexpr):
        rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        rk = tl.arange(0, BLOCK_K).to(tl.int64)
        if KIND == 2:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ka = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * K + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ka[:, None] * N + rn[None, :], mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            if KIND == 0:
                acc += tl.dot(a, b)
            elif KIND == 1:
                acc += tl.dot(a, b, input_precision="ieee")
            else:
                acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)

    return {"triton": triton, "mm": mm_kernel}


# (BLOCK_M, BLOCK_N, BLOCK_K, KIND) per dtype: the triton_op row measures the boundary, not a tuned GEMM.
_TRITON_CONFIG = {
    torch.float16: (64, 64, 32, 0),
    torch.bfloat16: (64, 64, 32, 0),
    torch.float32: (32, 32, 32, 1),
    torch.float64: (16, 16, 16, 2),
}


def _triton_mm(a: Tensor, b: Tensor) -> Tensor:
    from ..triton_ops import NS, check_inputs

    k = _triton_kernels()
    qualified = f"{NS}::mm"
    check_inputs(qualified, ("a", "b"), (a, b), dtypes=tuple(_TRITON_CONFIG), same_shape=False)
    for name, t in (("a", a), ("b", b)):
        if t.dim() != 2:
            raise RuntimeError(f"{qualified}: argument '{name}' must be a 2-D tensor, "
                               f"got {t.dim()}-D shape {list(t.shape)}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"{qualified}: inner dimensions do not match: 'a' is {list(a.shape)}, 'b' is "
                           f"{list(b.shape)} (a.size(1) must equal b.size(0))")
    a, b = a.contiguous(), b.contiguous()
    (m, kk), n = a.shape, b.shape[1]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if out.numel() == 0:
        return out
    bm, bn, bk, kind = _TRITON_CONFIG[a.dtype]
    with torch.cuda.device(out.device):
        grid = (k["triton"].cdiv(m, bm), k["triton"].cdiv(n, bn))
        torch.library.wrap_triton(k["mm"])[grid](a, b, out, m, n, kk, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, KIND=kind)
    return out


def _triton_launchers() -> Mapping[str, Callable[..., Any]]:
    return {"mm": _triton_mm}


CONTRACT = OpContract(
    name="mm",
    tensor_args=("a", "b"),
    scalars=(),
    differentiable=("a", "b"),
    reference=torch.mm,
    save=_save,
    backward=_backward,
    boundary_shape=(64, 128, 32),
    description="a @ b: tensor cores (float16/bfloat16, fp32 accumulation) on CUDA, the compute-bound end",
    input_shapes=_shapes,
    output_shape=_output_shape,
    boundary=False,  # a matrix product is not a boundary-cost row; time it with --ops mm
    aten=torch.mm,  # cuBLAS: the comparison row
    work=_work,
    size_axis="side",
    gpu_dtype=torch.bfloat16,
    no_compiled_reason="torch.compile lowers a lone mm to the same cuBLAS call as aten",
    kernel_of=_kernel,
    triton_launchers=_triton_launchers,
)
