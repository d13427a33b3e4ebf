"""Variant `triton_op`: an op's Triton launchers behind torch.library.triton_op.

GPU only. Each shipped op declares its Triton kernels and launchers beside its contract
(ops/shipped/<op>.py, `triton_launchers=`), the same algorithms as its CUDA kernels; a user's op
brings launchers that call its own kernels through wrap_triton. Here: what they share, the input
checks with the C++ launchers' messages, the elementwise launch, and the registration with
triton_op + wrap_triton (so torch.compile can trace inside), made differentiable with
register_autograd.
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from .contract import SUPPORTED_DTYPES, OpContract, expected_dtypes
from .flavour import Flavour, registered_backward

NS = "dbench_triton_op"
BLOCK = 1024  # elements a program of an elementwise kernel handles


def triton_unavailable_reason(device: str) -> str | None:
    if not device.startswith("cuda"):
        return "triton_op runs on CUDA devices only"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    return None


def check_inputs(op: str, names: tuple[str, ...], tensors: tuple[Tensor, ...],
                 dtypes: tuple[torch.dtype, ...] = SUPPORTED_DTYPES, same_shape: bool = True) -> None:
    """The same input contract as the C++ launchers, with the same messages."""
    first_name, first = names[0], tensors[0]
    for name, t in zip(names, tensors):
        if t.layout != torch.strided:
            raise RuntimeError(f"{op}: argument '{name}' has unsupported layout {t.layout} "
                               "(only strided tensors are supported)")
        if t.dtype not in dtypes:
            raise RuntimeError(f"{op}: argument '{name}' has unsupported dtype {t.dtype} ({expected_dtypes(dtypes)})")
        if t.device != first.device:
            raise RuntimeError(f"{op}: arguments '{first_name}' and '{name}' are on different devices "
                               f"({first.device} vs {t.device})")
        if t.dtype != first.dtype:
            raise RuntimeError(f"{op}: arguments '{first_name}' and '{name}' have different dtypes "
                               f"({first.dtype} vs {t.dtype})")
        if same_shape and t.shape != first.shape:
            raise RuntimeError(f"{op}: arguments '{first_name}' and '{name}' have mismatched shapes "
                               f"{list(first.shape)} vs {list(t.shape)}")


HALF_DTYPES = (torch.float16, torch.bfloat16)


def elementwise_launcher(op_name: str, arg_names: tuple[str, ...], kernels: Callable[[], Mapping[str, Any]],
                         constexprs: Callable[..., dict[str, Any]] | None = None) -> Callable[..., Tensor]:
    """The launcher of an elementwise kernel, `kernels()[op_name]`(*tensors, out, n, BLOCK, **constexprs)
    over contiguous copies of the op's tensor arguments (`arg_names`, first). `constexprs(qualified
    name, dtype, *the op's other arguments)` checks those arguments and gives the kernel's
    compile-time ones (noop: none; muladd: WIDE; chain: its steps and constants)."""
    qualified = f"{NS}::{op_name}"
    count = len(arg_names)

    def launch(*args: Any) -> Tensor:
        k = kernels()
        tensors = args[:count]
        check_inputs(qualified, arg_names, tensors)
        extra = constexprs(qualified, tensors[0].dtype, *args[count:]) if constexprs is not None else {}
        tensors = tuple(t.contiguous() for t in tensors)
        out = torch.empty(tensors[0].shape, dtype=tensors[0].dtype, device=tensors[0].device)
        n = out.numel()
        if n == 0:
            return out
        with torch.cuda.device(out.device):
            grid = (k["triton"].cdiv(n, BLOCK),)
            torch.library.wrap_triton(k[op_name])[grid](*tensors, out, n, BLOCK=BLOCK, **extra)
        return out

    return launch


def widened(qualified: str, dtype: torch.dtype) -> dict[str, Any]:
    """WIDE for a kernel that computes float16/bfloat16 inputs in float32 and rounds once on store."""
    return {"WIDE": dtype in HALF_DTYPES}


_PY_TYPES = {"Tensor": Tensor, "float": float, "int": int, "bool": bool, "str": str}


def _with_schema_signature(fn: Callable[..., Tensor], schema_args: str, own: bool = False) -> Callable[..., Tensor]:
    """Give a *args launcher the named, annotated signature of the C++ schema.

    triton_op infers its schema from the Python signature (older releases take
    no explicit schema), so the signature is generated from the one declaration.
    """
    schema = torch._C.parse_schema("f" + schema_args)
    params = [
        inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_PY_TYPES[str(a.type)])
        for a in schema.arguments
    ]
    returns = len(schema.returns)
    annotation = Tensor if returns == 1 else tuple[(Tensor,) * returns]  # type: ignore[misc]

    launcher = fn
    if own:
        def launcher(*args: Any) -> Any:  # a fresh function: the user's launcher is left as it was
            return fn(*args)

        launcher.__name__ = getattr(fn, "__name__", "launcher")
    launcher.__signature__ = inspect.Signature(params, return_annotation=annotation)  # type: ignore[attr-defined]
    return launcher


def _register(contract: OpContract, op_name: str, launcher: Callable[..., Tensor]) -> Any:
    return torch.library.triton_op(
        f"{NS}::{op_name}",
        _with_schema_signature(launcher, contract.signature(op_name), contract.launchers is not None),
        mutates_args=()
    )


def triton_flavour(contract: OpContract) -> Any:
    """The op as triton_op(s): the launchers it declares for Triton (every shipped op: ops/shipped/),
    or a user's own launchers, which call their Triton kernels through wrap_triton."""
    if contract.triton_launchers is not None:
        launcher = contract.triton_launchers().__getitem__
    elif contract.launchers is not None:
        launcher = contract.launcher
    else:
        raise KeyError(f"op {contract.name!r} declares no Triton launchers (triton_launchers=)")
    fwd = _register(contract, contract.name, launcher(contract.name))
    bwd = _register(contract, contract.backward_op, launcher(contract.backward_op)) if contract.backward_op else None
    fl = Flavour(fwd, bwd)
    if contract.backward is not None:
        fwd.register_autograd(registered_backward(contract, fl), setup_context=contract.save)
    return fl
