"""A/A spread of several collections: per row, (max - min) / min of its counts per call."""

from __future__ import annotations

from typing import Any

from dbench.bench.core.identity import case_label, identity_text, row_identity


def spreads(documents: list[dict[str, Any]]) -> list[tuple[str, float, list[float]]]:
    """(label, spread, counts) for every row timed in all the documents, largest spread first."""
    by_key: dict[str, list[float]] = {}
    labels: dict[str, str] = {}
    for document in documents:
        for row in document["rows"]:
            if row.get("instructions") is not None:
                key = identity_text(row_identity(row))
                by_key.setdefault(key, []).append(float(row["instructions"]))
                labels[key] = case_label(row)
    out = [(labels[k], (max(v) - min(v)) / min(v), v) for k, v in by_key.items() if len(v) == len(documents)]
    return sorted(out, key=lambda item: -item[1])
