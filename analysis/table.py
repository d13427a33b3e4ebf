"""The result tables as data, and the console sink.

A table is one op x driver x metric of a result: a tidy frame with one row per variant x column
(mode, or timer where one case has several), holding the numbers, their CI, the flags (noisy,
GPU-bound, floor) and the n/a reasons. Glyphs and rounding are applied only when a sink renders
it: the console here, markdown and CSV in analysis.report, figures in analysis.figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

import pandas as pd
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from dbench.bench.io.escape import rich
from dbench.bench.io.ab import CONFIDENCE as AB_CONFIDENCE
from dbench.bench.io.cpp_results import CPP_VARIANT_NAMES
from dbench.ops import VARIANT_NAMES

# torch.utils.benchmark warns above this IQR/median; such a median moves between runs.
NOISY_REL_IQR = 0.10
NOISY_GLYPH = "~"
GPU_BOUND_GLYPH = "†"

VALUE_COLUMNS = (
    "median", "ci_low", "ci_high", "delta_median", "delta_ci_low", "delta_ci_high",
    "ratio_median", "ratio_ci_low", "ratio_ci_high", "rel_iqr",
)
TITLES = {
    ("python", "cpu_us"): "CPU µs/call, median (Δ vs floor)",
    ("python", "gpu_us"): "GPU µs/call ({timer}), median ×kernels/call",
    ("cpp", "cpu_us"): "called from C++ (Google Benchmark real_time), µs/call, median (Δ vs cpp_direct)",
    ("cpp", "gpu_us"): "called from C++: GPU µs/call ({timer}, a separate run of the driver), median ×kernels/call",
}


@dataclass(frozen=True)
class TableData:
    """One table of a result. `data` has a row per variant x `axis` value, in display order."""

    op: str
    driver: str
    metric: str
    timer: str
    axis: str  # what the columns are: "mode", or "timer" when a case was timed several ways
    columns: tuple[str, ...]
    data: pd.DataFrame
    point: str = ""  # the shape, dtype and axis values of its cases, when a result has several

    @property
    def variants(self) -> list[str]:
        return list(self.data["variant"].drop_duplicates())

    def heading(self) -> str:
        if self.axis == "timer":
            return f"{self.metric.removesuffix('_us').upper()} µs/call by timer, median"
        return TITLES.get((self.driver, self.metric), f"{self.metric} ({self.driver})").format(timer=self.timer)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _drivers(frame: pd.DataFrame) -> pd.Series:
    return frame["driver"].fillna("python") if "driver" in frame else pd.Series("python", index=frame.index)


def _ordered(names: Iterable[str], declared: Iterable[str]) -> list[str]:
    names, declared = list(dict.fromkeys(names)), list(declared)  # lists: `in` on a Series tests its index
    return [n for n in declared if n in names] + [n for n in names if n not in declared]


def _floor(baseline: Any) -> str | None:
    """The variant named by a row's baseline label (op/variant/mode)."""
    return None if _missing(baseline) else str(baseline).split("/")[1]


def table_data(frame: pd.DataFrame, op: str, metric: str = "cpu_us", driver: str = "python") -> TableData | None:
    """The rows of one table, variants in declaration order, columns in the order the op's rows
    first show them (whatever the metric, so the CPU and GPU tables line up); None when empty."""
    sub = frame[(frame["op"] == op) & (frame["metric"] == metric) & (_drivers(frame) == driver)]
    if sub.empty:
        return None
    axis = "timer" if sub.duplicated(["variant", "mode"]).any() else "mode"
    data = sub.reindex(columns=["variant", "mode", "timer", "status", "reason", "baseline", "gpu_bound",
                                *VALUE_COLUMNS]).reset_index(drop=True)
    data["status"] = data["status"].fillna("ok")
    data["noisy"] = data["rel_iqr"].fillna(0) > NOISY_REL_IQR
    data["gpu_bound"] = data["gpu_bound"].eq(True)
    floors = {v for v in data["baseline"].map(_floor) if v is not None}
    data["floor"] = data["variant"].isin(floors) & data["baseline"].isna()
    kpc = frame[(frame["op"] == op) & (frame["metric"] == "kernels_per_call") & (_drivers(frame) == driver)]
    data = data.merge(kpc[["variant", "mode", "median"]].rename(columns={"median": "kernels_per_call"}),
                      on=["variant", "mode"], how="left") if metric == "gpu_us" else data.assign(kernels_per_call=None)
    variants = _ordered(data["variant"], CPP_VARIANT_NAMES if driver == "cpp" else VARIANT_NAMES)
    modes = frame.loc[frame["op"] == op, "mode"].drop_duplicates()
    columns = _ordered(data[axis], modes if axis == "mode" else [])
    data = data.assign(_v=data["variant"].map(variants.index), _c=data[axis].map(columns.index))
    data = data.sort_values(["_v", "_c"], kind="stable").drop(columns=["_v", "_c"]).reset_index(drop=True)
    timers = sub["timer"].dropna().unique()
    return TableData(op, driver, metric, "/".join(map(str, timers)), axis, tuple(columns), data)


