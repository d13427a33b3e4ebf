"""`offsets`: what the 64-bit offset specialisation of each kernel costs.

Every elementwise and row-wise kernel is compiled twice, with int32 and with
int64 offset arithmetic (ops/kernels/kernels.h); `auto` takes int32 whenever
every argument's view and the kernel's own loops fit. Cases: noop (the copy
kernel), muladd, l2norm forward and backward, chain (k = 8) forward and
backward x dtypes (float32, float64) x the axes `size` (bytes per tensor) and
`index` (int32 or forced int64), all through the raw launcher. GPU rows carry
the registers and local (spill) bytes per thread of the specialisation that
ran. The table (analysis/kernels.py) sets int64 against int32 per op, dtype
and size.

On a GPU with the memory for it, `index=auto` cases run each op once more on
one tensor of 2^31 + 2^20 elements (float32: past INT32_MAX, so offsets really
are 64-bit): the predicate must choose int64, and the output must equal, bit
for bit, the same op run chunk by chunk on compact copies (which run int32).
On the CPU these cases are n/a (the kernels are the reference loops, and the
tensors would not fit a CI machine).

Each int64 case is checked bit for bit against its int32 twin on the same
inputs before it is timed; each int32 case against PyTorch's op.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import Tensor

from dbench.bench.core.identity import check_unique_labels
from dbench.bench.core.case import Case
from dbench.ops import OPS, OpContract

from . import DECLARATIONS
from .base import Axis, Planned, Scenario, Selection, axis_points, case_key, device_sync
from .kernels import InputPool, check_against, check_exact, elements_for, shape_for

INDEXES = ("int32", "int64")
DEFAULT_OPS: tuple[str, ...] = DECLARATIONS["offsets"].ops or ()
DTYPES = (torch.float32, torch.float64)
MODES: tuple[str, ...] = DECLARATIONS["offsets"].modes
SIZES_CUDA = (1 << 20, 16 << 20, 256 << 20, 1 << 30)  # bytes per tensor
SIZES_CPU = (64 << 10, 1 << 20, 16 << 20)
ROW = 1024
# The past-INT32_MAX run: one float32 tensor of this many elements per argument.
HUGE_ELEMENTS = (1 << 31) + (1 << 20)
HUGE_CHUNK = 1 << 30  # elements per compact chunk of the reference
KERNEL_NAMES = {("noop", "forward"): "copy", ("muladd", "forward"): "muladd", ("l2norm", "forward"): "l2norm",
                ("l2norm", "backward"): "l2norm_backward", ("chain", "forward"): "chain",
                ("chain", "backward"): "chain_backward"}


def sizes(sel: Selection, op: str = "") -> tuple[int, ...]:
    full = SIZES_CUDA if sel.device.startswith("cuda") else SIZES_CPU
    return full[::2] if sel.quick else full


def dtypes(sel: Selection) -> tuple[torch.dtype, ...]:
    return (torch.float32,) if sel.quick else DTYPES


# dtype is an axis too: it must tell two cases' labels (GPU windows, tables) apart. The int32 launch
# comes before the int64 one of the same point, which is checked against it bit for bit. The
# past-INT32_MAX cases (index "auto", huge_cases) come on top of this grid.
AXES = (Axis("dtype", lambda sel, op: tuple(str(d).removeprefix("torch.") for d in dtypes(sel))),
        Axis("size", sizes), Axis("index", INDEXES))


def op_args(contract: OpContract, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The forward's arguments, its scalars those at which the kernel does the most work per element
    (chain: every step), where wider offsets would show first."""
    if contract.heaviest_scalars is None:
        return args
    return (*args[:len(args) - len(contract.scalars)], *contract.heaviest_scalars)


