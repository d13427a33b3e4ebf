"""Scenarios: which ops x variants x modes x shapes to time, and which table they make.

SCENARIO_NAMES is plain data so that run.py can check a command line before it
imports torch; SCENARIOS (the Scenario objects) is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

SCENARIO_NAMES: tuple[str, ...] = ("boundary", "compile", "timer_validation", "roofline", "launch", "offsets", "fusion")
# Scenarios with variant names of their own (the others take the variant factory's, ops.specs).
SCENARIO_VARIANTS: dict[str, tuple[str, ...]] = {
    "roofline": ("raw", "aten", "compiled"),
    "offsets": ("raw",),
    "fusion": ("unfused", "fused", "aten", "compiled", "triton"),
}
# Scenarios that take only some ops (the others take every op of ops.specs): offsets has no index
# axis for mm (its kernel always addresses in int64), fusion is about the chain alone.
SCENARIO_OPS: dict[str, tuple[str, ...]] = {
    "offsets": ("noop", "muladd", "l2norm", "chain"),
    "fusion": ("chain",),
}
# Run defaults that differ from bench/cli.py DEFAULTS, per scenario: option -> (full run, --quick).
# The kernel scenarios have hundreds of cases whose GPU time repeats within 0.5 %: fewer rounds.
SCENARIO_DEFAULTS: dict[str, dict[str, tuple[object, object]]] = {
    "roofline": {"rounds": (10, 3), "gpu_rounds": (5, 2)},
    "launch": {"rounds": (8, 3), "gpu_rounds": (4, 2)},
    "offsets": {"rounds": (8, 3), "gpu_rounds": (5, 2)},
    "fusion": {"rounds": (8, 3), "gpu_rounds": (5, 2)},
}
# ... and on a CUDA device. The boundary table there: the H200 host's CPU holds fast and slow speed
# states for seconds at a time, so a case's block and its floor's block must lie close in time for
# their ratio to repeat: short blocks in many rounds (a 2.5 ms x 60 round took less time than a
# 10 ms x 30 one for narrower ratio CIs; results/h200/README.md), and shorter C++ repetitions.
# On the CPU VMs the noise inside a run is white, and long blocks average it (the CPU default).
# The GPU pass's blocks last at least 10 ms (bench/runner.py GPU_MIN_BLOCK_SECONDS); 5 of its rounds
# keep the whole command under a minute, and CUPTI's medians repeat within 0.1 % (median over rows).
SCENARIO_CUDA_DEFAULTS: dict[str, dict[str, tuple[object, object]]] = {
    "boundary": {"rounds": (60, 6), "block_ms": (2.5, 2.0), "gpu_rounds": (5, 3), "cpp_repetitions": (12, 3),
                 "cpp_min_time": (0.03, 0.01)},
}

__all__ = ["SCENARIO_CUDA_DEFAULTS", "SCENARIO_DEFAULTS", "SCENARIO_NAMES", "SCENARIO_OPS", "SCENARIO_VARIANTS", "SCENARIOS", "Scenario", "Selection"]


def _registry() -> dict[str, Any]:
    from .boundary import BOUNDARY
    from .compile import COMPILE
    from .fusion import FUSION
    from .launch import LAUNCH
    from .offsets import OFFSETS
    from .roofline import ROOFLINE
    from .timer_validation import TIMER_VALIDATION

    registry = {s.name: s for s in (BOUNDARY, COMPILE, TIMER_VALIDATION, ROOFLINE, LAUNCH, OFFSETS, FUSION)}
    assert tuple(registry) == SCENARIO_NAMES, "SCENARIO_NAMES must list the registered scenarios, in order"
    assert all(registry[n].variants == v for n, v in SCENARIO_VARIANTS.items()), "SCENARIO_VARIANTS out of step"
    assert all(set(registry[n].default_ops or ()) <= set(o) for n, o in SCENARIO_OPS.items()), "SCENARIO_OPS out of step"
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
