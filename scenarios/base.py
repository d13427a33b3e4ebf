"""What a scenario declares, and the shared pieces for building its cases."""

from __future__ import annotations

import itertools
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypedDict

import torch
from torch import Tensor

from dbench.bench.core.identity import axis_text, case_label, check_unique_labels
from dbench.bench.core.passes import Pass
from dbench.bench.core.case import CASE_ERRORS, Case, first_line, raised
from dbench.bench.io.cpp_results import CppRequest
from dbench.ops import MODES, InputSpec, Mode, OpContract, Variant
from dbench.ops.specs import needs_gradient

from .declaration import Declaration


@dataclass(frozen=True)
class Selection:
    """What the user asked for on the command line."""

    ops: tuple[str, ...]
    variants: tuple[str, ...]
    device: str
    dtype: torch.dtype = torch.float32
    seed: int = 0
    quick: bool = False  # kernel scenarios: fewer sizes
    cache: tuple[str, ...] = ("warm",)  # kernel scenarios: L2 state(s) for GPU timing
    # Whether `ops` was given by the user (--ops). None: given unless it is every op, the
    # default. Ops whose contract says boundary=False (mm) are timed only when asked for.
    explicit_ops: bool | None = None
    # --shape: every op's inputs from each of these shapes in turn (else its own shape)
    shapes: tuple[tuple[int, ...], ...] = ()
    # --axis NAME=V,...: only these values of the named axes (as labels write them: 4096, 8x64)
    axis_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    modes: tuple[str, ...] | None = None  # --modes: these of the scenario's modes (None: all of them)
    # Told each case's label as it is built and checked (a build can take minutes: contract checks,
    # compiles); the run shows it. Not part of what was asked for.
    on_case: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    def building(self, label: str) -> None:
        """Say that the case `label` is being built and checked (to on_case, when there is one)."""
        if self.on_case is not None:
            self.on_case(label)

    def modes_of(self, declared: tuple[str, ...]) -> tuple[str, ...]:
        """The scenario's modes this selection takes, in the scenario's order."""
        return tuple(m for m in declared if self.modes is None or m in self.modes)

    def wants(self, contract: OpContract) -> bool:
        from dbench.ops import OP_NAMES

        explicit = self.explicit_ops if self.explicit_ops is not None else tuple(self.ops) != OP_NAMES
        return contract.boundary or explicit


@dataclass(frozen=True)
class Axis:
    """One axis of a scenario (in the spirit of nvbench's add_axis): a name and the values it takes,
    given as a tuple or as a function of the selection and the op (sizes differ by device, --quick
    and the op's own unit). The product of a scenario's axes, times ops x variants x modes, is the
    loop that builds its cases (axis_points): a new size or axis is a change of this data."""

    name: str
    values: tuple[Any, ...] | Callable[[Selection, str], tuple[Any, ...]]

    def values_for(self, sel: Selection, op: str = "") -> tuple[Any, ...]:
        """The axis's values for this selection and op: all of them, or those --axis keeps."""
        values = tuple(self.values(sel, op)) if callable(self.values) else self.values
        kept = sel.axis_values.get(self.name)
        return values if kept is None else tuple(v for v in values if axis_text(v) in kept)


Point = dict[str, Any]  # one value per axis


@dataclass(frozen=True)
class Planned:
    """One case of a selection as far as it is known before anything is built (no inputs, no native
    build, no compile): the names the user selected it by, and why it cannot run on the device
    (None: it can, unless building it or its pre-flight check finds otherwise)."""

    op: str
    variant: str
    mode: str
    na_reason: str | None
    cache: str | None = None  # the L2 state, for scenarios with a cache axis


# The names a user selects, in the order a name none of whose cases can run is looked for: an L2
# state rules out every op and variant with it. (A mode none of a selection's variants has, such as
# fwd_bwd for --variants raw, is an n/a column of the table, which says why, not a skipped name.)
PLAN_DIMENSIONS = ("cache", "variant", "op")


