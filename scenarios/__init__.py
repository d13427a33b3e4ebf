"""Scenarios: which ops x variants x modes x shapes to time, and which table they make."""

from __future__ import annotations

from .base import Scenario, Selection
from .boundary import BOUNDARY
from .compile import COMPILE
from .timer_validation import TIMER_VALIDATION

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (BOUNDARY, COMPILE, TIMER_VALIDATION)}

__all__ = ["SCENARIOS", "Scenario", "Selection"]
