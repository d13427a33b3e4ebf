"""A user's op, declared once: `Op` is the public declaration, `contract_of` turns it into the
OpContract every variant is generated from, and `load` reads declarations from a user's file.

The declaration names what the suite cannot guess: the launcher (any callable returning tensors:
a pybind or load_inline function, a Triton launcher, a torch function), the tensor inputs and
scalars, the outputs, and optionally a backward launcher with what the forward saves for it, a
fake, an fp64 reference, the least work of a call (roofline), the author's own registered op and
a native form of the same semantics. Schemas are generated from it unless given.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from dbench.bench.core.trust import trusted_code_path

from .contract import LAYOUTS, Args, OpContract, OpKernels, Shape, Work, written_arguments
from .inputs import MakeContext
from .specs import USER_OP_FOLDERS, USER_OP_NAMES

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCALAR_TYPES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))
# Flavours a declaration gets without further information; the others depend on what it declares.
_BASE_FLAVOURS = frozenset({"raw", "define_impl", "custom_op", "nested_define_impl", "nested_custom_op"})


class DeclarationError(ValueError):
    """A declaration the suite cannot use (the message says what to change)."""


@dataclass(frozen=True)
class Op:
    """One operator as its author has it.

    forward(*inputs, *scalars) returns one tensor, or a tuple of len(outputs) tensors.
    backward(*grads, *saved, *scalars) gets the gradients of the differentiable outputs, then the
    tensors named in `saves` (inputs or outputs, in that order), then the scalars, and returns one
    gradient per differentiable input (a tensor, or a tuple in `differentiable`'s order).
    """

    name: str
    forward: Callable[..., Any]
    inputs: Sequence[str] = ("x",)
    scalars: Mapping[str, Any] = field(default_factory=dict)
    # Inputs that are lists of tensors (`Tensor[]` in the schema): name -> how many tensors the
    # inputs the suite makes put in it. Not differentiable, not saved.
    lists: Mapping[str, int] = field(default_factory=dict)
    outputs: Sequence[str] = ("out",)
    # Input shapes from one shape (--shape): default, every input has that shape.
    shapes: Callable[[Shape], Sequence[Shape]] | None = None
    shape: Shape = (4, 32)
    rowwise: bool = False  # works on rows (the last dimension): sized scenarios give it rows of 256
    # The inputs' shape for a size of N elements in the sized scenarios (launch, roofline): a function
    # N -> shape. Default: rows of 256 for a rowwise op; else the declared shape's trailing
    # dimensions kept and its first one scaled (at least 1), so an op that takes (rows, block) is
    # never given a 1-D shape.
    sized: Callable[[int], Sequence[int]] | None = None
    # How the roofline sizes it: "bytes" per tensor, or "side": a square matrix product of side n,
    # its shapes given (n, n, n) as (M, K, N).
    size_axis: str = "bytes"
    gpu_dtype: torch.dtype | None = None  # the dtype the roofline times it in on a GPU (else the run's)
    dtypes: Sequence[torch.dtype] = (torch.float32,)
    backward: Callable[..., Any] | None = None
    saves: Sequence[str] = ()
    differentiable: Sequence[str] | None = None  # default: every input, when there is a backward
    nondifferentiable_outputs: Sequence[str] = ()
    reference: Callable[..., Any] | None = None
    fake: Callable[..., Any] | None = None
    backward_fake: Callable[..., Any] | None = None
    work: Callable[[Args], Work] | None = None
    backward_work: Callable[[Args], Work] | None = None
    registered: Any = None  # torch.ops.ns.name (packet or overload): the `registered` row
    # How the declaration's call (*inputs, *scalars) maps onto the registered op's arguments, when
    # they differ (extra constants, an optional argument left None, another order): a function
    # returning the registered op's positional arguments as a tuple, or (args, kwargs). Its call
    # is part of the `registered` row's time.
    registered_args: Callable[..., Any] | None = None
    native: Callable[..., Any] | None = None  # PyTorch code of the same semantics: the `aten` row
    triton: bool = False  # the launchers call Triton kernels (through wrap_triton): a triton_op row
    # The input layouts the launcher takes: ("compact",) when it assumes contiguous inputs (the
    # contract checks then skip dense permuted ones, and say so).
    layouts: Sequence[str] = ("compact", "permuted")
    # Inputs that are not random floating tensors: name -> maker (dbench.inputs: integers, offsets,
    # constant, absent, or a function of a MakeContext returning a tensor or None).
    input_makers: Mapping[str, Callable[[MakeContext], Any]] = field(default_factory=dict)
    # Or one function making every tensor input at once, for inputs that depend on each other:
    # make_inputs(ctx) -> {name: tensor or None} (or a tuple in `inputs` order); ctx.shape is the op's.
    make_inputs: Callable[[MakeContext], Any] | None = None
    # How close its outputs must be to the reference: (atol, rtol) for every floating dtype, or a
    # mapping dtype -> (atol, rtol); default: the suite's per dtype (scenarios/base.py TOLERANCES).
    # Integer and bool outputs are compared exactly (the reference may return them in their own dtype).
    tolerance: tuple[float, float] | Mapping[torch.dtype, tuple[float, float]] | None = None
    # Or a comparator of the user's, in place of both: compare(output_name, got, expected) -> None when
    # they agree, else the reason (got: the variant's output; expected: the reference's; both on the CPU).
    compare: Callable[[str, Tensor, Tensor], str | None] | None = None
    # "(Tensor x, float eps) -> Tensor"; default: generated. `Tensor(a!) x` declares that the op writes x.
    schema: str | None = None
    backward_schema: str | None = None
    description: str = ""


def _check(cond: bool, op: str, message: str) -> None:
    if not cond:
        raise DeclarationError(f"op {op!r}: {message}")


def _check_tolerance(op: Op) -> None:
    """tolerance: an (atol, rtol) pair of finite numbers ≥ 0, or a mapping of floating dtypes to such pairs."""
    given = op.tolerance
    if given is None:
        return
    pairs = dict(given) if isinstance(given, Mapping) else {None: given}
    for dtype, pair in pairs.items():
        where = "" if dtype is None else f" for {dtype}"
        _check(dtype is None or (isinstance(dtype, torch.dtype) and dtype.is_floating_point), op.name,
               f"tolerance is keyed by floating dtypes, not {dtype!r}")
        ok = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in pair)
        _check(ok, op.name, f"tolerance{where} must be (atol, rtol), two finite numbers ≥ 0, not {pair!r}")


def _tolerances(op: Op) -> dict[torch.dtype | None, tuple[float, float]] | None:
    """The declared tolerance by dtype (None: every dtype)."""
    if op.tolerance is None:
        return None
    pairs = dict(op.tolerance) if isinstance(op.tolerance, Mapping) else {None: op.tolerance}
    return {d: (float(p[0]), float(p[1])) for d, p in pairs.items()}


def _scalar_type(op: str, name: str, value: Any) -> str:
    for kind, text in _SCALAR_TYPES:
        if isinstance(value, kind):
            return text
    raise DeclarationError(f"op {op!r}: scalar {name!r} is a {type(value).__name__}; "
                           "a schema takes bool, int, float or str")


def _returns(n: int) -> str:
    return "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"


def _schemas(op: Op, diff_in: Sequence[str], diff_out: Sequence[str]) -> dict[str, str]:
    scalars = [f"{_scalar_type(op.name, n, v)} {n}" for n, v in op.scalars.items()]
    tensors = [f"Tensor[] {n}" if n in op.lists else f"Tensor {n}" for n in op.inputs]
    fwd = op.schema or "(" + ", ".join([*tensors, *scalars]) + ") -> " + _returns(len(op.outputs))
    schemas = {op.name: fwd}
    if op.backward is not None:
        grads = [f"Tensor grad_{n}" for n in diff_out]
        saved = [f"Tensor saved_{n}" for n in op.saves]
        schemas[op.name + "_backward"] = op.backward_schema or \
            "(" + ", ".join([*grads, *saved, *scalars]) + ") -> " + _returns(len(diff_in))
    expect = {op.name: (len(op.inputs) + len(op.scalars), len(op.outputs)),
              op.name + "_backward": (len(diff_out) + len(op.saves) + len(op.scalars), len(diff_in))}
    for name, text in schemas.items():
        try:
            parsed = torch._C.parse_schema(name + text)
        except RuntimeError as exc:
            raise DeclarationError(f"op {op.name!r}: schema {text!r} does not parse: "
                                   f"{str(exc).splitlines()[0]}") from None
        got = (len(parsed.arguments), len(parsed.returns))
        _check(got == expect[name], op.name, f"schema {text!r} has {got[0]} argument(s) and {got[1]} return(s); "
               f"the declaration calls it with {expect[name][0]} and gets {expect[name][1]}")
    return schemas


def _validate(op: Op) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Differentiable inputs and outputs, after checking the declaration's names."""
    _check(isinstance(op.name, str) and bool(_NAME.match(op.name)), str(op.name), "the name must be an identifier")
    _check(callable(op.forward), op.name, "forward must be callable")
    _check(len(op.inputs) > 0, op.name, "declare at least one tensor input")
    names = [*op.inputs, *op.scalars, *op.outputs]
    for n in names:
        _check(bool(_NAME.match(n)), op.name, f"argument or output name {n!r} is not an identifier")
    _check(len(set(names)) == len(names), op.name, "input, scalar and output names must differ")
    _check(len(op.outputs) > 0, op.name, "declare at least one output")
    _check(op.size_axis in ("bytes", "side"), op.name, f"size_axis must be 'bytes' or 'side', got {op.size_axis!r}")
    for n, maker in op.input_makers.items():
        _check(n in op.inputs, op.name, f"input_makers names {n!r}, which is not one of the inputs {list(op.inputs)}")
        _check(callable(maker), op.name, f"the maker of input {n!r} is not callable")
        _check(n not in op.lists, op.name, f"input {n!r} is a list input: its tensors are made by the suite")
    _check(op.make_inputs is None or callable(op.make_inputs), op.name,
           "make_inputs must be callable: a MakeContext -> every tensor input, by name")
    _check(op.make_inputs is None or not op.input_makers, op.name,
           "declare input_makers or make_inputs, not both (make_inputs makes every input)")
    _check_tolerance(op)
    _check(op.sized is None or callable(op.sized), op.name, "sized must be callable: a number of elements -> a shape")
    _check(op.compare is None or callable(op.compare), op.name, "compare must be callable: (name, got, expected) -> "
           "None or the reason they differ")
    _check("compact" in op.layouts and set(op.layouts) <= set(LAYOUTS), op.name,
           f"layouts must include 'compact' and name only {list(LAYOUTS)}, got {list(op.layouts)}")
    for d in op.dtypes:
        _check(isinstance(d, torch.dtype) and d.is_floating_point, op.name, f"dtype {d!r} is not a floating dtype")
    diff_in = tuple(op.differentiable if op.differentiable is not None else (op.inputs if op.backward else ()))
    for n in diff_in:
        _check(n in op.inputs, op.name, f"differentiable input {n!r} is not one of the inputs {list(op.inputs)}")
    for n in op.nondifferentiable_outputs:
        _check(n in op.outputs, op.name, f"non-differentiable output {n!r} is not an output")
    diff_out = tuple(n for n in op.outputs if n not in op.nondifferentiable_outputs)
    if op.backward is None:
        _check(not op.saves, op.name, "`saves` without a backward")
        _check(op.differentiable is None or not op.differentiable, op.name, "differentiable inputs without a backward")
    else:
        _check(callable(op.backward), op.name, "backward must be callable")
        _check(bool(diff_in), op.name, "a backward needs at least one differentiable input")
        _check(bool(diff_out), op.name, "a backward needs at least one differentiable output")
        for n in op.saves:
            _check(n in op.inputs or n in op.outputs, op.name, f"saved {n!r} is neither an input nor an output")
        missing = [n for n in diff_in if n not in op.saves]
        _check(not missing or op.backward_fake is not None, op.name,
               f"the backward's fake cannot be derived: differentiable input(s) {missing} not saved "
               "(save them or give backward_fake=)")
    _check_lists(op, diff_in)
    return diff_in, diff_out


def _check_lists(op: Op, diff_in: Sequence[str]) -> None:
    """A `Tensor[]` input is passed as it is: no gradient flows to it and nothing of it is saved (the
    backward formula returns one tensor per differentiable input, save_for_backward takes tensors)."""
    for n, length in op.lists.items():
        _check(n in op.inputs, op.name, f"list input {n!r} is not one of the inputs {list(op.inputs)}")
        _check(isinstance(length, int) and not isinstance(length, bool) and length >= 0, op.name,
               f"list input {n!r}: its length must be a whole number >= 0, got {length!r}")
        _check(n not in diff_in, op.name, f"list input {n!r} cannot be differentiable")
        _check(n not in op.saves, op.name, f"list input {n!r} cannot be saved for the backward")
    _check(op.inputs[0] not in op.lists, op.name,
           "the first input must be a tensor (its shape, dtype and device are the call's)")


def _saver(op: Op) -> Callable[[Any, Args, Any], None]:
    """setup_context: save the declared tensors and scalars; mark statistic outputs."""
    n_in, outputs = len(op.inputs), tuple(op.outputs)
    picks = [("in", op.inputs.index(n)) if n in op.inputs else ("out", outputs.index(n)) for n in op.saves]
    nondiff = [outputs.index(n) for n in op.nondifferentiable_outputs]

    def save(ctx: Any, inputs: Args, output: Any) -> None:
        outs = tuple(output) if len(outputs) > 1 else (output,)
        ctx.save_for_backward(*(inputs[i] if kind == "in" else outs[i] for kind, i in picks))
        ctx.scalars = tuple(inputs[n_in:])
        if nondiff:
            ctx.mark_non_differentiable(*(outs[i] for i in nondiff))

    return save


def _backward_formula(op: Op, diff_in: Sequence[str], diff_out: Sequence[str]) -> Callable[..., Any]:
    """grads -> one call of the variant's backward kernel -> a gradient per forward argument."""
    positions = [op.inputs.index(n) for n in diff_in]
    out_index = [tuple(op.outputs).index(n) for n in diff_out]
    n_args = len(op.inputs) + len(op.scalars)
    lists = [op.inputs.index(n) for n in op.lists]

    def backward(ctx: Any, grad: Any, kernels: OpKernels) -> tuple[Any, ...]:
        assert kernels.bwd is not None
        grads = tuple(grad) if isinstance(grad, tuple) else (grad,)
        if len(grads) != len(diff_out):  # autograd passes every output's gradient
            grads = tuple(grads[i] for i in out_index)
        out = kernels.bwd(*grads, *ctx.saved_tensors, *ctx.scalars)
        got = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        result: list[Any] = [None] * n_args
        for pos in lists:
            # A Tensor[] input gets a None per tensor where the autograd wrapper sees its tensors
            # (custom_op's register_autograd: needs_input_grad holds a list), one None where it does not.
            need = ctx.needs_input_grad[pos]
            result[pos] = [None] * len(need) if isinstance(need, (list, tuple)) else None
        for pos, g in zip(positions, got):
            result[pos] = g
        return tuple(result)

    return backward


def _derived_backward_fake(op: Op, diff_in: Sequence[str], diff_out: Sequence[str]) -> Callable[..., Any]:
    """Each input's gradient shaped like the saved input."""
    first_saved = len(diff_out)
    where = [first_saved + list(op.saves).index(n) for n in diff_in]

    def fake(*args: Any) -> Any:
        made = tuple(args[i].new_empty(args[i].shape) for i in where)
        return made if len(made) > 1 else made[0]

    return fake


def _as_call(got: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """What registered_args returned, as (args, kwargs): a tuple of arguments, or (args, kwargs)."""
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], (tuple, list)) and isinstance(got[1], dict):
        return tuple(got[0]), dict(got[1])
    return tuple(got), {}


