"""Typed inputs: how the suite makes an input that is not a random floating tensor.

By default every tensor input is `randn` in the run's dtype. An op whose inputs include indices,
CSR offsets, a codebook or an optional tensor declares a maker per input (`Op(input_makers=...)`):

    from dbench import Op, inputs
    Op(name="segment_sum", forward=..., inputs=("src", "indptr"),
       shapes=lambda s: (s, (s[0] // 4 + 1,)),
       input_makers={"indptr": inputs.offsets()})

A maker is called with the input's own shape, the op's shape (what --shape sets), the run's dtype,
the device and a seeded generator, and returns a tensor (or None, for a `Tensor?` argument the
call leaves out). Inputs that depend on each other (boxes and the feature map they index, indices
sorted by another input) come from one function instead: `Op(make_inputs=f)`, f(ctx) returning
every tensor input by name (a mapping) or in the declaration's order (ctx.shape: the op's shape).
A maker's tensor is never given a gradient unless it is floating and the input is differentiable.
Every check and scenario (pre-flight, opcheck, gradcheck, the aten and registered rows, the
roofline's sizes) takes the inputs from here.
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


def boxes(extent: float | Callable[[Shape], float] = 64.0, min_side: float = 1.0,
          batch: int | Callable[[Shape], int] | None = None) -> InputMaker:
    """Boxes (x1, y1, x2, y2) with x1 < x2 and y1 < y2, each side at least `min_side`, inside the square
    [0, extent] (a number, or a function of the op's shape, e.g. `lambda s: s[-1]` for an (N, C, H, W)
    feature map), in the run's dtype; the input's shape is (N, 4). With `batch` (a number, or a
    function of the op's shape), each row is (b, x1, y1, x2, y2), b an image index in [0, batch): the
    (N, 5) regions of RoI pooling."""
    if not callable(extent) and not (isinstance(extent, (int, float)) and extent > min_side > 0):
        raise ValueError(f"boxes() needs extent > min_side > 0, got extent={extent!r}, min_side={min_side!r}")

    def make(ctx: MakeContext) -> Tensor:
        columns = 4 if batch is None else 5
        if len(ctx.shape) != 2 or ctx.shape[1] != columns:
            raise ValueError(f"boxes() makes an (N, {columns}) tensor; the input's shape is {ctx.shape}")
        side = float(extent(ctx.op_shape) if callable(extent) else extent)
        if not side > min_side:
            raise ValueError(f"boxes(): the extent {side} is not above min_side {min_side}")
        n, room = ctx.shape[0], side - min_side
        u = torch.rand((n, 4), generator=ctx.generator, dtype=torch.float64, device=ctx.generator.device).cpu()
        low = u[:, :2] * room  # top-left corner, leaving room for the smallest side
        high = low + min_side + u[:, 2:] * (side - min_side - low)
        corners = torch.cat([low, high], dim=1)
        if batch is not None:
            images = int(batch(ctx.op_shape) if callable(batch) else batch)
            index = torch.randint(0, images, (n, 1), generator=ctx.generator, device=ctx.generator.device).cpu()
            corners = torch.cat([index.to(torch.float64), corners], dim=1)
        return corners.to(dtype=ctx.dtype, device=ctx.device)

    return make


def absent() -> InputMaker:
    """None, for an optional `Tensor?` argument the call leaves out (declare the schema with `Tensor?`)."""

    def make(ctx: MakeContext) -> None:
        return None

    return make