def _point(row: pd.Series) -> str:
    """What tells apart two cases of one op/variant/mode (bench/core/identity.py): axes, shape, dtype."""
    axes = row.get("axes")
    axes = axes if isinstance(axes, (list, tuple)) else []
    named = [f"{a}={row.get(a)}" for a in axes if a != "shape"]  # (a shape axis: the shape part says it)
    shape = row.get("shape")
    shape_text = f"shape {list(shape)}" if isinstance(shape, (list, tuple)) else ""
    return ", ".join(named + [shape_text, str(row.get("dtype") or "")]).strip(", ")


def tables(frame: pd.DataFrame) -> list[TableData]:
    """Every table of a result: per op (first-seen order), the Python CPU, GPU and C++ tables; one set
    per case point (shape, dtype, axis values) when the result has several, so no two cases share a cell."""
    if frame.empty or "op" not in frame:  # a run stopped before its first case has no table
        return []
    points = frame.apply(_point, axis=1)
    found = []
    for op in frame["op"].drop_duplicates():
        op_points = points[frame["op"] == op].drop_duplicates()
        for point in op_points:
            part = frame[(frame["op"] == op) & (points == point)] if len(op_points) > 1 else frame
            for driver, metric in TITLES:
                table = table_data(part, op, metric, driver)
                if table is not None:
                    found.append(dataclasses.replace(table, point=point if len(op_points) > 1 else ""))
    return found


def cell_text(row: pd.Series, metric: str) -> str:
    """A cell as the text tables show: median (Δ) with the glyphs of its flags."""
    if row["status"] == "n/a":
        return "n/a"
    if row["status"] == "failed":
        return "FAILED"
    if _missing(row["median"]):
        return "-"
    text = f"{row['median']:.2f}"
    if metric == "gpu_us":
        k = row.get("kernels_per_call")
        return text + ("" if _missing(k) else f" ×{round(k, 2):g}")
    if not _missing(row.get("delta_median")):
        text += f" ({row['delta_median']:+.2f})"
    if row["gpu_bound"]:
        text += f" {GPU_BOUND_GLYPH}"
    if row["noisy"]:
        text += f" {NOISY_GLYPH}"
    return text


def cell_grid(table: TableData) -> pd.DataFrame:
    """Formatted cells: variants as rows, the table's columns as columns."""
    data = table.data.assign(cell=table.data.apply(lambda r: cell_text(r, table.metric), axis=1))
    grid = data.pivot_table(index="variant", columns=table.axis, values="cell", aggfunc="first")
    return grid.reindex(index=table.variants, columns=list(table.columns)).fillna("")


def na_reasons(frame: pd.DataFrame) -> dict[str, str]:
    """Label -> reason for n/a cells (one per variant) and failed cells (one per case)."""
    sub = frame[frame["status"].isin(["n/a", "failed"])]
    out: dict[str, str] = {}
    for _, row in sub.iterrows():
        label = row["variant"] if row["status"] == "n/a" else f"FAILED {row['op']}/{row['variant']}/{row['mode']}"
        out.setdefault(label, row["reason"])
    if "delta_reason" in frame.columns:  # timed, but its baseline failed: the cell has no Δ
        for _, row in frame[frame["delta_reason"].notna()].iterrows():
            out.setdefault(f"{row['op']}/{row['variant']}/{row['mode']}", row["delta_reason"])
    return out


def legend(frame: pd.DataFrame) -> list[str]:
    """What the glyphs of this result's cells mean (only the glyphs that occur)."""
    lines = []
    cpu = frame[(frame["metric"] == "cpu_us") & (frame["status"].fillna("ok") == "ok")]
    noisy = int((cpu["rel_iqr"].fillna(0) > NOISY_REL_IQR).sum()) if "rel_iqr" in cpu else 0
    if noisy:
        lines.append(f"{NOISY_GLYPH} noisy ({noisy} of {len(cpu)} CPU rows): IQR above {NOISY_REL_IQR:.0%} of the "
                     "median across rounds; expect this median to move between runs.")
    if "gpu_bound" in frame.columns and frame["gpu_bound"].eq(True).any():
        lines.append(f"{GPU_BOUND_GLYPH} GPU-bound: GPU time per call ≥ CPU time per call, so the CPU figure is "
                     "the GPU's pace.")
    return lines


def check_notes(frame: pd.DataFrame) -> list[str]:
    """One line per op whose contract checks skipped a layout (it declared compact inputs only)."""
    if "checked_on" not in frame:
        return []
    checked = frame.dropna(subset=["checked_on"]).drop_duplicates(["op", "checked_on"])
    return [f"{r.op}: contract checks on {r.checked_on}" for r in checked.itertuples()]


