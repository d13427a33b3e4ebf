"""The breakdown's windows on torch's own Python functions (bench/instructions/python_functions.py):
each declared function is found where its callers look it up, the wrapper switches collection on
for the outermost call only, a classmethod stays one, everything is restored, and the counts read
from the dumps take the wrapper's own instructions off."""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest
import torch

from dbench.bench.instructions.python_functions import PYTHON_FUNCTIONS, Hook, Window, count_calls, hooks


def test_every_declared_function_is_found_in_this_torch() -> None:
    assert [h.name for h in hooks()] == list(PYTHON_FUNCTIONS)
    assert Hook.find("x", "torch._ops:NoSuchClass.__call__") is None
    assert Hook.find("x", "no_such_module_here:f") is None


def test_collection_is_on_for_the_outermost_call_only_and_off_when_it_raises() -> None:
    switched: list[str] = []
    window = Window(lambda: switched.append("toggle"))

    def inner(n: int) -> int:
        if n < 0:
            raise ValueError("boom")
        return n if n == 0 else wrapped(n - 1)  # recursion: still one window

    wrapped = window.wrap(inner)
    assert wrapped(3) == 0 and switched == []  # not armed: no window
    window.armed = True
    assert wrapped(3) == 0 and switched == ["toggle", "toggle"] and window.calls == 1
    with pytest.raises(ValueError):
        wrapped(-1)
    assert switched == ["toggle"] * 4 and window.depth == 0  # switched off again on the way out


def test_a_classmethod_stays_one_and_every_hook_is_restored() -> None:
    class Base:
        @classmethod
        def apply(cls, x: int) -> tuple[type, int]:
            return cls, x

    class Child(Base):
        pass

    module = types.SimpleNamespace(Base=Base)
    hook = Hook("apply", module.Base, "apply", Base.__dict__["apply"])
    window = Window(lambda: None)
    hook.install(window.wrap)
    window.armed = True
    assert Child.apply(2) == (Child, 2) and window.calls == 1
    hook.restore()
    assert Base.__dict__["apply"] is hook.original


def test_the_counting_pass_counts_calls_per_call_of_the_case_and_restores_torch() -> None:
    @torch.library.custom_op("dbench_test_pf::copy", mutates_args=())
    def copy(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    x = torch.ones(2)
    found = hooks()
    called = count_calls(lambda: copy(x), None, found)
    assert called["CustomOpDef.__call__"] == 1.0 and called["OpOverload.__call__"] == 1.0
    assert "fill_defaults" not in called  # no autograd formula, no graph: never called
    assert all(inspect.getattr_static(h.owner, h.attribute) is h.original for h in found)


def test_the_counts_take_the_wrappers_own_instructions_off() -> None:
    from dbench.bench.instructions.collect import _function_counts

    dump = types.SimpleNamespace
    functions: dict[str, Any] = {"calls": 100, "calibration_calls": 100,
                                 "windows": [{"case": 0, "function": "fill_defaults", "outermost_calls": 200},
                                             {"case": 2, "function": "OpOverload.__call__", "outermost_calls": 100}]}
    # The wrapper costs 50 a call; fill_defaults is called twice a call at 1 000 each.
    counts = _function_counts(functions, [dump(instructions=5_000), dump(instructions=200 * 1050),
                                          dump(instructions=100 * 350)])
    assert counts == {0: {"fill_defaults": {"instructions": 2000.0, "calls": 2.0}},
                      2: {"OpOverload.__call__": {"instructions": 300.0, "calls": 1.0}}}
