"""JSON: the tables as shown (headings, row and column names, cells as text) and their notes, per
result, for a dashboard or a bot that wants the tables rather than the rows. As shown: strings pass
bench/io/escape.py `terminal` (json.dumps leaves bidi controls and C1 characters raw)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from . import Named

FORMAT = "json"
DESCRIPTION = "JSON: per result, its tables as shown and its notes"


def render(results: Sequence[Named]) -> str:
    from dbench.bench.io.escape import terminal
    from dbench.analysis.views import document_tables, env_line, no_rows_line, notes

    def shown(text: Any) -> Any:  # null stays null
        return None if text is None else terminal(text)

    out: list[dict[str, Any]] = []
    for doc, name in results:
        entry: dict[str, Any] = {"source": shown(name), "scenario": shown(doc.get("scenario")),
                                 "status": shown(doc.get("status")), "environment": shown(env_line(doc["env"]))}
        if not doc["rows"]:
            entry.update(tables=[], notes=[shown(no_rows_line(doc))])
        else:
            entry["tables"] = [{"heading": shown(t.heading), "index_name": shown(t.grid.index.name),
                                "columns": [shown(c) for c in t.grid.columns],
                                "rows": [{"name": shown(i), "cells": [shown(v) for v in r]}
                                         for i, r in zip(t.grid.index, t.grid.to_numpy().tolist())]}
                               for t in document_tables(doc)]
            entry["notes"] = [shown(n) for n in notes(doc)]
        out.append(entry)
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"
