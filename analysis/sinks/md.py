"""GitHub markdown (a PR comment, $GITHUB_STEP_SUMMARY): per result, a heading with the machine,
torch and date, its tables, and its notes. Every string from the document is escaped
(bench/io/escape.py `markdown`): no HTML, no added rows, links or images."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import Named

FORMAT = "md"
DESCRIPTION = "markdown: per result, its tables and notes"


def render(results: Sequence[Named]) -> str:
    return "\n".join(document(doc, name) for doc, name in results)


def document(doc: Mapping[str, Any], name: str = "") -> str:
    from dbench.bench.io.escape import code, frame, markdown
    from dbench.analysis.views import document_tables, env_line, no_rows_line, notes, run_parts

    out = [f"## {markdown(doc.get('scenario'))} · {markdown(env_line(doc['env']))}", "",
           " · ".join([code(name)] * bool(name) + [markdown(p) for p in run_parts(doc)]), ""]
    if not doc["rows"]:
        return "\n".join(out + [f"_{markdown(no_rows_line(doc))}_", ""])
    for table in document_tables(doc):
        colalign = ("left", *["right"] * len(table.grid.columns)) if table.align_numbers else None
        heading = f"**{markdown(table.title)}**" + (f" — {markdown(table.subtitle)}" if table.subtitle else "")
        out += [heading, "", frame(table.grid, markdown).to_markdown(colalign=colalign, disable_numparse=True), ""]
    lines = notes(doc)
    if lines:
        out += ["Notes:", "", *[f"- {markdown(line)}" for line in lines], ""]
    return "\n".join(out)
