"""Figures of result files (matplotlib, rendered headless with Agg).

    python -m dbench.analysis.figures RESULTS... --out DIR
        [--kinds cpu,ratio,launch,compile,crossover,regions,roofline,args,history]

Each function takes the pandas frame of `analysis.load` (any set of runs) and returns a Figure;
`scenario_figures` writes the figures that suit one result (by its scenario) as PNGs, and the CLI
adds the history figures when it is given several runs of a scenario. Figures are built on
`matplotlib.figure.Figure`, never pyplot, so no global backend or figure state is touched.

RESULTS are files or folders (their *.json); of several, files that are not result documents (a
calibration beside the runs) are skipped with a note on stderr, as are results without rows and
figures their data cannot make. Every PNG is written atomically. Exit status: 0; 2 bad input (no
result document left, a damaged one, an empty or unknown --kinds, an --out folder that cannot be
written, matplotlib missing), one line on stderr.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

# Light imports only: numpy, pandas, matplotlib and the table modules are imported in the functions
# that draw, so the command checks its options, output folder and files before loading them.
from dbench.analysis.load import read_results, rows_frame
from dbench.bench.io.document import result_stem
from dbench.analysis.outputs import OutputPathError, check_output_dir, output_path
from dbench.bench.harness.cli import Parser, name_list, path_value  # usage errors in one line, like run.py's
from dbench.ops.specs import MODES  # the boundary scenario's modes, which the history figures follow

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

BAR = "#4C72B0"
FLOOR = "#3A3A3A"
SERIES_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")
DPI = 120
ROW_INCH = 0.3  # height per bar row: room for a 9 pt variant name
LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.85}  # labels stay legible over lines


# ---------------------------------------------------------------- shared pieces

def _env(frame: pd.DataFrame) -> dict[str, Any]:
    """The environment of a frame's (first) run, from the env_* columns analysis.load adds."""
    first = frame.iloc[0]
    env = {c[4:]: first[c] for c in frame.columns if c.startswith("env_")}
    return {**env, "device": first.get("device")}


def _caption(frame: pd.DataFrame) -> str:
    """GPU (or CPU) · torch · date · source: under every title, so a PNG says where it came from."""
    import pandas as pd

    env = _env(frame)
    # A time that does not parse is left out of the caption, never a reason not to draw.
    stamps = frame["env_time"].dropna().unique() if "env_time" in frame else []
    times = pd.to_datetime(pd.Series(stamps, dtype=object), errors="coerce", utc=True).dropna()
    when = "time unknown" if not len(times) else f"{times.min():%Y-%m-%d %H:%M}" + (
        f"–{times.max():%H:%M} UTC" if times.max() != times.min() else " UTC")
    sources = frame["source"].dropna().unique() if "source" in frame else []
    source = result_stem(sources[0]) if len(sources) == 1 else f"{len(sources)} runs" if len(sources) else ""
    parts = [env.get("gpu_name") or env.get("cpu_model") or str(env.get("device")),
             f"torch {env['torch']}" if env.get("torch") else "", when, source]
    return " · ".join(p for p in parts if p)


def _titled(fig: Figure, title: str, frame: pd.DataFrame) -> None:
    fig.suptitle(f"{title}\n{_caption(frame)}", fontsize=12, x=0.01, ha="left")


def _ok(data: pd.DataFrame) -> pd.DataFrame:
    return data[(data["status"] == "ok") & data["median"].notna()]


# Panels per row of a figure with one panel per mode: the boundary's three modes that record no
# graph on the first row, the two that do on the second.
MODE_COLUMNS = 3


