"""The boundary's modes: no_grad and inference_mode beside inference, each entered around a block of
calls (never inside the timed loop), with `raw` as their floor, selectable with --modes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from dbench.bench.harness import cli
from dbench.bench.core.runner import Case, time_block
from dbench.ops import MODES, Mode
from dbench.ops.specs import OP_NAMES, VARIANT_NAMES, needs_gradient
from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES
from dbench.scenarios.base import Selection, mode_context
from dbench.scenarios.boundary import BASELINE, build


def test_the_modes_say_what_they_record_and_where_they_run() -> None:
    assert MODES == ("inference", "no_grad", "inference_mode", "fwd_requires_grad", "fwd_bwd")
    assert [m.value for m in Mode if m.records_graph] == ["fwd_requires_grad", "fwd_bwd"]
    assert [m.value for m in Mode if not m.inputs_require_grad] == ["inference"]
    assert mode_context("no_grad") is torch.no_grad and mode_context("inference_mode") is torch.inference_mode
    assert mode_context("inference") is None and mode_context("forward") is None  # a kernel scenario's mode
    assert needs_gradient("forward") and needs_gradient("fwd_bwd") and not needs_gradient("no_grad")
    # The floor: the launcher itself where nothing is recorded, its autograd.Function where a graph is.
    assert BASELINE == {"inference": "raw", "no_grad": "raw", "inference_mode": "raw",
                        "fwd_requires_grad": "function_raw", "fwd_bwd": "function_raw"}


def test_a_block_runs_inside_its_cases_context_and_the_timed_loop_does_not_enter_it() -> None:
    seen: list[tuple[bool, bool]] = []
    entered = 0

    class Counting:
        def __init__(self) -> None:
            self.inner = torch.inference_mode()

        def __enter__(self) -> None:
            nonlocal entered
            entered += 1
            self.inner.__enter__()

        def __exit__(self, *exc: Any) -> None:
            self.inner.__exit__(*exc)

    case = Case(key={"op": "x", "variant": "v", "mode": "inference_mode"},
                call=lambda: seen.append((torch.is_grad_enabled(), torch.is_inference_mode_enabled())),
                context=Counting)
    time_block(case, 5)
    assert seen == [(False, True)] * 5 and entered == 1  # one entry per block, not per call
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()  # left on the way out


def test_the_boundarys_cases_in_the_new_modes_run_every_variant_under_their_context() -> None:
    sel = Selection(ops=("muladd",), variants=("raw", "define_impl", "custom_op", "function_raw", "cpp"),
                    device="cpu", dtype=torch.float32, modes=("no_grad", "inference_mode"))
    cases = build(sel)
    assert {c.key["mode"] for c in cases} == {"no_grad", "inference_mode"}
    for case in cases:
        assert case.runnable, (case.label, case.na_reason, case.error)  # a variant without autograd runs too
        assert case.context is mode_context(case.key["mode"])
        assert case.baseline is None if case.key["variant"] == "raw" else case.baseline.startswith("muladd/raw/")
        with case.context():  # type: ignore[misc]
            out = case.call()  # type: ignore[misc]
        assert not out.requires_grad
        assert out.is_inference() == (case.key["mode"] == "inference_mode")


def test_the_inputs_require_grad_outside_inference() -> None:
    sel = Selection(ops=("muladd",), variants=("raw",), device="cpu", dtype=torch.float32, modes=("no_grad",))
    (case,) = build(sel)
    assert case.call is not None
    # make_call closes over the inputs: read them back through the closure of the call.
    inputs = [c.cell_contents for c in case.call.__closure__ or () if isinstance(c.cell_contents, tuple)]
    assert inputs and all(t.requires_grad for t in inputs[0] if isinstance(t, torch.Tensor))


def _parse(*argv: str) -> Any:
    return cli.parse(list(argv), SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, declarations=DECLARATIONS)


def test_modes_are_checked_against_the_scenarios_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert _parse("--scenario", "boundary", "--modes", "inference_mode,no_grad").modes == ("inference_mode", "no_grad")
    assert _parse("--scenario", "roofline", "--modes", "backward").modes == ("backward",)
    for argv, says in ((("--scenario", "boundary", "--modes", "inference,eager"),
                        "argument --modes: unknown mode 'eager'; valid modes: inference, no_grad, inference_mode, "
                        "fwd_requires_grad, fwd_bwd"),
                       (("--scenario", "timer_validation", "--modes", "inference"),
                        "argument --modes: scenario timer_validation has no modes to choose from")):
        with pytest.raises(SystemExit) as info:
            _parse(*argv)
        assert info.value.code == 2 and says in capsys.readouterr().err


def test_a_selection_keeps_the_scenarios_order_of_modes() -> None:
    sel = Selection(ops=("muladd",), variants=("raw",), device="cpu", modes=("fwd_bwd", "inference"))
    assert sel.modes_of(MODES) == ("inference", "fwd_bwd")
    assert Selection(ops=(), variants=(), device="cpu").modes_of(MODES) == MODES
