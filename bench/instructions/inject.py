"""A known extra cost for one case, to show what the check catches (its power); never used by CI.

`--inject LABEL=ITERATIONS` (child.py) wraps that case's call in a function that first runs a
Python loop of ITERATIONS empty iterations: a fixed number of extra instructions per call,
deterministic like the rest. `iterations_for` turns a target fraction of a row's count into
iterations, from the wrapper's measured cost (PAD_FIXED + PAD_PER_ITERATION x iterations).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable

# Measured under callgrind (CPython 3.11, this suite's child environment): instructions the
# wrapper adds per call, and per loop iteration.
PAD_FIXED = 2000.0
PAD_PER_ITERATION = 74.0


def _pad(iterations: int) -> None:
    # repeat(), not range(): past 256, range() allocates an int per iteration, which would make the
    # cost per iteration depend on the count.
    for _ in itertools.repeat(None, iterations):
        pass


def padded(call: Callable[[], Any], iterations: int) -> Callable[[], Any]:
    def call_with_pad() -> Any:
        _pad(iterations)
        return call()

    return call_with_pad


def iterations_for(count: float, fraction: float) -> int:
    """Loop iterations that add at least `fraction` of `count` instructions per call."""
    return max(0, math.ceil((fraction * count - PAD_FIXED) / PAD_PER_ITERATION))


def parse_injections(text: str | None) -> dict[str, int]:
    """'label=iterations[;label=iterations...]' -> {label: iterations}."""
    out: dict[str, int] = {}
    for item in filter(None, (text or "").split(";")):
        label, eq, value = item.partition("=")
        if not eq or not value.isdigit():
            raise ValueError(f"bad --inject item {item!r} (expected LABEL=ITERATIONS)")
        out[label] = int(value)
    return out
