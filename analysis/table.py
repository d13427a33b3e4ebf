"""The boundary table: rows are variants, columns are modes, cells are µs/call and Δ vs the floor."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from ops import VARIANT_NAMES


def _cell(row: pd.Series) -> str:
    if row["status"] == "n/a":
        return "n/a"
    if row["status"] == "failed":
        return "FAILED"
    if row["median"] is None or (isinstance(row["median"], float) and math.isnan(row["median"])):
        return "-"
    text = f"{row['median']:.2f}"
    delta = row.get("delta_median")
    if delta is not None and not (isinstance(delta, float) and math.isnan(delta)):
        text += f" ({delta:+.2f})"
    return text


def boundary_table(frame: pd.DataFrame, op: str, metric: str = "cpu_us") -> pd.DataFrame:
    """Formatted cells, variants in declaration order, modes as columns (in first-seen order)."""
    sub = frame[(frame["op"] == op) & (frame["metric"] == metric)]
    cells = sub.assign(cell=sub.apply(_cell, axis=1)).pivot_table(
        index="variant", columns="mode", values="cell", aggfunc="first"
    )
    order = [v for v in VARIANT_NAMES if v in cells.index] + [v for v in cells.index if v not in VARIANT_NAMES]
    modes = [m for m in sub["mode"].drop_duplicates() if m in cells.columns]
    return cells.reindex(index=order, columns=modes).fillna("")


def na_reasons(frame: pd.DataFrame) -> dict[str, str]:
    """Label -> reason for n/a cells (one per variant) and failed cells (one per case)."""
    sub = frame[frame["status"].isin(["n/a", "failed"])]
    out: dict[str, str] = {}
    for _, row in sub.iterrows():
        label = row["variant"] if row["status"] == "n/a" else f"FAILED {row['op']}/{row['variant']}/{row['mode']}"
        out.setdefault(label, row["reason"])
    return out


def _title(op: str, env: dict[str, Any]) -> str:
    where = env.get("gpu_name") or env.get("cpu_model")
    return f"{op}: CPU µs/call, median (Δ vs floor) — {env.get('device')} · {where} · torch {env.get('torch')}"


def print_tables(frame: pd.DataFrame, env: dict[str, Any], console: Console | None = None, note: str = "") -> None:
    console = console or Console()
    for op in frame["op"].drop_duplicates():
        cells = boundary_table(frame, op)
        table = Table(title=_title(op, env), title_justify="left")
        table.add_column("variant")
        for mode in cells.columns:
            table.add_column(mode, justify="right")
        for variant, row in cells.iterrows():
            table.add_row(str(variant), *row.tolist())
        console.print(table)
    for label, reason in na_reasons(frame).items():
        console.print(f"  [dim]{label}: {reason}[/dim]")
    if note:
        console.print(f"[dim]{note}[/dim]")


def markdown_table(frame: pd.DataFrame, op: str) -> str:
    cells = boundary_table(frame, op)
    header = "| variant | " + " | ".join(cells.columns) + " |"
    rule = "|---|" + "---:|" * len(cells.columns)
    lines = [header, rule] + [f"| {v} | " + " | ".join(row.tolist()) + " |" for v, row in cells.iterrows()]
    return "\n".join(lines)
