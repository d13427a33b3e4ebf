"""Result files: one JSON document per run (the source of truth) and a CSV view.

Rows are tidy (one per case x metric) and carry their raw samples, so any
later comparison can re-derive statistics. Files are written atomically (bench/io/atomic.py) and
re-written after every round, so an interrupted run keeps what it finished, and a failed write
(a full disk) leaves the previous complete file, never a partial or empty one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from dbench.bench.io import atomic
from dbench.bench.io.atomic import write_atomic  # noqa: F401  (the one atomic writer; importable from here, as before)
from dbench.bench.core.identity import case_identity
from dbench.bench.core.rows import stat_row
from dbench.bench.io.result_types import ResultDocument
from dbench.bench.io.schema import VALIDATE_ENV
from dbench.bench.core.case import Case
from dbench.bench.core.runner import TIMER
from dbench.bench.core.trust import UntrustedPathError, make_output_folder

# The one reader of result documents, and the row contract it checks, live in bench/io/document.py
# (standard library only, so a command refuses bad input before pandas or torch load).
from dbench.bench.io.document import REQUIRED_ROW_FIELDS, SCHEMA_VERSION, ResultFileError, load_result  # noqa: F401


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


def mark_gpu_bound(rows: list[dict[str, Any]]) -> None:
    """Flag CPU rows whose GPU time per call is at least their CPU time per call:
    their CPU figure is the GPU's pace, not a dispatch cost."""
    gpu = {case_identity(r): r["median"] for r in rows if r["metric"] == "gpu_us" and r["median"] is not None}
    for r in rows:
        if r["metric"] == "cpu_us":
            g = gpu.get(case_identity(r))
            r["gpu_bound"] = None if g is None or r["median"] is None else g >= r["median"]


class ResultWriteError(OSError):
    """A result file that could not be written (a full disk, a folder made read-only or removed):
    the message names the file and the system's reason; the file, if any, is as it was before."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(exc.errno, exc.strerror or str(exc), str(path))
        self.path = Path(path)

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.strerror}"


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """OSError while writing `path` -> ResultWriteError naming it."""
    try:
        yield
    except ResultWriteError:
        raise
    except OSError as exc:
        raise ResultWriteError(path, exc) from exc


def placeholder(scenario: str, device: str) -> dict[str, Any]:
    """What a reserved result file holds until the run's first write: a valid, empty `running` document
    (no round done yet, so an interrupt at any moment leaves a file that says how many rounds it holds)."""
    return ResultDocument(scenario, "running", config={"rounds_done": 0}, env={"device": device}).to_json()


def reserve_result_path(folder: Path, scenario: str, device: str) -> Path:
    """A new result file `<scenario>-<device>-<UTC time>-<random>.json`, created exclusively (runs
    started in the same second into the same folder never share a file) and holding a valid `running`
    document from the start (never an empty file). Raises ResultWriteError when it cannot be made."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(placeholder(scenario, device), indent=1) + "\n"
    with _writing(folder):
        try:  # a folder another user could plant or swap files in is refused (bench/core/trust.py)
            make_output_folder(folder)
        except UntrustedPathError as exc:
            raise ResultWriteError(folder, PermissionError(errno.EACCES, str(exc))) from None
        return atomic.create_unique(folder, f"{scenario}-{device.replace(':', '')}-{stamp}", ".json", text)


def write_result(json_path: Path, result: ResultDocument | dict[str, Any]) -> Path:
    """Write the JSON document and its CSV view (same stem), each atomically; returns the CSV path.
    A document given as a dict (a merge's, rewritten) is taken back as its type first, so every file
    is made by ResultDocument.to_json (its "failures": the failed rows, then any failed child process).
    Raises ResultWriteError (the previous file stays whole) on failure."""
    document = (result if isinstance(result, ResultDocument) else ResultDocument.from_json(result)).to_json()
    if os.environ.get(VALIDATE_ENV):  # the tests: every document written follows docs/result.schema.json
        from dbench.bench.io.schema import validate

        validate(document)
    csv_path = json_path.with_suffix(".csv")
    with _writing(json_path):
        atomic.write_atomic(json_path, json.dumps(document, indent=1) + "\n")
    frame = pd.DataFrame(document["rows"]).drop(columns=["samples"], errors="ignore")
    with _writing(csv_path):
        atomic.write_atomic(csv_path, frame.to_csv(index=False))
    return csv_path
