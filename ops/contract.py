"""The op contract: everything the variant factory needs to know about one op.

A shipped op is declared once (ops/shipped/<op>.py): its schema lives in C++
(ops/native/<op>.h) and is read back from the dispatcher, its kernels are the
shared CPU/CUDA kernels behind the pybind launchers, and this contract adds the
Python half: fake, saved tensors, backward formula, fp64 reference and inputs.
A user's op (ops/declare.py) gives its launchers and schemas here instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import torch
from torch import Tensor

from .inputs import MakeContext

Args = tuple[Any, ...]
Shape = tuple[int, ...]
# Every op takes these; the 16-bit types are computed in float32 and rounded once on store (the
# chain: once per operation, as eager PyTorch). The C++ launchers' message lists them in this order.
# Input layouts: "compact" (contiguous) and "permuted" (dense, strides of t().contiguous().t()).
LAYOUTS: tuple[str, ...] = ("compact", "permuted")
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class OpKernels(Protocol):
    """The variant's own flavour of the op (raw launcher, registered op...): its forward
    (differentiable where the variant is, e.g. mm's backward calls mm) and backward kernel."""

    @property
    def fwd(self) -> Callable[..., Tensor]: ...

    @property
    def bwd(self) -> Callable[..., Tensor] | None: ...


# A backward formula receives the autograd ctx, the incoming gradient (a Tensor; a tuple of them for
# an op with several outputs) and the variant's kernels.
BackwardFn = Callable[[Any, Any, OpKernels], tuple[Tensor | None, ...]]


def expected_dtypes(dtypes: Sequence[torch.dtype]) -> str:
    """'expected float32 or float64', as the C++ launchers word it."""
    names = [str(d).removeprefix("torch.") for d in dtypes]
    return "expected " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0])


@dataclass(frozen=True)
class Work:
    """What one call must do at the least: each input read once, each output written once, and the
    arithmetic of the formula (nvbench's add_global_memory_reads / google-benchmark's
    SetBytesProcessed). Bandwidth, throughput and % of roof are derived from it, never typed in."""

    bytes_read: int
    bytes_written: int
    flops: int
    # Distinct bytes the call touches, where smaller than the traffic (a chain of passes over
    # reused buffers): what must fit in a cache for the call to run from it. None: the traffic.
    footprint: int | None = None

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def resident_bytes(self) -> int:
        return self.footprint if self.footprint is not None else self.bytes


def elementwise_work(n: int, itemsize: int, inputs: int, outputs: int, flops_per_element: int) -> Work:
    return Work(n * itemsize * inputs, n * itemsize * outputs, n * flops_per_element)


def same_shape_work(inputs: int, outputs: int, flops_per_element: int) -> Callable[[Args], Work]:
    """Work of an op over same-shaped tensors, from its first tensor argument."""
    def work(args: Args) -> Work:
        x = args[0]
        return elementwise_work(x.numel(), x.element_size(), inputs, outputs, flops_per_element)

    return work


def save_x_and_scalar(ctx: Any, inputs: Args, output: Tensor) -> None:
    """For ops f(x, scalar) whose gradient is one call of a backward kernel (l2norm, chain)."""
    x, scalar = inputs
    ctx.save_for_backward(x)
    ctx.scalar = scalar


def backward_kernel(ctx: Any, grad: Tensor, kernels: OpKernels) -> tuple[Tensor | None, ...]:
    """grad_x = backward_kernel(grad, x, scalar) after save_x_and_scalar; no gradient for the scalar."""
    assert kernels.bwd is not None, "this op's backward needs its backward kernel"
    (x,) = ctx.saved_tensors
    return kernels.bwd(grad, x, ctx.scalar), None


