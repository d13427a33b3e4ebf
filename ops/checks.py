"""The contract checks a user's op passes before any of its variants is timed, in the run itself:
opcheck on compact and dense-permuted inputs, gradcheck in float64 where there is a backward,
a fullgraph trace of the registered variants. A failure says which registration is wrong.

(The shipped ops pass the same checks in the test suite: tests/test_contracts.py.)
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from dbench.bench.core.case import CASE_ERRORS, first_line, raised

from .contract import InputSpec, OpContract
from .declare import AdaptedOp
from .specs import needs_gradient
from .variants import Variant, flavour

OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
# What each opcheck test failing means for the declaration: the registration to fix.
HINTS = {
    "test_schema": "the schema does not say what the kernel does (an input it writes to, an output aliasing "
                   "an input): declare the mutation or return a new tensor",
    "test_faketensor": "the fake's outputs differ from the kernel's (shape, dtype or strides): fix fake=",
    "test_autograd_registration": "the op takes inputs that require grad but has no autograd formula at the "
                                  "Autograd key: register one (register_autograd) or declare no backward",
    "test_aot_dispatch_dynamic": "the op does not trace under AOTAutograd: its fake or autograd formula is wrong",
}


def _failing_test(exc: BaseException) -> str | None:
    text = str(exc)
    return next((t for t in OPCHECK_UTILS if t in text.split("\n")[0] or f"{t} failed" in text), None)


# What test_schema says when the schema hides a write or an alias (its hint applies only then).
_SCHEMA_FINDINGS = ("mutated", "mutable", "alias")
# What torch.library's custom ops raise when a kernel (the forward or the backward) returns one of its
# own inputs, wherever a check meets it (opcheck's tests, a compiled graph): the kernel is at fault.
_RETURNS_INPUT = "must not also be an input"
_RETURNS_INPUT_HINT = (" (the kernel named returns one of its inputs as an output; a registered op's outputs "
                       "must be new tensors: return a copy, e.g. g.clone())")


def _opcheck_reason(exc: BaseException, contract: OpContract, registered: bool) -> str:
    test = _failing_test(exc)
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    hint = f" ({HINTS[test]})" if test else ""
    if test == "test_schema" and not any(word in str(cause) for word in _SCHEMA_FINDINGS):
        hint = ""  # another error inside the schema test: its message is the cause
    if _RETURNS_INPUT in str(cause) and not registered:
        hint = _RETURNS_INPUT_HINT  # torch named the cause: not the fake (test_aot_dispatch_dynamic's usual one)
    elif registered and test:  # the library's own op: its registration, not the declaration, is at fault
        op = contract.registered.op if isinstance(contract.registered, AdaptedOp) else contract.registered
        what = _untraceable(op) if test != "test_schema" else None
        hint = (f" (the registered op's own registration is at fault, not this declaration: "
                f"{what or HINTS[test].split(': ')[0]}; report it to the op's authors, or drop registered=)")
    elif test == "test_aot_dispatch_dynamic" and contract.fake_fn is None and contract.reference is not None \
            and contract.output_shape is None and contract.origin is not None:
        data = ("it computes sizes from the inputs' values (unbacked symbols: repeat_interleave, nonzero, an "
                "index's max), which a fake cannot know; " if "unbacked" in str(cause) else "")
        hint = (" (no fake was declared, and the one derived from the reference does not trace with symbolic "
                f"sizes: {data}declare fake= giving the outputs from the inputs' shapes)")
    elif test == "test_faketensor" and contract.fake_fn is None:
        hint = (" (no fake was declared, and the one derived from the "
                + ("reference's shapes and one call of the launcher" if contract.reference is not None
                   else "first input") + " differs from the kernel's outputs: declare fake=)")
    return f"opcheck {test or ''}: {first_line(cause, 240)}{hint}".replace("opcheck :", "opcheck:")


def _untraceable(op: Any) -> str | None:
    """What a library's registered op's registration says when tracing it failed: a
    CompositeImplicitAutograd kernel only (the old RegisterOperators / catch-all form), no backend,
    fake or Meta kernel, so tracing ran that kernel itself on fake tensors (the error says what it
    did there). None for any other registration."""
    from torch._library.simple_registry import singleton

    name = getattr(op, "_qualified_op_name", None) or getattr(getattr(op, "_schema", None), "name", None)
    if not isinstance(name, str):
        return None
    has = functools.partial(torch._C._dispatch_has_kernel_for_dispatch_key, name)
    if not has("CompositeImplicitAutograd") or singleton.find(name).fake_impl.kernel is not None \
            or any(has(k) for k in ("Meta", "CPU", "CUDA", "CompositeExplicitAutograd")):
        return None
    return (f"{name} has only a CompositeImplicitAutograd kernel (no backend kernel, no fake, no Meta kernel), so "
            "tracing ran that kernel itself on fake tensors and it failed there, as the error says")


def _target(v: Variant) -> Any:
    """What opcheck can check: the op itself, or the registered op a function_* wraps (a library's
    op called through registered_args: the op, given the adapted arguments by _opcheck)."""
    if v.spec.wrap == "function":
        return flavour(v.spec.flavour, v.op.name).fwd
    return v.fn.op if isinstance(v.fn, AdaptedOp) else v.fn


def _layouts(contract: OpContract) -> tuple[str, ...]:
    """The layouts the op is checked on: dense permuted too where it has 2-D inputs, unless it
    declares that it takes compact inputs only (layouts=("compact",))."""
    two_d = any(len(s) == 2 for s in contract.shapes(contract.boundary_shape))
    return tuple(layout for layout in contract.layouts if layout == "compact" or two_d)


def launcher_failure(contract: OpContract, device: str, args: tuple[Any, ...], layout: str) -> str | None:
    """When a registration check fails: does the op's own launcher raise on the same inputs? Then the
    launcher, not a registration, is the cause (its exception and the frame that raised it)."""
    from .variants import get_variant

    try:
        get_variant("raw", contract.name, device).fn(*args)
    except CASE_ERRORS as exc:
        hint = ("; it assumes compact (contiguous) inputs: make them contiguous in the launcher, or declare "
                "layouts=(\"compact\",)") if layout == "permuted" else ""
        return f"the launcher raised on {layout} inputs, before any registration was checked: {raised(exc)}{hint}"
    return None


def _inputs(contract: OpContract, device: str, dtype: torch.dtype, layout: str, grad: bool) -> tuple[Any, ...]:
    return contract.make_inputs(InputSpec(contract.boundary_shape, dtype, device, requires_grad=grad, layout=layout))


@functools.cache
def _opcheck(op: str, variant: str, device: str, dtype: torch.dtype, grad: bool) -> str | None:
    from .variants import get_variant

    v = get_variant(variant, op, device)
    target = _target(v)
    for layout in _layouts(v.op):
        args, kwargs = _inputs(v.op, device, dtype, layout, grad), dict[str, Any]()
        if isinstance(v.fn, AdaptedOp):
            args, kwargs = v.fn.split(*args)
        try:
            torch.library.opcheck(target, args, kwargs, test_utils=OPCHECK_UTILS)
        except CASE_ERRORS as exc:  # the failure is the finding
            launcher = launcher_failure(v.op, device, _inputs(v.op, device, dtype, layout, False), layout)
            if launcher is not None:
                return launcher
            with_grad = " with inputs that require grad" if grad else ""
            return f"{_opcheck_reason(exc, v.op, v.spec.flavour == 'registered')} [{layout} inputs{with_grad}]"
    return None


@functools.cache
def _gradcheck(op: str, variant: str, device: str) -> str | None:
    from .variants import get_variant

    v = get_variant(variant, op, device)
    # Float64 on the CPU where the op runs there; else on the device (a Triton kernel).
    where = "cpu"
    try:
        v.fn(*_inputs(v.op, "cpu", torch.float64, "compact", False))
    except CASE_ERRORS:  # no CPU kernel
        where = device
    args = _inputs(v.op, where, torch.float64, "compact", True)
    try:
        def fn(*a: Any) -> Any:
            return v.op.differentiable_outputs(v.fn(*a))

        torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-5, rtol=1e-4)
    except CASE_ERRORS as exc:
        return f"gradcheck (float64, {where}): {first_line(exc, 240)}"
    return None


@functools.cache
def _compiles(op: str, variant: str, device: str, dtype: torch.dtype, grad: bool) -> str | None:
    from .variants import get_variant

    v = get_variant(variant, op, device)
    args = _inputs(v.op, device, dtype, "compact", grad)
    torch._dynamo.reset()
    try:
        out = torch.compile(v.fn, fullgraph=True, backend="aot_eager")(*args)
        if grad:
            outs = v.op.differentiable_outputs(out)
            torch.autograd.grad(outs, v.op.grad_inputs(args), [torch.ones_like(o) for o in outs])
    except CASE_ERRORS as exc:
        hint = _RETURNS_INPUT_HINT if _RETURNS_INPUT in str(exc) else ""
        return f"torch.compile(fullgraph=True): {first_line(exc, 240)}{hint}"
    return None


def contract_failure(v: Variant, mode: str, device: str, dtype: torch.dtype) -> str | None:
    """Why this variant of a user's op fails its contract in `mode` (None: it passes), each check run
    once per process. Checks that need gradients run for the modes that take them."""
    op, name, grad = v.op.name, v.spec.name, needs_gradient(mode)
    if not v.spec.registered or v.spec.native:  # a launcher, or PyTorch's own code: no registration to check
        checks = []
    elif v.spec.wrap == "function" or not (v.spec.differentiable and grad):
        checks = [lambda: _opcheck(op, name, device, dtype, False)]
    else:
        checks = [lambda: _opcheck(op, name, device, dtype, False), lambda: _opcheck(op, name, device, dtype, True)]
    if v.spec.registered and not v.spec.native:
        checks.append(lambda: _compiles(op, name, device, dtype, grad and v.spec.differentiable))
    if grad and v.spec.differentiable and torch.float64 in v.op.dtypes and not v.spec.native:
        checks.append(lambda: _gradcheck(op, name, device))
    for check in checks:
        failed = check()
        if failed:
            return "contract check failed: " + failed
    return None
