"""What every registration mechanism shares (ops/variants.py, ops/triton_ops.py): the pair of ops
a mechanism makes of a contract, the schema each op is declared with, and the backward that a
registered autograd formula runs. Kept apart so that the Triton flavour needs nothing from the
factory that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import Tensor

from .contract import OpContract, OpKernels

OpFn = Callable[..., Tensor]


@dataclass(frozen=True)
class Flavour:
    """One registration mechanism applied to an op's forward and backward."""

    fwd: OpFn
    bwd: OpFn | None


def registered_backward(contract: OpContract, kernels: OpKernels) -> Callable[..., Any]:
    """The backward a register_autograd formula runs: the contract's, over these kernels."""
    def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
        return contract.backward(ctx, grads[0] if len(grads) == 1 else grads, kernels)

    return backward
