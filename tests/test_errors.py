"""Bad input to every public op (noop, muladd, l2norm) through every available variant.

Every variant validates (they all end in the shared launchers, the stable-ABI
checks, or the dispatcher), so each problem kind is one test function
parametrized over all available (device, op, variant) triples; that covers
raw, cpp, stable, define_impl and custom_op and the wrappers around them. Each
error must be a RuntimeError whose message names the op and the problem.

Mismatched shapes / dtypes / devices need two tensor arguments, so among the
public ops only muladd can be given them.
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
from ops.catalog import OPS
from ops.contract import InputSpec
from ops.variants import Variant


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


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16], ids=["int32", "float16"])
@pytest.mark.parametrize(("device", "v", "index", "name"), _per_tensor_arg(variant_cases()))
def test_wrong_dtype(device: str, v: Variant, index: int, name: str, dtype: torch.dtype) -> None:
    args = _with_bad_arg(v, device, index, lambda t: t.to(dtype))
    named = {torch.int32: "Int|torch.int32", torch.float16: "Half|torch.float16"}[dtype]
    _raises(v, args, rf"argument '{name}' has unsupported dtype ({named})\b", r"expected float32 or float64")


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["muladd"]))
def test_mixed_dtypes(device: str, v: Variant) -> None:
    args = _with_bad_arg(v, device, 2, lambda t: t.to(torch.float64))
    _raises(v, args, r"arguments 'a' and 'c' have different dtypes \((Float|torch.float32) vs (Double|torch.float64)\)")


@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["muladd"]))
def test_mismatched_shapes(device: str, v: Variant) -> None:
    args = _with_bad_arg(v, device, 1, lambda t: torch.zeros(t.shape[0], t.shape[1] + 1, dtype=t.dtype, device=t.device))
    _raises(v, args, r"arguments 'a' and 'b' have mismatched shapes")


def _mixed_device_params() -> list:
    params = []
    for p in variant_cases(ops=["muladd"]):
        device, v = p.values
        others = ["meta", "cuda"] if device == "cpu" else ["cpu"]
        for other in others:
            marks = [requires_cuda] if "cuda" in (device, other) else []
            for index, name in ((0, "a"), (2, "c")):
                params.append(pytest.param(device, v, other, index, name, id=f"{p.id}-{name}_on_{other}", marks=marks))
    return params


@pytest.mark.parametrize(("device", "v", "other", "index", "name"), _mixed_device_params())
def test_mixed_devices(device: str, v: Variant, other: str, index: int, name: str) -> None:
    """One muladd argument on another device.

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


@pytest.mark.parametrize("op", ["noop", "muladd", "l2norm"])
def test_fake_rejects_unsupported_dtype(op: str) -> None:
    contract = OPS[op]
    args = contract.make_inputs(InputSpec((3, 4), device="meta"))
    bad = tuple(a.to(torch.int32) if isinstance(a, torch.Tensor) else a for a in args)
    with pytest.raises(RuntimeError, match=rf"{op}: unsupported dtype torch.int32"):
        contract.fake(*bad)
    assert contract.fake(*args).shape == (3, 4)


@pytest.mark.parametrize(("x", "eps", "problem"), [((3, 4), 0.0, "eps must be positive"), ((), 1e-6, "expected a tensor with at least 1 dimension")])
def test_l2norm_fake_checks_its_arguments(x: tuple[int, ...], eps: float, problem: str) -> None:
    with pytest.raises(RuntimeError, match=f"l2norm: {problem}"):
        OPS["l2norm"].fake(torch.empty(x, device="meta"), eps)
