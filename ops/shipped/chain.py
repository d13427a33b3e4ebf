"""chain: k elementwise steps over one input, the Python half of the shipped op.

Its steps, reference and work are ops/chain.py (shared with the fusion scenario's unfused form);
its native half (schema, fused CPU and CUDA kernels, forward and backward) is ops/native/chain.h.
"""

from __future__ import annotations

from .. import chain
from ..contract import OpContract, backward_kernel, save_x_and_scalar

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
    triton_shape="chain",
)
