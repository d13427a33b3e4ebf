"""Variant `triton_op`: the ops as Triton kernels behind torch.library.triton_op.

GPU only. Triton kernels are the same algorithms as the CUDA kernels; the op
is registered with triton_op + wrap_triton so torch.compile can trace inside,
and made differentiable with register_autograd. float16/bfloat16: muladd and
l2norm compute in float32 and round once on store (WIDE), as the CUDA kernels
do; the copy needs no arithmetic, and the chain computes in the input's dtype,
each operation rounded, as eager PyTorch and the CUDA kernels round it.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from typing import Any, Callable

import torch
from torch import Tensor

from .contract import SUPPORTED_DTYPES, OpContract, expected_dtypes
from .flavour import Flavour, registered_backward

NS = "dbench_triton_op"
BLOCK = 1024
MAX_L2NORM_COLS = 16384  # one program holds a whole row


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


@functools.cache
def _kernels() -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

    # WIDE (float16/bfloat16 inputs): the arithmetic in float32, one rounding on store.
    @triton.jit
    def muladd_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask)
        b = tl.load(b_ptr + offs, mask=mask)
        c = tl.load(c_ptr + offs, mask=mask)
        if WIDE:
            a, b, c = a.to(tl.float32), b.to(tl.float32), c.to(tl.float32)
        tl.store(out_ptr + offs, (a * b + c).to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def l2norm_fwd_kernel(x_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr, WIDE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        if WIDE:
            x = x.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) + eps)
        tl.store(y_ptr + row * cols + offs, (x * rstd).to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def l2norm_bwd_kernel(g_ptr, x_ptr, gx_ptr, cols, eps, BLOCK: tl.constexpr, WIDE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        g = tl.load(g_ptr + row * cols + offs, mask=mask, other=0.0)
        if WIDE:
            x, g = x.to(tl.float32), g.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) + eps)
        dot = tl.sum(g * x, axis=0) * rstd
        tl.store(gx_ptr + row * cols + offs, (rstd * (g - x * rstd * dot)).to(gx_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def mm_kernel(a_ptr, b_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, KIND: tl.constexpr):
        # KIND 0: 16-bit inputs, tensor cores, fp32 accumulation; 1: float32 without tf32;
        # 2: float64, a broadcast product (tl.dot has no float64 on every release).
        rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        rk = tl.arange(0, BLOCK_K).to(tl.int64)
        if KIND == 2:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ka = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * K + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ka[:, None] * N + rn[None, :], mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            if KIND == 0:
                acc += tl.dot(a, b)
            elif KIND == 1:
                acc += tl.dot(a, b, input_precision="ieee")
            else:
                acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)

    # The chain (ops/chain.py): step i is STEPS[i % 4], unrolled at compile time for each K.
    # C0, C1: the multiply-add's constants; C2 the scale; C3 the subtrahend.
    @triton.jit
    def chain_kernel(x_ptr, out_ptr, n, K: tl.constexpr, C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr,
                     C3: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        for i in tl.static_range(K):
            if i % 4 == 0:
                x = x * C0 + C1
            elif i % 4 == 1:
                x = tl.where(x < 0, 0.0, x)
            elif i % 4 == 2:
                x = x * C2
            else:
                x = x - C3
        tl.store(out_ptr + offs, x, mask=mask)

    @triton.jit
    def chain_bwd_kernel(g_ptr, x_ptr, gx_ptr, n, K: tl.constexpr, C0: tl.constexpr, C1: tl.constexpr,
                         C2: tl.constexpr, C3: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        slope = tl.load(g_ptr + offs, mask=mask)
        for i in tl.static_range(K):
            if i % 4 == 0:
                slope = slope * C0
                x = x * C0 + C1
            elif i % 4 == 1:
                slope = tl.where(x > 0, slope, 0.0)
                x = tl.where(x < 0, 0.0, x)
            elif i % 4 == 2:
                slope = slope * C2
                x = x * C2
        tl.store(gx_ptr + offs, slope, mask=mask)

    return {
        "triton": triton,
        "chain": chain_kernel,
        "chain_backward": chain_bwd_kernel,
        "mm": mm_kernel,
        "noop": copy_kernel,
        "muladd": muladd_kernel,
        "l2norm": l2norm_fwd_kernel,
        "l2norm_backward": l2norm_bwd_kernel,
    }


HALF_DTYPES = (torch.float16, torch.bfloat16)
WIDENED = ("muladd", "l2norm", "l2norm_backward")  # the kernels taking WIDE


def _widen(op_name: str, dtype: torch.dtype) -> dict[str, bool]:
    """The WIDE constexpr of a kernel that computes 16-bit inputs in float32 (none for the others)."""
    return {"WIDE": dtype in HALF_DTYPES} if op_name in WIDENED else {}


def _elementwise(op_name: str, arg_names: tuple[str, ...]) -> Callable[..., Tensor]:
    def launch(*tensors: Tensor) -> Tensor:
        k = _kernels()
        check_inputs(f"{NS}::{op_name}", arg_names, tensors)
        tensors = tuple(t.contiguous() for t in tensors)
        out = torch.empty(tensors[0].shape, dtype=tensors[0].dtype, device=tensors[0].device)
        n = out.numel()
        if n == 0:
            return out
        with torch.cuda.device(out.device):
            grid = (k["triton"].cdiv(n, BLOCK),)
            torch.library.wrap_triton(k[op_name])[grid](*tensors, out, n, BLOCK=BLOCK, **_widen(op_name, out.dtype))
        return out

    return launch


def _rowwise(op_name: str, arg_names: tuple[str, ...]) -> Callable[..., Tensor]:
    def launch(*args: Any) -> Tensor:
        k = _kernels()
        tensors, eps = tuple(args[:-1]), float(args[-1])
        qualified = f"{NS}::{op_name}"
        check_inputs(qualified, arg_names, tensors)
        x = tensors[-1]
        if x.dim() < 1:
            raise RuntimeError(f"{qualified}: expected a tensor with at least 1 dimension, got a scalar")
        if eps <= 0:
            raise RuntimeError(f"{qualified}: eps must be positive, got {eps}")
        cols = x.shape[-1]
        if cols > MAX_L2NORM_COLS:
            raise RuntimeError(f"{qualified}: rows longer than {MAX_L2NORM_COLS} elements are not supported "
                               "by the Triton kernel")
        tensors = tuple(t.contiguous() for t in tensors)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if out.numel() == 0:
            return out
        rows = out.numel() // cols
        block = k["triton"].next_power_of_2(cols)
        with torch.cuda.device(out.device):
            torch.library.wrap_triton(k[op_name])[(rows,)](*tensors, out, cols, eps, BLOCK=block,
                                                           **_widen(op_name, out.dtype))
        return out

    return launch


def _chain_constants() -> dict[str, float]:
    """The chain's step constants as the kernels' constexprs, from the one Python table."""
    from .chain import STEPS

    (_, (c0, c1)), _, (_, (c2,)), (_, (c3,)) = STEPS
    return {"C0": c0, "C1": c1, "C2": c2, "C3": c3}


def _chain(op_name: str, arg_names: tuple[str, ...]) -> Callable[..., Tensor]:
    """chain(x, k) and chain_backward(grad, x, k): elementwise, k a compile-time constant."""
    from .chain import MAX_LENGTH

    def launch(*args: Any) -> Tensor:
        k = _kernels()
        tensors, steps = tuple(args[:-1]), int(args[-1])
        qualified = f"{NS}::{op_name}"
        check_inputs(qualified, arg_names, tensors)
        if not 1 <= steps <= MAX_LENGTH:
            raise RuntimeError(f"{qualified}: k must be between 1 and {MAX_LENGTH}, got {steps}")
        tensors = tuple(t.contiguous() for t in tensors)
        out = torch.empty(tensors[0].shape, dtype=tensors[0].dtype, device=tensors[0].device)
        n = out.numel()
        if n == 0:
            return out
        with torch.cuda.device(out.device):
            grid = (k["triton"].cdiv(n, BLOCK),)
            torch.library.wrap_triton(k[op_name])[grid](*tensors, out, n, K=steps, BLOCK=BLOCK, **_chain_constants())
        return out

    return launch


# (BLOCK_M, BLOCK_N, BLOCK_K, KIND) per dtype: the triton_op row measures the boundary, not a tuned GEMM.
_MM_CONFIG = {
    torch.float16: (64, 64, 32, 0),
    torch.bfloat16: (64, 64, 32, 0),
    torch.float32: (32, 32, 32, 1),
    torch.float64: (16, 16, 16, 2),
}


def _matmul(op_name: str, arg_names: tuple[str, ...]) -> Callable[..., Tensor]:
    def launch(a: Tensor, b: Tensor) -> Tensor:
        k = _kernels()
        qualified = f"{NS}::{op_name}"
        check_inputs(qualified, arg_names, (a, b), dtypes=tuple(_MM_CONFIG), same_shape=False)
        for name, t in zip(arg_names, (a, b)):
            if t.dim() != 2:
                raise RuntimeError(f"{qualified}: argument '{name}' must be a 2-D tensor, "
                                   f"got {t.dim()}-D shape {list(t.shape)}")
        if a.shape[1] != b.shape[0]:
            raise RuntimeError(f"{qualified}: inner dimensions do not match: 'a' is {list(a.shape)}, 'b' is "
                               f"{list(b.shape)} (a.size(1) must equal b.size(0))")
        a, b = a.contiguous(), b.contiguous()
        (m, kk), n = a.shape, b.shape[1]
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
        if out.numel() == 0:
            return out
        bm, bn, bk, kind = _MM_CONFIG[a.dtype]
        with torch.cuda.device(out.device):
            grid = (k["triton"].cdiv(m, bm), k["triton"].cdiv(n, bn))
            torch.library.wrap_triton(k[op_name])[grid](a, b, out, m, n, kk, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                         KIND=kind)
        return out

    return launch


# How a shipped kernel of _kernels() is launched, by the contract's triton_shape.
LAUNCH_SHAPES: dict[str, Callable[[str, tuple[str, ...]], Callable[..., Tensor]]] = {
    "elementwise": _elementwise, "rows": _rowwise, "chain": _chain, "matmul": _matmul}

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
    if contract.launchers is not None or contract.triton_launchers is not None:
        # A user's op (its own launchers call its Triton kernels), or an op declaring its Triton launchers.
        own = contract.triton_launchers() if contract.triton_launchers is not None else None
        launcher = own.__getitem__ if own is not None else contract.launcher
        fwd = _register(contract, contract.name, launcher(contract.name))
        bwd = _register(contract, contract.backward_op, launcher(contract.backward_op)) \
            if contract.backward_op else None
        fl = Flavour(fwd, bwd)
        if contract.backward_op:
            fwd.register_autograd(registered_backward(contract, fl), setup_context=contract.save)
        return fl
    launch = LAUNCH_SHAPES[contract.triton_shape]
    fwd = _register(contract, contract.name, launch(contract.name, contract.tensor_args))
    bwd = None
    if contract.backward_op:
        bwd = _register(contract, contract.backward_op, launch(contract.backward_op, ("grad", "x")))
    fl = Flavour(fwd, bwd)
    fwd.register_autograd(registered_backward(contract, fl), setup_context=contract.save)
    return fl
