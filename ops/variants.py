"""Variant factory: every way of exposing an op to PyTorch, generated from its contract.

A *flavour* is one registration mechanism applied to an op's forward and
backward kernels (raw launcher, torch.library define/impl, custom_op, the C++
TORCH_LIBRARY op, the stable-ABI op, triton_op). A *variant* is what a caller
invokes: a flavour's forward op directly, or wrapped in autograd (an
autograd.Function, register_autograd, an Autograd-key kernel), or nested
inside another registered op. Adding a variant is one entry in VARIANT_SPECS.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from . import libraries
from .catalog import OPS
from .specs import MODES, SPECS, VARIANT_NAMES, VARIANT_SPECS, Mode, VariantSpec, needs_gradient  # noqa: F401  (re-exported)
from .contract import OpContract
from .flavour import Flavour, OpFn, registered_backward


def _op_names(contract: OpContract) -> list[str]:
    return contract.op_names()


def _fake_for(contract: OpContract, op_name: str) -> Callable[..., Any]:
    return contract.fake if op_name == contract.name else contract.backward_fake


# ---------------------------------------------------------------------------
# Flavours. Each is built once per op and process (registrations are global).

_LIBRARIES: list[torch.library.Library] = []  # keep Python-defined ops alive


def _library(ns: str) -> torch.library.Library:
    lib = torch.library.Library(ns, "FRAGMENT")
    _LIBRARIES.append(lib)
    return lib


def _define_impl(ns: str, contract: OpContract, impls: Callable[[str], OpFn]) -> Flavour:
    """torch.library define + per-key impl (CPU and CUDA) + register_fake."""
    lib = _library(ns)
    ops: dict[str, OpFn] = {}
    for op_name in _op_names(contract):
        lib.define(op_name + contract.signature(op_name))
        for key in ("CPU", "CUDA"):
            lib.impl(op_name, impls(op_name), key)
        torch.library.register_fake(f"{ns}::{op_name}", _fake_for(contract, op_name), lib=lib)
        ops[op_name] = getattr(getattr(torch.ops, ns), op_name).default
    return Flavour(ops[contract.name], ops.get(contract.backward_op or ""))


def _custom_op(ns: str, contract: OpContract, impls: Callable[[str], OpFn]) -> Flavour:
    """torch.library.custom_op (schema given, not inferred) + register_fake."""
    ops: dict[str, Any] = {}
    for op_name in _op_names(contract):
        schema = contract.signature(op_name)
        op = torch.library.custom_op(
            f"{ns}::{op_name}", impls(op_name), mutates_args=contract.written(op_name), schema=schema
        )
        op.register_fake(_fake_for(contract, op_name))
        ops[op_name] = op
    return Flavour(ops[contract.name], ops.get(contract.backward_op or ""))


# DBENCH_INJECT_PY_NS (read once, at import): a known CPU cost in the Python kernel of the
# `define_impl` variant only (bench/harness/cli.py checks the value), so a gate's power can be shown on a
# Python-side regression as DBENCH_INJECT_CPU_NS shows it on the C++ `cpp` op.
_INJECT_PY_NS = int(os.environ.get("DBENCH_INJECT_PY_NS") or 0)


def _spinning(kernel: OpFn) -> OpFn:
    """`kernel` after a busy-wait of DBENCH_INJECT_PY_NS ns on every call (a wait, not a sleep:
    the cost stays on this thread's CPU time as a real regression's would)."""
    @functools.wraps(kernel)
    def spun(*args: Any, **kwargs: Any) -> Any:
        until = time.perf_counter_ns() + _INJECT_PY_NS
        while time.perf_counter_ns() < until:
            pass
        return kernel(*args, **kwargs)

    return spun


@functools.cache
def flavour(kind: str, op: str) -> Flavour:
    contract = OPS[op]
    if kind == "raw":
        return Flavour(contract.launcher(op), contract.launcher(contract.backward_op) if contract.backward_op else None)
    if kind == "define_impl":
        launcher = contract.launcher if not _INJECT_PY_NS else lambda name: _spinning(contract.launcher(name))
        return _define_impl("dbench_define_impl", contract, launcher)
    if kind == "custom_op":
        return _custom_op("dbench_custom_op", contract, contract.launcher)
    if kind == "nested_define_impl":
        inner = flavour("define_impl", op)
        return _define_impl("dbench_nested_define_impl", contract, lambda n: _inner_of(inner, contract, n))
    if kind == "nested_custom_op":
        inner = flavour("custom_op", op)
        return _custom_op("dbench_nested_custom_op", contract, lambda n: _inner_of(inner, contract, n))
    if kind == "custom_op_autograd":
        fl = _custom_op("dbench_custom_op_autograd", contract, contract.launcher)
        custom: Any = fl.fwd  # a torch.library.custom_op (CustomOpDef), which Flavour types as a callable
        custom.register_autograd(registered_backward(contract, fl), setup_context=contract.save)
        return fl
    if kind == "autograd_key_py":
        return _autograd_key_py(contract)
    if kind in ("cpp", "cpp_autograd"):
        return _cpp(contract, autograd=kind == "cpp_autograd")
    if kind == "stable":
        return _stable(contract)
    if kind == "triton_op":
        from .triton_ops import triton_flavour

        return triton_flavour(contract)
    if kind == "aten":
        if contract.aten is None:
            raise KeyError(f"op {op!r} declares no native (aten) form")
        return Flavour(contract.aten, None)
    if kind == "registered":
        if contract.registered is None:
            raise KeyError(f"op {op!r} declares no registered op of its own")
        return Flavour(contract.registered, None)
    raise KeyError(kind)


def _inner_of(inner: Flavour, contract: OpContract, op_name: str) -> OpFn:
    return inner.fwd if op_name == contract.name else inner.bwd  # type: ignore[return-value]


_FAKES_REGISTERED: set[str] = set()


def _register_fakes(ns: str, names: list[str], contract: OpContract, suffix: str = "") -> None:
    for op_name in names:
        qualified = f"{ns}::{op_name}{suffix if op_name == contract.name else ''}"
        if qualified not in _FAKES_REGISTERED:
            torch.library.register_fake(qualified, _fake_for(contract, op_name))
            _FAKES_REGISTERED.add(qualified)


def _cpp(contract: OpContract, autograd: bool) -> Flavour:
    libraries.load_cpp_ops()
    suffix = "_autograd" if autograd else ""
    _register_fakes("dbench", _op_names(contract), contract, suffix)
    ns = torch.ops.dbench
    bwd = getattr(ns, contract.backward_op).default if contract.backward_op else None
    return Flavour(getattr(ns, contract.name + suffix).default, bwd)


def _stable(contract: OpContract) -> Flavour:
    libraries.load_stable_ops()
    _register_fakes("dbench_stable", [contract.name], contract)
    return Flavour(getattr(torch.ops.dbench_stable, contract.name).default, None)


def _autograd_key_py(contract: OpContract) -> Flavour:
    """A define/impl op with a Python kernel at the Autograd dispatch key."""
    ns = "dbench_autograd_key_py"
    fl = _define_impl(ns, contract, contract.launcher)
    below = fl.fwd

    class _AutogradKernel(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Tensor:
            with torch._C._AutoDispatchBelowAutograd():
                out = below(*args)
            contract.save(ctx, args, out)
            return out

        @staticmethod
        @_first_order_only(contract)
        def backward(ctx: Any, *grads: Tensor) -> Any:
            return contract.backward(ctx, grads[0] if len(grads) == 1 else grads, fl)

    _LIBRARIES[-1].impl(contract.name, _AutogradKernel.apply, "Autograd")
    return fl


def _first_order_only(contract: OpContract) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """once_differentiable for ops whose backward kernel has no derivative (contract.double_backward),
    so that differentiating the gradient raises rather than silently returning zeros. Applied only
    while a graph is being built (create_graph): the wrapper costs ~7 µs per backward on the CPU even
    when grad mode is off, which would land in every fwd_bwd row."""
    if contract.double_backward:
        return lambda fn: fn

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        guarded = torch.autograd.function.once_differentiable(fn)

        @functools.wraps(fn)
        def backward(ctx: Any, *grads: Any) -> Any:
            return guarded(ctx, *grads) if torch.is_grad_enabled() else fn(ctx, *grads)

        return backward

    return wrap


def autograd_function(contract: OpContract, fl: Flavour, label: str) -> OpFn:
    """autograd.Function over a flavour's forward/backward (the seed's eager floor).

    forward takes exactly the op's arguments (not *args): Dynamo matches
    apply()'s arguments against forward's parameters to decide whether ctx is
    passed, and a variadic forward makes it drop ctx for two-argument ops.
    """
    names = [*contract.tensor_args, *(f"s{i}" for i in range(len(contract.scalars)))]
    params = ", ".join(names)
    namespace: dict[str, Any] = {"fwd": fl.fwd, "save": contract.save}
    exec(  # noqa: S102  # a fixed-arity forward generated from the contract
        f"def forward(ctx, {params}):\n"
        f"    out = fwd({params})\n"
        f"    save(ctx, ({params},), out)\n"
        f"    return out\n",
        namespace,
    )

    @_first_order_only(contract)
    def backward(ctx: Any, *grads: Tensor) -> Any:
        return contract.backward(ctx, grads[0] if len(grads) == 1 else grads, kernels)

    cls = type(
        f"{contract.name}_{label}",
        (torch.autograd.Function,),
        {"forward": staticmethod(namespace["forward"]), "backward": staticmethod(backward)},
    )
    kernels = _FunctionKernels(fl, cls.apply)  # type: ignore[attr-defined]
    return cls.apply  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _FunctionKernels:
    """What an autograd.Function's backward calls: the flavour's op, or, while a graph is
    built (create_graph), the Function itself so that the gradient is differentiable too
    (mm's backward is two mm calls). Plain backward stays on the op: it is what torch.compile
    traces, and it costs nothing extra in fwd_bwd rows."""

    flavour: Flavour
    differentiable: OpFn

    @property
    def fwd(self) -> OpFn:
        return self.differentiable if torch.is_grad_enabled() else self.flavour.fwd

    @property
    def bwd(self) -> OpFn | None:
        return self.flavour.bwd


# ---------------------------------------------------------------------------
# Variants.


def unavailable_reason(spec: VariantSpec, device: str) -> str | None:
    """Why a variant cannot exist on this machine, or None."""
    if spec.flavour in ("aten", "registered"):
        return None  # PyTorch's or the user's own op: it runs wherever they do
    if spec.flavour == "stable" and libraries.torch_version() < libraries.STABLE_MIN_TORCH:
        return f"needs torch >= 2.10 for the stable ABI (have {torch.__version__})"
    if spec.flavour == "triton_op":
        from .triton_ops import triton_unavailable_reason

        return triton_unavailable_reason(device)
    if device.startswith("cuda") and not libraries.has_cuda_kernels():
        return "this build has no CUDA kernels"
    return None


class VariantUnavailable(RuntimeError):
    """Calling a variant this machine cannot run (the message says why)."""


@dataclass(frozen=True)
class Variant:
    spec: VariantSpec
    op: OpContract
    fn: OpFn  # for an unavailable variant: raises VariantUnavailable with the reason
    unavailable: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def available(self) -> bool:
        return self.unavailable is None

    def na_reason(self, mode: str) -> str | None:
        """Why this variant has no row in `mode`, or None when it runs."""
        if self.unavailable:
            return self.unavailable
        if needs_gradient(mode) and not self.spec.differentiable:
            return self.spec.no_grad_reason
        if needs_gradient(mode) and self.op.backward is None:
            # aten and registered carry their own autograd, but with no backward declared the op has
            # no function_raw row to pair them with, and its native form may not be differentiable.
            return f"op {self.op.name!r} declares no backward: its gradient modes are not timed"
        return None


def _refusing(variant: str, op: str, device: str, reason: str) -> OpFn:
    def unavailable(*args: Any, **kwargs: Any) -> Tensor:
        raise VariantUnavailable(f"variant {variant!r} of op {op!r} cannot run on {device}: {reason}")

    return unavailable


@functools.cache
def _build(variant: str, op: str) -> OpFn:
    spec, contract = SPECS[variant], OPS[op]
    fl = flavour(spec.flavour, op)
    if spec.wrap == "function":
        return autograd_function(contract, fl, spec.name)
    return fl.fwd


def get_variant(variant: str, op: str, device: str = "cpu") -> Variant:
    if variant not in SPECS:
        raise KeyError(f"unknown variant {variant!r}; valid: {', '.join(VARIANT_NAMES)}")
    if op not in OPS:
        raise KeyError(f"unknown op {op!r}; valid: {', '.join(OPS)}")
    spec, contract = SPECS[variant], OPS[op]
    reason = variant_absent_reason(spec, contract) or unavailable_reason(spec, device)
    if reason:
        return Variant(spec, contract, _refusing(variant, op, device, reason), reason)
    return Variant(spec, contract, _build(variant, op))


def variant_absent_reason(spec: VariantSpec, contract: OpContract) -> str | None:
    """Why the op has no such variant at all (not a row of its table), or None."""
    if spec.flavour == "aten" and contract.aten is None:
        return f"op {contract.name!r} declares no native (aten) form"
    if spec.flavour == "registered" and contract.registered is None:
        return f"op {contract.name!r} declares no registered op of its own"
    if not contract.has_flavour(spec.flavour):
        return f"op {contract.name!r} has no {spec.flavour} form"
    if spec.differentiable and spec.flavour not in ("aten", "registered") and contract.backward is None:
        return f"op {contract.name!r} declares no backward"
    return None


def has_variant(variant: str, op: str) -> bool:
    """Whether the op has this variant as a row of its tables (an n/a row where this machine lacks it)."""
    return variant_absent_reason(SPECS[variant], OPS[op]) is None


def register_all(device: str = "cpu") -> dict[tuple[str, str], Variant]:
    """Every (op, variant) pair, registering what this machine supports."""
    return {(op, v): get_variant(v, op, device) for op in OPS for v in VARIANT_NAMES if has_variant(v, op)}