def _panels(count: int, rows: float, width: float = 5.4, cols: int | None = None) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    cols = min(cols or count, count)
    nrows = -(-count // cols)
    fig = Figure(figsize=(width * cols, max(2.6, rows * ROW_INCH + 1.6) * nrows), dpi=DPI, layout="constrained")
    axes = list(fig.subplots(nrows, cols, squeeze=False).ravel())
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, axes[:count]


def _na_note(data: pd.DataFrame) -> str:
    na = int((data["status"] == "n/a").sum())
    return f"  ({na} variants n/a)" if na else ""


def _ci_errors(rows: pd.DataFrame, value: str = "median", lo: str = "ci_low", hi: str = "ci_high"
               ) -> tuple[np.ndarray, np.ndarray]:
    """Whisker lengths below and above each value; a row without a CI gets none."""
    values = rows[value].to_numpy(float)
    return ((values - rows[lo].fillna(rows[value]).to_numpy(float)).clip(min=0),
            (rows[hi].fillna(rows[value]).to_numpy(float) - values).clip(min=0))


def _number(v: float) -> str:
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


# ---------------------------------------------------------------- cost per call: the boundary chart

def _cost_panel(ax: Axes, rows: pd.DataFrame, value: str, lo: str, hi: str, floor_value: float, floor_label: str,
                unit: str, mark_noisy: bool) -> None:
    """One bar per variant, cheapest at the top, 95 % CI whiskers, the floor drawn as a dashed line."""
    from dbench.analysis.table import NOISY_GLYPH

    rows = rows.sort_values(value, ascending=False)
    values = rows[value].to_numpy(float)
    err_lo, err_hi = _ci_errors(rows, value, lo, hi)
    colors = [FLOOR if f else BAR for f in rows["floor"]]
    ax.barh(rows["variant"], values, xerr=[err_lo, err_hi], color=colors, height=0.7,
            error_kw={"ecolor": "black", "capsize": 2.5, "elinewidth": 1})
    right = float((values + err_hi).max())
    for y, (v, top, noisy) in enumerate(zip(values, values + err_hi, rows["noisy"] & mark_noisy)):
        ax.text(top + right * 0.015, y, f"{_number(v)}{' ' + NOISY_GLYPH if noisy else ''}", va="center", fontsize=8,
                bbox=LABEL_BOX)
    ax.axvline(floor_value, color=FLOOR, linestyle="--", linewidth=1.2)
    ax.text(floor_value, len(rows) - 0.35, f" floor: {floor_label}", color=FLOOR, fontsize=8, va="bottom")
    ax.set_xlim(0, right * 1.2)
    ax.set_ylim(-0.6, len(rows) + 0.3)
    ax.set_xlabel(unit)
    ax.tick_params(axis="y", labelsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def _bars(data: pd.DataFrame, ratio: bool) -> pd.DataFrame:
    """One mode's bars: its timed rows; as ratios, those with a ratio to the floor (the floor's own is
    1 by definition, no CI), none when the floor was not timed."""
    rows = _ok(data).copy()
    if ratio:
        rows.loc[rows["floor"], ["ratio_median", "ratio_ci_low", "ratio_ci_high"]] = 1.0
        rows = rows[rows["ratio_median"].notna()]
    return rows


def _cost_chart(frame: pd.DataFrame, op: str, ratio: bool) -> Figure:
    from dbench.analysis.table import NOISY_GLYPH, table_data

    table = table_data(frame, op, "cpu_us", "python")
    if table is None:
        raise ValueError(f"no CPU rows for op {op!r}")
    bars = {m: _bars(table.data[table.data["mode"] == m], ratio) for m in table.columns}
    modes = [m for m in table.columns if not bars[m].empty]
    if not modes:  # e.g. --variants raw: no variant timed beside its floor
        raise ValueError(f"no ratio to the floor for op {op!r}: it needs a variant and its floor timed in one run"
                         if ratio else f"no timed CPU row for op {op!r}")
    fig, axes = _panels(len(modes), max(len(bars[m]) for m in modes), cols=MODE_COLUMNS)
    for ax, mode in zip(axes, modes):
        data = table.data[table.data["mode"] == mode]
        rows = bars[mode]
        floor = rows[rows["floor"]]
        floor_name = floor["variant"].iloc[0] if len(floor) else "none"
        if ratio:
            _cost_panel(ax, rows, "ratio_median", "ratio_ci_low", "ratio_ci_high", 1.0, f"{floor_name} = 1",
                        "ratio to the floor (paired per round)", mark_noisy=False)
        else:
            floor_us = float(floor["median"].iloc[0]) if len(floor) else 0.0
            _cost_panel(ax, rows, "median", "ci_low", "ci_high", floor_us, f"{floor_name} {_number(floor_us)} µs",
                        "CPU µs per call", mark_noisy=True)
        ax.set_title(f"{mode}{_na_note(data)}", fontsize=10, loc="left")
    what = ("CPU time per call / the floor's, median and 95 % CI of the per-round ratios" if ratio else
            f"CPU µs per call, median and 95 % CI ({NOISY_GLYPH} = noisy row)")
    _titled(fig, f"{op}: {what}, cheapest first", frame)
    return fig


def boundary_chart(frame: pd.DataFrame, op: str) -> Figure:
    """Per mode, one bar per variant: CPU µs per call with its 95 % CI, sorted, the floor marked."""
    return _cost_chart(frame, op, ratio=False)


def ratio_chart(frame: pd.DataFrame, op: str) -> Figure:
    """The boundary chart as ratios to the floor (per-round paired ratios: machine drift cancels)."""
    return _cost_chart(frame, op, ratio=True)


# ---------------------------------------------------------------- grouped bars: launch-bound, compile

def _grouped_panel(ax: Axes, variants: Sequence[str], series: dict[str, pd.DataFrame], unit: str) -> None:
    """Per variant (first at the top), one bar per series with its CI, on a log axis; a missing
    value is written n/a where its bar would be."""
    import pandas as pd
    from matplotlib.ticker import FuncFormatter

    height = 0.8 / len(series)
    ys = {v: len(variants) - 1 - i for i, v in enumerate(variants)}
    top = 0.0
    for k, (name, rows) in enumerate(series.items()):
        rows = rows.set_index("variant").reindex(variants)
        offset = (len(series) - 1) / 2 * height - k * height
        y = [ys[v] + offset for v in variants]
        med = rows["median"].to_numpy(float)
        err = _ci_errors(rows)
        ax.barh(y, med, height=height * 0.92, xerr=err, color=SERIES_COLORS[k % len(SERIES_COLORS)], label=name,
                error_kw={"ecolor": "black", "capsize": 1.5, "elinewidth": 0.8})
        for yy, v, end in zip(y, med, med + err[1]):
            missing = math.isnan(v)
            ax.text(0.55 if missing else end * 1.06, yy, "n/a" if missing else _number(v), va="center", fontsize=7)
        top = max(top, float(pd.Series(med + err[1]).max()))
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlim(0.5, top * 2.0)
    ax.set_yticks(list(ys.values()), list(ys))
    ax.set_ylim(-0.6, len(variants) - 0.4)
    ax.set_xlabel(f"{unit} (log scale)")
    ax.tick_params(axis="y", labelsize=9)
    ax.grid(axis="x", which="both", alpha=0.25)
    ax.set_axisbelow(True)


def _legend_below(fig: Figure, ax: Axes) -> None:
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=4, frameon=False, fontsize=9)


def _by_cost(rows: pd.DataFrame) -> list[str]:
    return list(rows.sort_values("median")["variant"])


def launch_chart(frame: pd.DataFrame, op: str) -> Figure:
    """Per mode, CPU wall-clock and GPU kernel time per call for every variant: where the CPU bar
    is the longer one, the boundary sets the pace and the GPU waits (launch-bound)."""
    from dbench.analysis.table import table_data

    cpu, gpu = table_data(frame, op, "cpu_us"), table_data(frame, op, "gpu_us")
    if cpu is None or gpu is None:
        raise ValueError(f"op {op!r} needs CPU and GPU rows for the launch chart")
    modes = [m for m in cpu.columns if not _ok(gpu.data[gpu.data["mode"] == m]).empty]
    fig, axes = _panels(len(modes), max(len(_ok(cpu.data[cpu.data["mode"] == m])) for m in modes) * 1.3,
                        cols=MODE_COLUMNS)
    for ax, mode in zip(axes, modes):
        rows = {name: _ok(t.data[t.data["mode"] == mode]) for name, t in
                (("CPU wall-clock per call", cpu), (f"GPU kernel time per call ({gpu.timer})", gpu))}
        cpu_rows, gpu_rows = rows.values()
        _grouped_panel(ax, _by_cost(cpu_rows), rows, "µs per call")
        ratio = cpu_rows["median"].median() / gpu_rows["median"].median()
        ax.set_title(f"{mode}  (CPU/GPU, median over variants: {ratio:.0f}×)", fontsize=10, loc="left")
    _legend_below(fig, axes[0])
    _titled(fig, f"{op}: CPU vs GPU time per call, median and 95 % CI, cheapest first", frame)
    return fig


def compile_chart(frame: pd.DataFrame, op: str) -> Figure:
    """CPU µs per call of every variant eager, compiled and replayed from a CUDA graph (one bar each)."""
    from dbench.analysis.table import table_data

    table = table_data(frame, op, "cpu_us")
    if table is None:
        raise ValueError(f"no CPU rows for op {op!r}")
    series = {mode: table.data[(table.data["mode"] == mode) & (table.data["status"] == "ok")] for mode in table.columns}
    first = next(iter(series.values()))
    fig, (ax,) = _panels(1, len(table.variants) * 1.5, width=10)
    _grouped_panel(ax, _by_cost(first), series, "CPU µs per call")
    _legend_below(fig, ax)
    _titled(fig, f"{op}: CPU µs per call by how it is called, median and 95 % CI", frame)
    return fig


# ---------------------------------------------------------------- history

def history_chart(frame: pd.DataFrame, op: str, mode: str = "inference", value: str = "median",
                  metric: str = "cpu_us", driver: str = "python", cols: int = 5) -> Figure:
    """One panel per variant: its `value` (median or ratio_median) in every run of the frame, by run
    time, with the 95 % CI as error bars."""
    import pandas as pd

    from dbench.analysis.table import table_data

    lo, hi = ("ratio_ci_low", "ratio_ci_high") if value == "ratio_median" else ("ci_low", "ci_high")
    runs = []
    for source, run in frame.groupby("source", sort=False):
        table = table_data(run, op, metric, driver)
        if table is not None:
            rows = _ok(table.data[table.data["mode"] == mode])
            runs.append(rows.assign(time=pd.Timestamp(run["env_time"].iloc[0]), source=source))
    rows = pd.concat(runs).sort_values("time", kind="stable") if runs else pd.DataFrame(columns=[value])
    rows = rows[rows[value].notna()]
    if rows.empty:
        raise ValueError(f"no {value} of {metric} rows for {op}/{mode}")
    frame = frame[frame["source"].isin(rows["source"])]  # the caption names the runs drawn
    variants = list(dict.fromkeys(rows["variant"]))
    fig, axes = _panels(len(variants), 0, width=3.4, cols=min(cols, len(variants)))
    for ax, variant in zip(axes, variants):
        r = rows[rows["variant"] == variant]
        err = _ci_errors(r, value, lo, hi)
        ax.errorbar(r["time"], r[value], yerr=err, marker="o", markersize=4, capsize=3, color=BAR, linewidth=1)
        ax.set_title(variant, fontsize=10, loc="left")
        ax.set_ylim(0, float((r[value] + err[1]).max()) * 1.15)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_formatter(_hour_minute())
    unit = "ratio to the floor" if value == "ratio_median" else "µs per call"
    for ax in axes[-min(cols, len(variants)):]:
        ax.set_xlabel(f"run start (UTC), {rows['time'].min():%Y-%m-%d}", fontsize=9)
    for ax in axes[::cols]:
        ax.set_ylabel(unit, fontsize=9)
    what = ("CPU time per call ÷ the floor's" if value == "ratio_median"
            else f"{metric.replace('_us', '').upper()} µs per call")
    _titled(fig, f"{op}/{mode}: {what} in {rows['source'].nunique()} runs, median and 95 % CI", frame)
    return fig


LAUNCH_HIGHLIGHT = ("raw", "cpp", "custom_op", "function_raw", "triton_op", "aten")
OP_MARKERS = {"noop": "o", "muladd": "s", "l2norm": "^", "mm": "D", "chain": "v"}


def _roofline_points(frame: pd.DataFrame) -> pd.DataFrame:
    """The timed roofline rows with their derived rates; points above their roof are left out
    (a counting or timing error is never drawn as a result)."""
    from dbench.analysis.kernels import roofline_frame

    points = roofline_frame(frame)
    return points[(points["status"] == "ok") & points["gbps"].notna()]


def _roofline_panel(ax: Axes, points: pd.DataFrame, roofs: dict[str, Any]) -> None:
    """The roofline (log-log): achieved TFLOP/s against arithmetic intensity, one marker per op x
    size, under the measured roofs min(P, B x I)."""
    import numpy as np

    memory = roofs["memory"]["value"]
    intensity = np.logspace(-2.5, 4, 200)
    for i, (name, roof) in enumerate(sorted(roofs.get("compute", {}).items())):
        line = np.minimum(roof["value"], memory * intensity / 1e3)
        ax.plot(intensity, line, color=SERIES_COLORS[i % len(SERIES_COLORS)], lw=1.6,
                label=f"roof {name}: {roof['value']:.0f} TFLOP/s, {memory:.0f} GB/s")
    for (op_name, mode), g in points.groupby(["op", "mode"], sort=False):
        sizes = g["size"].astype(float)
        area = 14 + 90 * (np.log(sizes) - np.log(sizes.min())) / max(1e-9, np.log(sizes.max()) - np.log(sizes.min()))
        ax.scatter(g["intensity"], g["tflops"], s=area, marker=OP_MARKERS.get(op_name, "o"), alpha=0.8,
                   edgecolors="black", linewidths=0.4, label=f"{op_name} {mode} ({g['dtype'].iloc[0]})")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte moved)", ylabel="achieved TFLOP/s")
    ax.set_title("ours (raw), warm cache, working sets beyond the L2; marker ~ size", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def _bandwidth_panel(ax: Axes, points: pd.DataFrame, roofs: dict[str, Any]) -> None:
    """Achieved GB/s by size for every memory-bound op and variant, under the memory roof."""
    from dbench.analysis.kernels import size_text

    memory = roofs["memory"]["value"]
    styles = {"raw": "-", "aten": "--", "compiled": ":"}
    for i, ((op_name, mode), g) in enumerate(points.groupby(["op", "mode"], sort=False)):
        for variant, line in g.groupby("variant", sort=False):
            line = line.sort_values("size")
            ax.plot(line["size"], line["gbps"], styles.get(variant, "-"), marker=OP_MARKERS.get(op_name, "o"),
                    ms=4, color=SERIES_COLORS[i % len(SERIES_COLORS)], label=f"{op_name} {mode} {variant}")
    ax.axhline(memory, color=FLOOR, ls="--", lw=1)
    ax.text(points["size"].min(), memory * 1.02, f"memory roof {memory:.0f} GB/s ({roofs['memory']['method']})",
            fontsize=8, va="bottom")
    ax.set(xscale="log", yscale="log", xlabel="bytes per tensor", ylabel="achieved GB/s (read + written)")
    ax.set_title(f"by size, {points['cache'].iloc[0]} cache: ours solid, aten dashed, compiled dotted", fontsize=10)
    ticks = sorted(points["size"].astype(float).unique())
    ax.set_xticks(ticks, [size_text(t, "B") for t in ticks], fontsize=8)
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncols=2, loc="lower right")


