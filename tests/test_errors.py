"""Bad input to every public op (noop, muladd, l2norm, mm) through every available variant.

Every variant validates (they all end in the shared launchers, the stable-ABI
checks, or the dispatcher), so each problem kind is one test function
parametrized over all available (device, op, variant) triples; that covers
raw, cpp, stable, define_impl and custom_op and the wrappers around them. Each
error must be a RuntimeError whose message names the op and the problem.

Mismatched shapes / dtypes / devices need two tensor arguments, so among the
public ops only muladd and mm can be given them; mm's own shape rules (2-D,
inner dimensions) are at the end.
"""

from __future__ import annotations

import re

import pytest
import torch

from conftest import (
    make_inputs,
    op_pattern,
    requires_cuda,
    scalars_of,
    tensors_of,
    variant_cases,
)
from dbench.ops.catalog import OPS
from dbench.ops.contract import InputSpec, expected_dtypes
from dbench.ops.variants import Variant


def _with_bad_arg(v: Variant, device: str, index: int, make_bad) -> tuple:
    args = make_inputs(v.op, device)
    tensors = tensors_of(v.op, args)
    tensors[index] = make_bad(tensors[index])
    return (*tensors, *scalars_of(v.op, args))


def _per_tensor_arg(cases: list) -> list:
    """Expand (device, v) params with the index and name of each tensor argument."""
    params = []
    for p in cases:
        device, v = p.values
        for i, name in enumerate(v.op.tensor_args):
            params.append(pytest.param(device, v, i, name, id=f"{p.id}-{name}"))
    return params


def _raises(v: Variant, args, *problems: str, qualified: bool = True) -> str:
    with pytest.raises(RuntimeError) as info:
        v.fn(*args)
    msg = str(info.value)
    assert re.search(op_pattern(v.op.name, qualified), msg), f"error does not name {v.op.name}: {msg}"
    for problem in problems:
        assert re.search(problem, msg), f"error does not say {problem!r}: {msg}"
    return msg


# ---------------------------------------------------------------------------


# An integer and a complex dtype: every op takes all four floating ones.
BAD_DTYPES = {torch.int32: "Int|torch.int32", torch.complex64: "ComplexFloat|torch.complex64"}


def _wrong_dtype_params() -> list:
    """Each tensor argument of each op cast to each of BAD_DTYPES the op does not take."""
    return [pytest.param(*p.values, dtype, id=f"{p.id}-{str(dtype).removeprefix('torch.')}")
            for p in _per_tensor_arg(variant_cases()) for dtype in BAD_DTYPES if dtype not in p.values[1].op.dtypes]


@pytest.mark.parametrize(("device", "v", "index", "name", "dtype"), _wrong_dtype_params())
def test_wrong_dtype(device: str, v: Variant, index: int, name: str, dtype: torch.dtype) -> None:
    args = _with_bad_arg(v, device, index, lambda t: t.to(dtype))
    _raises(v, args, rf"argument '{name}' has unsupported dtype ({BAD_DTYPES[dtype]})\b",
            re.escape(f"({expected_dtypes(v.op.dtypes)})"))


def _last_arg(v: Variant) -> tuple[int, str]:
    return len(v.op.tensor_args) - 1, v.op.tensor_args[-1]


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["muladd", "mm"]))
def test_mixed_dtypes(device: str, v: Variant) -> None:
    index, name = _last_arg(v)
    args = _with_bad_arg(v, device, index, lambda t: t.to(torch.float64))
    _raises(v, args, rf"arguments 'a' and '{name}' have different dtypes "
                     r"\((Float|torch.float32) vs (Double|torch.float64)\)")


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["muladd"]))
def test_mismatched_shapes(device: str, v: Variant) -> None:
    args = _with_bad_arg(v, device, 1,
                         lambda t: torch.zeros(t.shape[0], t.shape[1] + 1, dtype=t.dtype, device=t.device))
    _raises(v, args, r"arguments 'a' and 'b' have mismatched shapes")


def _mixed_device_params() -> list:
    params = []
    for p in variant_cases(ops=["muladd", "mm"]):
        device, v = p.values
        others = ["meta", "cuda"] if device == "cpu" else ["cpu"]
        for other in others:
            marks = [requires_cuda] if "cuda" in (device, other) else []
            for index, name in ((0, "a"), _last_arg(v)):
                params.append(pytest.param(device, v, other, index, name, id=f"{p.id}-{name}_on_{other}", marks=marks))
    return params


@pytest.mark.parametrize(("device", "v", "other", "index", "name"), _mixed_device_params())
def test_mixed_devices(device: str, v: Variant, other: str, index: int, name: str) -> None:
    """One muladd (or mm) argument on another device.

    cpu vs cuda (needs CUDA) reaches the launchers' "different devices" check.
    On a CPU-only machine "meta" is the second device: a meta argument sends a
    dispatcher op to its Meta kernel (the contract's fake), whose device check
    must fire, while the raw launcher rejects the meta tensor itself as an
    unsupported device. Either way the error must name the op and the device
    problem; the launcher's cross-device branch itself needs the CUDA case.
    """
    args = _with_bad_arg(v, device, index, lambda t: t.to(other))
    if other == "meta":
        if v.spec.registered:
            _raises(v, args, r"different devices", qualified=False)
        else:
            _raises(v, args, rf"argument '{name}' is on unsupported device meta")
    else:
        _raises(v, args, r"are on different devices")


