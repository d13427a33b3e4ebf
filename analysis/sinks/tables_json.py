"""JSON: the tables as shown (headings, row and column names, cells as text) and their notes, per
result, for a dashboard or a bot that wants the tables rather than the rows."""

from __future__ import annotations

import json
from typing import Any, Sequence

from . import Named

FORMAT = "json"
DESCRIPTION = "JSON: per result, its tables as shown and its notes"


def render(results: Sequence[Named]) -> str:
    from dbench.analysis.views import document_tables, env_line, no_rows_line, notes

    out: list[dict[str, Any]] = []
    for doc, name in results:
        entry: dict[str, Any] = {"source": name, "scenario": doc.get("scenario"), "status": doc.get("status"),
                                 "environment": env_line(doc["env"])}
        if not doc["rows"]:
            entry.update(tables=[], notes=[no_rows_line(doc)])
        else:
            entry["tables"] = [{"heading": t.heading, "index_name": t.grid.index.name,
                                "columns": [str(c) for c in t.grid.columns],
                                "rows": [{"name": str(i), "cells": [str(v) for v in r]}
                                         for i, r in zip(t.grid.index, t.grid.to_numpy().tolist())]}
                               for t in document_tables(doc)]
            entry["notes"] = notes(doc)
        out.append(entry)
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"