@dataclass(frozen=True)
class Scenario:
    """A scenario's declaration (names, defaults, passes, presentation: scenarios/__init__.py) and what
    needs torch: how its cases are built and planned."""

    declaration: Declaration
    build: Callable[[Selection], list[Case]]
    axes: tuple[Axis, ...] = ()
    # Variants other variants' cases are paired with: a sharded run times them in every shard.
    baseline_variants: tuple[str, ...] = ()
    # Its cases as planned before anything is built: run.py refuses a selection with nothing that can
    # run on the device, and names the parts that cannot. None: no case-level plan (custom_run).
    plan: Callable[[Selection], list[Planned]] | None = None
    # A scenario whose one pass is Pass.CUSTOM runs itself:
    # custom_run(device) -> (rows, env additions); custom_report(rows, console) -> exit code.
    custom_run: Callable[[str], tuple[list[dict[str, Any]], dict[str, Any]]] | None = None
    custom_report: Callable[[list[dict[str, Any]], Any], int] | None = None
    # Or, a custom scenario that writes its own kind of document, not a result, from parts that lie
    # above the scenarios: run.py runs it (breakdown: analysis/breakdown.py run_scenario).
    own_document: bool = False
    # A scenario that makes the C++ pass says what the driver times: cpp_request(sel) -> CppRequest.
    cpp_request: Callable[[Selection], CppRequest] | None = None

    def __post_init__(self) -> None:
        custom = self.declaration.makes(Pass.CUSTOM)
        runs_itself = (self.custom_run is not None and self.custom_report is not None) != self.own_document
        if custom != runs_itself:
            raise ValueError(f"scenario {self.name}: custom_run and custom_report, or own_document, go with the "
                             "custom pass, and only it")
        if self.declaration.makes(Pass.CPP_DRIVER) != (self.cpp_request is not None):
            raise ValueError(f"scenario {self.name}: cpp_request goes with the C++ pass, and only it")

    # What the declaration says, read where the scenario object is at hand.
    @property
    def name(self) -> str:
        return self.declaration.name

    @property
    def description(self) -> str:
        return self.declaration.description

    @property
    def modes(self) -> tuple[str, ...]:
        return self.declaration.modes

    @property
    def requires_cuda(self) -> bool:
        return self.declaration.requires_cuda

    @property
    def cpu_only(self) -> bool:
        return self.declaration.cpu_only

    @property
    def variants(self) -> tuple[str, ...] | None:
        return self.declaration.variants

    @property
    def default_ops(self) -> tuple[str, ...] | None:
        return self.declaration.ops_when_unnamed

    @property
    def table_note(self) -> str:
        return self.declaration.table_note

    def makes(self, p: Pass) -> bool:
        return self.declaration.makes(p)


def static_na_reason(variant: str, op: str, device: str, mode: str) -> str | None:
    """Why `variant` of `op` has no case in `mode` on `device`, from its spec alone: what
    ops.variants.get_variant would say, without building the variant (a missing native build is left
    to the build, which names it)."""
    from dbench.ops import OPS
    from dbench.ops.libraries import NativeBuildMissing
    from dbench.ops.variants import SPECS, Variant, unavailable_reason, variant_absent_reason

    spec, contract = SPECS[variant], OPS[op]
    try:
        reason = unavailable_reason(spec, device)
    except NativeBuildMissing:
        reason = None
    reason = variant_absent_reason(spec, contract) or reason
    return Variant(spec, contract, None, reason).na_reason(mode)  # type: ignore[arg-type]


def grid_plan(sel: Selection, modes: tuple[str, ...], variant_mode: Callable[[str], str] = lambda mode: mode
              ) -> list[Planned]:
    """The plan of a case_grid scenario: every wanted op x variant x mode, n/a where the variant is
    (in variant_mode(mode): the mode whose autograd needs the scenario's mode has)."""
    from dbench.ops import OPS
    from dbench.ops.variants import has_variant

    return [Planned(op, variant, mode, static_na_reason(variant, op, sel.device, variant_mode(mode)))
            for op in sel.ops if sel.wants(OPS[op]) for variant in sel.variants if has_variant(variant, op)
            for mode in modes]


