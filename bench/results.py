"""Result files: one JSON document per run (the source of truth) and a CSV view.

Rows are tidy (one per case x metric) and carry their raw samples, so any
later comparison can re-derive statistics. Files are written atomically and
re-written after every round, so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .rows import stat_row
from .runner import TIMER, Case

SCHEMA_VERSION = 1
REQUIRED_ROW_FIELDS = (
    "scenario", "op", "variant", "mode", "device", "driver", "metric", "unit", "timer",
    "median", "q1", "q3", "ci_low", "ci_high", "samples",
)


def case_rows(cases: Iterable[Case], by_label: dict[str, Case] | None = None) -> list[dict[str, Any]]:
    """CPU wall-clock rows, with the paired difference against each case's baseline."""
    cases = list(cases)
    by_label = by_label or {c.label: c for c in cases}
    rows = []
    for case in cases:
        base = by_label.get(case.baseline or "")
        status = "failed" if case.error else "n/a" if case.na_reason else None
        rows.append(stat_row(
            case.key, metric="cpu_us", unit="us", timer=TIMER, samples=case.samples,
            base_samples=base.samples if base is not None else None, baseline=case.baseline,
            status=status, reason=case.error or case.na_reason, block_calls=case.block or None,
        ))
    return rows


def mark_gpu_bound(rows: list[dict[str, Any]]) -> None:
    """Flag CPU rows whose GPU time per call is at least their CPU time per call:
    their CPU figure is the GPU's pace, not a dispatch cost."""
    key = ("scenario", "op", "variant", "mode", "device", "driver")
    gpu = {tuple(r[k] for k in key): r["median"] for r in rows if r["metric"] == "gpu_us" and r["median"] is not None}
    for r in rows:
        if r["metric"] == "cpu_us":
            g = gpu.get(tuple(r[k] for k in key))
            r["gpu_bound"] = None if g is None or r["median"] is None else g >= r["median"]


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_result(json_path: Path, document: dict[str, Any]) -> Path:
    """Write the JSON document and its CSV view (same stem); returns the CSV path."""
    document = {"schema_version": SCHEMA_VERSION, **document}
    write_atomic(json_path, json.dumps(document, indent=1) + "\n")
    csv_path = json_path.with_suffix(".csv")
    frame = pd.DataFrame(document["rows"]).drop(columns=["samples"], errors="ignore")
    write_atomic(csv_path, frame.to_csv(index=False))
    return csv_path


def load_result(path: Path) -> dict[str, Any]:
    document = json.loads(Path(path).read_text())
    missing = [f for f in REQUIRED_ROW_FIELDS for row in document.get("rows", []) if f not in row]
    if "env" not in document or missing:
        raise ValueError(f"{path}: not a result file (missing env or row fields {sorted(set(missing))})")
    return document
