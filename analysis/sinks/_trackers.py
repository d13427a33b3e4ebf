"""What the benchmark-tracker sinks share: the timed rows, and one name per row of a run."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dbench.bench.core.identity import case_label


def timed_rows(documents: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(document, row) of every timed row (status ok, with a median)."""
    return [(doc, row) for doc in documents for row in doc["rows"]
            if str(row.get("status") or "ok").lower() == "ok" and isinstance(row.get("median"), (int, float))]


def benchmark_name(doc: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """One name per row of a run: scenario/op/variant/mode[axes] (driver) [device dtype shape]; a user's
    op adds its op_source (`from FILE.py:NAME@<digest>`), so two different ops of one name, or an edited
    op, never share a tracker's series. A shipped op's name is unchanged."""
    from dbench.bench.io.escape import terminal  # a tracker shows the name: no control characters

    driver = row.get("driver") or "python"
    shape = "x".join(map(str, row.get("shape") or [])) or "-"
    source = f" from {row['op_source']}" if row.get("op_source") else ""
    return terminal(f"{doc.get('scenario')}/{case_label(row)}{source}" + ("" if driver == "python" else f" ({driver})")
                    + f" [{row.get('device')} {row.get('dtype')} {shape}]")


def number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None
