"""`args`: what each registration variant costs per argument, by the kind of argument.

One op per argument kind and arity (scenarios/arity.py names them), each declared like any user's
op (dbench.Op): the first argument is the tensor the one shared kernel reads (it returns a copy of
it), the others ride along, so only the boundary grows with the arity. Kinds: `tensor` (n tensors),
`optional` (`Tensor?`, given tensors), `list` (one `Tensor[]` of n - 1 tensors), `mutable` (n tensors,
the last declared `Tensor(a!)`), and `float`, `int`, `bool`, `str` (n - 1 scalars). Every variant the
declaration generates is checked (opcheck, gradcheck, a fullgraph compile) before it is timed, and
paired with its mode's floor at the same op, as in the boundary scenario. Only the first tensor is
differentiable: in fwd_requires_grad the others are inputs that need no gradient (masks, indices,
buffers), so a slope there is what an argument costs a recorded call, not another autograd edge.

The variant `registered` is the same op as a C++ TORCH_LIBRARY op, defined while the run starts (its
schema is only known then) with one boxed CPU/CUDA kernel that copies the first argument through the
noop launcher (ops/csrc/runtime_library.cpp), its fake and autograd formula registered from Python,
as a user with their own C++ op would: the C++ boundary's cost per argument beside the Python ones.
The variant `stable` is the same op once more as a stable-ABI op (torch.ops.dbench_stable.<name>, a
boxed kernel per kind of argument in ops/csrc/stable_library.cpp that takes every argument off the
stack as the stable ABI requires): what the stable ABI's conversion of each argument adds. Like the
boundary scenario's `stable` row it has no autograd formula, so it has inference rows only.

The table (analysis/arity.py) fits the cost per extra argument of each variant and kind.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
from typing import Any, Callable

import torch
from torch import Tensor

from dbench.bench.core.case import Case
from dbench.bench.io.cpp_results import CppRequest
from dbench.ops import Mode
from dbench.ops.contract import OpContract
from dbench.ops.declare import Op, contract_of, register

from . import DECLARATIONS
from .arity import arities, kind_and_arity, op_name
from .base import Axis, Planned, Scenario, Selection, case_grid, grid_plan
from .boundary import BASELINE, fill_case, paired_with

MODES: tuple[str, ...] = DECLARATIONS["args"].modes
SHAPE = (16,)  # one dimension: opcheck has one layout to try, not two
SCALARS: dict[str, Any] = {"float": 0.5, "int": 1, "bool": True, "str": "a"}


def kernel(x0: Tensor, *rest: Any) -> Tensor:
    """The one kernel every op shares: it reads the first tensor and ignores the rest."""
    return x0.clone()


def kernel_backward(grad: Tensor, *scalars: Any) -> Tensor:
    return grad.clone()


def kernel_fake(x0: Tensor, *rest: Any) -> Tensor:
    return torch.empty_like(x0)


def backward_fake(grad: Tensor, *scalars: Any) -> Tensor:
    return torch.empty_like(grad)


def _signature(kind: str, names: tuple[str, ...]) -> str | None:
    """The schema of the kinds a generated one cannot say (None: the generated one)."""
    if kind == "optional":
        return "(" + ", ".join(["Tensor x0", *(f"Tensor? {n}" for n in names[1:])]) + ") -> Tensor"
    if kind == "mutable":
        return "(" + ", ".join([*(f"Tensor {n}" for n in names[:-1]), f"Tensor(a!) {names[-1]}"]) + ") -> Tensor"
    return None


def declare(kind: str, arity: int) -> Op:
    """The op of `kind` with `arity` arguments (tensors, for the list), as a user would declare it."""
    if kind in SCALARS:
        kw: dict[str, Any] = {"inputs": ("x0",), "scalars": {f"s{i}": SCALARS[kind] for i in range(1, arity)}}
    elif kind == "list":
        kw = {"inputs": ("x0", "xs"), "lists": {"xs": arity - 1}}
    else:
        names = tuple(f"x{i}" for i in range(arity))
        kw = {"inputs": names, "schema": _signature(kind, names)}
    return Op(name=op_name(kind, arity), forward=kernel, **kw, differentiable=("x0",), backward=kernel_backward,
              backward_fake=backward_fake, fake=kernel_fake, reference=kernel, shape=SHAPE,
              dtypes=(torch.float32, torch.float64),
              description=f"{arity} argument(s) of kind {kind}; the kernel copies the first tensor")


def _origin(contract: OpContract) -> str:
    """module:name@digest of its schemas and the shared kernel's source: a changed op is a new case."""
    text = json.dumps(dict(contract.schemas or {}), sort_keys=True)
    text += "".join(inspect.getsource(f) for f in (kernel, kernel_backward))
    return f"{__name__}:{contract.name}@{hashlib.sha256(text.encode()).hexdigest()[:12]}"


CPP_NAMESPACE = "dbench_args"
STABLE_NAMESPACE = "dbench_stable"  # the stable variant's ops: where ops/variants.py looks them up
# The schema type of the arguments after the first, per kind: the stable kernel takes them off the stack.
REST_TYPE = {"tensor": "Tensor", "mutable": "Tensor", "optional": "Tensor?", "list": "Tensor[]",
             "float": "float", "int": "int", "bool": "bool", "str": "str"}


_DEFINED: dict[str, Any] = {}  # qualified name -> its op: the dispatcher keeps a definition for the process


def _once(namespace: str, name: str, define: Callable[[str], Any]) -> Any:
    """define(qualified name), the first time that name is asked for in this process; its op after."""
    qualname = f"{namespace}::{name}"
    if qualname not in _DEFINED:
        _DEFINED[qualname] = define(qualname)
    return _DEFINED[qualname]


