"""Result files: one JSON document per run (the source of truth) and a CSV view.

Rows are tidy (one per case x metric) and carry their raw samples, so any
later comparison can re-derive statistics. Files are written atomically and
re-written after every round, so an interrupted run keeps what it finished.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .identity import case_identity
from .rows import stat_row
from .runner import TIMER, Case

SCHEMA_VERSION = 2  # 2: rows carry their scenario axes (bench/identity.py); 1 reads as axis-free
REQUIRED_ROW_FIELDS = (
    "scenario", "op", "variant", "mode", "device", "driver", "metric", "unit", "timer",
    "median", "q1", "q3", "ci_low", "ci_high", "samples",
)


class ResultFileError(ValueError):
    """A file that cannot be read as a result; the message names the file and what is wrong."""


def case_status(case: Case) -> str | None:
    """failed / n/a / None (timed, or not yet)."""
    return "failed" if case.error else "n/a" if case.na_reason else None


def delta_reason(case: Case, base: Case | None) -> str | None:
    """Why a timed case has no paired Δ although it names a baseline (None when it has one or needs none)."""
    if not case.baseline or not case.samples:
        return None
    if base is None:
        return f"no Δ: its baseline {case.baseline} is not in this run"
    if case_status(base):
        return f"no Δ: its baseline {case.baseline} {case_status(base)} ({base.error or base.na_reason})"
    return None


def case_rows(cases: Iterable[Case], by_label: dict[str, Case] | None = None) -> list[dict[str, Any]]:
    """CPU wall-clock rows, with the paired difference against each case's baseline."""
    cases = list(cases)
    by_label = by_label or {c.label: c for c in cases}
    rows = []
    for case in cases:
        if case.flush is not None:  # cold-cache cases have GPU rows only
            continue
        base = by_label.get(case.baseline or "")
        rows.append(stat_row(
            case.key, metric="cpu_us", unit="us", timer=TIMER, samples=case.samples,
            base_samples=base.samples if base is not None else None, baseline=case.baseline,
            status=case_status(case), reason=case.error or case.na_reason, block_calls=case.block or None,
            delta_reason=delta_reason(case, base),
        ))
    return rows


def failures(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failed rows of a document, one line each (the document's "failures" list)."""
    return [{"row": "/".join(str(r.get(k)) for k in ("op", "variant", "mode")), "driver": r.get("driver"),
             "metric": r.get("metric"), "reason": r.get("reason")} for r in rows if r.get("status") == "failed"]


def mark_gpu_bound(rows: list[dict[str, Any]]) -> None:
    """Flag CPU rows whose GPU time per call is at least their CPU time per call:
    their CPU figure is the GPU's pace, not a dispatch cost."""
    gpu = {case_identity(r): r["median"] for r in rows if r["metric"] == "gpu_us" and r["median"] is not None}
    for r in rows:
        if r["metric"] == "cpu_us":
            g = gpu.get(case_identity(r))
            r["gpu_bound"] = None if g is None or r["median"] is None else g >= r["median"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def reserve_result_path(folder: Path, scenario: str, device: str) -> Path:
    """A new, empty result file `<scenario>-<device>-<UTC time>-<random>.json`, created exclusively,
    so runs started in the same second into the same folder never share (and overwrite) a file."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for _ in range(100):
        path = folder / f"{scenario}-{device.replace(':', '')}-{stamp}-{secrets.token_hex(3)}.json"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)  # the umask applies
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise RuntimeError(f"could not create a new result file in {folder}")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; result files are for sharing
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_result(json_path: Path, document: dict[str, Any]) -> Path:
    """Write the JSON document and its CSV view (same stem); returns the CSV path."""
    document = {"schema_version": SCHEMA_VERSION, **document, "failures": failures(document["rows"])}
    write_atomic(json_path, json.dumps(document, indent=1) + "\n")
    csv_path = json_path.with_suffix(".csv")
    frame = pd.DataFrame(document["rows"]).drop(columns=["samples"], errors="ignore")
    write_atomic(csv_path, frame.to_csv(index=False))
    return csv_path


def load_result(path: Path) -> dict[str, Any]:
    """A result document, checked; raises ResultFileError naming the file and the problem."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultFileError(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if not text.strip():
        raise ResultFileError(f"{path}: empty file (a run killed before it wrote anything?)")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno}; "
                              "truncated?)") from None
    if not isinstance(document, dict) or not isinstance(document.get("rows"), list):
        raise ResultFileError(f"{path}: not a result file (no list of rows)")
    bad = [i for i, row in enumerate(document["rows"]) if not isinstance(row, dict)]
    missing = sorted({f for row in document["rows"] if isinstance(row, dict) for f in REQUIRED_ROW_FIELDS
                      if f not in row})
    if "env" not in document or missing or bad:
        raise ResultFileError(f"{path}: not a result file (missing env or row fields {missing}"
                              f"{f', rows {bad[:5]} are not objects' if bad else ''})")
    return document
