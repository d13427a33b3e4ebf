"""`boundary`: per-call CPU cost of every way of exposing a kernel to PyTorch.

Rows: ops x variants; columns: inference, fwd_requires_grad, fwd_bwd. Inputs
are small so the kernels are trivial and the boundary dominates. Each case is
paired with the unregistered floor of its mode: `raw` for inference (no
autograd), `function_raw` once gradients are tracked.
"""

from __future__ import annotations

from dbench.bench.runner import Case
from dbench.ops import MODES, InputSpec, Mode, OpContract, Variant

from . import DECLARATIONS
from .base import Scenario, Selection, case_grid, grid_plan, make_call, preflight

BASELINE = {
    Mode.INFERENCE.value: "raw",
    Mode.FWD_REQUIRES_GRAD.value: "function_raw",
    Mode.FWD_BWD.value: "function_raw",
}


def _baseline(op: str, variant: str, mode: str) -> tuple[str, str] | None:
    base = BASELINE[mode]
    return (base, mode) if variant != base else None


def _fill(case: Case, variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> None:
    case.na_reason = variant.na_reason(mode)
    if case.na_reason is None:
        case.error = preflight(variant, contract, mode, spec)
        if case.error is None:
            case.call = make_call(variant, contract, mode, spec)


def build(sel: Selection) -> list[Case]:
    return case_grid(sel, "boundary", MODES, _baseline, _fill, requires_grad=lambda m: m != Mode.INFERENCE.value)


SCENARIO = Scenario(
    DECLARATIONS["boundary"],
    build=build,
    modes=MODES,
    plan=lambda sel: grid_plan(sel, MODES),
    baseline_variants=tuple(dict.fromkeys(BASELINE.values())),
)