def where(env: dict[str, Any]) -> str:
    """device · GPU (or CPU model) · torch: the machine a table was measured on."""
    return f"{env.get('device')} · {env.get('gpu_name') or env.get('cpu_model')} · torch {env.get('torch')}"


def title(table: TableData, env: dict[str, Any]) -> str:
    point = f" [{table.point}]" if table.point else ""
    return f"{table.op}{point}: {table.heading()} — {where(env)}"


def _rich_table(table: TableData) -> Table:
    grid = cell_grid(table)
    out = Table()
    names = [rich(v) for v in grid.index]
    # min_width: a narrow terminal squeezes the number columns, never the variant names.
    out.add_column("variant", no_wrap=True, min_width=max(len(n) for n in names))
    for column in grid.columns:
        out.add_column(rich(column), justify="right", no_wrap=True)
    for name, (_, row) in zip(names, grid.iterrows()):
        out.add_row(name, *map(rich, row.tolist()))
    return out


def print_tables(frame: pd.DataFrame, env: dict[str, Any], console: Console | None = None, note: str = "") -> None:
    """The console sink. Output that is not a terminal (a log, a pipe) gets the full width its
    tables need instead of rich's 80 columns, so no name or cell is cut. Every string shown passes
    bench/io/escape.py `rich`: a result's names and reasons neither drive the terminal nor carry markup."""
    console = console or Console()
    found = tables(frame)
    rendered = [_rich_table(t) for t in found]
    with fitted(console, rendered):
        for table, rich_table in zip(found, rendered):
            # The title on its own line: a rich title would wrap at the table's width.
            console.print(f"[bold]{rich(title(table, env))}[/bold]", soft_wrap=True)
            console.print(rich_table)
        for line in legend(frame) + check_notes(frame):
            console.print(f"[dim]{rich(line)}[/dim]", soft_wrap=True)
        for label, reason in na_reasons(frame).items():
            console.print(f"  [dim]{rich(label)}: {rich(reason)}[/dim]", soft_wrap=True)
        if note:
            console.print(f"[dim]{rich(note)}[/dim]", soft_wrap=True)


@contextlib.contextmanager
def fitted(console: Console, rendered: list[Table]) -> Iterator[None]:
    """Output that is not a terminal (a log, a pipe) gets the full width its tables need instead
    of rich's 80 columns, so no name or cell is cut; a terminal keeps its width."""
    width = console.width
    if not console.is_terminal and rendered:
        wide = console.options.update_width(10_000)
        console.width = max(width, *(Measurement.get(console, wide, t).maximum for t in rendered))
    try:
        yield
    finally:
        console.width = width


# ---------------------------------------------------------------------------------------------
# A/B runs (run.py --ab)


def _ratio_text(row: Mapping[str, Any], prefix: str) -> str:
    value = row.get(f"{prefix}_median")
    if value is None:
        return "—"
    low, high = row.get(f"{prefix}_ci_low"), row.get(f"{prefix}_ci_high")
    return f"{value:.3f}" + (f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else "")


def print_ab_table(doc: Mapping[str, Any], console: Any) -> None:
    """Per row: each side's median of process medians and the paired ratios B/A with their CI."""
    from rich.table import Table

    ab = doc["ab"]
    # Times only (kernels_per_call rows stay in the file); rows with a ratio, or FAILED on a side.
    rows = [r for r in doc["rows"] if r.get("unit") == "us" and (
        r.get("ab_ratio_median") is not None or "failed" in (r.get("status"), r.get("a_status")))]
    if not rows:
        console.print("[yellow]A/B: no row was timed on both sides: no paired ratios[/yellow]")
        return
    table = Table()
    for name, justify in (("row", "left"), ("metric", "left"), ("A median", "right"), ("B median", "right"),
                          ("B/A", "right"), ("B/A of ratio to floor", "right"), ("pairs", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        label = "/".join(str(r.get(k)) for k in ("op", "variant", "mode"))
        if (r.get("driver") or "python") != "python":
            label += f" ({r['driver']})"
        cells = [f"{x:.3f}" if isinstance(x, (int, float)) else "—" for x in (r.get("a_median"), r.get("median"))]
        if r.get("status") == "failed" or r.get("a_status") == "failed":
            cells.append("FAILED")
        else:
            cells.append(_ratio_text(r, "ab_ratio"))
        table.add_row(rich(label), rich(r.get("metric")), *cells, _ratio_text(r, "ab_floor_ratio"),
                      rich(r.get("ab_pairs", 0)))
    with fitted(console, [table]):
        console.print(f"[bold]A/B: B/A per row, geometric mean over {rich(ab['pairs'])} ABBA pairs, "
                      f"{AB_CONFIDENCE:.0%} t-interval[/bold] — A = {rich(ab['a'])}, B = {rich(ab['b'])}",
                      soft_wrap=True)
        console.print(table)
        console.print("[dim]B/A: of the process medians (µs); of ratio to floor: of each process's median ratio to "
                      "its in-run floor, in which the offset of each process cancels.[/dim]", soft_wrap=True)
