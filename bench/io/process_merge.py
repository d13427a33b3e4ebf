"""One result from the results of N fresh processes of the same run (run.py --processes / --ab).

On a shared host the dominant noise of a CPU median is an offset per process, so the process,
not the round, is the unit a repeated run's statistics are taken over. Per row (joined on the
row identity, bench/core/identity.py):

* ``process_medians``, ``process_ratio_medians``, ``process_delta_medians``: that row's
  ``median``, ``ratio_median`` and ``delta_median`` in each process, in time order (None where the
  process has no such value: not run, failed, interrupted before its first round).
* ``median``, ``ratio_median``, ``delta_median``: the median of those; ``q1``, ``q3``, ``ci_low``,
  ``ci_high`` (and the ``ratio_``/``delta_`` CIs) the quartiles and the distribution-free CI of
  the median over the processes (the sample range below 6 processes), ``rel_iqr`` their IQR over
  the median: the spread between processes, which is what decides whether a median repeats.
* ``samples``: every process's per-round samples, concatenated in time order, and ``process_n``
  how many each contributed (so a slice per process can be taken back out); ``n`` their total.
* ``status``: ``failed`` when the row failed in any process (``reason`` names it), else the
  status of the processes that ran it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dbench.bench.core import stats
from dbench.bench.core.identity import row_identity
from dbench.bench.core.rows import num
from dbench.bench.io.result_types import ResultDocument
from dbench.bench.io.shard_merge import row_order, settle

PER_PROCESS = {"median": "process_medians", "ratio_median": "process_ratio_medians",
               "delta_median": "process_delta_medians"}


def _over_processes(values: Sequence[float | None]) -> tuple[float | None, ...]:
    """median, q1, q3, ci_low, ci_high over the processes' values."""
    present = [v for v in values if v is not None]
    if not present:
        return (None,) * 5
    s = stats.summarize(present)
    return num(s.median), num(s.q1), num(s.q3), num(s.ci_low), num(s.ci_high)


def merge_row(per_process: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """One row from the same row of each process (None: that process has no such row)."""
    present = [(i, r) for i, r in enumerate(per_process) if r is not None]
    if not present:
        raise ValueError("a merged row needs the row of at least one process")
    row = dict(present[0][1])
    for field, listed in PER_PROCESS.items():
        row[listed] = [None if r is None else r.get(field) for r in per_process]
    median, q1, q3, low, high = _over_processes(row["process_medians"])
    row.update(median=median, q1=q1, q3=q3, ci_low=low, ci_high=high,
               rel_iqr=num((q3 - q1) / abs(median)) if median and q1 is not None and q3 is not None else None)
    for prefix in ("ratio", "delta"):
        m, _, _, lo, hi = _over_processes(row[PER_PROCESS[f"{prefix}_median"]])
        row.update({f"{prefix}_median": m, f"{prefix}_ci_low": lo, f"{prefix}_ci_high": hi})
    row["process_n"] = [0 if r is None else len(r.get("samples") or []) for r in per_process]
    row["samples"] = [x for r in per_process if r is not None for x in (r.get("samples") or [])]
    row["n"] = len(row["samples"])
    failed = [(i, r) for i, r in present if r.get("status") == "failed"]
    if failed:
        row["status"] = "failed"
        row["reason"] = "; ".join(f"process {i}: {r.get('reason')}" for i, r in failed)
    elif any(r.get("status") == "ok" for _, r in present):
        row["status"], row["reason"] = "ok", None
    if "gpu_bound" in row:
        row["gpu_bound"] = None  # recomputed over the merged medians (bench.io.results.mark_gpu_bound)
    return row


def merge_rows(docs: Sequence[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """The rows of every process, one merged row per row identity, in a one-process run's order."""
    from dbench.bench.io.results import mark_gpu_bound

    by_identity: dict[tuple[Any, ...], list[Mapping[str, Any] | None]] = {}
    for i, doc in enumerate(docs):
        for r in (doc or {}).get("rows", []):
            by_identity.setdefault(row_identity(r), [None] * len(docs))[i] = r
    rows = row_order([merge_row(per) for per in by_identity.values()])
    mark_gpu_bound(rows)
    return rows


def process_entry(doc: Mapping[str, Any] | None, meta: Mapping[str, Any]) -> dict[str, Any]:
    """env.processes[i]: what changes from one process to the next, and how the process ended."""
    env: Mapping[str, Any] = (doc or {}).get("env", {})
    config: Mapping[str, Any] = (doc or {}).get("config", {})
    keys = ("time", "sm_clock_mhz", "mem_clock_mhz", "gpu_throttle_reasons", "gpu_other_processes",
            "load_average", "pinned_cpu", "torch", "torch_git", "python")
    return {
        **{k: env.get(k) for k in keys},
        "probe": ((doc or {}).get("speed_probe") or {}).get("median"),
        "rounds_done": config.get("rounds_done"),
        "stop_reason": config.get("stop_reason"),
        **({"gpu_turn_wait_s": config["gpu_turn_wait_s"]} if "gpu_turn_wait_s" in config else {}),  # a duet's
        **meta,
    }


def merge_processes(docs: Sequence[Mapping[str, Any] | None], meta: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One document from the processes' documents (docs[i]: process i's, in time order; None when
    it wrote none). meta[i] is what the parent knows of process i (name, pid, status, seconds, log...);
    its status (complete / interrupted / failed / not run) decides the document's (shard.merge.settle:
    a failed process is named under "failures", and a merge without rows is failed)."""
    present = [d for d in docs if d is not None]
    if not present:
        raise ValueError("no process wrote a result")
    first = present[0]
    config = dict(first.get("config", {}))
    config.update(processes=len(docs), rounds_per_process=config.get("rounds"),
                  rounds_done=sum(int(d.get("config", {}).get("rounds_done") or 0) for d in present),
                  seconds=round(sum(float(d.get("config", {}).get("seconds") or 0) for d in present), 2))
    if "gpu_rounds_done" in config:
        config["gpu_rounds_done"] = sum(int(d.get("config", {}).get("gpu_rounds_done") or 0) for d in present)
    config["stop_reason"] = "; ".join(dict.fromkeys(str(d.get("config", {}).get("stop_reason")) for d in present))
    env = dict(first.get("env", {}))
    env["processes"] = [process_entry(d, m) for d, m in zip(docs, meta)]
    probe_samples = [x for d in present for x in ((d.get("speed_probe") or {}).get("samples") or [])]
    from dbench.bench.core.probe import probe_summary

    return settle(ResultDocument(
        scenario=first.get("scenario"),
        status=None,
        config=config,
        env=env,
        speed_probe=probe_summary(probe_samples),  # every process's rounds, in time order
        roofs=first.get("roofs"),
        rows=merge_rows(docs),
    ), meta)
