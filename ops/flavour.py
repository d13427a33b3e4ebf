"""What every registration mechanism shares (ops/variants.py, ops/triton_ops.py): the pair of ops
a mechanism makes of a contract, the schema each op is declared with, and the backward that a
registered autograd formula runs. Kept apart so that the Triton flavour needs nothing from the
factory that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from . import native
from .contract import OpContract, OpKernels

OpFn = Callable[..., Tensor]


@dataclass(frozen=True)
class Flavour:
    """One registration mechanism applied to an op's forward and backward."""

    fwd: OpFn
    bwd: OpFn | None


def signature(op_name: str) -> str:
    """The op's argument list and return type, from the C++ declaration (ops/csrc/schemas.h)."""
    native.load_cpp_ops()
    schema = str(getattr(torch.ops.dbench, op_name).default._schema)
    return schema[schema.index("(") :]


def registered_backward(contract: OpContract, kernels: OpKernels) -> Callable[..., Any]:
    """The backward a register_autograd formula runs: the contract's, over these kernels."""
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        return contract.backward(ctx, grad, kernels)

    return backward