def roofline_chart(frame: pd.DataFrame) -> Figure:
    """The roofline of the suite's kernels (warm cache, working sets beyond the cache) and, beside
    it, achieved GB/s by size for the memory-bound ops. A panel with nothing to show is left out
    (a run of `--ops mm` has no memory-bound op; one of `--ops noop` has no FLOPs). Points above
    their roof are not drawn."""
    from matplotlib.figure import Figure

    roofs = frame.attrs.get("roofs") or {}
    points = _roofline_points(frame)
    if points.empty or not roofs:
        raise ValueError("no roofline rows with derived rates (and roofs) in this frame")
    # Cache-resident points are not bounded by the memory roof: the roofline shows the others.
    ours = points[(points["variant"] == "raw") & (points["cache"] == "warm") & (points["flops"] > 0)
                  & (points["bound"] != "cache")]
    # The bandwidth panel: the ops bound by memory at their largest size (not a matrix product, which
    # only its small sizes leave below the ridge). Cold cache (L2 flushed before each call): every
    # byte comes from memory, so the roof applies at every size.
    streaming = points[points["op"].isin(_memory_bound_ops(points))]
    memory_ops = streaming[streaming["cache"] == "cold"]
    if memory_ops.empty:  # a CPU run, or one without cold-cache cases
        memory_ops = streaming[streaming["bound"] != "cache"]
    panels = [(draw, data) for draw, data in ((_roofline_panel, ours), (_bandwidth_panel, memory_ops))
              if not data.empty]
    if not panels:
        raise ValueError("no roofline point beyond the cache to draw in this frame")
    fig = Figure(figsize=(7 * len(panels), 5.6), dpi=DPI, layout="constrained")
    for ax, (draw, data) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        draw(ax, data, roofs)
    _titled(fig, "roofline: achieved rate against the roofs measured in the same run", frame)
    return fig


