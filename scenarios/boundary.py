"""`boundary`: per-call CPU cost of every way of exposing a kernel to PyTorch.

Rows: ops x variants; columns: inference, fwd_requires_grad, fwd_bwd. Inputs
are small so the kernels are trivial and the boundary dominates. Each case is
paired with the unregistered floor of its mode: `raw` for inference (no
autograd), `function_raw` once gradients are tracked.
"""

from __future__ import annotations

from bench.runner import Case
from ops import MODES, OPS, InputSpec, Mode, get_variant

from .base import Scenario, Selection, device_sync, make_call, preflight

BASELINE = {
    Mode.INFERENCE.value: "raw",
    Mode.FWD_REQUIRES_GRAD.value: "function_raw",
    Mode.FWD_BWD.value: "function_raw",
}


def build(sel: Selection) -> list[Case]:
    cases = []
    sync = device_sync(sel.device)
    for op in sel.ops:
        contract = OPS[op]
        for name in sel.variants:
            variant = get_variant(name, op, sel.device)
            for mode in MODES:
                spec = InputSpec(contract.boundary_shape, sel.dtype, sel.device,
                                 requires_grad=mode != Mode.INFERENCE.value, seed=sel.seed)
                key = {"scenario": "boundary", "op": op, "variant": name, "mode": mode, "device": sel.device,
                       "shape": list(spec.shape), "dtype": str(sel.dtype).removeprefix("torch.")}
                base = BASELINE[mode]
                case = Case(key=key, call=None, sync=sync, baseline=f"{op}/{base}/{mode}" if name != base else None)
                case.na_reason = variant.na_reason(mode)
                if case.na_reason is None:
                    case.error = preflight(variant, contract, mode, spec)
                    if case.error is None:
                        case.call = make_call(variant, contract, mode, spec)
                cases.append(case)
    return cases


BOUNDARY = Scenario(
    name="boundary",
    description="per-call CPU cost of each registration variant, in inference, fwd_requires_grad and fwd_bwd",
    build=build,
    modes=MODES,
    table_note="Δ = median of per-round paired differences vs raw (inference) or function_raw (with grad).",
)