def not_runnable(planned: Sequence[Planned], given: Sequence[str] = ()) -> list[str]:
    """'variant triton_op (its most common reason)' for each selected name none of whose cases can run.
    The dimensions the user gave (`given`, e.g. "variant" for --variants) are looked at first, then
    PLAN_DIMENSIONS' order; a name's cases are set aside once it is named, so no later name (the
    default L2 state, say) is blamed for them. When nothing can run, every variant left is named."""
    remaining, notes = list(planned), []
    for dim in sorted(PLAN_DIMENSIONS, key=lambda d: d not in given):
        for value in dict.fromkeys(getattr(p, dim) for p in planned):
            cases = [p for p in remaining if getattr(p, dim) == value]
            if value is None or not cases or any(p.na_reason is None for p in cases):
                continue
            notes.append(f"{dim} {value} ({Counter(p.na_reason for p in cases).most_common(1)[0][0]})")
            remaining = [p for p in remaining if getattr(p, dim) != value]
    return notes


def axis_points(axes: tuple[Axis, ...], sel: Selection, op: str = "") -> list[Point]:
    """Every combination of the axes' values for this selection and op, first axis slowest ([{}]
    without axes)."""
    return [dict(zip((a.name for a in axes), values))
            for values in itertools.product(*(a.values_for(sel, op) for a in axes))]


def case_key(scenario: str, op: str, variant: str, mode: str, device: str, shape: tuple[int, ...],
             dtype: torch.dtype, point: Point) -> dict[str, Any]:
    """A case's key: the core identity fields, then the axis values and the names of the axes
    (bench/core/identity.py reads it); a user's op adds where it comes from (its file and source digest)."""
    from dbench.ops import OPS

    origin = OPS[op].origin if op in OPS else None
    return {"scenario": scenario, "op": op, "variant": variant, "mode": mode, "device": device,
            "shape": list(shape), "dtype": str(dtype).removeprefix("torch."), **point, "axes": list(point),
            **({"op_source": origin} if origin else {}), **checked_on(op)}


def checked_on(op: str) -> dict[str, str]:
    """Where an op's contract checks ran, when not on every layout (the table's notes say so): a
    launcher declared to take compact inputs only was never checked on dense permuted ones."""
    from dbench.ops import OPS
    from dbench.ops.contract import LAYOUTS

    contract = OPS.get(op)
    if contract is None or not contract.runtime_checks or tuple(contract.layouts) == LAYOUTS:
        return {}
    return {"checked_on": f"{', '.join(contract.layouts)} inputs only (declared layouts="
                          f"{tuple(contract.layouts)!r}): not checked on "
                          f"{', '.join(x for x in LAYOUTS if x not in contract.layouts)} ones"}


# Pre-flight tolerances against the fp64 reference, per dtype. The 16-bit types: torch.testing's
# rtol, and an atol for entries near zero, which carry the absolute error of rounded operands
# (a * b + c cancelling; PyTorch's composites round each op), as tests/conftest.py says.
class Tolerance(TypedDict):
    atol: float
    rtol: float


TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2},
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float64: {"atol": 1e-10, "rtol": 1e-10},
}


def declared_tolerance(contract: OpContract, dtype: torch.dtype) -> tuple[float, float] | None:
    """The declaration's (atol, rtol) for `dtype` (or for every dtype); None: it declares none."""
    declared = contract.tolerance or {}
    return declared.get(dtype, declared.get(None))


def tolerance(contract: OpContract, dtype: torch.dtype) -> Tolerance:
    """The declaration's (atol, rtol) for `dtype`, else the suite's."""
    pair = declared_tolerance(contract, dtype)
    return TOLERANCES[dtype] if pair is None else {"atol": pair[0], "rtol": pair[1]}


