"""Operator contracts: opcheck, gradcheck and torch.compile for every variant.

opcheck and requires_grad
-------------------------
Every registered variant is opchecked (test_schema, test_autograd_registration,
test_faketensor, test_aot_dispatch_dynamic) on compact, dense-permuted and
zero-size inputs without requires_grad, in float32, bfloat16 and float16 (OPCHECK_DTYPES;
gradcheck stays float64). Inputs with requires_grad are opchecked
only for variants whose *checked op itself* is differentiable
(custom_op_autograd, autograd_key_py, cpp_autograd, triton_op):

* For non-differentiable variants opcheck's autograd checks prove nothing:
  custom_op-based ones fail test_aot_dispatch_dynamic ("no autograd formula was
  registered"), while define_impl/cpp/stable ones pass vacuously through
  PyTorch's autograd-not-implemented fallback. What they actually do with
  requires_grad inputs is pinned by test_non_differentiable_variants_yield_no_gradient.
* function_* variants are autograd.Functions; opcheck needs an OpOverload or
  CustomOpDef, so their flavour's (non-differentiable) forward op is checked
  and the Function's gradient is covered by test_gradcheck.
"""

from __future__ import annotations

import contextlib
import re
import warnings

import pytest
import torch
from torch._dynamo.utils import counters
from torch.library import opcheck

from conftest import (
    ALL_VARIANTS,
    HALF_DTYPES,
    TOLERANCES,
    case_id,
    dispatcher_target,
    is_differentiable,
    is_function_wrapper,
    is_registered,
    make_inputs,
    tensors_of,
    unavailable_cases,
    variant_cases,
)
from dbench.ops.variants import MODES, Mode, Variant, VariantUnavailable, flavour
from dbench.scenarios.base import mode_context

OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
# Every dtype the kernels take but float64 (gradcheck's): about 16 s each on two cores.
OPCHECK_DTYPES = {str(d).removeprefix("torch."): d for d in (torch.float32, *HALF_DTYPES)}

INPUT_KINDS = {
    "compact": dict(layout="compact"),
    "permuted": dict(layout="permuted"),
    "empty": dict(layout="compact", shape=(0, 8)),
}


def _opcheck_grad_capable(v: Variant) -> bool:
    """The op that opcheck sees carries its own autograd formula."""
    return v.spec.differentiable and not is_function_wrapper(v)


def _opcheck_params() -> list:
    params = []
    for p in variant_cases(is_registered):
        device, v = p.values
        for kind in INPUT_KINDS:
            for name, dtype in OPCHECK_DTYPES.items():
                params.append(pytest.param(device, v, kind, dtype, False, id=f"{p.id}-{kind}-{name}"))
                if _opcheck_grad_capable(v):
                    params.append(pytest.param(device, v, kind, dtype, True, id=f"{p.id}-{kind}-{name}-requires_grad"))
    return params


# ---------------------------------------------------------------------------
# Availability.


@pytest.mark.parametrize(
    ("device", "v"), unavailable_cases() or [pytest.param(None, None, id="none-unavailable")]
)
def test_unavailable_variants_have_a_reason(device: str | None, v: Variant | None) -> None:
    if v is None:
        pytest.skip("every variant is available on every device of this machine")
    assert not v.available
    assert isinstance(v.unavailable, str) and v.unavailable.strip(), f"{case_id(device, v)} gives no reason"
    for mode in MODES:
        assert v.na_reason(mode) == v.unavailable
    # Calling it anyway says why, naming the variant, the op and the device (not a TypeError on None).
    with pytest.raises(VariantUnavailable, match=re.escape(v.unavailable)) as info:
        v.fn(*make_inputs(v.op, "cpu"))
    assert v.name in str(info.value) and v.op.name in str(info.value) and str(device) in str(info.value)


def test_only_triton_op_is_unavailable_on_cpu() -> None:
    """Guards the parametrization: a variant silently missing on the CPU would shrink every test."""
    missing = {(v.op.name, v.name): v.unavailable for d, v in ALL_VARIANTS if d == "cpu" and not v.available}
    assert {name for _, name in missing} <= {"triton_op"}, missing


@pytest.mark.parametrize(("device", "v"), variant_cases(lambda v: not v.spec.differentiable))
def test_non_differentiable_variants_explain_missing_grad_modes(device: str, v: Variant) -> None:
    assert v.na_reason(Mode.INFERENCE.value) is None
    for mode in (Mode.FWD_REQUIRES_GRAD.value, Mode.FWD_BWD.value):
        reason = v.na_reason(mode)
        assert isinstance(reason, str) and reason.strip()


