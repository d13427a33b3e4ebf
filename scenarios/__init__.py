"""Scenarios: which ops x variants x modes x shapes to time, and which table they make.

SCENARIO_NAMES is plain data so that run.py can check a command line before it
imports torch; SCENARIOS (the Scenario objects) is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

SCENARIO_NAMES: tuple[str, ...] = ("boundary", "compile", "timer_validation")

__all__ = ["SCENARIO_NAMES", "SCENARIOS", "Scenario", "Selection"]


def _registry() -> dict[str, Any]:
    from .boundary import BOUNDARY
    from .compile import COMPILE
    from .timer_validation import TIMER_VALIDATION

    registry = {s.name: s for s in (BOUNDARY, COMPILE, TIMER_VALIDATION)}
    assert tuple(registry) == SCENARIO_NAMES, "SCENARIO_NAMES must list the registered scenarios, in order"
    return registry


def __getattr__(name: str) -> Any:
    if name == "SCENARIOS":
        value = _registry()
    elif name in ("Scenario", "Selection"):
        value = getattr(importlib.import_module(".base", __name__), name)
    else:
        raise AttributeError(f"module 'scenarios' has no attribute {name!r}")
    globals()[name] = value
    return value