def cpp_op(made: OpContract) -> Any:
    """`made` as a C++ op, torch.ops.dbench_args.<name>, with its fake and, where the op mutates
    nothing (register_autograd refuses that), its autograd formula."""
    from dbench.ops.flavour import Flavour, registered_backward
    from dbench.ops.libraries import raw

    def define(qualname: str) -> Any:
        raw().define_copy_first_op(CPP_NAMESPACE, made.name, made.signature(made.name))
        torch.library.register_fake(qualname)(kernel_fake)
        op = getattr(getattr(torch.ops, CPP_NAMESPACE), made.name)
        if not made.written(made.name):
            assert made.backward_op is not None  # every op of this scenario declares its backward
            torch.library.register_autograd(
                qualname, registered_backward(made, Flavour(op, made.launcher(made.backward_op))),
                setup_context=made.save)
        return op

    return _once(CPP_NAMESPACE, made.name, define)


def stable_op(made: OpContract) -> None:
    """Defines `made` as a stable-ABI op, torch.ops.dbench_stable.<name> (once per process); the
    stable variant registers its fake when it is built."""
    from dbench.ops.libraries import define_stable_copy_first_op

    _once(STABLE_NAMESPACE, made.name, lambda _: define_stable_copy_first_op(
        STABLE_NAMESPACE, made.name, made.signature(made.name), REST_TYPE[kind_and_arity(made.name)[0]]))


@functools.cache
def contract(name: str) -> OpContract:
    """The op's contract; with its C++ op as `registered` and its stable-ABI op as `stable` where the
    native build is there (without it the Python variants still run, and those two have no rows)."""
    from dbench.ops.libraries import NativeBuildMissing

    op = declare(*kind_and_arity(name))
    made = contract_of(op, origin="")
    try:
        made = contract_of(dataclasses.replace(op, registered=cpp_op(made)), origin="")
        stable_op(made)
        assert made.flavours is not None  # contract_of names a declared op's flavours
        made = dataclasses.replace(made, flavours=made.flavours | {"stable"})
    except NativeBuildMissing:
        pass
    return dataclasses.replace(made, origin=_origin(made))


def selected(sel: Selection) -> tuple[str, ...]:
    """The selection's ops to time (--quick: QUICK_ARITIES' unless --ops names them). Every op it names
    is registered in the catalogue (a dict entry each; their variants are made when first asked for):
    the run looks up each op of the selection."""
    register([contract(n) for n in sel.ops])
    ops = sel.ops if sel.explicit_ops else \
        tuple(n for n in sel.ops if kind_and_arity(n)[1] in arities(kind_and_arity(n)[0], sel.quick))
    return tuple(n for n in ops if all(a.values_for(sel, n) for a in AXES))  # --axis arity=16: those ops


def _na_reason(contract: OpContract, variant: str, mode: str) -> str | None:
    """The C++ op of a mutable kind has no autograd formula: register_autograd refuses a schema that
    writes to an input (the generated custom_op_autograd has no row for it either)."""
    if variant == "registered" and Mode(mode).inputs_require_grad and contract.written(contract.name):
        return "a C++ op that writes to an input takes no register_autograd formula: no autograd row"
    return None


def plan(sel: Selection) -> list[Planned]:
    from dbench.ops import OPS

    planned = grid_plan(dataclasses.replace(sel, ops=selected(sel)), sel.modes_of(MODES))
    return [dataclasses.replace(p, na_reason=p.na_reason or _na_reason(OPS[p.op], p.variant, p.mode)) for p in planned]


# Each op is one kind at one arity: the axes take their one value from the op's name.
AXES = (Axis("arg_kind", lambda sel, op: (kind_and_arity(op)[0],)),
        Axis("arity", lambda sel, op: (kind_and_arity(op)[1],)))


def build(sel: Selection) -> list[Case]:
    return case_grid(dataclasses.replace(sel, ops=selected(sel)), "args", sel.modes_of(MODES), paired_with,
                     fill_case, requires_grad=lambda m: Mode(m).inputs_require_grad, axes=AXES,
                     skip=lambda contract, variant, mode, point: _na_reason(contract, variant.spec.name, mode))


def cpp_request(sel: Selection) -> CppRequest:
    """The same ops called from C++: the driver defines each one as this file does (its C++ op and its
    stable-ABI op, from the same schema) and times a typed and a boxed call of the first, a typed call
    of the second, and the noop launcher on the first tensor (the C++ floor), in inference."""
    ops = selected(sel)
    specs, keys = [], {}
    for n in ops:
        kind, arity = kind_and_arity(n)
        specs.append(f"--dbench_args_op={n}|{arity}|{kind}|{REST_TYPE[kind]}|{contract(n).signature(n)}")
        # The same axis fields as the Python rows (AXES), and the op's source digest.
        keys[n] = {**{a.name: a.values_for(sel, n)[0] for a in AXES}, "axes": [a.name for a in AXES],
                   "op_source": contract(n).origin}
    return CppRequest(ops, scenario="args", driver_args=(*specs, f"--dbench_args_shape={'x'.join(map(str, SHAPE))}"),
                      modes=("inference",), op_keys=keys)


SCENARIO = Scenario(
    DECLARATIONS["args"],
    build=build,
    plan=plan,
    axes=AXES,
    baseline_variants=tuple(dict.fromkeys(BASELINE[m] for m in MODES)),
    cpp_request=cpp_request,
)
