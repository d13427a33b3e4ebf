"""A result's tables and notes as data: what every output format (analysis/sinks/) and the console
render. Its heavy imports (pandas, the table modules) are made where used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

if TYPE_CHECKING:
    import pandas as pd


def _when(time: Any) -> str:
    import pandas as pd

    try:
        return pd.Timestamp(time).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError):
        return f"time {time!r}"


def env_line(env: dict[str, Any]) -> str:
    """GPU (or CPU model) · torch · date: the line a reader checks first."""
    when = _when(env["time"]) if env.get("time") else "time unknown"
    machine = env.get("gpu_name") or env.get("cpu_model") or "unknown machine"
    return f"{machine} ({env.get('device')}) · torch {env.get('torch')} · {when}"


def table_note(scenario: str) -> str:
    """What the bracketed Δ of a scenario's tables is measured against."""
    from dbench.scenarios import DECLARATIONS

    return DECLARATIONS[scenario].table_note if scenario in DECLARATIONS else ""


def notes(document: Mapping[str, Any]) -> list[str]:
    import pandas as pd

    from dbench.analysis.table import check_notes, legend, na_reasons
    from dbench.bench.core.probe import instability_note

    frame = pd.DataFrame(document["rows"])
    lines = legend(frame) + check_notes(frame)
    lines += [f"n/a {label}: {reason}" if not label.startswith("FAILED") else f"{label}: {reason}"
              for label, reason in na_reasons(frame).items()]
    unstable = instability_note(document.get("speed_probe"))
    return lines + ([f"warning: {unstable}"] if unstable else []) + [n for n in [table_note(document["scenario"])] if n]


def run_parts(document: Mapping[str, Any]) -> list[str]:
    """How the run went: its rounds (and why it stopped early), its status."""
    config = document.get("config") or {}
    stop = config.get("stop_reason")
    rounds = f"{config['rounds_done']} rounds" if config.get("rounds_done") else ""
    rounds += f" (stopped: {stop})" if rounds and stop not in (None, "rounds") else ""
    return [str(p) for p in (rounds, document.get("status")) if p]


def no_rows_line(document: Mapping[str, Any]) -> str:
    """What a result without rows says: nothing was measured, and the run's status and error."""
    error = f" ({document['error']})" if document.get("error") else ""
    return f"no rows: the run measured nothing (status {document.get('status') or 'unknown'}){error}"


class TableData(NamedTuple):
    """One table of a result as shown: its title (the op, or the kernel table's heading), what it
    shows (subtitle, may be empty) and its cells as text (index: the variant or the row's name).
    align_numbers: a table of numbers (right-aligned cells beside a left-aligned name)."""

    title: str
    subtitle: str
    grid: pd.DataFrame
    align_numbers: bool

    @property
    def heading(self) -> str:
        return f"{self.title} — {self.subtitle}" if self.subtitle else self.title


def document_tables(document: Mapping[str, Any]) -> list[TableData]:
    """A result's tables as data: its scenario's kernel tables (analysis/kernels.py TABLES), else the
    boundary tables (analysis/table.py), each with its heading."""
    import pandas as pd

    from dbench.analysis.kernels import tables_of
    from dbench.analysis.table import cell_grid, tables

    frame = pd.DataFrame(document["rows"])
    frame.attrs["roofs"] = document.get("roofs")
    kernel_tables = tables_of(str(document.get("scenario")))
    if kernel_tables is not None:
        return [TableData(heading, "", grid, False) for heading, grid in kernel_tables.grids(frame)]
    return [TableData(t.op, t.heading(), cell_grid(t).rename_axis(index="variant", columns=None), True)
            for t in tables(frame)]


def print_document(document: Mapping[str, Any], console: Any, note: str | None = None) -> None:
    """A result's tables on a rich console (the run's own output, and the txt sink); `note` under the
    boundary tables (default: the scenario's table note)."""
    import pandas as pd

    from dbench.analysis.kernels import tables_of
    from dbench.analysis.table import print_tables

    kernel_tables = tables_of(str(document.get("scenario")))
    if kernel_tables is not None:
        kernel_tables.print(dict(document), console)
    elif document["rows"]:  # none when stopped before the cases were built
        print_tables(pd.DataFrame(document["rows"]), document["env"], console,
                     note=table_note(str(document.get("scenario"))) if note is None else note)


def table_frame(document: Mapping[str, Any], name: str = "") -> pd.DataFrame:
    """Every table's data (numbers, CI, flags, reasons), one row per cell."""
    import pandas as pd

    from dbench.analysis.table import tables

    found = tables(pd.DataFrame(document["rows"])) if document["rows"] else []
    # point: the axis values (and shape, dtype) of a table's cases, where a result has several (the
    # regions chain length, the launch size): without it two cells of one variant and mode look alike.
    parts = [t.data.assign(source=name, op=t.op, point=t.point, driver=t.driver, metric=t.metric) for t in found]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["source"])
    first = [c for c in ("source", "op", "point", "driver", "metric", "variant", "mode") if c in frame.columns]
    return frame[first + [c for c in frame.columns if c not in first]]
