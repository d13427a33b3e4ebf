"""The compile scenario's steady-state check, on the CPU (the scenario itself needs CUDA)."""

from __future__ import annotations

from typing import Any

import torch

from dbench.scenarios.compile import fresh_function, recompiles_on_repeat


def test_a_fresh_wrapper_does_not_recompile_on_repeat() -> None:
    torch._dynamo.reset()
    x = torch.ones(3)
    wrapper = fresh_function(lambda a: a * 2, 1)
    compiled = torch.compile(wrapper, fullgraph=True, dynamic=False)
    compiled(x)
    assert recompiles_on_repeat(compiled, (x,)) is None
    assert fresh_function(lambda a: a, 1).__code__ is not wrapper.__code__  # one code object per variant


def test_a_function_whose_guards_fail_every_call_is_reported() -> None:
    torch._dynamo.reset()
    state: dict[str, Any] = {"k": 0}

    def bump(a: torch.Tensor) -> torch.Tensor:
        state["k"] += 1  # a Python int Dynamo specialises on: every call fails the guard
        return a * state["k"]

    compiled = torch.compile(bump, fullgraph=True, dynamic=False)
    x = torch.ones(3)
    compiled(x)
    reason = recompiles_on_repeat(compiled, (x,))
    assert reason is not None and reason.startswith("recompiles when called again with the same inputs")
