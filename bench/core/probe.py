"""The speed probe: a fixed CPU reference workload timed in every round.

Dispatch costs are CPU costs, so when the machine's CPU slows down (another
tenant on the host, a frequency change) every row of a run moves with it. The
probe is a torch-free workload (interpreter work, small allocations, a sort)
timed exactly like a case: calibrated to the same block length and placed at
a random position of every round. Its per-round samples show whether the
machine held its speed through the run; two runs whose probes differ by X%
differ by about that much in every absolute median, while the ratios to a
baseline timed in the same rounds (the rows' `ratio_*` fields) largely do not.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dbench.bench.core.case import Case
from dbench.bench.core.stats import summarize

LABEL_KEY = {"op": "(machine)", "variant": "speed_probe", "mode": "reference"}
UNSTABLE = 0.05  # q90/q10 - 1 above this: the run's absolute medians are not expected to repeat

_DATA = tuple((i * 7919) % 257 for i in range(96))


def reference_workload() -> int:
    """About a microsecond of mixed interpreter and allocator work; deterministic."""
    table = {k: k * 3 for k in _DATA[:24]}
    items = sorted(_DATA)
    return len(table) + items[len(items) // 2]


def probe_case() -> Case:
    return Case(key=dict(LABEL_KEY), call=reference_workload)


def probe_summary(samples: Sequence[float]) -> dict[str, Any]:
    """Median µs per workload call, its spread across rounds, and the samples (for later pairing)."""
    if not samples:
        return {"n": 0, "median": None, "rel_iqr": None, "spread": None, "samples": []}
    s = summarize(samples)
    q10, q90 = np.percentile(np.asarray(samples, dtype=float), [10, 90])
    return {
        "n": s.n,
        "median": round(s.median, 6),
        "rel_iqr": round(s.iqr / s.median, 6) if s.median else None,
        "spread": round(float(q90 / q10 - 1), 6) if q10 > 0 else None,  # q90/q10 - 1
        "samples": [round(float(x), 6) for x in samples],
    }


def instability_note(summary: dict[str, Any] | None) -> str | None:
    """A warning for the table when the probe says the machine's speed varied during the run."""
    if not summary or summary.get("spread") is None or summary["spread"] <= UNSTABLE:
        return None
    return (f"machine speed varied during this run: the speed probe's 10th-90th percentile rounds differ by "
            f"{summary['spread']:.0%} (rel. IQR {summary['rel_iqr']:.0%}). Absolute medians will move between runs "
            f"by about as much; the ratio to the baseline (ratio_median, paired per round) moves far less.")