class AdaptedOp:
    """A library's registered op called through the declaration's registered_args: the `registered`
    row calls this; the contract checks give the op itself its adapted arguments (split)."""

    def __init__(self, op: Any, adapt: Callable[..., Any]) -> None:
        self.op, self.adapt = op, adapt

    def split(self, *args: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return _as_call(self.adapt(*args))

    def __call__(self, *args: Any) -> Any:
        call, kwargs = self.split(*args)
        return self.op(*call, **kwargs)


class _Arg:
    """A stand-in for one of the declaration's arguments in the dry run of registered_args."""

    def __init__(self, name: str, tensor: bool) -> None:
        self.name, self.tensor = name, tensor

    def __repr__(self) -> str:
        return self.name


def _adapted_call(op: Op) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """registered_args applied to stand-ins for the declaration's arguments (None: it does more
    than place them, e.g. calls a tensor method; the run's checks then judge the call)."""
    stand_ins = [*(_Arg(n, True) for n in op.inputs), *(_Arg(n, False) for n in op.scalars)]
    if op.registered_args is None:
        return tuple(stand_ins), {}
    try:
        got = op.registered_args(*stand_ins)
    except Exception:  # noqa: BLE001 (any error: the adapter computes on its arguments)
        return None
    _check(isinstance(got, (tuple, list)), op.name,
           f"registered_args must return the registered op's arguments as a tuple, or (args, kwargs); "
           f"got {type(got).__name__}")
    return _as_call(got)


def _check_fits(op: Op, reg: Any) -> None:
    """The registered op's schema takes the call the declaration (through registered_args) makes:
    refused when the file is loaded, naming both, not at timing."""
    call = _adapted_call(op)
    if call is None:
        return
    args, kwargs = call
    schema = getattr(reg, "_opoverload", reg)._schema
    positional = [a for a in schema.arguments if not a.kwarg_only]
    required = [a for a in positional if not a.has_default_value()]
    names = {a.name for a in schema.arguments}
    wanted = f"the registered op {schema.name}{str(schema)[len(schema.name):]}"
    fix = " (give registered_args=, mapping the declaration's arguments onto it)" if op.registered_args is None else ""
    _check(len(required) <= len(args) + sum(a.name in kwargs for a in required) and len(args) <= len(positional),
           op.name, f"{wanted} does not take the call ({', '.join(map(repr, args))}){fix}")
    unknown = sorted(set(kwargs) - names)
    _check(not unknown, op.name, f"{wanted} has no argument(s) {unknown}")
    for value, arg in zip(args, positional):
        if isinstance(value, _Arg) and value.tensor:
            _check("Tensor" in str(arg.type), op.name,
                   f"{wanted} takes {arg.type} {arg.name} where the call puts the tensor input {value.name!r}{fix}")


def _registered(op: Op) -> Callable[..., Any] | None:
    reg = op.registered
    if reg is None:
        _check(op.registered_args is None, op.name, "registered_args= without registered=")
        return None
    if isinstance(reg, torch._ops.OpOverloadPacket):
        reg = reg.default
    _check(isinstance(reg, torch._ops.OpOverload) or hasattr(reg, "_opoverload"), op.name,
           "registered= must be a registered op (torch.ops.namespace.name), got " + type(reg).__name__)
    _check(op.registered_args is None or callable(op.registered_args), op.name, "registered_args must be callable")
    _check_fits(op, reg)
    return reg if op.registered_args is None else AdaptedOp(reg, op.registered_args)


def contract_of(op: Op, origin: str) -> OpContract:
    """The contract the variant factory generates this op's variants from."""
    diff_in, diff_out = _validate(op)
    schemas = _schemas(op, diff_in, diff_out)
    backward_op: str | None = None
    launchers: dict[str, Callable[..., Any]] = {op.name: op.forward}
    if op.backward is not None:
        backward_op = op.name + "_backward"
        launchers[backward_op] = op.backward
    flavours = set(_BASE_FLAVOURS)
    if op.backward is not None:
        flavours.add("autograd_key_py")
        # custom_op's register_autograd refuses an op that writes to an input (a non-functional schema).
        if not written_arguments(op.name, schemas[op.name]):
            flavours.add("custom_op_autograd")
    if op.triton:
        flavours.add("triton_op")
    if op.registered is not None:
        flavours.add("registered")
    if op.native is not None:
        flavours.add("aten")
    shapes = op.shapes
    return OpContract(
        name=op.name,
        tensor_args=tuple(op.inputs),
        scalars=tuple(op.scalars.values()),
        list_inputs=dict(op.lists) or None,
        differentiable=diff_in,
        reference=op.reference,  # type: ignore[arg-type]
        save=_saver(op),
        backward=_backward_formula(op, diff_in, diff_out) if op.backward else None,  # type: ignore[arg-type]
        backward_op=backward_op,
        boundary_shape=tuple(op.shape),
        description=op.description,
        double_backward=False,  # a user's backward kernel has no derivative of its own
        aten=op.native,
        work=op.work,
        backward_work=op.backward_work,
        dtypes=tuple(op.dtypes),
        rowwise=op.rowwise,
        sized=op.sized,
        size_axis=op.size_axis,
        gpu_dtype=op.gpu_dtype,
        input_shapes=(lambda s: tuple(tuple(x) for x in shapes(s))) if shapes else None,
        launchers=launchers,
        schemas=schemas,
        outputs=tuple(op.outputs),
        nondiff_outputs=tuple(op.nondifferentiable_outputs),
        flavours=frozenset(flavours),
        registered=_registered(op),
        origin=origin,
        runtime_checks=True,
        layouts=tuple(op.layouts),
        tolerance=_tolerances(op),
        compare=op.compare,
        input_makers=dict(op.input_makers) or None,
        inputs_factory=op.make_inputs,
        fake_fn=op.fake,
        backward_fake_fn=op.backward_fake or (_derived_backward_fake(op, diff_in, diff_out) if op.backward else None),
    )


# ---------------------------------------------------------------------------
# Loading a user's file: `path.py:NAME` (or `path.py`: every Op the module defines).


def split_spec(text: str) -> tuple[Path, str | None]:
    """'path/to/my_ops.py:NAME' -> (resolved path, NAME); the checks that need no import."""
    path_text, sep, name = text.rpartition(":") if text.count(":") and not text.endswith(".py") else (text, "", "")
    path = Path(path_text).expanduser().absolute()
    if path.suffix != ".py":
        raise DeclarationError(f"--op {text!r}: expected FILE.py or FILE.py:NAME")
    if not path.is_file():
        raise DeclarationError(f"--op {text!r}: {path} is not a file")
    if sep and not _NAME.match(name):
        raise DeclarationError(f"--op {text!r}: {name!r} is not a Python name")
    # Imported next: refused (UntrustedPathError) where another local user could change it.
    return trusted_code_path(path, "the --op file"), (name or None)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def origin_of(path: Path, attr: str) -> str:
    """A user op's origin: 'my_ops.py:NAME@<source digest>' (an edited file is another origin)."""
    return f"{path.name}:{attr}@{digest(path)}"


def split_origin(origin: str) -> tuple[str, str]:
    """'my_ops.py:NAME@digest' -> ('my_ops.py:NAME', 'digest')."""
    source, _, source_digest = origin.rpartition("@")
    return source, source_digest


def _import(path: Path) -> ModuleType:
    module_name = f"dbench_user_{path.stem}_{digest(path)}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    # SystemExit too: sys.exit() at import would end the run silently (a Ctrl-C still interrupts).
    except (Exception, SystemExit) as exc:
        del sys.modules[module_name]
        why = f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
        raise DeclarationError(f"--op {path}: importing it failed: {why}") from exc
    return module


def _named(text: str, path: Path, module: ModuleType, declared: dict[str, Op], name: str) -> dict[str, Any]:
    """The declaration `:NAME` picks: the variable NAME, or the Op whose name= is NAME (users write
    either); refused when they are two different declarations, or when nothing matches (listing the
    file's ops, so the user can pick)."""
    matches = {k: v for k, v in declared.items() if v.name == name}
    if name in declared:
        matches = {name: declared[name], **matches}
    elif not matches and name in vars(module):
        return {name: getattr(module, name)}  # not an Op: load says what it is
    distinct: dict[int, str] = {}  # one Op under two variables (`a = b = Op(...)`) is one declaration
    for k, v in matches.items():
        distinct.setdefault(id(v), k)
    if len(distinct) > 1:
        which = " and ".join(f"variable {k} (Op {matches[k].name!r})" for k in distinct.values())
        raise DeclarationError(f"--op {text!r}: {name!r} names two declarations in {path.name}, {which}: "
                               "pick one by its other name, or rename one")
    if not matches:
        ops = ", ".join(f"{k} = Op {v.name!r}" for k, v in declared.items()) or "none"
        raise DeclarationError(f"--op {text!r}: {path.name} defines no {name!r} (as a variable or an Op's "
                               f"name=); the dbench Ops it defines: {ops}")
    attr = next(iter(distinct.values()))
    return {attr: matches[attr]}


def load(text: str) -> list[OpContract]:
    """The ops named by one --op value, as contracts (not yet registered)."""
    path, name = split_spec(text)
    # Its folder, resolved and as given (the given text's last part, FILE.py:NAME, is dropped with it).
    USER_OP_FOLDERS.update({str(path.parent), str(Path(text).expanduser().absolute().parent)})
    module = _import(path)
    declared = {k: v for k, v in vars(module).items() if isinstance(v, Op)}
    if name is not None:
        found = _named(text, path, module, declared, name)
    else:
        found = declared
        if not found:
            raise DeclarationError(f"--op {text!r}: {path.name} defines no dbench Op")
    contracts = []
    for attr, op in found.items():
        if not isinstance(op, Op):
            raise DeclarationError(f"--op {text!r}: {attr} is a {type(op).__name__}, not a dbench Op")
        contracts.append(contract_of(op, origin_of(path, attr)))
    return contracts


def register(contracts: Sequence[OpContract]) -> list[str]:
    """Add user ops to the catalogue (ops.catalog.OPS); refuses a name taken by another op."""
    from .catalog import OPS

    for c in contracts:
        taken = OPS.get(c.name)
        if taken is not None and taken.origin != c.origin:
            where = taken.origin or "the suite's own ops"
            raise DeclarationError(f"op name {c.name!r} is taken by {where}: rename the declaration")
        OPS[c.name] = c
        if c.name not in USER_OP_NAMES:
            USER_OP_NAMES.append(c.name)
    return [c.name for c in contracts]


def load_all(specs: Sequence[str]) -> list[str]:
    """Load and register every --op value; the op names, in order, without repeats."""
    names: list[str] = []
    for text in specs:
        names += [n for n in register(load(text)) if n not in names]
    return names
