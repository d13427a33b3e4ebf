"""`launch`: from what size on each boundary stops mattering.

Cases: muladd and l2norm x every variant x the axis `size` (elements per
tensor, powers of 4 from 1 to about 1 GiB of float32 on a GPU), inference
mode, each paired with `raw` at the same size. Rows: CPU µs per call (the
interleaved rounds) and, on CUDA, GPU µs per call (CUPTI). A variant is
launch-bound while its CPU time per call exceeds its GPU time per call; the
crossover (analysis/kernels.py) is the size from which it no longer does. On
the CPU the same cases show where the boundary's cost fades against the
kernel's own time (the ratio to raw at the same size).

Each case passes the usual pre-flight (fp64 reference, at the boundary
shape) and a full-size check against PyTorch's op on the shared inputs.
"""

from __future__ import annotations

from dbench.bench.core.case import Case
from dbench.ops import OpContract, Variant
from dbench.ops.contract import InputSpec

from . import DECLARATIONS
from .base import Axis, Scenario, Selection, case_grid, declared_tolerance, grid_plan, preflight
from .kernels import InputPool, below_one_block, check_against, shape_for

SIZES_CUDA = tuple(4**k for k in range(15))  # 1 .. 2^28 elements (1 GiB of float32)
SIZES_CPU = tuple(4**k for k in range(12))  # 1 .. 4 Mi elements
ROW = 256  # l2norm rows of 256 elements (fewer when smaller)
DEFAULT_OPS: tuple[str, ...] = DECLARATIONS["launch"].default_ops or ()
(MODE,) = DECLARATIONS["launch"].modes


def sizes(sel: Selection, op: str = "") -> tuple[int, ...]:
    full = SIZES_CUDA if sel.device.startswith("cuda") else SIZES_CPU
    return full[::2] if sel.quick else full


AXES = (Axis("size", sizes),)


def build(sel: Selection) -> list[Case]:
    from dbench.ops import get_variant
    from dbench.ops.variants import has_variant

    pool = InputPool(sel)
    # What each variant is checked against at full size: PyTorch's own op, or for an op that declares
    # none, its raw launcher (every variant of an op must give the launcher's outputs).
    aten = {op: get_variant("aten" if has_variant("aten", op) else "raw", op, sel.device).fn for op in sel.ops}

    def fill(case: Case, variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> None:
        case.na_reason = variant.na_reason(mode)
        if case.na_reason is None:
            small = InputSpec(contract.boundary_shape, spec.dtype, spec.device, seed=spec.seed)
            case.error = preflight(variant, contract, mode, small)
        if case.na_reason is None and case.error is None:
            args = pool.args(contract, spec.shape)
            case.work = contract.work(args) if contract.work else None
            declared = declared_tolerance(contract, spec.dtype)
            check_against(case, lambda: variant.fn(*args), lambda: aten[contract.name](*args), spec.dtype,
                          declared[1] if declared else None)

    return case_grid(sel, "launch", (MODE,), lambda op, v, mode: ("raw", mode) if v != "raw" else None, fill,
                     axes=AXES, shape=lambda contract, point: shape_for(contract, point["size"], ROW),
                     skip=lambda contract, variant, mode, point: below_one_block(contract, point["size"]))


SCENARIO = Scenario(
    DECLARATIONS["launch"],
    build=build,
    plan=lambda sel: grid_plan(sel, (MODE,)),
    axes=AXES,
    baseline_variants=("raw",),
)
