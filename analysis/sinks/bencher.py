"""Bencher Metric Format (`bencher run --adapter json`): one benchmark per timed row, named by its
identity, one measure per metric (cpu_us, gpu_us, ...): the median as `value`, the row's CI as
`lower_value` / `upper_value`."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from . import Named
from ._trackers import benchmark_name, number, timed_rows

FORMAT = "bencher"
DESCRIPTION = "Bencher Metric Format (JSON)"


def metrics(documents: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for doc, row in timed_rows(documents):
        measure: dict[str, float] = {"value": float(row["median"])}
        low, high = number(row.get("ci_low")), number(row.get("ci_high"))
        if low is not None and high is not None:
            measure.update(lower_value=low, upper_value=high)
        out.setdefault(benchmark_name(doc, row), {})[str(row["metric"])] = measure
    return out


def render(results: Sequence[Named]) -> str:
    return json.dumps(metrics([doc for doc, _ in results]), indent=1) + "\n"