def crossover_chart(frame: pd.DataFrame, op: str) -> Figure:
    """CPU µs per call of a few variants and the GPU µs per call of the op's kernel against size
    (log-log): left of where a CPU curve meets the GPU curve the variant is launch-bound; the
    crossover of each (analysis.kernels.crossovers) is marked."""
    import pandas as pd
    from matplotlib.figure import Figure

    from dbench.analysis.kernels import crossovers

    rows = _ok(frame[(frame["scenario"] == "launch") & (frame["op"] == op)])
    if rows.empty:
        raise ValueError(f"no launch rows for op {op!r}")
    fig = Figure(figsize=(9, 5.6), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    cross = crossovers(frame[frame["op"] == op]).set_index("variant")
    gpu = rows[(rows["metric"] == "gpu_us") & (rows["variant"] == "raw")].sort_values("size")
    if not gpu.empty:
        ax.plot(gpu["size"], gpu["median"], color="black", lw=2.4, label="GPU µs per call (raw's kernel, CUPTI)")
    shown = [v for v in LAUNCH_HIGHLIGHT if v in set(rows["variant"])]
    for i, variant in enumerate(shown):
        line = rows[(rows["metric"] == "cpu_us") & (rows["variant"] == variant)].sort_values("size")
        color = SERIES_COLORS[i % len(SERIES_COLORS)] if i < len(SERIES_COLORS) else f"C{i + 4}"
        ax.plot(line["size"], line["median"], marker="o", ms=3, color=color, label=f"CPU µs per call: {variant}")
        at = cross["crossover_elements"].get(variant) if variant in cross.index else None
        if at is not None and not pd.isna(at):
            y = line.set_index("size")["median"].get(at)
            ax.plot([at], [y], marker="v", ms=10, color=color, markeredgecolor="black")
    ax.set(xscale="log", yscale="log", xlabel="elements per tensor (float32)", ylabel="µs per call")
    ax.set_title("launch-bound while a CPU curve lies above the GPU curve; ▼ = crossover", fontsize=10)
    if len(cross):
        ax.text(0.99, 0.02, f"crossover: {cross['criterion'].iloc[0]} from there on", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, bbox=LABEL_BOX)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    _titled(fig, f"launch: CPU and GPU time per call of {op} by size", frame)
    return fig


def offsets_chart(frame: pd.DataFrame) -> Figure:
    """int64 / int32 time per call against size, one line per kernel (op and mode), a panel per
    dtype, with the ±5 % band the offsets question is asked against."""
    from dbench.analysis.kernels import offsets_frame, size_text, timed_metric

    data = offsets_frame(frame)
    data = data[data["status"] == "ok"]
    if data.empty:
        raise ValueError("no timed offsets rows in this frame")
    dtypes = list(dict.fromkeys(data["dtype"]))
    fig, axes = _panels(len(dtypes), 10, width=6.4)
    for ax, dtype in zip(axes, dtypes):
        g = data[data["dtype"] == dtype]
        for i, ((op, mode), line) in enumerate(g.groupby(["op", "mode"], sort=False)):
            line = line.sort_values("size")
            ax.plot(line["size"], line["ratio"], marker=OP_MARKERS.get(op, "o"), ms=5, lw=1.4,
                    color=f"C{i}", label=f"{op} {mode}")
        ax.axhspan(0.95, 1.05, color=FLOOR, alpha=0.08, lw=0)
        ax.axhline(1.0, color=FLOOR, lw=1, ls="--")
        ticks = sorted(g["size"].astype(float).unique())
        ax.set(xscale="log", xlabel="bytes per tensor",
               ylabel=f"int64 / int32 ({'GPU' if timed_metric(frame) == 'gpu_us' else 'CPU'} time per call)")
        ax.set_xticks(ticks, [size_text(t, "B") for t in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_title(f"{dtype}; shaded: ±5 %", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(6, len(labels)), frameon=False, fontsize=9)
    _titled(fig, "offsets: what forcing 64-bit offset arithmetic costs each kernel", frame)
    return fig


FUSION_STYLES = {"unfused": "-", "fused": "-", "aten": "--", "compiled": "-.", "triton": (0, (1, 1))}
FUSION_COLORS = {"unfused": SERIES_COLORS[0], "fused": SERIES_COLORS[1], "aten": SERIES_COLORS[2],
                 "compiled": SERIES_COLORS[3], "triton": "#8172B3"}


def fusion_chart(frame: pd.DataFrame) -> Figure:
    """Time per call against the chain length k, one line per implementation, at the largest size
    (traffic-bound: the unfused/fused gap should grow like k, drawn as the model k x fused at k = 1)
    and at the smallest (launch-bound: GPU time per call, and the CPU time per call in a second
    panel row, where k launches cost k times one)."""
    from matplotlib.lines import Line2D

    from dbench.analysis.kernels import fusion_frame, size_text, timed_metric

    data = fusion_frame(frame, frame.attrs.get("roofs"))
    data = data[data["status"] == "ok"]
    if data.empty:
        raise ValueError("no timed fusion rows in this frame")
    on_gpu = timed_metric(frame) == "gpu_us"
    sizes = sorted(data["size"].unique())
    shown = [sizes[-1], sizes[0]] if len(sizes) > 1 else sizes
    fig, axes = _panels(len(shown), 10, width=6.4)
    for ax, size in zip(axes, shown):
        g = data[data["size"] == size]
        for variant, line in g.groupby("variant", sort=False):
            line = line.sort_values("k")
            color = FUSION_COLORS.get(variant, FLOOR)
            ax.plot(line["k"], line["median"], linestyle=FUSION_STYLES.get(variant, "-"), marker="o", ms=4,
                    color=color, label=variant)
            if on_gpu and size == sizes[0] and line["cpu_us"].notna().any():
                ax.plot(line["k"], line["cpu_us"], ":", marker="x", ms=4, color=color, alpha=0.8)
        fused = g[g["variant"] == "fused"].sort_values("k")
        if size == sizes[-1] and len(fused):
            base = fused["median"].iloc[0]
            ax.plot(fused["k"], base * fused["k"], color=FLOOR, ls="--", lw=1, label="model: k × fused at k = 1")
        unit = "GPU" if on_gpu else "CPU"
        ax.set(xlabel="chain length k (steps)", ylabel=f"{unit} µs per call", yscale="log")
        ax.set_xticks(sorted(g["k"].unique()))
        regime = "traffic-bound" if size == sizes[-1] else "launch-bound"
        extra = ("; x dotted: CPU µs per call" if on_gpu and size == sizes[0] else "")
        ax.set_title(f"{size_text(float(size), 'B')} input, {regime}{extra}", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if on_gpu and len(axes) > 1:
        handles.append(Line2D([], [], color=FLOOR, ls=":", marker="x"))
        labels.append("CPU µs per call (right panel)")
    fig.legend(handles, labels, loc="outside lower center", ncols=min(7, len(labels)), frameon=False, fontsize=9)
    _titled(fig, "fusion: a chain of k elementwise steps, fused or not", frame)
    return fig


# Past matplotlib's ten colours: six more that none of them resembles (the boundary has 16 variants).
EXTRA_COLORS = ("#000000", "#000080", "#b8860b", "#32cd32", "#ff00ff", "#008080")


def variant_styles(variants: list[str]) -> dict[str, tuple[str, str]]:
    """A colour and a marker per variant: the marker changes where the colours run out again."""
    palette = [f"C{i}" for i in range(10)] + list(EXTRA_COLORS)
    return {v: (palette[i % len(palette)], "os^D"[i // len(palette) % 4]) for i, v in enumerate(variants)}


def _memory_bound_ops(points: pd.DataFrame) -> set[str]:
    """The ops whose rows at their largest size are bound by memory bandwidth (bytes over the roof)."""
    largest = points[points["size"] == points.groupby("op")["size"].transform("max")]
    return set(largest.loc[largest["bound"] == "memory", "op"])


def args_chart(frame: pd.DataFrame) -> Figure:
    """CPU µs per call against the number of arguments (log2 axis), one line per variant (dashed:
    fwd_requires_grad; squares: called from C++), one panel per argument kind: the slope of a line is
    what one more argument of that kind costs the variant."""
    from matplotlib.lines import Line2D

    from dbench.analysis.arity import args_rows

    rows = _ok(args_rows(frame))
    if rows.empty:
        raise ValueError("no timed args rows in this frame")
    kinds, variants = list(dict.fromkeys(rows["arg_kind"])), list(dict.fromkeys(rows["variant"]))
    styles = variant_styles(variants)
    # The calls from C++ (the driver's rows) as squares, beside the circles of the calls from Python.
    styles.update({v: (styles[v][0], "s") for v in set(rows.loc[rows["driver"] == "cpp", "variant"])})
    fig, axes = _panels(len(kinds), 10, width=4.2, cols=4)
    for ax, kind in zip(axes, kinds):
        g = rows[rows["arg_kind"] == kind]
        for (variant, mode), line in g.groupby(["variant", "mode"], sort=False):
            line = line.sort_values("arity")
            color, marker = styles[variant]
            ax.plot(line["arity"], line["median"], marker=marker, ms=3, lw=1.3, color=color,
                    ls="-" if mode == "inference" else "--")
        ticks = sorted(g["arity"].astype(int).unique())
        ax.set_xscale("log", base=2)
        ax.set(yscale="log", xlabel="tensors (list: x0 + the list's)" if kind == "list" else "arguments",
               ylabel="CPU µs per call")
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_title(kind, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=styles[v][0], marker=styles[v][1], ms=3) for v in variants]
    handles += [Line2D([], [], color=FLOOR, ls=ls) for ls in ("-", "--")]
    fig.legend(handles, [*variants, "inference", "fwd_requires_grad"], loc="outside lower center",
               ncols=min(2 * min(4, len(kinds)), len(handles)), frameon=False, fontsize=9)  # as wide as the panels
    _titled(fig, "args: CPU time per call by the number and kind of arguments", frame)
    return fig


def regions_chart(frame: pd.DataFrame, op: str) -> Figure:
    """CPU µs per op against the chain length N (log2), one line per variant (cheapest eager first), one
    panel per mode with timed rows, on one y scale; a variant whose compiled chain breaks the graph is
    dashed, and its break-even N (from which compiling or capturing beats eager:
    analysis.kernels.break_even) is marked ▼."""
    from dbench.analysis.kernels import break_even, regions_frame

    data = regions_frame(frame[frame["op"] == op])
    data = data[data["status"] == "ok"]
    if data.empty:
        raise ValueError(f"no timed regions rows for op {op!r}")
    modes = list(dict.fromkeys(data["mode"]))
    variants = list(data[data["mode"] == modes[0]].groupby("variant", sort=False)["per_op"].max().sort_values().index)
    variants += [v for v in dict.fromkeys(data["variant"]) if v not in variants]
    styles = variant_styles(variants)
    found = break_even(frame[frame["op"] == op])
    fig, axes = _panels(len(modes), 14, width=5.6)
    for ax, mode in zip(axes, modes):
        _regions_panel(ax, data[data["mode"] == mode], found[found["mode"] == mode] if len(found) else found, styles)
        na = len(set(frame[(frame["op"] == op) & (frame["mode"] == mode) & (frame["status"] != "ok")]["variant"]))
        ax.set_title(mode + (f"  ({na} variant{'s' if na > 1 else ''} n/a or failed)" if na else ""), fontsize=10,
                     loc="left")
        ax.set_ylim(data["per_op"].min() / 1.6, data["per_op"].max() * 1.4)  # one scale: panels compare; room for ▼
    handles = {label: h for ax in axes for h, label in zip(*ax.get_legend_handles_labels())}
    shown = [v for v in variants if v in handles]  # cheapest eager first, as the colours go
    fig.legend([handles[v] for v in shown], shown, loc="outside lower center", ncols=min(6, len(shown)),
               frameon=False, fontsize=8)
    skipped = [m for m in dict.fromkeys(frame.loc[frame["op"] == op, "mode"]) if m not in modes]
    _titled(fig, f"{op}: CPU µs per op inside a chain of N calls; dashed: the compiled chain breaks the graph; "
            f"▼ break-even N" + (f"; {', '.join(skipped)}: n/a here" if skipped else ""), frame)
    return fig


def _regions_panel(ax: Axes, rows: pd.DataFrame, found: pd.DataFrame, styles: dict[str, tuple[str, str]]) -> None:
    import pandas as pd
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    broken = set(rows.loc[rows["graph_breaks"].fillna(0) > 0, "variant"])
    marks = found.set_index("variant")["break_even_n"] if "break_even_n" in found else pd.Series(dtype=float)
    for variant, line in rows.groupby("variant", sort=False):
        line = line.sort_values("length")
        color, marker = styles[variant]
        ax.plot(line["length"], line["per_op"], marker=marker, ms=4, lw=1.4, color=color,
                ls="--" if variant in broken else "-", label=variant)
        at = marks.get(variant)
        if at is not None and not pd.isna(at):
            ax.plot([at], [line.set_index("length")["per_op"].get(at)], marker="v", ms=10, color=color,
                    markeredgecolor="black", ls="none")
    ticks = sorted(rows["length"].unique())
    ax.set(xscale="log", yscale="log", xlabel="chain length N (calls)", ylabel="CPU µs per op (log)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [f"{t:.0f}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    ax.grid(True, which="major", alpha=0.3)


def _hour_minute() -> Any:
    from matplotlib.dates import DateFormatter

    return DateFormatter("%H:%M")


# ---------------------------------------------------------------- files

def result_frame(result: dict[str, Any] | pd.DataFrame, source: str = "") -> pd.DataFrame:
    """A result document as the rows frame the figures take (with its roofs), or a frame as it is."""
    if not isinstance(result, dict):
        return result
    frame = rows_frame(result, source)
    frame.attrs["roofs"] = result.get("roofs")  # the roofline draws the roofs measured in its run
    return frame


def save(fig: Figure, path: Path) -> Path:
    """Write a figure as a PNG, atomically; OutputPathError (one line) when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}") from None
    with output_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png")  # the format given: the temporary name ends in .tmp
    return path


Note = Callable[[str], None]


def _drawn(make: Callable[[], Figure], path: Path, on_skip: Note | None) -> list[Path]:
    """[path] once the figure is written there. A figure the data cannot make (ValueError: nothing
    to draw) is raised, or, given `on_skip`, reported there and left out."""
    try:
        fig = make()
    except ValueError as exc:
        if on_skip is None:
            raise
        on_skip(f"{path.name}: not drawn: {exc}")
        return []
    return [save(fig, path)]


def _ops_with(frame: pd.DataFrame, metric: str) -> list[str]:
    return list(frame.loc[(frame["metric"] == metric) & (frame["status"] == "ok"), "op"].drop_duplicates())


# The figure kinds a scenario's declaration can name (`figures`). One per op: kind -> (the figure
# function, the metric its op must have) ...
OP_FIGURES: dict[str, tuple[Callable[[pd.DataFrame, str], Figure], str]] = {
    "cpu": (boundary_chart, "cpu_us"), "ratio": (ratio_chart, "cpu_us"), "launch": (launch_chart, "gpu_us"),
    "compile": (compile_chart, "cpu_us"), "crossover": (crossover_chart, "gpu_us"),
    "regions": (regions_chart, "cpu_us"),
}
# ... and one of a whole result (all ops in one, against the run's roofs): kind -> function.
WHOLE_FIGURES: dict[str, Callable[[pd.DataFrame], Figure]] = {
    "roofline": roofline_chart, "fusion": fusion_chart, "offsets": offsets_chart, "args": args_chart,
}
# The whole-result figures drawn against the roofs their run measured (none without them).
ROOF_FIGURES = ("roofline", "fusion", "offsets")
KINDS = (*OP_FIGURES, *WHOLE_FIGURES, "history")


def scenario_figures(result: dict[str, Any] | pd.DataFrame, out_dir: Path, stem: str,
                     kinds: Sequence[str] = KINDS, on_skip: Note | None = None) -> list[Path]:
    """Write the figures suited to one result (a result document or its rows' frame) as
    `out_dir/<stem>-<op>-<kind>.png`; a scenario without figures, or a result without rows, writes
    none. A figure its data cannot make raises ValueError, or, given `on_skip`, is reported there."""
    frame = result_frame(result)
    if frame.empty:
        return []
    from dbench.scenarios import DECLARATIONS

    written = []
    scenario = str(result["scenario"] if isinstance(result, dict) else frame["scenario"].iloc[0])
    declared = DECLARATIONS[scenario].figures if scenario in DECLARATIONS else ()
    for kind in (k for k in declared if k in kinds):
        if kind in OP_FIGURES:
            make, metric = OP_FIGURES[kind]
            for op in _ops_with(frame, metric):
                written += _drawn(partial(make, frame, op), Path(out_dir) / f"{stem}-{op}-{kind}.png", on_skip)
        elif kind not in ROOF_FIGURES or frame.attrs.get("roofs"):
            written += _drawn(partial(WHOLE_FIGURES[kind], frame), Path(out_dir) / f"{stem}-{kind}.png", on_skip)
    return written


def history_figures(frame: pd.DataFrame, out_dir: Path, mode: str = "inference",
                    on_skip: Note | None = None) -> list[Path]:
    """Per op, the median and the ratio to the floor over every boundary run in the frame."""
    runs = frame[frame["scenario"] == "boundary"]
    if runs["source"].nunique() < 2:
        return []
    written = []
    for op in _ops_with(runs, "cpu_us"):
        for value, suffix in (("median", ""), ("ratio_median", "-ratio")):
            written += _drawn(partial(history_chart, runs, op, mode, value),
                              Path(out_dir) / f"history-{op}-{mode}{suffix}.png", on_skip)
    return written


def _note(text: str) -> None:
    print(f"figures: {text}", file=sys.stderr)


def check_kinds(kinds: Sequence[str]) -> list[str]:
    """--kinds (already a list without empty or repeated names: bench.harness.cli.name_list): a subset of
    KINDS (ValueError naming the unknown ones)."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"--kinds: unknown kinds {unknown}; valid: {','.join(KINDS)}")
    return list(kinds)


def main(argv: Sequence[str] | None = None, prog: str = "python -m dbench.analysis.figures") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=path_value, help="result files or folders")
    p.add_argument("--out", type=path_value, required=True, help="folder for the PNGs")
    p.add_argument("--kinds", type=name_list, default=KINDS, help=f"comma-separated subset of {','.join(KINDS)}")
    p.add_argument("--history-mode", default="inference", choices=MODES,
                   help="the mode the history figures follow (of the boundary runs)")
    args = p.parse_args(argv)
    try:
        kinds = check_kinds(args.kinds)
        if importlib.util.find_spec("matplotlib") is None:
            raise ValueError("figures need matplotlib (pip install matplotlib; it is in requirements.txt)")
        docs = read_results(args.results, note=_note)
        check_output_dir(args.out, "--out")  # made here, once the inputs are known to be good
    except ValueError as exc:  # ResultFileError, OutputPathError, the checks above
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    import pandas as pd

    written = []
    try:
        for path, doc in docs:
            if not doc["rows"]:
                _note(f"{path}: no figures: it has no rows (status {doc.get('status') or 'unknown'})")
            written += scenario_figures(doc, args.out, result_stem(path), kinds, on_skip=_note)
        timed = [rows_frame(doc, str(path)) for path, doc in docs if doc["rows"]]
        if "history" in kinds and timed:
            written += history_figures(pd.concat(timed, ignore_index=True), args.out, args.history_mode, _note)
    except OutputPathError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    if not written:
        _note(f"no figure of kinds {','.join(kinds)} for these results")
    return 0


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("figures", main)