def agree(contract: OpContract, name: str, got: Tensor, expected: Tensor, dtype: torch.dtype, label: str = "") -> None:
    """Raise AssertionError (torch's summary, after `label`) when output `name` of a variant, `got`,
    is not the reference's `expected`: by the declaration's comparator when it has one; integer and
    bool outputs exactly (a reference may return them in their own dtype or as fp64 values);
    floating ones within `tolerance` for the run's dtype."""
    got, expected = got.detach().cpu(), expected.detach().cpu()
    if contract.compare is not None:
        reason = contract.compare(name, got, expected)
        if reason is not None:
            raise AssertionError(_labelled(label)(f"the op's compare said: {reason}"))
        return
    if not got.is_floating_point() and not got.is_complex():
        torch.testing.assert_close(got, expected.to(got.dtype), atol=0, rtol=0, msg=_labelled(label))
        return
    torch.testing.assert_close(got.double(), expected.double(), **tolerance(contract, dtype), msg=_labelled(label))


def device_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        dev = torch.device(device)
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def mode_context(mode: str) -> Callable[[], AbstractContextManager[Any]] | None:
    """What a case in `mode` runs under (its Case.context): torch.no_grad or torch.inference_mode,
    entered around each block of calls; None for the modes without one."""
    name = Mode(mode).context if mode in MODES else None
    return None if name is None else getattr(torch, name)


def make_call(variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> Callable[[], Any]:
    """A zero-argument callable doing exactly one call of `variant` in `mode` (inside the mode's
    context, mode_context, which the caller enters)."""
    fn = variant.fn
    args = contract.make_inputs(spec)
    if mode != Mode.FWD_BWD.value:
        return lambda: fn(*args)
    grad_inputs = contract.grad_inputs(args)
    gen = torch.Generator().manual_seed(spec.seed + 1)
    if contract.n_outputs == 1 and contract.origin is None:
        grad_out = torch.randn(tuple(contract.out_shape(contract.tensors_of(args))), generator=gen, dtype=torch.float64)
        grad_out = grad_out.to(dtype=spec.dtype, device=spec.device)

        def fwd_bwd() -> tuple[Tensor, ...]:
            return torch.autograd.grad(fn(*args), grad_inputs, grad_out)

        return fwd_bwd
    with torch.no_grad():  # the outputs' shapes, from one call
        shapes = [o for o in contract.differentiable_outputs(fn(*args))]
    grads = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(dtype=o.dtype, device=o.device)
             for o in shapes]

    def fwd_bwd_outputs() -> tuple[Tensor, ...]:
        return torch.autograd.grad(contract.differentiable_outputs(fn(*args)), grad_inputs, grads)

    return fwd_bwd_outputs


def preflight(variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> str | None:
    """Check one call against the fp64 reference (a user's op: after its contract checks); returns
    what failed, or None."""
    if contract.runtime_checks:
        from dbench.ops.checks import contract_failure

        failed = contract_failure(variant, mode, spec.device, spec.dtype)
        if failed:
            return failed
    try:
        context = mode_context(mode)
        with context() if context is not None else nullcontext():
            return _agreement(variant, contract, mode, spec)
    except CASE_ERRORS as exc:  # any failure disqualifies the case from timing
        return f"pre-flight check failed: {first_line(exc)}"


def _labelled(label: str) -> Callable[[str], str]:
    """assert_close's msg: its own message after `label` (as it is when the label is empty)."""
    return lambda m: f"{label}: {m}" if label else m


def _agreement(variant: Variant, contract: OpContract, mode: str, spec: InputSpec) -> str | None:
    tol = tolerance(contract, spec.dtype)
    args = contract.make_inputs(spec)
    out = variant.fn(*args)
    outs = contract.outputs_of(out)
    diff_outs = contract.differentiable_outputs(out)
    if needs_gradient(mode) and not all(o.requires_grad for o in diff_outs):
        return "pre-flight check failed: output does not require grad"
    if not needs_gradient(mode) and any(o.requires_grad for o in outs):
        return f"pre-flight check failed: output requires grad in mode {mode} (nothing should be recorded)"
    if contract.reference is None:
        return None  # nothing to agree with: the declaration has no reference
    try:
        expected = contract.outputs_of(contract.reference_fp64(args))
    except CASE_ERRORS as exc:  # the reference, not the variant: say so, with the inputs it was given
        shapes = ", ".join(str(list(a.shape)) for a in contract.tensors_of(args))
        return f"pre-flight check failed: the op's reference raised on inputs of shapes {shapes}: {raised(exc)}"
    for name, o, e in zip(contract.outputs, outs, expected):
        agree(contract, name, o, e, spec.dtype, f"output {name!r}" if contract.n_outputs > 1 else "")
    if mode == Mode.FWD_BWD.value:
        grad_outs = [torch.randn_like(e) for e, n in zip(expected, contract.outputs)
                     if n not in contract.nondiff_outputs]
        got = torch.autograd.grad(diff_outs, contract.grad_inputs(args),
                                  [g.to(o.dtype) for g, o in zip(grad_outs, diff_outs)])
        ref_args = tuple(a.detach().double().requires_grad_(a.requires_grad)
                         if isinstance(a, Tensor) and a.is_floating_point() else a for a in args)
        ref_outs = contract.differentiable_outputs(contract.reference(*ref_args))
        want = torch.autograd.grad(ref_outs, contract.grad_inputs(ref_args), grad_outs)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.double().cpu(), w.cpu(), **tol)
    return None


