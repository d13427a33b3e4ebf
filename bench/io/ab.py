"""A/B runs (run.py --ab A B --pairs K): the ABBA schedule, the paired ratios, their table.

The two sides run as alternating fresh processes, A B B A A B B A ...: pair i is two processes
adjacent in time, so a machine that slows down for a while slows both sides of the pairs it
overlaps, and the order within a pair alternates, so a steady drift cancels over two pairs.
The dominant noise of a CPU benchmark on a shared host is an offset per process; comparing one
process of A with one of B right beside it, K times, is what lets a small difference show.

Per row, the paired ratio B/A is the geometric mean of the K per-pair ratios of the process
medians, with a t-interval on their logarithms (the ratio of two positive times is
log-symmetric: 2x and 0.5x are equally far from 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Slot:
    """One child process of a repeated run: its place in time, its side and its pair."""

    index: int  # position in time, 0-based
    side: str | None  # "a" / "b" in an A/B run, None in a --processes run
    pair: int  # the pair (A/B) or the process number (--processes)


def abba(pairs: int) -> list[Slot]:
    """A B, B A, A B, B A, ...: K pairs, 2K slots; element i of each side is pair i."""
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    sides = [("a", "b") if p % 2 == 0 else ("b", "a") for p in range(pairs)]
    return [Slot(2 * p + k, side, p) for p, pair in enumerate(sides) for k, side in enumerate(pair)]


def order_text(slots: Sequence[Slot]) -> str:
    return "".join(s.side.upper() for s in slots if s.side)


def paired_ratio(a: Sequence[float | None], b: Sequence[float | None],
                 confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Geometric mean of b[i] / a[i] over the pairs where both are positive, and its t-interval.

    One usable pair gives the ratio without an interval; none gives nothing.
    """
    logs = [math.log(y / x) for x, y in zip(a, b) if x is not None and y is not None and x > 0 and y > 0]
    out: dict[str, Any] = {"median": None, "ci_low": None, "ci_high": None, "pairs": len(logs)}
    if not logs:
        return out
    mean = sum(logs) / len(logs)
    out["median"] = math.exp(mean)
    if len(logs) >= 2:
        import scipy.stats  # lazily: the command line is checked without it

        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
        half = float(scipy.stats.t.ppf(0.5 + confidence / 2, len(logs) - 1)) * sd / math.sqrt(len(logs))
        out["ci_low"], out["ci_high"] = math.exp(mean - half), math.exp(mean + half)
    return out


def _round(x: float | None) -> float | None:
    """Six significant digits: a ratio's interval over few, far-apart pairs can reach 1e-7,
    which six decimals would write as 0."""
    return None if x is None else float(f"{x:.6g}")


def ab_fields(a_row: Mapping[str, Any] | None, b_row: Mapping[str, Any] | None, pairs: int) -> dict[str, Any]:
    """The A side's per-process fields (a_*) and the paired ratios B/A of one row.

    ``ab_ratio_*``: of the process medians; ``ab_floor_ratio_*``: of the process medians of the
    ratio to the in-run floor (rows that have one), in which each process's own offset cancels.
    """
    empty: list[float | None] = [None] * pairs
    a_medians = list(a_row.get("process_medians", empty)) if a_row else empty
    a_ratios = list(a_row.get("process_ratio_medians", empty)) if a_row else empty
    b_medians = list(b_row.get("process_medians", empty)) if b_row else empty
    b_ratios = list(b_row.get("process_ratio_medians", empty)) if b_row else empty
    time_ratio, floor_ratio = paired_ratio(a_medians, b_medians), paired_ratio(a_ratios, b_ratios)
    return {
        "a_median": a_row.get("median") if a_row else None,
        "a_status": a_row.get("status") if a_row else "n/a",  # side A has no such row
        "a_process_medians": a_medians,
        "a_process_ratio_medians": a_ratios,
        "a_process_n": list(a_row.get("process_n", [])) if a_row else [],
        "a_samples": list(a_row.get("samples", [])) if a_row else [],
        "ab_ratio_median": _round(time_ratio["median"]),
        "ab_ratio_ci_low": _round(time_ratio["ci_low"]),
        "ab_ratio_ci_high": _round(time_ratio["ci_high"]),
        "ab_pairs": time_ratio["pairs"],
        "ab_floor_ratio_median": _round(floor_ratio["median"]),
        "ab_floor_ratio_ci_low": _round(floor_ratio["ci_low"]),
        "ab_floor_ratio_ci_high": _round(floor_ratio["ci_high"]),
    }


