"""The boundary table: rows are variants, columns are modes, cells are µs/call and Δ vs the floor."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from bench.cpp_results import CPP_VARIANT_NAMES
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
    if row.get("gpu_bound") is True:
        text += " †"
    if (row.get("rel_iqr") or 0) > NOISY_REL_IQR:
        text += " ~"
    return text


def _gpu_cell(row: pd.Series, kernels: dict[tuple[str, str], float]) -> str:
    if row["status"] != "ok" or row["median"] is None:
        return ""
    k = kernels.get((row["variant"], row["mode"]))
    return f"{row['median']:.2f}" + (f" ×{k:g}" if k is not None else "")


# torch.utils.benchmark warns above this IQR/median; such a median moves between runs.
NOISY_REL_IQR = 0.10


def _drivers(frame: pd.DataFrame) -> pd.Series:
    return frame["driver"].fillna("python") if "driver" in frame else pd.Series("python", index=frame.index)


def boundary_table(frame: pd.DataFrame, op: str, metric: str = "cpu_us", driver: str = "python") -> pd.DataFrame:
    """One driver's formatted cells, variants in declaration order, modes as columns (the order the
    op's rows first show them in, whatever the metric, so the CPU and GPU tables line up).

    metric "cpu_us": median (Δ vs floor), † when GPU-bound; "gpu_us": median ×kernels per call.
    """
    sub = frame[(frame["op"] == op) & (frame["metric"] == metric) & (_drivers(frame) == driver)]
    if sub.empty:
        return pd.DataFrame()
    if metric == "gpu_us":
        kpc = frame[(frame["op"] == op) & (frame["metric"] == "kernels_per_call")]
        kernels = {(r["variant"], r["mode"]): round(r["median"], 2) for _, r in kpc.iterrows() if r["median"] is not None}
        cell = sub.apply(lambda r: _gpu_cell(r, kernels), axis=1)
    else:
        cell = sub.apply(_cell, axis=1)
    cells = sub.assign(cell=cell).pivot_table(
        index="variant", columns="mode", values="cell", aggfunc="first"
    )
    names = CPP_VARIANT_NAMES if driver == "cpp" else VARIANT_NAMES
    order = [v for v in names if v in cells.index] + [v for v in cells.index if v not in names]
    modes = [m for m in frame.loc[frame["op"] == op, "mode"].drop_duplicates() if m in cells.columns]
    return cells.reindex(index=order, columns=modes).fillna("")


def na_reasons(frame: pd.DataFrame) -> dict[str, str]:
    """Label -> reason for n/a cells (one per variant) and failed cells (one per case)."""
    sub = frame[frame["status"].isin(["n/a", "failed"])]
    out: dict[str, str] = {}
    for _, row in sub.iterrows():
        label = row["variant"] if row["status"] == "n/a" else f"FAILED {row['op']}/{row['variant']}/{row['mode']}"
        out.setdefault(label, row["reason"])
    return out


TITLES = {
    ("python", "cpu_us"): "CPU µs/call, median (Δ vs floor)",
    ("python", "gpu_us"): "GPU µs/call ({timer}), median ×kernels/call",
    ("cpp", "cpu_us"): "called from C++ (Google Benchmark real_time), µs/call, median (Δ vs cpp_direct)",
}


def _title(op: str, env: dict[str, Any], driver: str, metric: str, timer: str = "") -> str:
    where = env.get("gpu_name") or env.get("cpu_model")
    what = TITLES[(driver, metric)].format(timer=timer)
    return f"{op}: {what} — {env.get('device')} · {where} · torch {env.get('torch')}"


def print_tables(frame: pd.DataFrame, env: dict[str, Any], console: Console | None = None, note: str = "") -> None:
    console = console or Console()
    for op in frame["op"].drop_duplicates():
        for driver, metric in TITLES:
            cells = boundary_table(frame, op, metric, driver)
            if cells.empty:
                continue
            timers = frame[(frame["op"] == op) & (frame["metric"] == metric)]["timer"].dropna().unique()
            table = Table(title=_title(op, env, driver, metric, "/".join(timers)), title_justify="left")
            table.add_column("variant")
            for mode in cells.columns:
                table.add_column(mode, justify="right")
            for variant, row in cells.iterrows():
                table.add_row(str(variant), *row.tolist())
            console.print(table)
    if "rel_iqr" in frame.columns and (frame["rel_iqr"].fillna(0) > NOISY_REL_IQR).any():
        console.print(f"[dim]~ noisy: IQR above {NOISY_REL_IQR:.0%} of the median across rounds; expect this median "
                      "to move between runs.[/dim]")
    if "gpu_bound" in frame.columns and frame["gpu_bound"].eq(True).any():
        console.print("[dim]† GPU-bound: GPU time per call ≥ CPU time per call, so the CPU figure is the GPU's pace.[/dim]")
    for label, reason in na_reasons(frame).items():
        console.print(f"  [dim]{label}: {reason}[/dim]")
    if note:
        console.print(f"[dim]{note}[/dim]")


def markdown_table(frame: pd.DataFrame, op: str, metric: str = "cpu_us", driver: str = "python") -> str:
    cells = boundary_table(frame, op, metric, driver)
    header = "| variant | " + " | ".join(cells.columns) + " |"
    rule = "|---|" + "---:|" * len(cells.columns)
    lines = [header, rule] + [f"| {v} | " + " | ".join(row.tolist()) + " |" for v, row in cells.iterrows()]
    return "\n".join(lines)