# ---------------------------------------------------------------------------
# opcheck.


@pytest.mark.parametrize(("device", "v", "kind", "dtype", "requires_grad"), _opcheck_params())
def test_opcheck(device: str, v: Variant, kind: str, dtype: torch.dtype, requires_grad: bool) -> None:
    args = make_inputs(v.op, device, dtype=dtype, requires_grad=requires_grad, **INPUT_KINDS[kind])
    target = dispatcher_target(v)
    assert isinstance(target, (torch._ops.OpOverload, torch._library.custom_ops.CustomOpDef)), type(target)
    opcheck(target, args, test_utils=OPCHECK_UTILS)


def _backward_op_params() -> list:
    params = []
    for p in variant_cases(lambda v: is_registered(v) and not is_function_wrapper(v) and v.op.backward_op is not None):
        device, v = p.values
        if flavour(v.spec.flavour, v.op.name).bwd is not None:
            params.append(p)
    return params


@pytest.mark.parametrize("dtype", list(OPCHECK_DTYPES.values()), ids=list(OPCHECK_DTYPES))
@pytest.mark.parametrize("kind", list(INPUT_KINDS))
@pytest.mark.parametrize(("device", "v"), _backward_op_params())
def test_opcheck_backward_op(device: str, v: Variant, kind: str, dtype: torch.dtype) -> None:
    """The registered backward kernels (l2norm_backward, rmsnorm_backward) obey the same contract as the
    forward ops. Each takes (grad, every forward argument); grad is shaped like the forward's output,
    which for these ops is its first input's shape."""
    bwd = flavour(v.spec.flavour, v.op.name).bwd
    args = make_inputs(v.op, device, dtype=dtype, **INPUT_KINDS[kind])
    grad = tensors_of(v.op, make_inputs(v.op, device, dtype=dtype, seed=1, **INPUT_KINDS[kind]))[0]
    assert grad.shape == v.op.fake(*args).shape
    opcheck(bwd, (grad, *args), test_utils=OPCHECK_UTILS)


@pytest.mark.parametrize(("device", "v"), variant_cases(lambda v: not v.spec.differentiable))
def test_non_differentiable_variants_yield_no_gradient(device: str, v: Variant) -> None:
    """With requires_grad inputs a non-differentiable variant must never produce a gradient.

    raw: the output has no grad_fn. custom_op/nested_custom_op: backward raises
    "no autograd formula". define_impl/cpp/stable/nested_define_impl: PyTorch's
    autograd-not-implemented fallback gives the output a grad_fn whose backward
    warns and leaves the inputs' .grad as None.
    """
    args = make_inputs(v.op, device, requires_grad=True)
    inputs = v.op.grad_inputs(args)
    assert inputs
    out = v.fn(*args)
    if not out.requires_grad:
        assert out.grad_fn is None
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "an autograd kernel was not registered ..."
        try:
            out.sum().backward()
        except RuntimeError as e:
            assert "no autograd formula" in str(e) or "autograd kernel" in str(e), e
            return
    assert all(t.grad is None for t in inputs), [t.grad for t in inputs]


# ---------------------------------------------------------------------------
# gradcheck.


