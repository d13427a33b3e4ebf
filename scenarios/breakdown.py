"""`breakdown`: where each variant's CPU cost over its floor goes, by layer, in instructions and µs.

`run.py --scenario breakdown` is `dbench breakdown` under the run's options: one run of the
boundary scenario's CPU cases under callgrind, split into layers (bench/instructions/breakdown.py),
then a native run of the same cases that converts each layer to µs (bench/instructions/in_time.py).
It writes its own document, `<stem>.breakdown.json` with `<stem>.md` and one figure per op, in the
run's folder (a results folder's readers pass it by). What it composes (the collection, the
rendering) lies above the scenarios, so run.py runs it (analysis/breakdown.py run_scenario); this
module declares it and says which options it cannot honour.
"""

from __future__ import annotations

from dbench.bench.harness.options import RunOptions

from . import DECLARATIONS
from .arity import counted_scenario
from .base import Scenario

QUICK_CALLS = 200  # --quick: counts per case (the full run's 2 000 repeat to the instruction; these to ~1 %)


def refused(options: RunOptions) -> str | None:
    """The option the breakdown cannot honour, and why (None: it can run them all)."""
    if options.baseline is not None:
        return "--baseline: a breakdown is not gated (gate a boundary run; `dbench instructions check` gates counts)"
    if options.shapes or options.axis_values:
        return "--shape/--axis: the breakdown counts each op at the boundary scenario's shape"
    try:
        counted_scenario(options.ops)
    except ValueError as exc:
        return f"--ops: {exc}"
    if options.dtype != "float32":
        return f"--dtype {options.dtype}: the instruction counts are taken in float32 only"
    return None


SCENARIO = Scenario(DECLARATIONS["breakdown"], build=lambda sel: [], own_document=True)
