"""The elementwise chain, PyTorch's side: k cheap steps over one input.

Step i is STEPS[i % 4] (ops/kernels/chain.h holds the same table for the CPU and
CUDA kernels; the tests hold the two to each other):

    0  x * 1.25 - 0.5   (multiply, then add: two roundings, as eager PyTorch)
    1  relu(x)
    2  x * 0.75
    3  x - 0.125

The fused op runs all k steps in registers (one read, one write); the unfused
form launches one kernel per step, each reading and writing the whole tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .contract import Work

MAX_LENGTH = 8
DEFAULT_LENGTH = 4
# (kind, constants) per step of a cycle; FLOPs counted as the arithmetic the step does.
STEPS: tuple[tuple[str, tuple[float, ...]], ...] = (
    ("muladd", (1.25, -0.5)),
    ("relu", ()),
    ("scale", (0.75,)),
    ("sub", (0.125,)),
)
STEP_FLOPS = {"muladd": 2, "relu": 1, "scale": 1, "sub": 1}


def step_kind(i: int) -> tuple[str, tuple[float, ...]]:
    return STEPS[i % len(STEPS)]


def apply_step(x: Tensor, i: int) -> Tensor:
    """Step i as eager PyTorch ops: the same roundings as our kernels (no FMA), so the same bits."""
    kind, c = step_kind(i)
    if kind == "muladd":
        return x * c[0] + c[1]
    if kind == "relu":
        return torch.relu(x)
    if kind == "scale":
        return x * c[0]
    return x - c[0]


def aten_chain(x: Tensor, k: int) -> Tensor:
    """The k steps as eager torch ops: k kernels (what torch.compile fuses into one)."""
    for i in range(k):
        x = apply_step(x, i)
    return x


def reference(x: Tensor, k: int) -> Tensor:
    """In the input's dtype (the contract's reference runs in float64)."""
    return aten_chain(x, k)


def check_length(x: Tensor, k: int) -> None:
    torch._check(1 <= k <= MAX_LENGTH, lambda: f"chain: k must be between 1 and {MAX_LENGTH}, got {k}")


def flops_per_element(k: int) -> int:
    return sum(STEP_FLOPS[step_kind(i)[0]] for i in range(k))


def work(args: tuple[Any, ...]) -> Work:
    """The fused chain's least work: one read, one write, k steps of arithmetic."""
    x, k = args
    n, size = x.numel(), x.element_size()
    return Work(n * size, n * size, n * flops_per_element(k))


def eager_passes(k: int) -> int:
    """Kernels the eager form launches: one per step, two for a multiply-add (mul, then add)."""
    return sum(2 if step_kind(i)[0] == "muladd" else 1 for i in range(k))


def _passes_work(x: Tensor, k: int, passes: int) -> Work:
    # Each pass reads and writes the whole tensor; the buffers are reused (the input and the two
    # intermediates the caching allocator alternates between), so three tensors is the footprint.
    n, size = x.numel(), x.element_size()
    return Work(passes * n * size, passes * n * size, n * flops_per_element(k), footprint=3 * n * size)


def unfused_work(args: tuple[Any, ...]) -> Work:
    """k separate passes, each reading and writing the whole tensor: k times the fused traffic."""
    x, k = args
    return _passes_work(x, k, k)


def eager_work(args: tuple[Any, ...]) -> Work:
    """The eager torch form: one pass per kernel it launches (eager_passes)."""
    x, k = args
    return _passes_work(x, k, eager_passes(k))


def backward_work(args: tuple[Any, ...]) -> Work:
    """chain_backward (from the forward's arguments): reads grad and x, writes grad_x, recomputes
    the chain and its slopes."""
    x, k = args
    n, size = x.numel(), x.element_size()
    return Work(2 * n * size, n * size, n * (2 * flops_per_element(k) + 1))