@pytest.mark.parametrize("layout", ["compact", "permuted"])
@pytest.mark.parametrize(("device", "v"), variant_cases(is_differentiable, native=True))
def test_gradcheck(device: str, v: Variant, layout: str) -> None:
    """Float64 gradcheck of every differentiable variant (incl. function_raw and the other Functions)."""
    args = make_inputs(v.op, device, shape=(3, 7), dtype=torch.float64, layout=layout, requires_grad=True)
    assert torch.autograd.gradcheck(v.fn, args, eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize(("device", "v"), variant_cases(is_differentiable, native=True))
def test_backward_on_empty_input(device: str, v: Variant) -> None:
    args = make_inputs(v.op, device, shape=(0, 8), requires_grad=True)
    out = v.fn(*args)
    grads = torch.autograd.grad(out, v.op.grad_inputs(args), torch.ones_like(out))
    for g, a in zip(grads, v.op.grad_inputs(args)):
        assert g.shape == a.shape


# ---------------------------------------------------------------------------
# torch.compile.
#
# Default inductor backend: it works on the CPU (g++ is present) and, because
# every op but triton_op is opaque to it, only the glue (e.g. muladd's backward
# grad * b) is generated code. Generated kernels are cached under
# /tmp/torchinductor_$USER, so re-runs are fast (cold: ~1 min on 2 cores).


def _frame(fn):
    def f(*args):
        return fn(*args)

    return f


def _grads(v: Variant, args, out, grad_out):
    return torch.autograd.grad(out, v.op.grad_inputs(args), grad_out)


def _compile_params() -> list:
    """(device, variant, mode) for every registered variant (and the native one) and every mode it has a row in."""
    params = []
    for p in variant_cases(is_registered, native=True):
        device, v = p.values
        for mode in MODES:
            if v.na_reason(mode) is not None:
                continue
            params.append(pytest.param(device, v, mode, id=f"{p.id}-{mode}"))
    return params


def _check_compiled_against_eager(v: Variant, compiled, args, mode: str) -> None:
    """In the mode's context (no_grad, inference_mode), as the boundary table calls it."""
    context = mode_context(mode)
    with context() if context is not None else contextlib.nullcontext():
        out = compiled(*args)
        ref = v.fn(*args)
    if v.spec.flavour == "triton_op" or v.spec.native:
        # triton_op and PyTorch's own ops are transparent to inductor, which generates its own kernel:
        # ulp-level differences.
        torch.testing.assert_close(out, ref, **TOLERANCES[ref.dtype])
    else:
        # Every other op is opaque to inductor: the compiled forward runs the same kernel.
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert out.is_contiguous()
    assert out.requires_grad == ref.requires_grad == Mode(mode).records_graph
    if mode == Mode.FWD_BWD.value:
        grad_out = torch.randn_like(ref)
        torch.testing.assert_close(_grads(v, args, out, grad_out), _grads(v, args, ref, grad_out))


@pytest.mark.usefixtures("dynamo_reset")
@pytest.mark.parametrize(("device", "v", "mode"), _compile_params())
def test_compile_fullgraph_matches_eager(device: str, v: Variant, mode: str) -> None:
    args = make_inputs(v.op, device, requires_grad=Mode(mode).inputs_require_grad)
    compiled = torch.compile(_frame(v.fn), fullgraph=True)
    _check_compiled_against_eager(v, compiled, args, mode)


@pytest.mark.usefixtures("dynamo_reset")
@pytest.mark.parametrize(("device", "v", "mode"), _compile_params())
def test_compile_dynamic_compiles_once(device: str, v: Variant, mode: str) -> None:
    """dynamic=True: one graph serves two different sizes, with no recompile."""
    counters.clear()
    compiled = torch.compile(_frame(v.fn), fullgraph=True, dynamic=True)
    rg = Mode(mode).inputs_require_grad
    # Both dims change. Sizes > 1 (0 and 1 are specialised even under
    # dynamic=True), and row lengths in one power-of-two bucket: triton_op's
    # l2norm kernel takes BLOCK = next_power_of_2(cols) as a compile-time
    # constant, so it legitimately guards on that bucket.
    _check_compiled_against_eager(v, compiled, make_inputs(v.op, device, shape=(3, 9), requires_grad=rg), mode)
    with torch.compiler.set_stance("fail_on_recompile"):
        args = make_inputs(v.op, device, shape=(5, 16), requires_grad=rg, seed=1)
        _check_compiled_against_eager(v, compiled, args, mode)
    # unique_graphs, not a backend call count: with dynamic=True the float
    # `eps` of l2norm is first traced as a SymFloat, then specialised, which
    # restarts the trace and calls the backend twice for the same one graph.
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


@pytest.mark.usefixtures("dynamo_reset")
@pytest.mark.parametrize(("device", "v"), variant_cases(lambda v: not v.spec.registered))
def test_unregistered_variants_break_fullgraph(device: str, v: Variant) -> None:
    """raw/function_raw bypass the dispatcher: dynamo cannot trace the pybind launcher (documented limitation)."""
    args = make_inputs(v.op, device, requires_grad=v.spec.differentiable)
    compiled = torch.compile(_frame(v.fn), fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Dynamo does not know how to trace the builtin ..."
        with pytest.raises(torch._dynamo.exc.Unsupported, match="marked as skipped"):
            compiled(*args)


def test_unregistered_variants_exist() -> None:
    """The fullgraph-failure test above must not be vacuous."""
    assert {v.name for _, v in ALL_VARIANTS if not v.spec.registered} == {"raw", "function_raw"}
