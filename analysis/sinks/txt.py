"""Plain text: the console tables without colour, as wide as they need (strings of the document
escaped as on the console: bench/io/escape.py `rich`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import Named

FORMAT = "txt"
DESCRIPTION = "text: the console tables without colour"


def render(results: Sequence[Named]) -> str:
    return "\n".join(document(doc, name) for doc, name in results)


def document(doc: Mapping[str, Any], name: str = "") -> str:
    import io

    from rich.console import Console

    from dbench.bench.io.escape import rich
    from dbench.analysis.views import env_line, no_rows_line, print_document

    buffer = io.StringIO()
    console = Console(file=buffer, color_system=None, force_terminal=False)
    console.print(rich(" · ".join(p for p in (name, env_line(doc["env"])) if p)), soft_wrap=True)
    if not doc["rows"]:
        console.print(rich(no_rows_line(doc)), soft_wrap=True)
    else:
        print_document(doc, console)
    return buffer.getvalue()
