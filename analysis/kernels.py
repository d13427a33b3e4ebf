"""Tables of the kernel scenarios as data, and their console sink: the roofline (rates and % of roof
by size), the launch crossover (from which size a variant stops being launch-bound), offsets,
fusion, and regions (µs per op in a chain of N, and from which N compiling or capturing pays back);
TABLES also names the args scenario's (analysis/arity.py)."""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import pandas as pd
from rich.console import Console
from rich.table import Table

from dbench.bench.io.escape import rich
from dbench.analysis.table import fitted, where

# launch: GPU-bound once GPU time per call reaches this share of CPU time per call. When the GPU
# sets the pace the CPU waits on the launch queue, so the two times are equal up to noise.
GPU_BOUND_SHARE = 0.9
# launch on the CPU: the boundary stops mattering once a variant costs at most this much over raw.
CPU_BOUNDARY_SHARE = 1.10


def size_text(n: float, unit: str) -> str:
    """64 KiB / 4 GiB for bytes (unit 'B'), 4Ki / 16Mi for counts (unit '')."""
    if unit == "B":
        for step, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if n >= step:
                return f"{n / step:g} {name}"
        return f"{n:g} B"
    for step, name in ((1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
        if n >= step:
            return f"{n / step:g}{name}"
    return f"{n:g}"


def sided(rows: pd.DataFrame) -> bool:
    """Whether these roofline rows (one op's) are sized by their side n (n×n times n×n: the row field
    size_axis), not bytes per tensor. Results from before that field: a shape of three equal sides."""
    if "size_axis" in rows and (rows["size_axis"] == "side").any():
        return True
    shapes = rows["shape"] if "shape" in rows else pd.Series(dtype=object)
    return bool(len(shapes)) and all(isinstance(s, (list, tuple)) and len(s) == 3 and set(s) == {n}
                                     for s, n in zip(shapes, rows["size"]))


def size_label(size: float, dtype: str, side: bool) -> str:
    """A roofline row's size as tables show it: n³ and the dtype for a side, else bytes per tensor."""
    return f"{int(size)}³ {dtype}" if side else size_text(float(size), "B")


def size_heading(side: bool) -> str:
    return "n (n×n×n)" if side else "size / tensor"


def timed_metric(frame: pd.DataFrame) -> str:
    """GPU time where the run has it, else CPU time (a CPU run: the kernel runs on the caller's thread)."""
    return "gpu_us" if (frame["metric"] == "gpu_us").any() else "cpu_us"


def roofline_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per case of a roofline result: time, rates, % of roof (NaN where above the roof)."""
    metric = timed_metric(frame)
    rows = frame[(frame["scenario"] == "roofline") & (frame["metric"] == metric)].copy()
    for col in ("gbps", "tflops", "pct_of_roof", "above_roof", "intensity", "bound", "bytes", "flops"):
        if col not in rows:
            rows[col] = None
    rows["above_roof"] = rows["above_roof"].fillna(False).astype(bool)
    # A point above its roof is a counting or timing error: no rate is reported for it.
    rows.loc[rows["above_roof"], ["gbps", "tflops", "pct_of_roof"]] = math.nan
    cols = ["op", "mode", "variant", "cache", "size", "dtype", "status", "reason", "median", "gbps", "tflops",
            "intensity", "bound", "pct_of_roof", "above_roof", "bytes", "flops", "shape", "size_axis"]
    return rows.reindex(columns=cols).reset_index(drop=True)


def _number(value: Any) -> bool:
    """A finite number (a roof's value, a share): what a format spec can print."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _roof_cell(r: pd.Series) -> str:
    if r["status"] == "n/a":
        return "n/a"
    if r["status"] == "failed":
        return "FAILED"
    if r["above_roof"]:
        return f"{r['median']:.2f} µs ABOVE ROOF"
    if r["median"] is None or pd.isna(r["median"]):
        return "-"
    pct = " in cache" if r.get("bound") == "cache" else "" if pd.isna(r["pct_of_roof"]) else f" {r['pct_of_roof']:.0%}"
    # A run stopped before its roofs were measured has times without rates: the cell shows the time.
    compute = r.get("bound") == "compute"
    value = r["tflops"] if compute else r["gbps"]
    rate = "" if pd.isna(value) else f" {value:.1f} TFLOP/s" if compute else f" {value:.0f} GB/s"
    return f"{r['median']:.2f} µs{rate}{pct}"


def print_roofline(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    frame = roofline_frame(pd.DataFrame(doc["rows"]))
    roofs = doc.get("roofs") or {}
    memory = roofs.get("memory") or {}
    if _number(memory.get("value")):
        sheet = roofs.get("measured_over_datasheet") or {}
        console.print(f"memory roof {memory['value']:.0f} GB/s ({rich(memory.get('method'))}"
                      + (f", {sheet['memory']:.0%} of the datasheet" if _number(sheet.get("memory")) else "") + ")")
        for name, roof in (roofs.get("compute") or {}).items():
            if isinstance(roof, dict) and _number(roof.get("value")):
                console.print(f"compute roof {rich(name)} {roof['value']:.1f} TFLOP/s ({rich(roof.get('method'))}"
                              + (f", {sheet[name]:.0%} of the datasheet" if _number(sheet.get(name)) else "") + ")")
    titled = []
    for (op, mode, cache), g in frame.groupby(["op", "mode", "cache"], sort=False):
        if (g["status"] == "n/a").all():
            continue
        side = sided(g)
        table = Table()
        table.add_column(size_heading(side), no_wrap=True)
        variants = list(dict.fromkeys(g["variant"]))
        for v in variants:
            table.add_column(rich(v), justify="right", no_wrap=True)
        for size, line in g.groupby("size", sort=False):
            cells = {r["variant"]: _roof_cell(r) for _, r in line.iterrows()}
            label = size_label(size, line["dtype"].iloc[0], side)
            table.add_row(rich(label), *(rich(cells.get(v, "")) for v in variants))
        titled.append((f"roofline {op}/{mode}, {cache} cache — {where(doc.get('env', {}))}: time per call, "
                       "bandwidth, % of roof", table))
    _print_titled(console, titled)
    for (op, variant, mode), g in frame[frame["status"] == "n/a"].groupby(["op", "variant", "mode"], sort=False):
        console.print(f"  [dim]{rich(op)}/{rich(variant)}/{rich(mode)}: {rich(g['reason'].iloc[0])}[/dim]",
                      soft_wrap=True)
    for _, r in frame[frame["status"] == "failed"].iterrows():
        console.print(f"  [red]FAILED {_case(r)} at size {rich(r['size'])} ({rich(r['cache'])})[/red]: "
                      f"{rich(r['reason'])}", soft_wrap=True)
    if frame["above_roof"].any():
        console.print("[red]ABOVE ROOF: a point faster than the measured roof is not a result: a counting or "
                      "timing error, or (warm cache) a working set just past the cache that it still partly "
                      "serves[/red]")


def _case(row: pd.Series, *keys: str) -> str:
    """op/variant/mode (or the `keys` given) of a row, escaped for the console."""
    return "/".join(rich(row[k]) for k in keys or ("op", "variant", "mode"))


def _print_titled(console: Console, titled: list[tuple[str, Table]]) -> None:
    with fitted(console, [t for _, t in titled]):
        for heading, table in titled:
            console.print(f"[bold]{rich(heading)}[/bold]", soft_wrap=True)  # on its own line: never wrapped
            console.print(table)


def crossovers(frame: pd.DataFrame) -> pd.DataFrame:
    """Per op x variant of a launch result: the smallest size from which the variant is GPU-bound
    (GPU time >= GPU_BOUND_SHARE x CPU time at that size and every larger one), or, in a CPU run,
    from which it costs at most CPU_BOUNDARY_SHARE x raw. NaN when no size qualifies."""
    runs = frame[(frame["scenario"] == "launch") & (frame["status"] == "ok")]
    on_gpu = (runs["metric"] == "gpu_us").any()
    out = []
    for (op, variant), g in runs.groupby(["op", "variant"], sort=False):
        cpu = g[g["metric"] == "cpu_us"].set_index("size")["median"].sort_index()
        if on_gpu:
            gpu = g[g["metric"] == "gpu_us"].set_index("size")["median"].reindex(cpu.index)
            share = gpu / cpu
            bound = share >= GPU_BOUND_SHARE
        else:
            ratio = g[g["metric"] == "cpu_us"].set_index("size")["ratio_median"].sort_index()
            if ratio.isna().all():
                continue  # raw: the baseline itself
            share = ratio
            bound = ratio <= CPU_BOUNDARY_SHARE
        # the crossover: every size from here on qualifies
        tail = bound[::-1].cummin()[::-1]
        size = tail[tail].index.min() if tail.any() else math.nan
        out.append({"op": op, "variant": variant, "crossover_elements": size,
                    "cpu_us_at": cpu.get(size, math.nan), "share_at": share.get(size, math.nan),
                    "cpu_us_smallest": cpu.iloc[0] if len(cpu) else math.nan,
                    "criterion": (f"GPU time >= {GPU_BOUND_SHARE:.0%} of CPU time" if on_gpu
                                  else f"time <= {CPU_BOUNDARY_SHARE:.2f} x raw")})
    return pd.DataFrame(out)


def print_launch(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    frame = pd.DataFrame(doc["rows"])
    table_data = crossovers(frame)
    if table_data.empty:
        console.print("no launch rows")
        return
    on_gpu = (frame["metric"] == "gpu_us").any()
    titled = []
    for op, g in table_data.groupby("op", sort=False):
        table = Table()
        for col in ("variant", "crossover", "CPU µs/call there", "GPU/CPU there" if on_gpu else "÷ raw there",
                    "CPU µs/call at the smallest size"):
            table.add_column(col, justify="left" if col == "variant" else "right", no_wrap=True)
        for _, r in g.iterrows():
            found = not pd.isna(r["crossover_elements"])
            table.add_row(rich(r["variant"]), size_text(r["crossover_elements"], "") if found else "not reached",
                          f"{r['cpu_us_at']:.2f}" if found else "", f"{r['share_at']:.2f}" if found else "",
                          f"{r['cpu_us_smallest']:.2f}")
        titled.append((f"launch {op} — {where(doc.get('env', {}))}: from which size (elements per tensor) "
                       + ("each variant stops being launch-bound" if on_gpu else "the boundary stops mattering"),
                       table))
    _print_titled(console, titled)
    console.print(f"[dim]criterion: {rich(table_data['criterion'].iloc[0])} at that size and every larger one.[/dim]")
    failed = frame[frame["status"] == "failed"]
    for _, r in failed.drop_duplicates(["op", "variant"]).iterrows():
        console.print(f"  [red]FAILED {_case(r, 'op', 'variant')}[/red]: {rich(r['reason'])}")


# ---------------------------------------------------------------- markdown (analysis.report)

def roofline_grids(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(heading, size x variant grid of cell texts) per op x mode x cache state."""
    data = roofline_frame(frame)
    out = []
    for (op, mode, cache), g in data.groupby(["op", "mode", "cache"], sort=False):
        if (g["status"] == "n/a").all():
            continue
        side = sided(g)
        g = g.assign(cell=g.apply(_roof_cell, axis=1),
                     label=[size_label(v, d, side) for v, d in zip(g["size"], g["dtype"])])
        grid = g.pivot_table(index="label", columns="variant", values="cell", aggfunc="first", sort=False)
        grid = grid.rename_axis(index=size_heading(side), columns=None)
        out.append((f"roofline {op}/{mode}, {cache} cache: time per call, rate, % of roof", grid.fillna("")))
    return out


def launch_grid(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(heading, variant x crossover table) per op."""
    found = crossovers(frame)
    out: list[tuple[str, pd.DataFrame]] = []
    if found.empty:  # no op with a timed row (every case failed or n/a): no crossover to show
        return out
    for op, g in found.groupby("op", sort=False):
        grid = pd.DataFrame({
            "crossover (elements)": [size_text(v, "") if not pd.isna(v) else "not reached"
                                     for v in g["crossover_elements"]],
            "CPU µs/call there": [f"{v:.2f}" if not pd.isna(v) else "" for v in g["cpu_us_at"]],
            ("GPU/CPU there" if g["criterion"].iloc[0].startswith("GPU") else "÷ raw there"):
                [f"{v:.2f}" if not pd.isna(v) else "" for v in g["share_at"]],
            "CPU µs/call, smallest size": [f"{v:.2f}" for v in g["cpu_us_smallest"]],
        }, index=pd.Index(g["variant"], name="variant"))
        out.append((f"launch {op}: crossover ({g['criterion'].iloc[0]} from there on)", grid))
    return out


# ---------------------------------------------------------------- offsets

def offsets_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per op x mode x dtype x size of an offsets result: int32 and forced-int64 time per call, their
    ratio, and the registers and local bytes per thread of each specialisation (GPU runs)."""
    metric = timed_metric(frame)
    rows = frame[(frame["scenario"] == "offsets") & (frame["metric"] == metric) & (frame["index"] != "auto")]
    out = []
    for (op, mode, dtype, size), g in rows.groupby(["op", "mode", "dtype", "size"], sort=False):
        if (g["status"] == "n/a").all():
            continue  # e.g. the backward of an op without a backward kernel
        by = g.set_index("index")
        ok = set(by.index[by["status"] == "ok"])
        rec: dict[str, Any] = {"op": op, "mode": mode, "dtype": dtype, "size": size}
        for index in ("int32", "int64"):
            r = by.loc[index] if index in by.index else None
            rec[f"{index}_us"] = r["median"] if r is not None and index in ok else math.nan
            for col in ("registers", "local_bytes"):
                rec[f"{index}_{col}"] = r.get(col, math.nan) if r is not None else math.nan
        rec["ratio"] = rec["int64_us"] / rec["int32_us"] if {"int32", "int64"} <= ok else math.nan
        rec["status"] = "ok" if {"int32", "int64"} <= ok else "; ".join(
            f"{i}: {by.loc[i, 'status']} {by.loc[i, 'reason'] or ''}".strip() for i in by.index if i not in ok)
        out.append(rec)
    return pd.DataFrame(out)


def huge_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The past-INT32_MAX rows of an offsets result: elements, the width chosen, exactness, time."""
    metric = timed_metric(frame)
    rows = frame[(frame["scenario"] == "offsets") & (frame["metric"] == metric) & (frame["index"] == "auto")]
    cols = ["op", "shape", "size", "status", "reason", "index_chosen", "exact", "median", "gbps", "above_roof"]
    out = rows.reindex(columns=cols).reset_index(drop=True)
    out["above_roof"] = out["above_roof"].fillna(False).astype(bool)
    out.loc[out["above_roof"], "gbps"] = math.nan  # a counting or timing error, never a rate
    return out


def offsets_grids(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(heading, table of cell texts): int64 against int32 per op and mode, and the past-INT32_MAX run."""
    data = offsets_frame(frame)
    out = []
    unit = "GPU" if timed_metric(frame) == "gpu_us" else "CPU"
    for (op, mode), g in data.groupby(["op", "mode"], sort=False):
        grid = pd.DataFrame({
            "dtype": g["dtype"],
            "size / tensor": [size_text(float(s), "B") for s in g["size"]],
            f"int32 {unit} µs": [f"{v:.2f}" for v in g["int32_us"]],
            f"int64 {unit} µs": [f"{v:.2f}" for v in g["int64_us"]],
            "int64 / int32": [f"{v:.3f}" if not pd.isna(v) else r for v, r in zip(g["ratio"], g["status"])],
            "registers int32 → int64": [_regs(a, b) for a, b in zip(g["int32_registers"], g["int64_registers"])],
            "spill bytes": [_regs(a, b) for a, b in zip(g["int32_local_bytes"], g["int64_local_bytes"])],
        })
        out.append((f"offsets {op}/{mode}: forced int64 against int32, same inputs", grid.set_index("dtype")))
    huge = huge_frame(frame)
    if len(huge):
        grid = pd.DataFrame({
            "op": huge["op"],
            "elements": [f"{math.prod(s):,}" for s in huge["shape"]],
            "index chosen": huge["index_chosen"].fillna(""),
            "equal to the compact chunked run": [_exact(r) for _, r in huge.iterrows()],
            "µs per call": [f"{v:.0f}" if not pd.isna(v) else "" for v in huge["median"]],
            "GB/s": ["ABOVE ROOF" if above else f"{v:.0f}" if not pd.isna(v) else ""
                     for v, above in zip(huge["gbps"], huge["above_roof"])],
        }).set_index("op")
        out.append(("offsets past INT32_MAX: one float32 tensor of 2³¹ + 2²⁰ elements per argument", grid))
    return out


def _regs(a: Any, b: Any) -> str:
    return "" if pd.isna(a) or pd.isna(b) else f"{int(a)} → {int(b)}"


def _exact(r: pd.Series) -> str:
    if r["status"] == "n/a":
        return f"n/a: {r['reason']}"
    if r["status"] != "ok":
        return f"FAILED: {r['reason']}"
    return "yes, bit for bit" if r["exact"] else "NO"


def print_offsets(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    _print_grids(console, offsets_grids(pd.DataFrame(doc["rows"])), doc)


def _print_grids(console: Console, grids: list[tuple[str, pd.DataFrame]], doc: dict[str, Any]) -> None:
    titled = []
    for heading, grid in grids:
        table = Table()
        table.add_column(rich(grid.index.name or ""), no_wrap=True)
        for col in grid.columns:
            table.add_column(rich(col), justify="right", no_wrap=True)
        for label, line in grid.iterrows():
            table.add_row(rich(label), *(rich(v) for v in line))
        titled.append((f"{heading} — {where(doc.get('env', {}))}", table))
    _print_titled(console, titled)


# ---------------------------------------------------------------- fusion

def copy_roof(roofs: dict[str, Any] | None) -> float:
    """The measured copy roof (GB/s, read + write): the best of memcpy and the copy kernel, else the
    memory roof."""
    memory = (roofs or {}).get("memory") or {}
    candidates = memory.get("candidates") or {}
    copies = [v for k, v in candidates.items() if "memcpy" in k.lower() or "copy" in k.lower()]
    return max(copies) if copies else float(memory.get("value", math.nan))


def fusion_frame(frame: pd.DataFrame, roofs: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per size x k x implementation of a fusion result: time per call (GPU where timed, and CPU),
    modelled bytes, achieved GB/s and its share of the copy roof, the unfused/fused speed-up and
    the modelled one (k)."""
    metric = timed_metric(frame)
    rows = frame[frame["scenario"] == "fusion"]
    timed = rows[rows["metric"] == metric].set_index(["size", "k", "variant"])
    cpu = rows[rows["metric"] == "cpu_us"].set_index(["size", "k", "variant"])["median"]
    roof = copy_roof(roofs)
    out = timed.reindex(columns=["status", "reason", "median", "gbps", "bytes", "bound", "above_roof"]).copy()
    out["cpu_us"] = cpu.reindex(out.index)
    out["above_roof"] = out["above_roof"].fillna(False).astype(bool)
    # A working set served by the cache is not bounded by the copy roof: no share of it is given.
    in_memory = (out["bound"] != "cache") & ~out["above_roof"]
    out["pct_of_copy_roof"] = (out["gbps"] / roof).where(in_memory) if roof == roof else math.nan
    out = out.reset_index()
    fused = out[out["variant"] == "fused"].set_index(["size", "k"])["median"]
    unfused = out[out["variant"] == "unfused"].set_index(["size", "k"])["median"]
    speed = (unfused / fused).rename("speedup")
    out = out.merge(speed.reset_index(), on=["size", "k"], how="left")
    out["modelled_speedup"] = out["k"].astype(float)
    return out


def fusion_grids(frame: pd.DataFrame, roofs: dict[str, Any] | None = None) -> list[tuple[str, pd.DataFrame]]:
    data = fusion_frame(frame, roofs)
    unit = "GPU" if timed_metric(frame) == "gpu_us" else "CPU"
    out = []
    for size, g in data.groupby("size", sort=False):
        variants = list(dict.fromkeys(g["variant"]))
        cells: dict[str, list[str]] = {v: [] for v in variants}
        ks = list(dict.fromkeys(g["k"]))
        for k in ks:
            line = g[g["k"] == k].set_index("variant")
            for v in variants:
                cells[v].append(_fusion_cell(line.loc[v]) if v in line.index else "-")
        first = g.drop_duplicates("k").set_index("k")
        grid = pd.DataFrame({**{f"{v} {unit} µs": cells[v] for v in variants},
                             "unfused / fused": [f"{first.loc[k, 'speedup']:.2f}"
                                                 if not pd.isna(first.loc[k, "speedup"]) else "" for k in ks],
                             "modelled (k)": [f"{k}" for k in ks]},
                            index=pd.Index(ks, name="k"))
        out.append((f"fusion at {size_text(float(size), 'B')}: time per call, GB/s and % of the copy roof", grid))
    if unit == "GPU" and data["cpu_us"].notna().any():
        small = data[data["size"] == data["size"].min()]
        grid = small.pivot_table(index="k", columns="variant", values="cpu_us", aggfunc="first", sort=False)
        grid = grid.map(lambda v: f"{v:.2f}" if not pd.isna(v) else "")
        grid.columns = [f"{c} CPU µs" for c in grid.columns]
        out.append((f"fusion at {size_text(float(small['size'].iloc[0]), 'B')}: CPU time per call "
                    "(k launches against one)", grid))
    return out


def _fusion_cell(r: pd.Series) -> str:
    if r["status"] == "n/a":
        return "n/a"
    if r["status"] != "ok":
        return "FAILED"
    if r["above_roof"]:
        return f"{r['median']:.2f} ABOVE ROOF"
    pct = (" in cache" if r["bound"] == "cache" else "" if pd.isna(r["pct_of_copy_roof"])
           else f" {r['pct_of_copy_roof']:.0%}")
    rate = "" if pd.isna(r["gbps"]) else f" {r['gbps']:.0f} GB/s"
    return f"{r['median']:.2f}{rate}{pct}"


def print_fusion(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    frame = pd.DataFrame(doc["rows"])
    roofs = doc.get("roofs")
    console.print(f"copy roof {copy_roof(roofs):.0f} GB/s (best of memcpy and the copy kernel, this run)")
    _print_grids(console, fusion_grids(frame, roofs), doc)
    absent = frame[(frame["scenario"] == "fusion") & (frame["status"] == "n/a")]
    for _, r in absent.drop_duplicates("variant").iterrows():
        console.print(f"  [dim]{rich(r['variant'])}: {rich(r['reason'])}[/dim]", soft_wrap=True)
    for _, r in frame[(frame["scenario"] == "fusion") & (frame["status"] == "failed")].iterrows():
        console.print(f"  [red]FAILED {rich(r['variant'])} k={rich(r['k'])} size={rich(r['size'])}[/red]: "
                      f"{rich(r['reason'])}", soft_wrap=True)


# ---------------------------------------------------------------- regions

REGION_COLUMNS = ["op", "variant", "mode", "length", "status", "reason", "median", "ratio_median", "graph_breaks",
                  "graphs", "first_call_s", "graph_break_reason"]


def regions_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per case of a regions result (CPU time): µs per chain call (median), µs per op (÷ N),
    the per-round paired ratio to the same variant eager, and what compiling or capturing it took."""
    rows = frame[(frame["scenario"] == "regions") & (frame["metric"] == "cpu_us")].reindex(columns=REGION_COLUMNS)
    for col in ("length", "median", "ratio_median", "graph_breaks", "graphs", "first_call_s"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    return rows.assign(per_op=rows["median"] / rows["length"]).reset_index(drop=True)


def _pays_back(timed: pd.DataFrame, eager: pd.Series, n_max: float) -> dict[str, Any]:
    """One variant in one mode (its timed rows by n) against its eager medians by n: the break-even N
    (from which the paired ratio to eager stays below 1) and, at n_max, the ratio, the µs saved per
    chain call and the calls that pay the first call back (inf: nothing is saved)."""
    eager = eager.reindex(timed.index)
    ratio = timed["ratio_median"].fillna(timed["median"] / eager)  # unpaired only where rounds differ
    tail = (ratio < 1)[::-1].cummin()[::-1]
    saved = eager.get(n_max, math.nan) - timed["median"].get(n_max, math.nan)
    first = timed["first_call_s"].get(n_max, math.nan)
    return {"break_even_n": tail[tail].index.min() if tail.any() else math.nan,
            "compared": bool(ratio.notna().any()), "ratio": ratio.get(n_max, math.nan), "saved_us": saved,
            "first_call_s": first,
            "payback_calls": first * 1e6 / saved if saved > 0 else math.inf if saved == saved else math.nan}


def break_even(frame: pd.DataFrame) -> pd.DataFrame:
    """Per op x variant x mode other than eager: _pays_back's numbers at the op's largest N (n_max),
    the graph breaks at each N, and the first break's reason; `status` says why a variant has none."""
    data = regions_frame(frame)
    ok = data[data["status"] == "ok"]
    out = []
    for (op, variant, mode), g in data[data["mode"] != "eager"].groupby(["op", "variant", "mode"], sort=False):
        timed = g[g["status"] == "ok"].set_index("length").sort_index()
        rec: dict[str, Any] = {"op": op, "variant": variant, "mode": mode,
                               "n_max": ok[ok["op"] == op]["length"].max()}
        if timed.empty:
            first = g.iloc[0]
            out.append({**rec, "status": f"{first['status']}: {first['reason']}"})
            continue
        eager = ok[(ok["op"] == op) & (ok["variant"] == variant) & (ok["mode"] == "eager")]
        eager = eager.set_index("length")["median"]
        breaks = timed["graph_breaks"].dropna()  # none for cudagraph: it compiles nothing
        reasons = timed["graph_break_reason"].dropna()
        out.append({**rec, "status": "ok", **_pays_back(timed, eager, rec["n_max"]),
                    "graph_breaks": (", ".join(f"{b:.0f}" for b in breaks) if breaks.any()
                                     else "0" if len(breaks) else ""),
                    "graph_break_reason": reasons.iloc[0] if len(reasons) else None})
    return pd.DataFrame(out)


def _per_op_cell(r: pd.Series) -> str:
    if r["status"] != "ok":
        return "n/a" if r["status"] == "n/a" else "FAILED"
    breaks = r["graph_breaks"]
    return f"{r['per_op']:.2f}" + (f" ({breaks:.0f} break{'s' if breaks > 1 else ''})" if breaks > 0 else "")


def _break_even_cells(r: pd.Series) -> list[str]:
    if r["status"] != "ok":
        return [r["status"], "", "", "", ""]
    calls = r["payback_calls"]
    reason = r["graph_break_reason"]
    why = reason.split(" Explanation:")[0][:60] if isinstance(reason, str) else ""
    return [r["graph_breaks"] + (f": {why}" if why else ""),
            f"{r['break_even_n']:.0f}" if not pd.isna(r["break_even_n"]) else
            "not reached" if r["compared"] else "no eager rows",
            "" if pd.isna(r["ratio"]) else f"{r['ratio']:.2f}",
            "" if pd.isna(r["first_call_s"]) else f"{r['first_call_s']:.2f}",
            "never" if calls == math.inf else "" if pd.isna(calls) else f"{calls:,.0f}"]


def regions_grids(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Per op: per mode, µs per op by N (variant x N); per mode other than eager, break-even N and the
    first call's cost (a mode with no timed row, such as cudagraph on a CPU, has neither)."""
    data, found = regions_frame(frame), break_even(frame)
    out = []
    for op, g in data.groupby("op", sort=False):
        for mode, m in g.groupby("mode", sort=False):
            if (m["status"] != "ok").all():
                continue
            grid = m.assign(cell=m.apply(_per_op_cell, axis=1), col=[f"N={n:.0f}" for n in m["length"]])
            grid = grid.pivot_table(index="variant", columns="col", values="cell", aggfunc="first", sort=False)
            out.append((f"regions {op}/{mode}: CPU µs per op (per chain call ÷ N)",
                        grid.rename_axis(index="variant", columns=None).fillna("")))
        for mode, b in found[found["op"] == op].groupby("mode", sort=False) if len(found) else ():
            if (b["status"] != "ok").all():
                continue
            n = f"N={b['n_max'].iloc[0]:.0f}"
            cols = ["graph breaks (each N)", "break-even N", f"÷ eager at {n}", f"first call s at {n}",
                    f"calls to pay back at {n}"]
            grid = pd.DataFrame([_break_even_cells(r) for _, r in b.iterrows()], columns=cols,
                                index=pd.Index(b["variant"], name="variant"))
            out.append((f"regions {op}: {mode} against eager, break-even and first-call cost", grid))
    return out


def print_regions(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    frame = pd.DataFrame(doc["rows"])
    _print_grids(console, regions_grids(frame), doc)
    data = regions_frame(frame)
    for mode, m in data.groupby("mode", sort=False):
        if (m["status"] == "n/a").all():
            console.print(f"  [dim]{rich(mode)}: n/a for every variant: {rich(m['reason'].iloc[0])}[/dim]",
                          soft_wrap=True)
    broken = data[data["graph_break_reason"].notna()].drop_duplicates(["op", "variant"])
    for _, r in broken.iterrows():  # Dynamo's reasons quote code: `[]`, `{}`
        console.print(f"  [yellow]{_case(r, 'op', 'variant')} breaks the graph[/yellow]: "
                      f"{rich(r['graph_break_reason'])}", soft_wrap=True)
    for _, r in data[data["status"] == "failed"].iterrows():
        console.print(f"  [red]FAILED {_case(r)} at N={r['length']:.0f}[/red]: "
                      f"{rich(r['reason'])}", soft_wrap=True)


class KernelTables(NamedTuple):
    """One kind of kernel tables (a scenario's declaration names it: `tables`): the markdown grids of
    a result's rows, and the console printer of a result document."""

    grids: Callable[[pd.DataFrame], list[tuple[str, pd.DataFrame]]]
    print: Callable[[dict[str, Any], Console | None], None]


def print_args(doc: dict[str, Any], console: Console | None = None) -> None:
    from dbench.analysis.arity import args_grids, args_rows
    from dbench.scenarios import DECLARATIONS

    console = console or Console()
    frame = pd.DataFrame(doc["rows"])
    grids = args_grids(frame)
    if not grids:
        console.print("no args rows timed")
    _print_grids(console, grids, doc)
    rows = args_rows(frame)
    for _, r in rows[rows["status"] == "n/a"].drop_duplicates(["variant", "mode"]).iterrows():
        console.print(f"  [dim]{_case(r, 'variant', 'mode')}: {rich(r['reason'])}[/dim]", soft_wrap=True)
    for _, r in rows[rows["status"] == "failed"].iterrows():
        console.print(f"  [red]FAILED {_case(r)}[/red]: {rich(r['reason'])}", soft_wrap=True)
    console.print(f"[dim]{DECLARATIONS['args'].table_note}[/dim]", soft_wrap=True)


def _args_grids(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    from dbench.analysis.arity import args_grids

    return args_grids(frame)


TABLES: dict[str, KernelTables] = {
    "args": KernelTables(_args_grids, print_args),
    "roofline": KernelTables(roofline_grids, print_roofline),
    "launch": KernelTables(launch_grid, print_launch),
    "offsets": KernelTables(offsets_grids, print_offsets),
    "fusion": KernelTables(lambda frame: fusion_grids(frame, frame.attrs.get("roofs")), print_fusion),
    "regions": KernelTables(regions_grids, print_regions),
}


def tables_of(scenario: str) -> KernelTables | None:
    """The kernel tables a scenario's declaration names (None: it has the boundary table, or is unknown)."""
    from dbench.scenarios import DECLARATIONS

    declaration = DECLARATIONS.get(scenario)
    return TABLES[declaration.tables] if declaration is not None and declaration.tables else None
