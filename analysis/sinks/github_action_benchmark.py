"""github-action-benchmark's `customSmallerIsBetter` list: name, unit, value, range, extra, one entry
per timed row and metric."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from . import Named
from ._trackers import benchmark_name, number, timed_rows

FORMAT = "github-action-benchmark"
DESCRIPTION = "github-action-benchmark customSmallerIsBetter (JSON)"


def entries(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for doc, row in timed_rows(documents):
        low, high = number(row.get("ci_low")), number(row.get("ci_high"))
        entry: dict[str, Any] = {"name": f"{benchmark_name(doc, row)} {row['metric']}",
                                 "unit": str(row.get("unit") or ""), "value": float(row["median"])}
        if low is not None and high is not None:
            entry["range"] = f"{low:.6g} to {high:.6g} (CI of the median)"
        entry["extra"] = f"n={row.get('n')} timer={row.get('timer')} torch={(doc.get('env') or {}).get('torch')}"
        out.append(entry)
    return out


def render(results: Sequence[Named]) -> str:
    return json.dumps(entries([doc for doc, _ in results]), indent=1) + "\n"
