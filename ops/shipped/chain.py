"""chain: k elementwise steps over one input, the Python half of the shipped op.

Its steps, reference and work are ops/chain.py (shared with the fusion scenario's unfused form);
its native half (schema, fused CPU and CUDA kernels, forward and backward) is ops/native/chain.h;
its Triton kernels are here.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch

from .. import chain
from ..contract import OpContract, backward_kernel, save_x_and_scalar


@functools.cache
def _triton_kernels() -> dict[str, Any]:
    """The triton_op variant's kernels, a program per BLOCK elements: step i is chain.STEPS[i % 4],
    unrolled at compile time for each K; C0, C1 the multiply-add's constants, C2 the scale, C3 the
    subtrahend. In the input's dtype, each operation rounded, as eager PyTorch and the CUDA kernels."""
    import triton
    import triton.language as tl

    @triton.jit
    def chain_kernel(x_ptr, out_ptr, n, K: tl.constexpr, C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr,
                     C3: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        for i in tl.static_range(K):
            if i % 4 == 0:
                x = x * C0 + C1
            elif i % 4 == 1:
                x = tl.where(x < 0, 0.0, x)
            elif i % 4 == 2:
                x = x * C2
            else:
                x = x - C3
        tl.store(out_ptr + offs, x, mask=mask)

    @triton.jit
    def chain_bwd_kernel(g_ptr, x_ptr, gx_ptr, n, K: tl.constexpr, C0: tl.constexpr, C1: tl.constexpr,
                         C2: tl.constexpr, C3: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        slope = tl.load(g_ptr + offs, mask=mask)
        for i in tl.static_range(K):
            if i % 4 == 0:
                slope = slope * C0
                x = x * C0 + C1
            elif i % 4 == 1:
                slope = tl.where(x > 0, slope, 0.0)
                x = tl.where(x < 0, 0.0, x)
            elif i % 4 == 2:
                slope = slope * C2
                x = x * C2
        tl.store(gx_ptr + offs, slope, mask=mask)

    return {"triton": triton, "chain": chain_kernel, "chain_backward": chain_bwd_kernel}


def _triton_constexprs(qualified: str, dtype: torch.dtype, steps: int) -> dict[str, Any]:
    """k, checked, and the steps' constants (from the one table, chain.STEPS) as the kernels' constexprs."""
    steps = int(steps)
    if not 1 <= steps <= chain.MAX_LENGTH:
        raise RuntimeError(f"{qualified}: k must be between 1 and {chain.MAX_LENGTH}, got {steps}")
    (_, (c0, c1)), _, (_, (c2,)), (_, (c3,)) = chain.STEPS
    return {"K": steps, "C0": c0, "C1": c1, "C2": c2, "C3": c3}


def _triton_launchers() -> Mapping[str, Callable[..., Any]]:
    """chain(x, k) and chain_backward(grad, x, k): elementwise, k a compile-time constant."""
    from ..triton_ops import elementwise_launcher

    return {name: elementwise_launcher(name, args, _triton_kernels, _triton_constexprs)
            for name, args in (("chain", ("x",)), ("chain_backward", ("grad", "x")))}


CONTRACT = OpContract(
    name="chain",
    tensor_args=("x",),
    scalars=(chain.DEFAULT_LENGTH,),
    differentiable=("x",),
    reference=chain.reference,
    save=save_x_and_scalar,
    backward=backward_kernel,
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
    triton_launchers=_triton_launchers,
)
