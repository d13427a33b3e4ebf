"""The op contract: everything the variant factory needs to know about one op.

An op is declared once (ops/catalog.py): its schema lives in C++
(ops/csrc/schemas.h) and is read back from the dispatcher, its kernels are the
shared CPU/CUDA kernels behind the pybind launchers, and this contract adds the
Python half: fake, saved tensors, backward formula, fp64 reference and inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import torch
from torch import Tensor

Args = tuple[Any, ...]
Shape = tuple[int, ...]
SUPPORTED_DTYPES = (torch.float32, torch.float64)


class OpKernels(Protocol):
    """The variant's own flavour of the op (raw launcher, registered op...): its forward
    (differentiable where the variant is, e.g. mm's backward calls mm) and backward kernel."""

    @property
    def fwd(self) -> Callable[..., Tensor]: ...

    @property
    def bwd(self) -> Callable[..., Tensor] | None: ...


# A backward formula receives the autograd ctx, the incoming gradient and the variant's kernels.
BackwardFn = Callable[[Any, Tensor, OpKernels], tuple[Tensor | None, ...]]


def expected_dtypes(dtypes: Sequence[torch.dtype]) -> str:
    """'expected float32 or float64', as the C++ launchers word it."""
    names = [str(d).removeprefix("torch.") for d in dtypes]
    return "expected " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0])


@dataclass(frozen=True)
class InputSpec:
    """How to build one set of inputs for an op."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    requires_grad: bool = False
    layout: str = "compact"  # "compact" | "permuted" (dense, t().contiguous().t())
    seed: int = 0


@dataclass(frozen=True)
class OpContract:
    name: str
    # Names of the tensor arguments, in schema order; scalars come from `scalars`.
    tensor_args: tuple[str, ...]
    scalars: tuple[Any, ...]
    # Which tensor arguments receive gradients.
    differentiable: tuple[str, ...]
    reference: Callable[..., Tensor]
    save: Callable[[Any, Args, Tensor], None]
    backward: BackwardFn
    # The backward kernel's op name (C++ schema) when the formula needs one.
    backward_op: str | None = None
    boundary_shape: tuple[int, ...] = (4, 32)
    description: str = ""
    # Extra input rules the fake enforces (raise like the kernels), e.g. l2norm's eps > 0.
    check_args: Callable[..., None] | None = None
    # False when the backward formula calls a backward kernel that has no derivative itself:
    # the hand-written autograd wrappers then make double backward raise (once_differentiable)
    # instead of returning a silently wrong (zero) second derivative.
    double_backward: bool = True
    # Dtypes the kernels take.
    dtypes: tuple[torch.dtype, ...] = SUPPORTED_DTYPES
    # Per-argument shapes from an InputSpec's shape (None: every tensor has that shape).
    input_shapes: Callable[[Shape], tuple[Shape, ...]] | None = None
    # Checks the tensor arguments' shapes (torch._check, raising like the kernels) and
    # returns the output's; None: elementwise, every tensor and the output shaped like the first.
    output_shape: Callable[..., Sequence[int]] | None = None
    # Whether the boundary and compile scenarios include the op when no --ops is given.
    boundary: bool = True

    def shapes(self, shape: Shape) -> tuple[Shape, ...]:
        return self.input_shapes(shape) if self.input_shapes else (shape,) * len(self.tensor_args)

    def make_inputs(self, spec: InputSpec) -> Args:
        """Random inputs: tensors in schema order, then scalars."""
        gen = torch.Generator().manual_seed(spec.seed)
        tensors = []
        for arg, shape in zip(self.tensor_args, self.shapes(spec.shape)):
            t = torch.randn(shape, generator=gen, dtype=torch.float64).to(spec.dtype)
            if spec.layout == "permuted":
                if t.dim() != 2:
                    raise ValueError("permuted layout needs 2-D inputs")
                t = t.t().contiguous().t()  # same values, column-major strides
            elif spec.layout != "compact":
                raise ValueError(f"unknown layout {spec.layout!r}")
            t = t.to(spec.device)
            if spec.requires_grad and arg in self.differentiable:
                t.requires_grad_(True)
            tensors.append(t)
        return (*tensors, *self.scalars)

    def tensors_of(self, args: Args) -> list[Tensor]:
        return [a for a in args[: len(self.tensor_args)]]

    def grad_inputs(self, args: Args) -> list[Tensor]:
        return [a for a, n in zip(args, self.tensor_args) if n in self.differentiable and a.requires_grad]

    def fake(self, *args: Any) -> Tensor:
        """Metadata-only output: contiguous, shaped as output_shape says (default: like the first tensor)."""
        tensors = self.tensors_of(args)
        first = tensors[0]
        for other in tensors[1:]:
            torch._check(other.dtype == first.dtype, lambda: f"{self.name}: different dtypes")
            torch._check(other.device == first.device, lambda: f"{self.name}: different devices")
        # The kernels' contract, so traced and meta runs fail where eager ones would.
        torch._check(first.dtype in self.dtypes,
                     lambda: f"{self.name}: unsupported dtype {first.dtype} ({expected_dtypes(self.dtypes)})")
        shape = self.out_shape(tensors)
        if self.check_args is not None:
            self.check_args(*args)
        return first.new_empty(shape)

    def out_shape(self, tensors: Sequence[Tensor]) -> Sequence[int]:
        if self.output_shape is not None:
            return self.output_shape(*tensors)
        first = tensors[0]
        for other in tensors[1:]:
            torch._check(other.shape == first.shape, lambda: f"{self.name}: mismatched shapes")
        return first.shape

    def reference_fp64(self, args: Args) -> Tensor:
        tensors = [t.detach().to(torch.float64) for t in self.tensors_of(args)]
        return self.reference(*tensors, *args[len(self.tensor_args):])


def backward_fake(grad: Tensor, x: Tensor, *_: Any) -> Tensor:
    return x.new_empty(x.shape)


def none_for_scalars(contract: OpContract, grads: Sequence[Tensor | None]) -> tuple[Tensor | None, ...]:
    return (*grads, *([None] * len(contract.scalars)))
