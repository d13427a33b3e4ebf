"""Numerics: every available variant agrees with its op's fp64 reference.

Forward outputs are compared with ``contract.reference_fp64`` and gradients
with autograd through ``contract.reference`` evaluated in float64, under the
per-dtype tolerances of conftest.TOLERANCES (float16, bfloat16, float32, float64),
for compact and dense-permuted (column-major) inputs. Also: outputs are fresh contiguous tensors (noop never
aliases its input).
"""

from __future__ import annotations

import pytest
import torch

from conftest import (
    SHAPES,
    TOLERANCES,
    dtype_params,
    is_differentiable,
    make_inputs,
    scalars_of,
    tensors_of,
    variant_cases,
)
from dbench.ops.contract import OpContract
from dbench.ops.variants import Variant

DTYPES = dtype_params()
LAYOUTS = ["compact", "permuted"]


def _reference_grads(contract: OpContract, args, grad_out: torch.Tensor) -> list[torch.Tensor]:
    """Autograd gradients of the fp64 reference for the inputs that require grad."""
    ref_args = []
    for name, t in zip(contract.tensor_args, tensors_of(contract, args)):
        r = t.detach().to(torch.float64)
        if name in contract.differentiable and t.requires_grad:
            r.requires_grad_(True)
        ref_args.append(r)
    out = contract.reference(*ref_args, *scalars_of(contract, args))
    wrt = [r for r in ref_args if r.requires_grad]
    return list(torch.autograd.grad(out, wrt, grad_out.to(torch.float64)))


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("device", "v"), variant_cases(native=True))
def test_forward_matches_fp64_reference(device: str, v: Variant, dtype: torch.dtype, layout: str, shape: str) -> None:
    args = make_inputs(v.op, device, shape=SHAPES[shape], dtype=dtype, layout=layout)
    if layout == "permuted" and shape != "empty":
        assert not args[0].is_contiguous(), "the permuted layout must exercise the strided path"
    out = v.fn(*args)
    expected = v.op.reference_fp64(args)
    assert out.dtype == dtype and out.device == args[0].device and out.shape == expected.shape
    torch.testing.assert_close(out.to(torch.float64), expected, **TOLERANCES[dtype])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("device", "v"), variant_cases(is_differentiable, native=True))
def test_gradients_match_fp64_reference(device: str, v: Variant, dtype: torch.dtype, layout: str) -> None:
    args = make_inputs(v.op, device, dtype=dtype, layout=layout, requires_grad=True)
    inputs = v.op.grad_inputs(args)
    assert len(inputs) == len(v.op.differentiable)
    out = v.fn(*args)
    gen = torch.Generator().manual_seed(1234)
    grad_out = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=out.device)
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected = _reference_grads(v.op, args, grad_out)
    assert len(grads) == len(expected)
    for name, g, e, a in zip(v.op.differentiable, grads, expected, inputs):
        assert g.dtype == dtype and g.shape == a.shape, name
        torch.testing.assert_close(g.to(torch.float64), e, **TOLERANCES[dtype],
                                   msg=lambda m, name=name: f"d/d{name}: {m}")


def _noop_params() -> list:
    """Every noop variant without requires_grad, and the differentiable ones with it too."""
    params = []
    for p in variant_cases(ops=["noop"]):
        params.append(pytest.param(*p.values, False, id=f"{p.id}-no_grad"))
        if is_differentiable(p.values[1]):
            params.append(pytest.param(*p.values, True, id=f"{p.id}-requires_grad"))
    return params


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("device", "v", "requires_grad"), _noop_params())
def test_noop_output_never_aliases_input(device: str, v: Variant, layout: str, requires_grad: bool) -> None:
    (x,) = make_inputs(v.op, device, layout=layout, requires_grad=requires_grad)
    out = v.fn(x)
    assert out is not x
    assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    torch.testing.assert_close(out, x, rtol=0, atol=0)
    before = x.detach().clone()
    with torch.no_grad():
        out.add_(1.0)  # writing the output must leave the input untouched
    torch.testing.assert_close(x.detach(), before, rtol=0, atol=0)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("device", "v"), variant_cases())
def test_outputs_are_contiguous(device: str, v: Variant, layout: str, shape: str) -> None:
    args = make_inputs(v.op, device, shape=SHAPES[shape], layout=layout)
    out = v.fn(*args)
    assert out.is_contiguous()
    assert out.stride() == torch.empty(out.shape).stride()


def _second_order(contract: OpContract, fn, args) -> list[torch.Tensor]:
    """d/dx of sum(d/dx (out * w).sum()) through `fn`: a gradient-penalty style double backward."""
    out = fn(*args)
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)
    wrt = contract.grad_inputs(args)
    first = torch.autograd.grad((out * out * weights).sum(), wrt, create_graph=True)
    return list(torch.autograd.grad(sum(g.sum() for g in first), wrt))


@pytest.mark.parametrize(("device", "v"), variant_cases(is_differentiable, native=True))
def test_double_backward_is_right_or_refused(device: str, v: Variant) -> None:
    """Second derivatives agree with the fp64 reference where the op supports them; where its backward
    kernel has none (contract.double_backward False) they raise, never come back as zeros."""
    args = make_inputs(v.op, device, dtype=torch.float64, requires_grad=True)
    if v.op.double_backward or v.spec.native:  # PyTorch's own op differentiates its backward
        ref_args = tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                         for a in args)
        got = _second_order(v.op, v.fn, args)
        expected = _second_order(v.op, v.op.reference, ref_args)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, **TOLERANCES[torch.float64])
    else:
        refused = "differentiate twice|double backward|no autograd formula|not have been used"
        with pytest.raises(RuntimeError, match=refused):
            _second_order(v.op, v.fn, args)