@dataclass(frozen=True)
class InputSpec:
    """How to build one set of inputs for an op."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    requires_grad: bool = False
    layout: str = "compact"  # "compact" | "permuted" (dense, t().contiguous().t())
    seed: int = 0
    # Draw the values on the device itself (large kernel-scenario inputs: a CPU fp64 draw of
    # gigabytes would dominate the run). Deterministic per seed, but not the CPU draw's values.
    on_device: bool = False


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
    # The native op of the same semantics (autograd generated by PyTorch): the `aten` variant.
    aten: Callable[..., Tensor] | None = None
    # The least work of one forward call, and of one call of the backward kernel, from the inputs.
    work: Callable[[Args], Work] | None = None
    backward_work: Callable[[Args], Work] | None = None
    # Dtypes the kernels take.
    dtypes: tuple[torch.dtype, ...] = SUPPORTED_DTYPES
    # Per-argument shapes from an InputSpec's shape (None: every tensor has that shape).
    input_shapes: Callable[[Shape], tuple[Shape, ...]] | None = None
    # Checks the tensor arguments' shapes (torch._check, raising like the kernels) and
    # returns the output's; None: elementwise, every tensor and the output shaped like the first.
    output_shape: Callable[..., Sequence[int]] | None = None
    # Whether the boundary and compile scenarios include the op when no --ops is given.
    boundary: bool = True
    # Row-wise over the last dimension (l2norm): the kernel scenarios give it rows, not a flat tensor.
    rowwise: bool = False
    # A user op's shape for N elements in the sized scenarios (scenarios/kernels.py shape_for).
    sized: Callable[[int], Sequence[int]] | None = None
    # How the kernel scenarios size the op: "bytes" (the size axis is bytes per tensor) or "side" (a
    # square matrix product, sized by its n: n x n times n x n).
    size_axis: str = "bytes"
    # The dtype the roofline times the op in on a GPU, where that is not the run's (mm: bfloat16, the
    # dtype of its tensor cores).
    gpu_dtype: torch.dtype | None = None
    # Why the roofline makes no `compiled` row of the op (None: it makes one).
    no_compiled_reason: str | None = None
    # Which kernel the raw launcher picks for these inputs, recorded on its roofline rows (mm has several).
    kernel_of: Callable[..., str] | None = None
    # The scalars at which the kernel does the most work per element (the offsets scenario times it there).
    heaviest_scalars: tuple[Any, ...] | None = None
    # The op's Triton launchers by op name (forward, backward): the triton_op variant's. Made without
    # importing triton; a launcher compiles its kernels on its first call. None: a user's op, whose
    # own launchers call its Triton kernels (`launchers`), or an op without a triton_op row.
    triton_launchers: Callable[[], Mapping[str, Callable[..., Any]]] | None = None
    # --- what a user's op declares (ops/declare.py); the shipped ops keep the defaults ---
    # Launcher per op name (the forward's and the backward's); None: the suite's pybind launchers.
    launchers: Mapping[str, Callable[..., Any]] | None = None
    # "(args) -> returns" per op name; None: read from the C++ declaration (ops/native/<op>.h).
    schemas: Mapping[str, str] | None = None
    # The forward's outputs, by name, and those that carry no gradient (a saved statistic).
    outputs: tuple[str, ...] = ("out",)
    nondiff_outputs: tuple[str, ...] = ()
    # The registration flavours this op has (ops/specs.py VariantSpec.flavour); None: every one.
    # A variant over a flavour the op lacks is not a row of its table (not an n/a row).
    flavours: frozenset[str] | None = None
    # The op as its author registered it (torch.ops.ns.name): the `registered` variant.
    registered: Callable[..., Any] | None = None
    # Where a user's op comes from: "file.py:NAME@<source digest>", part of its rows' identity.
    origin: str | None = None
    # Run the contract checks (opcheck, gradcheck, compile) before timing, in the run itself:
    # the shipped ops are checked by the test suite instead.
    runtime_checks: bool = False
    # The input layouts the op takes (InputSpec.layout): a launcher that assumes contiguous inputs
    # declares ("compact",), and the dense-permuted contract check is skipped for it.
    layouts: tuple[str, ...] = LAYOUTS
    # How an input is made when it is not a random floating tensor (ops/inputs.py): input name ->
    # maker (integers, sorted offsets, a constant, None for a `Tensor?`); the others are randn.
    input_makers: Mapping[str, Callable[[MakeContext], Tensor | None]] | None = None
    # Or one function making every tensor input at once (inputs that depend on each other): called
    # with the op's shape, returns them by name or in tensor_args order (ops/inputs.py).
    inputs_factory: Callable[[MakeContext], Any] | None = None
    # Tensor arguments that are lists (`Tensor[]`): name -> how many tensors make_inputs puts in each.
    list_inputs: Mapping[str, int] | None = None
    # The declaration's tolerance against the reference, (atol, rtol) by dtype (key None: every
    # dtype), and its own comparator (name, got, expected) -> reason | None: scenarios/base.py agree.
    tolerance: Mapping[torch.dtype | None, tuple[float, float]] | None = None
    compare: Callable[[str, Tensor, Tensor], str | None] | None = None
    # A fake given by the declaration (else derived from the output shape rules, or the reference).
    fake_fn: Callable[..., Any] | None = None
    backward_fake_fn: Callable[..., Any] | None = None

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)

    def has_flavour(self, flavour: str) -> bool:
        return self.flavours is None or flavour in self.flavours

    def op_names(self) -> list[str]:
        """The forward's op name, then the backward kernel's when there is one."""
        return [self.name] + ([self.backward_op] if self.backward_op else [])

    def launcher(self, op_name: str) -> Callable[..., Any]:
        """The unregistered callable of the forward or backward kernel (variant `raw`)."""
        if self.launchers is not None:
            return self.launchers[op_name]
        from . import libraries

        return getattr(libraries.raw(), op_name)

    def signature(self, op_name: str) -> str:
        """The op's argument list and return type, as registered by every Python flavour."""
        if self.schemas is not None:
            return self.schemas[op_name]
        from . import libraries

        libraries.load_cpp_ops()
        schema = str(getattr(torch.ops.dbench, op_name).default._schema)
        return schema[schema.index("(") :]

    def written(self, op_name: str) -> tuple[str, ...]:
        """The arguments op_name's schema declares written (`Tensor(a!) x`)."""
        return written_arguments(op_name, self.signature(op_name))

    def outputs_of(self, out: Any) -> tuple[Tensor, ...]:
        """A call's outputs as a tuple (one output: a one-tuple)."""
        return tuple(out) if self.n_outputs > 1 else (out,)

    def differentiable_outputs(self, out: Any) -> tuple[Tensor, ...]:
        return tuple(o for o, n in zip(self.outputs_of(out), self.outputs) if n not in self.nondiff_outputs)

    def shapes(self, shape: Shape) -> tuple[Shape, ...]:
        return self.input_shapes(shape) if self.input_shapes else (shape,) * len(self.tensor_args)

    def make_inputs(self, spec: InputSpec) -> Args:
        """Random inputs: tensors (a list of them for a `Tensor[]` argument) in schema order, then scalars."""
        draw_on = torch.device(spec.device) if spec.on_device else torch.device("cpu")
        gen = torch.Generator(device=draw_on).manual_seed(spec.seed)
        if spec.layout == "permuted" and not any(len(s) == 2 for s in self.shapes(spec.shape)):
            raise ValueError("permuted layout needs 2-D inputs")
        if spec.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {spec.layout!r}")
        lists = self.list_inputs or {}
        makers = self.input_makers or {}
        made = self._factory_inputs(spec, gen) if self.inputs_factory is not None else None
        args: list[Any] = []
        for arg, shape in zip(self.tensor_args, self.shapes(spec.shape)):
            grad = spec.requires_grad and arg in self.differentiable
            if made is not None and arg in lists:
                if not isinstance(made[arg], (list, tuple)):
                    raise TypeError(f"op {self.name!r}: input {arg!r} is a list input (Tensor[]): make_inputs "
                                    f"must give it a list of tensors, not a {type(made[arg]).__name__}")
                args.append([self._placed(arg, t, spec, False) for t in made[arg]])
            elif made is not None:
                args.append(self._placed(arg, made[arg], spec, grad))
            elif arg in makers:
                context = MakeContext(tuple(shape), tuple(spec.shape), spec.dtype, torch.device(spec.device), gen)
                args.append(self._placed(arg, makers[arg](context), spec, grad))
            elif arg in lists:
                args.append([self._draw(spec, shape, gen, draw_on, False) for _ in range(lists[arg])])
            else:
                args.append(self._draw(spec, shape, gen, draw_on, grad))
        return (*args, *self.scalars)

    def _factory_inputs(self, spec: InputSpec, gen: torch.Generator) -> dict[str, Any]:
        """The declaration's make_inputs, called once with the op's shape: its inputs by name."""
        assert self.inputs_factory is not None
        shape = tuple(spec.shape)
        value = self.inputs_factory(MakeContext(shape, shape, spec.dtype, torch.device(spec.device), gen))
        names = list(self.tensor_args)
        if isinstance(value, Mapping):
            if set(value) != set(names):
                raise TypeError(f"op {self.name!r}: make_inputs returned the inputs {sorted(map(str, value))}; "
                                f"the declaration's are {names}: return each of them, by name")
            return dict(value)
        if isinstance(value, (tuple, list)) and len(value) == len(names):
            return dict(zip(names, value))
        got = f"{len(value)} values" if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
        raise TypeError(f"op {self.name!r}: make_inputs returned {got}; return the {len(names)} tensor "
                        f"inputs {names} as a mapping by name or a tuple in that order")

    def _placed(self, arg: str, t: Any, spec: InputSpec, grad: bool) -> Tensor | None:
        """A made input (a maker's or make_inputs'): a tensor or None, in the layout asked for; a
        gradient only for a floating tensor of a differentiable input."""
        if t is not None and not isinstance(t, Tensor):
            who = "make_inputs" if self.inputs_factory is not None else "its maker"
            raise TypeError(f"op {self.name!r}: input {arg!r} is a {type(t).__name__} ({who} made it), "
                            "not a tensor or None")
        if t is None:
            return None
        t = t.detach()  # a fresh leaf, whatever the function returned (a view, a tensor it keeps)
        if spec.layout == "permuted" and t.dim() == 2:
            t = t.t().contiguous().t()
        return t.requires_grad_(grad and t.is_floating_point())

    @staticmethod
    def _draw(spec: InputSpec, shape: Shape, gen: torch.Generator, draw_on: torch.device, grad: bool) -> Tensor:
        if spec.on_device:
            t = torch.randn(shape, generator=gen, dtype=spec.dtype, device=draw_on)
        else:
            t = torch.randn(shape, generator=gen, dtype=torch.float64).to(spec.dtype)
        if spec.layout == "permuted" and t.dim() == 2:
            t = t.t().contiguous().t()  # same values, column-major strides
        return t.to(spec.device).requires_grad_(grad)

    @property
    def made_inputs(self) -> frozenset[str]:
        """The tensor inputs a declaration's makers (or its make_inputs) make, not the suite's draw."""
        return frozenset(self.tensor_args if self.inputs_factory is not None else (self.input_makers or ()))

    def tensors_of(self, args: Args) -> list[Tensor]:
        """The tensor arguments, a `Tensor[]` argument's tensors in its place."""
        flat: list[Tensor] = []
        for a in args[: len(self.tensor_args)]:
            flat.extend(a if isinstance(a, (list, tuple)) else () if a is None else (a,))
        return flat

    def grad_inputs(self, args: Args) -> list[Tensor]:
        return [a for a, n in zip(args, self.tensor_args)
                if n in self.differentiable and isinstance(a, Tensor) and a.requires_grad]

    def fake(self, *args: Any) -> Any:
        """Metadata-only output: contiguous, shaped as output_shape says (default: like the first tensor).
        A user's op without a fake or a shape rule: shaped as its reference's outputs, else like its
        first tensor (opcheck then says so where the kernel disagrees)."""
        if self.fake_fn is not None:
            return self.fake_fn(*args)
        tensors = self.tensors_of(args)
        for other in tensors[1:]:
            torch._check(other.device == tensors[0].device, lambda: f"{self.name}: different devices")
        # One dtype for the drawn inputs; a made one (indices, offsets) keeps its own.
        drawn = self.tensors_of(tuple(None if n in self.made_inputs else a for n, a in zip(self.tensor_args, args)))
        first = drawn[0] if drawn else next((t for t in tensors if t.is_floating_point()), tensors[0])
        for other in drawn[1:]:
            torch._check(other.dtype == first.dtype, lambda: f"{self.name}: different dtypes")
        # The kernels' contract, so traced and meta runs fail where eager ones would.
        torch._check(first.dtype in self.dtypes,
                     lambda: f"{self.name}: unsupported dtype {first.dtype} ({expected_dtypes(self.dtypes)})")
        if self.check_args is not None:
            self.check_args(*args)
        if self.origin is not None and self.output_shape is None:
            if self.reference is None:
                made = tuple(first.new_empty(first.shape) for _ in self.outputs)
            else:
                shaped = self.outputs_of(self.reference(*args))
                ran = launcher_outputs(self.launcher(self.name), args)
                usable = ran is not None and len(ran) == len(shaped)
                real: Sequence[Tensor | None] = ran if ran is not None and usable else [None] * len(shaped)
                made = tuple(_like(o, r) for o, r in zip(shaped, real))
            return made if self.n_outputs > 1 else made[0]
        return first.new_empty(self.out_shape(tensors))

    def out_shape(self, tensors: Sequence[Tensor]) -> Sequence[int]:
        if self.output_shape is not None:
            return self.output_shape(*tensors)
        first = tensors[0]
        for other in tensors[1:]:
            torch._check(other.shape == first.shape, lambda: f"{self.name}: mismatched shapes")
        return first.shape

    def reference_fp64(self, args: Args) -> Any:
        def fp64(t: Tensor | None) -> Tensor | None:  # indices, offsets and absent inputs as they are
            return t.detach().to(torch.float64) if t is not None and t.is_floating_point() else t

        n = len(self.tensor_args)
        tensors = [[fp64(t) for t in a] if isinstance(a, (list, tuple)) else fp64(a) for a in args[:n]]
        return self.reference(*tensors, *args[n:])

    def backward_fake(self, *args: Any) -> Any:
        """The backward kernel's metadata-only output."""
        if self.backward_fake_fn is not None:
            return self.backward_fake_fn(*args)
        return backward_fake(*args)


