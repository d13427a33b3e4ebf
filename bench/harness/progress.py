"""The runner's passes drawn on a terminal (rich): a bar per task, redrawn between blocks at most every
REFRESH_SECONDS, and a red line per case that failed. The timing core (bench/core/runner.py) knows only
its Reporter protocol; the harness hands it one of these."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dbench.bench.io.escape import rich as shown_text
from dbench.bench.core.runner import Throttled


class RichProgress:
    """A runner Reporter on `console` (default: stderr, so a table on stdout stays clean); `eta` adds
    the time remaining (the CPU rounds, whose length is known)."""

    def __init__(self, console: Console | None = None, eta: bool = True) -> None:
        self.console = console or Console(stderr=True, emoji=False)
        columns: list[Any] = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        if eta:
            columns.append(TimeRemainingColumn())
        # auto_refresh off: rich's refresh thread would wake up inside timed blocks.
        self._progress = Progress(*columns, console=self.console, auto_refresh=False)
        self._redraw = Throttled(self._progress.refresh)

    def __enter__(self) -> RichProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)

    def start(self, description: str, total: int) -> Any:
        return self._progress.add_task(description, total=total)

    def advance(self, task: Any) -> None:
        self._progress.advance(task)

    def refresh(self, force: bool = False) -> None:
        self._redraw(force)

    def failed(self, label: str, error: str, where: str) -> None:
        # A user op's exception text: no terminal sequence, no markup, no highlighting of its words.
        self.console.print(f"[red]FAILED {shown_text(label)}[/red]: {shown_text(error)} ({shown_text(where)})",
                           highlight=False)
