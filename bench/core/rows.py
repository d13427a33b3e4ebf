"""One result row: a case key, a metric, its samples and their statistics.

Every driver and timer builds its rows here, so the row contract
(bench.io.results.REQUIRED_ROW_FIELDS) has one implementation.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from dbench.bench.core import stats

# The GPU metrics of a CUPTI-timed case, (metric, unit), spelled once for every driver
# (bench/core/gputimer.py for Python, bench/io/cpp_results.py for the C++ driver).
GPU_METRICS: tuple[tuple[str, str], ...] = (("gpu_us", "us"), ("kernels_per_call", "count"))


def num(x: float | None) -> float | None:
    """JSON-safe rounding: NaN becomes null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)


def stat_row(
    key: dict[str, Any],
    *,
    metric: str,
    unit: str,
    timer: str,
    samples: Sequence[float],
    base_samples: Sequence[float] | None = None,
    baseline: str | None = None,
    status: str | None = None,
    reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Median, quartiles and CI of `samples`; the paired delta and ratio when `base_samples` align."""
    s = stats.summarize(samples)
    row: dict[str, Any] = {
        **key,
        "driver": key.get("driver", "python"),
        "metric": metric,
        "unit": unit,
        "timer": timer,
        "status": status or ("ok" if samples else "not run"),
        "reason": reason,
        "n": s.n,
        "median": num(s.median),
        "q1": num(s.q1),
        "q3": num(s.q3),
        "ci_low": num(s.ci_low),
        "ci_high": num(s.ci_high),
        "rel_iqr": num(s.iqr / abs(s.median)) if s.n and s.median else None,
        "baseline": baseline,
        "delta_median": None,
        "delta_ci_low": None,
        "delta_ci_high": None,
        "ratio_median": None,
        "ratio_ci_low": None,
        "ratio_ci_high": None,
        **extra,
        "samples": [round(float(x), 6) for x in samples],
    }
    if base_samples is not None and samples and len(base_samples) == len(samples):
        d = stats.summarize(stats.paired_differences(samples, base_samples))
        row.update(delta_median=num(d.median), delta_ci_low=num(d.ci_low), delta_ci_high=num(d.ci_high))
        if all(b > 0 for b in base_samples):
            q = stats.summarize(stats.paired_ratios(samples, base_samples))
            row.update(ratio_median=num(q.median), ratio_ci_low=num(q.ci_low), ratio_ci_high=num(q.ci_high))
    return row
