"""`boundary`: per-call CPU cost of every way of exposing a kernel to PyTorch.

Rows: ops x variants; columns: the modes (ops/specs.py Mode): inference, no_grad,
inference_mode, fwd_requires_grad, fwd_bwd. Inputs are small so the kernels are
trivial and the boundary dominates. Each case is paired with the unregistered
floor of its mode: `raw` where no graph is recorded (inference, no_grad,
inference_mode), `function_raw` once one is.
"""

from __future__ import annotations

from dbench.bench.core.case import Case
from dbench.bench.io.cpp_results import CppRequest
from dbench.ops import MODES, InputSpec, Mode, OpContract, Variant

from . import DECLARATIONS
from .base import Scenario, Selection, case_grid, grid_plan, make_call, mode_context, preflight

# The floor of each mode: the launcher called directly where no graph is recorded (it has no
# autograd of its own), its autograd.Function wrapper where one is.
BASELINE = {m.value: "function_raw" if m.records_graph else "raw" for m in Mode}


def paired_with(op: str, variant: str, mode: str) -> tuple[str, str] | None:
    """The case a boundary-style case is paired with: its mode's floor, same op (and axis point)."""
    base = BASELINE[mode]
    return (base, mode) if variant != base else None


def fill_case(case: Case, variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> None:
    """One call of the variant in the mode, after its pre-flight checks (n/a or FAILED otherwise)."""
    case.na_reason = variant.na_reason(mode)
    case.context = mode_context(mode)
    if case.na_reason is None:
        case.error = preflight(variant, contract, mode, spec)
        if case.error is None:
            case.call = make_call(variant, contract, mode, spec)


def build(sel: Selection) -> list[Case]:
    return case_grid(sel, "boundary", sel.modes_of(MODES), paired_with, fill_case,
                     requires_grad=lambda m: Mode(m).inputs_require_grad)


def cpp_request(sel: Selection) -> CppRequest:
    """The C++ driver times the selected ops it was built with: the shipped ops with a C++ flavour."""
    from dbench.ops import OPS

    return CppRequest(tuple(op for op in sel.ops if OPS[op].boundary and OPS[op].has_flavour("cpp")))


SCENARIO = Scenario(
    DECLARATIONS["boundary"],
    build=build,
    plan=lambda sel: grid_plan(sel, sel.modes_of(MODES)),
    baseline_variants=tuple(dict.fromkeys(BASELINE.values())),
    cpp_request=cpp_request,
)