@pytest.mark.parametrize(("device", "v", "index", "name"), _per_tensor_arg(variant_cases()))
def test_unsupported_layout(device: str, v: Variant, index: int, name: str) -> None:
    """Sparse COO: the launchers say "unsupported layout"; dispatcher ops without a Sparse kernel refuse it earlier."""
    args = _with_bad_arg(v, device, index, lambda t: t.to_sparse())
    msg = _raises(v, args)
    # C++ launchers print the layout as "Sparse", the triton_op checks as "torch.sparse_coo".
    launcher = re.search(rf"argument '{name}' has unsupported layout (Sparse|torch\.sparse_coo)", msg)
    dispatcher = re.search(r"Could not run '[\w:.]+' with arguments from the 'Sparse(CPU|CUDA)' backend", msg)
    assert launcher or dispatcher, msg


@pytest.mark.parametrize("eps", [0.0, -1e-6, -1.0])
@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["l2norm"]))
def test_l2norm_nonpositive_eps(device: str, v: Variant, eps: float) -> None:
    (x, _eps) = make_inputs(v.op, device)
    _raises(v, (x, eps), r"eps must be positive")


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["l2norm"]))
def test_l2norm_zero_dim_input(device: str, v: Variant) -> None:
    (x, eps) = make_inputs(v.op, device)
    _raises(v, (x[0, 0].clone(), eps), r"expected a tensor with at least 1 dimension, got a scalar")


# ---------------------------------------------------------------------------
# The fakes enforce the kernels' contract, so traced and meta runs fail where eager ones do.


@pytest.mark.parametrize("op", list(OPS))
def test_fake_rejects_unsupported_dtype(op: str) -> None:
    contract = OPS[op]
    args = contract.make_inputs(InputSpec((3, 4), device="meta"))
    bad = tuple(a.to(torch.int32) if isinstance(a, torch.Tensor) else a for a in args)
    with pytest.raises(RuntimeError, match=rf"{op}: unsupported dtype torch.int32"):
        contract.fake(*bad)
    assert contract.fake(*args).shape == contract.reference(*args).shape == ((3, 3) if op == "mm" else (3, 4))


@pytest.mark.parametrize(("x", "eps", "problem"), [((3, 4), 0.0, "eps must be positive"),
                                                   ((), 1e-6, "expected a tensor with at least 1 dimension")])
def test_l2norm_fake_checks_its_arguments(x: tuple[int, ...], eps: float, problem: str) -> None:
    with pytest.raises(RuntimeError, match=f"l2norm: {problem}"):
        OPS["l2norm"].fake(torch.empty(x, device="meta"), eps)


# ---------------------------------------------------------------------------
# mm's shape and dtype rules.


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"]))
def test_mm_inner_dimensions_must_match(device: str, v: Variant) -> None:
    a = torch.randn(3, 4, device=device)
    b = torch.randn(5, 6, device=device)
    _raises(v, (a, b), re.escape("inner dimensions do not match: 'a' is [3, 4], 'b' is [5, 6]"))


@pytest.mark.parametrize("shape", [(4,), (2, 4, 5)], ids=["1d", "3d"])
@pytest.mark.parametrize("name", ["a", "b"])
@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"]))
def test_mm_needs_2d_inputs(device: str, v: Variant, name: str, shape: tuple[int, ...]) -> None:
    args = {"a": torch.randn(4, 4, device=device), "b": torch.randn(4, 4, device=device)}
    args[name] = torch.randn(shape, device=device)
    _raises(v, (args["a"], args["b"]),
            re.escape(f"argument '{name}' must be a 2-D tensor, got {len(shape)}-D shape {list(shape)}"))


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"]))
def test_mm_mixed_16_bit_dtypes(device: str, v: Variant) -> None:
    a = torch.randn(4, 8, device=device, dtype=torch.bfloat16)
    b = torch.randn(8, 2, device=device, dtype=torch.float16)
    _raises(v, (a, b), r"arguments 'a' and 'b' have different dtypes "
                       r"\((BFloat16|torch.bfloat16) vs (Half|torch.float16)\)")


@pytest.mark.parametrize(("a", "b", "problem"), [
    ((3, 4), (5, 6), "inner dimensions do not match: 'a' is [3, 4], 'b' is [5, 6]"),
    ((3, 4), (4,), "argument 'b' must be a 2-D tensor, got 1-D shape [4]"),
    ((2, 3, 4), (4, 4), "argument 'a' must be a 2-D tensor, got 3-D shape [2, 3, 4]"),
])
def test_mm_fake_checks_shapes(a: tuple[int, ...], b: tuple[int, ...], problem: str) -> None:
    with pytest.raises(RuntimeError, match=re.escape(f"mm: {problem}")):
        OPS["mm"].fake(torch.empty(a, device="meta"), torch.empty(b, device="meta"))