def backward_fake(grad: Tensor, x: Tensor, *_: Any) -> Tensor:
    return x.new_empty(x.shape)


def written_arguments(op_name: str, signature: str) -> tuple[str, ...]:
    """The arguments a schema declares written (`Tensor(a!) x`): custom_op must be told the same, and
    register_autograd refuses an op that has any."""
    parsed = torch._C.parse_schema(op_name + signature)
    return tuple(a.name for a in parsed.arguments if a.alias_info is not None and a.alias_info.is_write)


def launcher_outputs(launcher: Callable[..., Any], args: Sequence[Any]) -> list[Tensor] | None:
    """The launcher's outputs on real inputs with the metadata of `args` (fake tensors: their shape,
    strides, dtype and device; zero-filled), run outside fake mode: the dtypes and strides a derived
    fake takes from the kernel itself (a reference may compute in float64). None where that cannot
    be had: symbolic sizes (a dynamic-shape trace), or a launcher that raises on those inputs."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    def concrete(t: Any) -> bool:
        return not isinstance(t, Tensor) or all(isinstance(n, int) for n in (*t.shape, *t.stride()))

    def real(t: Any) -> Any:
        if isinstance(t, (list, tuple)):
            return type(t)(real(x) for x in t)
        if not isinstance(t, Tensor):
            return t
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=t.device).zero_()

    flat = [x for a in args for x in (a if isinstance(a, (list, tuple)) else (a,))]
    if not all(concrete(t) for t in flat):
        return None
    try:
        with unset_fake_temporarily(), torch.no_grad():
            out = launcher(*(real(a) for a in args))
    except Exception:  # noqa: BLE001  (the reference's metadata then stands; opcheck names any mismatch)
        return None
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return outs if all(isinstance(o, Tensor) for o in outs) else None


def _like(shaped: Tensor, real: Tensor | None) -> Tensor:
    """An empty output shaped as the reference's and, where the launcher's real output of that
    shape is known, with its dtype and strides."""
    if real is None:
        return torch.empty_like(shaped)
    if tuple(real.shape) == tuple(shaped.shape):
        return torch.empty_strided(tuple(shaped.shape), tuple(real.stride()), dtype=real.dtype, device=shaped.device)
    return torch.empty_like(shaped, dtype=real.dtype)