def launch(contract: OpContract, mode: str, index: str, args: tuple[Any, ...],
           grad: Tensor | None) -> Callable[[], Tensor]:
    """One call of the op's kernel (forward, or its backward kernel) at a forced offset width."""
    from dbench.ops.libraries import raw

    kernels = raw().kernel
    if mode == "forward":
        fn = getattr(kernels, contract.name)
        return lambda: fn(*args, index=index)
    bwd = getattr(kernels, contract.backward_op or "")
    x, *scalars = args
    return lambda: bwd(grad, x, *scalars, index=index)


def expected(contract: OpContract, mode: str, args: tuple[Any, ...], grad: Tensor | None) -> Tensor:
    """PyTorch's result: the native op forward, or autograd through it for the backward."""
    assert contract.aten is not None
    if mode == "forward":
        return contract.aten(*args)
    x, *scalars = args
    x_rg = x.detach().requires_grad_(True)
    (gx,) = torch.autograd.grad(contract.aten(x_rg, *scalars), x_rg, grad)
    return gx


WARP_ROW_PACKS = 8  # ops/kernels/kernels.h kWarpRowPacks


def warp_row_packs(cols: int, width: int) -> int:
    """Accesses per lane of l2norm's warp schedule (kernels.h warp_row_packs, for rows that fit)."""
    per_lane = max(1, -(-(cols // width) // 32))
    assert per_lane <= WARP_ROW_PACKS, f"rows of {cols} elements do not fit the warp schedule"
    return 1 << (per_lane - 1).bit_length()


def registers(contract: OpContract, mode: str, index: str, dtype: torch.dtype, tensors: list[Tensor],
              cols: int | None) -> dict[str, Any]:
    """Registers and local bytes per thread of the specialisation this launch runs (CUDA only)."""
    from dbench.ops.libraries import raw

    if not tensors[0].is_cuda:
        return {}
    width = 16 // tensors[0].element_size()
    vector = bool(raw().vector_path(tensors)) and (cols is None or cols % width == 0)
    kernel, k, extra = KERNEL_NAMES[(contract.name, mode)], (contract.heaviest_scalars or (1,))[0], {}
    if contract.rowwise and mode == "forward":  # the row schedule auto takes (the forced-width launches take it too)
        extra["row_path"] = raw().row_path(tensors)
        if extra["row_path"] == "warp":
            kernel, k = "l2norm_warp", warp_row_packs(cols or 1, width if vector else 1)
    attrs = raw().kernel.attributes(kernel, str(dtype).removeprefix("torch."), index, vector, k)
    return {"registers": attrs["registers"], "local_bytes": attrs["local_bytes"], "vector_path": vector, **extra}


def _skip(contract: OpContract, mode: str) -> str | None:
    if mode == "backward" and contract.backward_op is None:
        return f"{contract.name} has no backward kernel of its own"
    return None


def plan(sel: Selection) -> list[Planned]:
    """Every op x mode (dtypes, sizes and offset widths change none of the reasons; the past-INT32_MAX
    cases come on top of these, where the GPU has the memory for them)."""
    return [Planned(op, "raw", mode, _skip(OPS[op], mode)) for op in sel.ops for mode in sel.modes_of(MODES)]


def build(sel: Selection) -> list[Case]:
    pool = InputPool(sel)
    sync = device_sync(sel.device)
    cases: list[Case] = []
    for op in sel.ops:
        contract = OPS[op]
        int32: dict[tuple[Any, ...], Callable[[], Tensor]] = {}  # the int32 launch each int64 one must equal
        for point in axis_points(AXES, sel, op):
            dtype, index = getattr(torch, point["dtype"]), point["index"]
            shape = shape_for(contract, elements_for(point["size"], dtype), ROW)
            for mode in sel.modes_of(MODES):
                key = case_key("offsets", op, "raw", mode, sel.device, shape, dtype, point)
                case = Case(key=key, call=None, sync=sync)
                case.na_reason = _skip(contract, mode)
                cases.append(case)
                if case.na_reason:
                    continue
                args = op_args(contract, pool.args(contract, shape, dtype))
                grad = pool.grad(shape, dtype) if mode == "backward" else None
                call = launch(contract, mode, index, args, grad)
                work = contract.work if mode == "forward" else contract.backward_work
                case.work = work(args) if work else None
                tensors = [t for t in (grad, *args) if isinstance(t, Tensor)]
                key.update(registers(contract, mode, index, dtype, tensors, shape[-1] if contract.rowwise else None))
                same = (point["dtype"], point["size"], mode)
                if index == "int32":
                    int32[same] = call
                    check_against(case, call, functools.partial(expected, contract, mode, args, grad), dtype)
                else:
                    check_exact(case, call, int32[same], "the int32 kernel")
    cases += huge_cases(sel, pool, sync)
    check_unique_labels(c.key for c in cases)
    return cases


# ---------------------------------------------------------------------------
# Past INT32_MAX: real 64-bit offsets, against a compact chunked reference.

HUGE_OPS = ("noop", "muladd", "l2norm", "chain")


def _huge_skip(sel: Selection, contract: OpContract) -> str | None:
    if not sel.device.startswith("cuda"):
        return "the past-INT32_MAX run is GPU only (tensors of 8 GiB each; the CPU kernels are reference loops)"
    need = (len(contract.tensor_args) + 2) * HUGE_ELEMENTS * 4
    free, _ = torch.cuda.mem_get_info(torch.device(sel.device))
    if free < need * 1.1:
        return f"needs {need / 2**30:.0f} GiB of free GPU memory, {free / 2**30:.0f} GiB free"
    return None


def chunked(contract: OpContract, args: tuple[Any, ...]) -> Callable[[], Tensor]:
    """The same op over compact copies of row chunks of at most HUGE_CHUNK elements (each runs int32)."""
    from dbench.ops.libraries import raw

    fn = getattr(raw(), contract.name)

    def run() -> Tensor:
        tensors = [a for a in args if isinstance(a, Tensor)]
        scalars = [a for a in args if not isinstance(a, Tensor)]
        rows_per_chunk = max(1, HUGE_CHUNK // max(1, tensors[0][0].numel() if tensors[0].dim() > 1 else 1))
        length = tensors[0].shape[0]
        out = torch.empty_like(tensors[0])
        for start in range(0, length, rows_per_chunk):
            parts = [t[start:start + rows_per_chunk].clone() for t in tensors]
            out[start:start + rows_per_chunk] = fn(*parts, *scalars)
        return out

    return run


def huge_cases(sel: Selection, pool: InputPool, sync: Callable[[], None]) -> list[Case]:
    from dbench.ops.libraries import raw

    cases: list[Case] = []
    dtype = torch.float32
    for op in sel.ops:
        if op not in HUGE_OPS:
            continue
        contract = OPS[op]
        shape = shape_for(contract, HUGE_ELEMENTS, ROW)
        key = case_key("offsets", op, "raw", "forward", sel.device, shape, dtype,
                       {"dtype": "float32", "size": HUGE_ELEMENTS * 4, "index": "auto"})
        case = Case(key=key, call=None, sync=sync)
        cases.append(case)
        case.na_reason = _huge_skip(sel, contract)
        if case.na_reason:
            continue
        args = op_args(contract, pool.args(contract, shape, dtype))
        tensors = [a for a in args if isinstance(a, Tensor)]
        key["index_chosen"] = raw().kernel.index_choice(op, tensors)
        if key["index_chosen"] != "int64":
            case.error = f"the predicate chose {key['index_chosen']} for {HUGE_ELEMENTS} elements"
            continue
        case.work = contract.work(args) if contract.work else None
        # partial, not a lambda: the call is kept past this loop iteration (a closure would time the last op)
        check_exact(case, functools.partial(getattr(raw(), op), *args), chunked(contract, args),
                    "the compact chunked run")
        key["exact"] = case.error is None
    return cases


SCENARIO = Scenario(
    DECLARATIONS["offsets"],
    build=build,
    plan=plan,
    axes=AXES,
)
