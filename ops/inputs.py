"""Typed inputs: how the suite makes an input that is not a random floating tensor.

By default every tensor input is `randn` in the run's dtype. An op whose inputs include indices,
CSR offsets, a codebook or an optional tensor declares a maker per input (`Op(input_makers=...)`):

    from dbench import Op, inputs
    Op(name="segment_sum", forward=..., inputs=("src", "indptr"),
       shapes=lambda s: (s, (s[0] // 4 + 1,)),
       input_makers={"indptr": inputs.offsets()})

A maker is called with the input's own shape, the op's shape (what --shape sets), the run's dtype,
the device and a seeded generator, and returns a tensor (or None, for a `Tensor?` argument the
call leaves out). A maker's tensor is never given a gradient unless it is floating and the input is
differentiable. Every check and scenario (pre-flight, opcheck, gradcheck, the aten and registered
rows, the roofline's sizes) takes the inputs from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

Shape = tuple[int, ...]


@dataclass(frozen=True)
class MakeContext:
    """What a maker gets: this input's shape, the op's shape, the run's dtype, where, and the draw."""

    shape: Shape
    op_shape: Shape
    dtype: torch.dtype
    device: torch.device
    generator: torch.Generator


InputMaker = Callable[[MakeContext], "Tensor | None"]


def integers(low: int, high: int, dtype: torch.dtype = torch.int64) -> InputMaker:
    """Uniform integers in [low, high) (indices, labels, bucket ids)."""
    if not (isinstance(low, int) and isinstance(high, int) and low < high):
        raise ValueError(f"integers(low, high) needs whole numbers with low < high, got {low!r}, {high!r}")
    if dtype.is_floating_point or dtype.is_complex:
        raise ValueError(f"integers() makes an integer tensor, got dtype {dtype}")

    def make(ctx: MakeContext) -> Tensor:
        return torch.randint(low, high, ctx.shape, generator=ctx.generator, dtype=dtype,
                             device=ctx.generator.device).to(ctx.device)

    return make


def offsets(total: Callable[[Shape], int] | None = None, dtype: torch.dtype = torch.int64) -> InputMaker:
    """Sorted offsets of a compressed layout (a CSR `indptr`): this input's length L gives L - 1
    segments, from 0 to `total(op_shape)` (default: the op shape's first size, its rows), random cut
    points between, empty segments allowed."""

    def make(ctx: MakeContext) -> Tensor:
        if len(ctx.shape) != 1 or ctx.shape[0] < 1:
            raise ValueError(f"offsets() makes a 1-D tensor of at least one element; the input's shape is {ctx.shape}")
        n, end = ctx.shape[0], total(ctx.op_shape) if total is not None else ctx.op_shape[0]
        inner = torch.randint(0, end + 1, (max(n - 2, 0),), generator=ctx.generator,
                              device=ctx.generator.device).cpu().sort().values
        values = torch.cat([torch.tensor([0]), inner, torch.tensor([end])]) if n >= 2 else torch.tensor([0])
        return values.to(dtype=dtype, device=ctx.device)

    return make


def constant(value: Tensor) -> InputMaker:
    """The same tensor every call (a codebook, a lookup table), on the run's device, its dtype kept."""
    if not isinstance(value, Tensor):
        raise ValueError(f"constant() takes a tensor, got {type(value).__name__}")

    def make(ctx: MakeContext) -> Tensor:
        return value.detach().clone().to(ctx.device)

    return make


def absent() -> InputMaker:
    """None, for an optional `Tensor?` argument the call leaves out (declare the schema with `Tensor?`)."""

    def make(ctx: MakeContext) -> None:
        return None

    return make
