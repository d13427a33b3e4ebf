"""GitHub markdown (a PR comment, $GITHUB_STEP_SUMMARY): per result, a heading with the machine,
torch and date, its tables, and its notes."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import Named

FORMAT = "md"
DESCRIPTION = "markdown: per result, its tables and notes"


def render(results: Sequence[Named]) -> str:
    return "\n".join(document(doc, name) for doc, name in results)


def document(doc: Mapping[str, Any], name: str = "") -> str:
    from dbench.analysis.views import document_tables, env_line, no_rows_line, notes, run_line

    out = [f"## {doc.get('scenario')} · {env_line(doc['env'])}", "", run_line(doc, name), ""]
    if not doc["rows"]:
        return "\n".join(out + [f"_{no_rows_line(doc)}_", ""])
    for table in document_tables(doc):
        colalign = ("left", *["right"] * len(table.grid.columns)) if table.align_numbers else None
        heading = f"**{table.title}**" + (f" — {table.subtitle}" if table.subtitle else "")
        out += [heading, "", table.grid.to_markdown(colalign=colalign, disable_numparse=True), ""]
    lines = notes(doc)
    if lines:
        out += ["Notes:", "", *[f"- {line}" for line in lines], ""]
    return "\n".join(out)