def _registered(variant: str, op: str, device: str) -> tuple[Variant | None, str | None]:
    """The variant, or why registering it failed (a user's schema torch refuses: a FAILED row, not a
    crash; a missing native build still stops the run, which names it)."""
    from dbench.ops import get_variant
    from dbench.ops.libraries import NativeBuildMissing

    try:
        return get_variant(variant, op, device), None
    except NativeBuildMissing:
        raise
    except CASE_ERRORS as exc:  # the registration's own error is the finding
        return None, f"registering {variant} failed: {first_line(exc)}"


def case_grid(
    sel: Selection,
    scenario: str,
    modes: tuple[str, ...],
    baseline: Callable[[str, str, str], tuple[str, str] | None],
    fill: Callable[[Case, Variant, OpContract, str, InputSpec], None],
    requires_grad: Callable[[str], bool] = lambda mode: False,
    axes: tuple[Axis, ...] = (),
    shape: Callable[[OpContract, Point], tuple[int, ...]] | None = None,
    skip: Callable[[OpContract, Variant, str, Point], str | None] = lambda contract, variant, mode, point: None,
) -> list[Case]:
    """One case per op x variant x mode x axis point, keyed and paired the same way in every scenario.

    baseline(op, variant, mode) names the (variant, mode) each case is paired with, at the same
    axis point; shape(contract, point) gives the inputs' shape; skip(...) says why a combination
    cannot run (the case is n/a with that reason); fill(case, variant, contract, mode, spec) makes
    the case callable or says why not.
    """
    from dbench.ops import OPS
    from dbench.ops.variants import has_variant

    cases = []
    sync = device_sync(sel.device)
    if shape is None:
        if len(sel.shapes) > 1:  # several --shape: the shape is an axis of the run, which labels say
            axes = (Axis("shape", tuple(list(s) for s in sel.shapes)), *axes)

        def shape(contract: OpContract, point: Point) -> tuple[int, ...]:
            given = point.get("shape") or (sel.shapes[0] if sel.shapes else None)
            return tuple(given) if given else contract.boundary_shape
    for op in sel.ops:
        contract = OPS[op]
        if not sel.wants(contract):
            continue
        for name in sel.variants:
            if not has_variant(name, op):
                continue
            variant, failed = _registered(name, op, sel.device)
            for point in axis_points(axes, sel, op):
                for mode in modes:
                    spec = InputSpec(shape(contract, point), sel.dtype, sel.device,
                                     requires_grad=requires_grad(mode), seed=sel.seed)
                    key = case_key(scenario, op, name, mode, sel.device, spec.shape, sel.dtype, point)
                    base = baseline(op, name, mode)
                    base_label = case_label({**key, "variant": base[0], "mode": base[1]}) if base else None
                    case = Case(key=key, call=None, sync=sync, baseline=base_label)
                    case.na_reason = skip(contract, variant, mode, point) if variant is not None else None
                    case.error = failed
                    if case.na_reason is None and variant is not None:
                        sel.building(case.label)
                        fill(case, variant, contract, mode, spec)
                    cases.append(case)
    check_unique_labels(c.key for c in cases)
    return cases
