"""mm: a @ b, the Python half of the shipped op (its native half: ops/native/mm.h).

The compute-bound end of the suite: tensor cores (float16/bfloat16 with fp32 accumulation) on
CUDA, whose kernel the launcher picks by the GPU and the shapes (wgmma, mma_sync, ... or cpu).
"""

from __future__ import annotations

from typing import Any

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
    triton_shape="matmul",
)
