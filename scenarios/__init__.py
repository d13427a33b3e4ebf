"""Scenarios: which ops x variants x modes x shapes to time, and which table they make."""

from __future__ import annotations

from .base import Scenario, Selection
from .boundary import BOUNDARY

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (BOUNDARY,)}

__all__ = ["SCENARIOS", "Scenario", "Selection"]
