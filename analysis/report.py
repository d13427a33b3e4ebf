"""The tables of result files as markdown (a PR comment, $GITHUB_STEP_SUMMARY), plain text or CSV.

    python -m analysis.report RESULTS... [--format md|txt|csv]

md: per result, a heading with the environment (GPU or CPU, torch, date), every table of
analysis.table, and its notes (glyphs, n/a reasons, speed-probe warning, what Δ is against).
txt: the console tables at the width they need. csv: the tables' data, one row per cell.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.kernels import (  # noqa: E402
    fusion_grids, launch_grid, offsets_grids, print_fusion, print_launch, print_offsets, print_roofline, roofline_grids)
from analysis.table import cell_grid, legend, na_reasons, print_tables, tables  # noqa: E402
from bench.probe import instability_note  # noqa: E402
from bench.results import ResultFileError, load_result  # noqa: E402


def env_line(env: dict[str, Any]) -> str:
    """GPU (or CPU model) · torch · date: the line a reader checks first."""
    when = pd.Timestamp(env["time"]).strftime("%Y-%m-%d %H:%M UTC") if env.get("time") else "time unknown"
    machine = env.get("gpu_name") or env.get("cpu_model") or "unknown machine"
    return f"{machine} ({env.get('device')}) · torch {env.get('torch')} · {when}"


def table_note(scenario: str) -> str:
    """What the bracketed Δ of a scenario's tables is measured against."""
    from scenarios import SCENARIOS

    return SCENARIOS[scenario].table_note if scenario in SCENARIOS else ""


def notes(document: dict[str, Any]) -> list[str]:
    frame = pd.DataFrame(document["rows"])
    lines = legend(frame) + [f"n/a {label}: {reason}" if not label.startswith("FAILED") else f"{label}: {reason}"
                             for label, reason in na_reasons(frame).items()]
    unstable = instability_note(document.get("speed_probe"))
    return lines + ([f"warning: {unstable}"] if unstable else []) + [n for n in [table_note(document["scenario"])] if n]


def _run_line(document: dict[str, Any], name: str) -> str:
    config = document.get("config") or {}
    stop = config.get("stop_reason")
    rounds = f"{config['rounds_done']} rounds" if config.get("rounds_done") else ""
    rounds += f" (stopped: {stop})" if rounds and stop not in (None, "rounds") else ""
    parts = [f"`{name}`" if name else "", rounds, document.get("status", "")]
    return " · ".join(p for p in parts if p)


KERNEL_TABLES = {"roofline": roofline_grids, "launch": launch_grid, "offsets": offsets_grids,
                 "fusion": lambda frame: fusion_grids(frame, frame.attrs.get("roofs"))}
KERNEL_PRINTERS = {"roofline": print_roofline, "launch": print_launch, "offsets": print_offsets,
                   "fusion": print_fusion}


def markdown(document: dict[str, Any], name: str = "") -> str:
    """One result's tables and notes as GitHub markdown; `name` is the file name shown."""
    frame = pd.DataFrame(document["rows"])
    frame.attrs["roofs"] = document.get("roofs")
    out = [f"## {document['scenario']} · {env_line(document['env'])}", "", _run_line(document, name), ""]
    kernel_tables = KERNEL_TABLES.get(document["scenario"])
    if kernel_tables is not None:  # the kernel scenarios' own tables (analysis/kernels.py)
        for heading, grid in kernel_tables(frame):
            out += [f"**{heading}**", "", grid.to_markdown(disable_numparse=True), ""]
        return "\n".join(out + _failed_lines(frame))
    for table in tables(frame):
        grid = cell_grid(table).rename_axis(index="variant", columns=None)
        out += [f"**{table.op}** — {table.heading()}", "",
                grid.to_markdown(colalign=("left", *["right"] * len(grid.columns)), disable_numparse=True), ""]
    lines = notes(document)
    if lines:
        out += ["Notes:", "", *[f"- {line}" for line in lines], ""]
    return "\n".join(out)


def text(document: dict[str, Any], name: str = "") -> str:
    """The console tables without colour, as wide as they need."""
    buffer = io.StringIO()
    console = Console(file=buffer, color_system=None, force_terminal=False)
    console.print(" · ".join(p for p in (name, env_line(document["env"])) if p), soft_wrap=True)
    printer = KERNEL_PRINTERS.get(document["scenario"])
    if printer is not None:
        printer(document, console)
    else:
        print_tables(pd.DataFrame(document["rows"]), document["env"], console, note=table_note(document["scenario"]))
    return buffer.getvalue()


def _failed_lines(frame: pd.DataFrame) -> list[str]:
    failed = frame[frame["status"] == "failed"]
    return [f"- FAILED {r['op']}/{r['variant']}/{r['mode']}: {r['reason']}" for _, r in failed.iterrows()]


def table_frame(document: dict[str, Any], name: str = "") -> pd.DataFrame:
    """Every table's data (numbers, CI, flags, reasons), one row per cell."""
    parts = [t.data.assign(source=name, op=t.op, driver=t.driver, metric=t.metric)
             for t in tables(pd.DataFrame(document["rows"]))]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["source"])
    first = [c for c in ("source", "op", "driver", "metric", "variant", "mode") if c in frame.columns]
    return frame[first + [c for c in frame.columns if c not in first]]


FORMATS = ("md", "txt", "csv")


def report(paths: Sequence[Path], fmt: str = "md") -> str:
    docs = [(load_result(p), Path(p).name) for p in paths]
    if fmt == "csv":
        return pd.concat([table_frame(d, n) for d, n in docs], ignore_index=True).to_csv(index=False)
    render = markdown if fmt == "md" else text
    return "\n".join(render(d, n) for d, n in docs)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=Path)
    p.add_argument("--format", choices=FORMATS, default="md")
    args = p.parse_args(argv)
    try:
        sys.stdout.write(report(args.results, args.format))
    except ResultFileError as exc:
        print(f"report: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