def merge_ab(docs: Sequence[Mapping[str, Any] | None], metas: Sequence[Mapping[str, Any]], slots: Sequence[Slot],
             specs: tuple[str, str], pairs: int) -> dict[str, Any]:
    """One A/B document from the 2K processes' documents (in time order, per `slots`).

    Rows are side B's merged rows (bench/io/process_merge.py) with side A's per-process fields and
    the paired ratios added (ab_fields); a row only side A has is kept with B's fields empty.
    env and config are side B's, env.processes every process in time order. The status is
    complete, failed (a process failed: named under "failures"; or no row) or interrupted.
    """
    from dbench.bench.core.identity import row_identity
    from dbench.bench.io.process_merge import merge_processes, merge_rows, process_entry
    from dbench.bench.io.results import mark_gpu_bound
    from dbench.bench.io.result_types import ResultDocument
    from dbench.bench.io.shard_merge import row_order, settle

    def side(name: str) -> tuple[list[Mapping[str, Any] | None], list[Mapping[str, Any]]]:
        picked = sorted((s.pair, i) for i, s in enumerate(slots) if s.side == name)
        return [docs[i] for _, i in picked], [metas[i] for _, i in picked]

    (a_docs, a_metas), (b_docs, b_metas) = side("a"), side("b")
    main = merge_processes(b_docs, b_metas) if any(d is not None for d in b_docs) else \
        merge_processes(a_docs, a_metas)
    a_rows = {row_identity(r): r for r in merge_rows(a_docs)}
    b_rows = {row_identity(r): r for r in merge_rows(b_docs)}
    rows = []
    for ident, b_row in b_rows.items():
        rows.append({**b_row, **ab_fields(a_rows.get(ident), b_row, pairs)})
    for ident, a_row in a_rows.items():
        if ident not in b_rows:
            empty = dict.fromkeys(("median", "q1", "q3", "ci_low", "ci_high", "rel_iqr", "ratio_median",
                                   "ratio_ci_low", "ratio_ci_high", "delta_median", "delta_ci_low", "delta_ci_high"))
            rows.append({**a_row, **empty, "samples": [], "n": 0, "process_n": [0] * pairs,
                         "process_medians": [None] * pairs, "process_ratio_medians": [None] * pairs,
                         "process_delta_medians": [None] * pairs, "status": "n/a", "reason": "not in side B",
                         **ab_fields(a_row, None, pairs)})
    rows = row_order(rows)
    mark_gpu_bound(rows)
    a_probe = [x for d in a_docs if d is not None for x in ((d.get("speed_probe") or {}).get("samples") or [])]
    from dbench.bench.core.probe import probe_summary

    main["env"]["processes"] = [process_entry(d, m) for d, m in zip(docs, metas)]
    main["config"]["processes"] = len(slots)
    main["config"]["rounds_done"] = sum(int((d or {}).get("config", {}).get("rounds_done") or 0) for d in docs)
    merged = ResultDocument.from_json(main)
    merged.ab = {"a": specs[0], "b": specs[1], "pairs": pairs, "order": order_text(slots)}
    merged.a_speed_probe = probe_summary(a_probe)
    merged.rows = rows
    return settle(merged, metas)  # both sides' processes decide the status; each failed one is named
