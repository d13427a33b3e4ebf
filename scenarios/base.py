"""What a scenario declares, and the shared pieces for building its cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from bench.runner import Case
from ops import InputSpec, Mode, OpContract, Variant


@dataclass(frozen=True)
class Selection:
    """What the user asked for on the command line."""

    ops: tuple[str, ...]
    variants: tuple[str, ...]
    device: str
    dtype: torch.dtype = torch.float32
    seed: int = 0
    # Whether `ops` was given by the user (--ops). None: given unless it is every op, the
    # default. Ops whose contract says boundary=False (mm) are timed only when asked for.
    explicit_ops: bool | None = None

    def wants(self, contract: OpContract) -> bool:
        from ops import OP_NAMES

        explicit = self.explicit_ops if self.explicit_ops is not None else tuple(self.ops) != OP_NAMES
        return contract.boundary or explicit


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    build: Callable[[Selection], list[Case]]
    modes: tuple[str, ...] = field(default_factory=tuple)
    requires_cuda: bool = False
    table_note: str = ""  # printed under the tables: what the bracketed delta is against
    # Scenarios that are not op x variant x mode tables run themselves:
    # custom_run(device) -> (rows, env additions); custom_report(rows, console) -> exit code.
    custom_run: Callable[[str], tuple[list[dict[str, Any]], dict[str, Any]]] | None = None
    custom_report: Callable[[list[dict[str, Any]], Any], int] | None = None


# Pre-flight tolerances against the fp64 reference, per dtype.
TOLERANCES: dict[torch.dtype, dict[str, float]] = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float64: {"atol": 1e-10, "rtol": 1e-10},
}


def device_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        dev = torch.device(device)
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def make_call(variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> Callable[[], Any]:
    """A zero-argument callable doing exactly one call of `variant` in `mode`."""
    fn = variant.fn
    args = contract.make_inputs(spec)
    if mode in (Mode.INFERENCE.value, Mode.FWD_REQUIRES_GRAD.value):
        return lambda: fn(*args)
    grad_inputs = contract.grad_inputs(args)
    out_shape = tuple(contract.out_shape(contract.tensors_of(args)))
    grad_out = torch.randn(out_shape, generator=torch.Generator().manual_seed(spec.seed + 1), dtype=torch.float64)
    grad_out = grad_out.to(dtype=spec.dtype, device=spec.device)

    def fwd_bwd() -> tuple[Tensor, ...]:
        return torch.autograd.grad(fn(*args), grad_inputs, grad_out)

    return fwd_bwd


def preflight(variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> str | None:
    """Check one call against the fp64 reference; returns what failed, or None."""
    fn = variant.fn
    tol = TOLERANCES[spec.dtype]
    args = contract.make_inputs(spec)
    try:
        out = fn(*args)
        if mode != Mode.INFERENCE.value and not out.requires_grad:
            return "pre-flight check failed: output does not require grad"
        expected = contract.reference_fp64(args)
        torch.testing.assert_close(out.double().cpu(), expected.cpu(), **tol)
        if mode == Mode.FWD_BWD.value:
            grad_out = torch.randn_like(expected)
            got = torch.autograd.grad(out, contract.grad_inputs(args), grad_out.to(out.dtype))
            ref_args = tuple(a.detach().double().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args)
            ref_out = contract.reference(*ref_args)
            want = torch.autograd.grad(ref_out, contract.grad_inputs(ref_args), grad_out)
            for g, w in zip(got, want):
                torch.testing.assert_close(g.double().cpu(), w.cpu(), **tol)
    except Exception as exc:  # noqa: BLE001  # any failure disqualifies the case from timing
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"pre-flight check failed: {first[:200]}"
    return None


def case_grid(
    sel: Selection,
    scenario: str,
    modes: tuple[str, ...],
    baseline: Callable[[str, str, str], str | None],
    fill: Callable[[Case, Variant, OpContract, str, InputSpec], None],
    requires_grad: Callable[[str], bool] = lambda mode: False,
) -> list[Case]:
    """One case per op x variant x mode, keyed and paired the same way in every scenario.

    baseline(op, variant, mode) names the case each one is paired with;
    fill(case, variant, contract, mode, spec) makes it callable or says why not.
    """
    from ops import OPS, get_variant

    cases = []
    sync = device_sync(sel.device)
    for op in sel.ops:
        contract = OPS[op]
        if not sel.wants(contract):
            continue
        for name in sel.variants:
            variant = get_variant(name, op, sel.device)
            for mode in modes:
                spec = InputSpec(contract.boundary_shape, sel.dtype, sel.device,
                                 requires_grad=requires_grad(mode), seed=sel.seed)
                key = {"scenario": scenario, "op": op, "variant": name, "mode": mode, "device": sel.device,
                       "shape": list(spec.shape), "dtype": str(sel.dtype).removeprefix("torch.")}
                case = Case(key=key, call=None, sync=sync, baseline=baseline(op, name, mode))
                fill(case, variant, contract, mode, spec)
                cases.append(case)
    return cases
