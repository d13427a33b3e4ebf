"""The ops of the suite, each declared once. Variants are generated from these."""

from __future__ import annotations

import importlib
from typing import Any, Callable

import torch
from torch import Tensor

from . import chain
from .contract import Args, OpContract, OpKernels, Shape, Work, elementwise_work
from .specs import OP_NAMES

L2NORM_EPS = 1e-6


def _save_nothing(ctx: Any, inputs: Args, output: Tensor) -> None:
    pass


def _noop_backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    return (grad,)


def _muladd_save(ctx: Any, inputs: Args, output: Tensor) -> None:
    a, b, _ = inputs
    ctx.save_for_backward(a, b)


def _muladd_backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    a, b = ctx.saved_tensors
    return grad * b, grad * a, grad


def _save_x_and_scalar(ctx: Any, inputs: Args, output: Tensor) -> None:
    """For ops f(x, scalar) whose gradient is one call of a backward kernel (l2norm, chain)."""
    x, scalar = inputs
    ctx.save_for_backward(x)
    ctx.scalar = scalar


def _backward_kernel(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    """grad_x = backward_kernel(grad, x, scalar); no gradient for the scalar."""
    assert kernels.bwd is not None, "this op's backward needs its backward kernel"
    (x,) = ctx.saved_tensors
    return kernels.bwd(grad, x, ctx.scalar), None


def _l2norm_check(x: Tensor, eps: float) -> None:
    torch._check(eps > 0, lambda: f"l2norm: eps must be positive, got {eps}")
    torch._check(x.dim() >= 1, lambda: "l2norm: expected a tensor with at least 1 dimension, got a scalar")


def _l2norm_reference(x: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _work(inputs: int, outputs: int, flops_per_element: int) -> Callable[[Args], Work]:
    """Work of an op over same-shaped tensors, from its first tensor argument."""
    def work(args: Args) -> Work:
        x = args[0]
        return elementwise_work(x.numel(), x.element_size(), inputs, outputs, flops_per_element)

    return work


NOOP = OpContract(
    name="noop",
    tensor_args=("x",),
    scalars=(),
    differentiable=("x",),
    reference=lambda x: x.clone(),
    save=_save_nothing,
    backward=_noop_backward,
    boundary_shape=(4, 32),
    description="allocate the output and copy the input: pure boundary cost",
    aten=lambda x: x.clone(),
    work=_work(1, 1, 0),
)

MULADD = OpContract(
    name="muladd",
    tensor_args=("a", "b", "c"),
    scalars=(),
    differentiable=("a", "b", "c"),
    reference=lambda a, b, c: a * b + c,
    save=_muladd_save,
    backward=_muladd_backward,
    boundary_shape=(4, 32),
    description="elementwise a * b + c",
    aten=lambda a, b, c: torch.addcmul(c, a, b),
    work=_work(3, 1, 2),
)

L2NORM = OpContract(
    name="l2norm",
    tensor_args=("x",),
    scalars=(L2NORM_EPS,),
    differentiable=("x",),
    reference=_l2norm_reference,
    save=_save_x_and_scalar,
    backward=_backward_kernel,
    backward_op="l2norm_backward",
    check_args=_l2norm_check,
    double_backward=False,  # l2norm_backward is a kernel without a derivative
    boundary_shape=(4, 32),
    rowwise=True,
    triton_shape="rows",
    description="row-wise L2 normalisation, forward and backward kernels",
    aten=_l2norm_reference,  # the composite: PyTorch generates its backward
    work=_work(1, 1, 3),  # x*x, the row sum, the scale (the rsqrt per row is negligible)
    backward_work=_work(2, 1, 7),  # reads grad and x; recomputes y and rstd, then rstd * (g - y * sum(g*y))
)

def _mm_shapes(shape: Shape) -> tuple[Shape, ...]:
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


def _mm_output_shape(a: Tensor, b: Tensor) -> tuple[int, int]:
    """The launchers' shape contract, with their messages."""
    for name, t in (("a", a), ("b", b)):
        torch._check(t.dim() == 2, lambda name=name, t=t: f"mm: argument '{name}' must be a 2-D tensor, "
                                                          f"got {t.dim()}-D shape {list(t.shape)}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"mm: inner dimensions do not match: 'a' is {list(a.shape)}, 'b' is {list(b.shape)} "
                         "(a.size(1) must equal b.size(0))")
    return a.shape[0], b.shape[1]


def _mm_save(ctx: Any, inputs: Args, output: Tensor) -> None:
    a, b = inputs
    ctx.save_for_backward(a, b)


def _mm_backward(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    """grad_a = g @ b^T, grad_b = a^T @ g, each one call of the variant's own mm."""
    a, b = ctx.saved_tensors
    grad_a = kernels.fwd(grad, b.t()) if ctx.needs_input_grad[0] else None
    grad_b = kernels.fwd(a.t(), grad) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


def _mm_kernel(a: Tensor, b: Tensor) -> str:
    """The kernel the launcher runs on these inputs (wgmma, mma_sync, ... or cpu)."""
    from .libraries import raw

    return str(raw().mm_kernel(a, b))


def _mm_work(args: Args) -> Work:
    a, b = args
    (m, k), n = a.shape, b.shape[1]
    return Work((m * k + k * n) * a.element_size(), m * n * a.element_size(), 2 * m * n * k)


MM = OpContract(
    name="mm",
    tensor_args=("a", "b"),
    scalars=(),
    differentiable=("a", "b"),
    reference=torch.mm,
    save=_mm_save,
    backward=_mm_backward,
    boundary_shape=(64, 128, 32),
    description="a @ b: tensor cores (float16/bfloat16, fp32 accumulation) on CUDA, the compute-bound end",
    input_shapes=_mm_shapes,
    output_shape=_mm_output_shape,
    boundary=False,  # a matrix product is not a boundary-cost row; time it with --ops mm
    aten=torch.mm,  # cuBLAS: the comparison row
    work=_mm_work,
    size_axis="side",
    gpu_dtype=torch.bfloat16,
    no_compiled_reason="torch.compile lowers a lone mm to the same cuBLAS call as aten",
    kernel_of=_mm_kernel,
    triton_shape="matmul",
)

CHAIN = OpContract(
    name="chain",
    tensor_args=("x",),
    scalars=(chain.DEFAULT_LENGTH,),
    differentiable=("x",),
    reference=chain.reference,
    save=_save_x_and_scalar,
    backward=_backward_kernel,
    backward_op="chain_backward",
    check_args=chain.check_length,
    double_backward=False,  # chain_backward is a kernel without a derivative
    boundary_shape=(4, 32),
    description="k elementwise steps (multiply-add, relu, scale, subtract, ...) fused in one kernel",
    aten=chain.aten_chain,
    work=chain.work,
    backward_work=chain.backward_work,
    boundary=False,  # a kernel-level experiment (the fusion scenario); time its boundary with --ops chain
    heaviest_scalars=(chain.MAX_LENGTH,),  # every step: the most arithmetic per element
    triton_shape="chain",
)

_DECLARED_HERE = {op.name: op for op in (NOOP, MULADD, L2NORM, MM, CHAIN)}


def _own_module(name: str) -> OpContract:
    """An op declared in a module of its own, ops/shipped/<name>.py, as its CONTRACT."""
    module = importlib.import_module(f".shipped.{name}", __package__)
    contract = module.CONTRACT
    assert isinstance(contract, OpContract) and contract.name == name, \
        f"ops/shipped/{name}.py must declare CONTRACT for {name!r}"
    return contract


# Every shipped op, in the order of ops/specs.py OP_NAMES (the one list of their names).
OPS: dict[str, OpContract] = {name: _DECLARED_HERE.get(name) or _own_module(name) for name in OP_NAMES}
assert set(_DECLARED_HERE) <= set(OPS), "ops/specs.py OP_NAMES must list every contract above"
