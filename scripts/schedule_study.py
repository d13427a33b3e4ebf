"""How precise each boundary result is, and how far its rows moved from another's: the numbers that
chose the boundary's schedule on CUDA (scenarios/__init__.py).

    python3 scripts/schedule_study.py RESULT|FOLDER... [--rounds K[,K...]] [--drift]

Per result: its schedule (order, rounds, block, warm-up, the C++ driver's command), its phases in
seconds, and per driver and metric the median and 90th percentile over rows of the 95 % CI
half-width, absolute and of the per-round ratio to the floor, in % of the median. --rounds adds
the ratio CI half-width a row would have had from its first K rounds only (the same statistics,
bench.core.stats), which shows precision against rounds inside one run. --drift, for a result timed in
the shuffled order: each round's order rebuilt from the run's seed (bench/core/runner.py round_order:
the timed Python cases in the order of their rows, then the speed probe), and the robust SD of two
rows' log-ratio (each row's log samples less their median) by how many blocks apart they ran in
the same round: how the host drifts within a round. Of each two results: how far
each shared row's ratio to its floor and its median moved (median and p90 of |move|, in %).
Results may be plain or gzip-compressed JSON; a folder gives its result files. Of several files,
one that is not a result (the C++ driver's JSON beside a run) is skipped with a note. Exit 0; 2 when
a single file is not a result, or nothing is (one line).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbench.bench.core import stats
from dbench.bench.io.document import ResultFileError, read_results
from dbench.bench.core.identity import case_label, row_identity
from dbench.bench.core.runner import round_order

CLASSES = (("python", "cpu_us"), ("cpp", "cpu_us"), ("python", "gpu_us"), ("cpp", "gpu_us"))
MOVES = (("python", "cpu_us", "ratio_median"), ("cpp", "cpu_us", "ratio_median"), ("python", "cpu_us", "median"),
         ("python", "gpu_us", "median"), ("cpp", "gpu_us", "median"))


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def half_width(low: float, high: float, median: float) -> float:
    return (high - low) / 2 / abs(median) * 100


def timed(rows: Iterable[dict[str, Any]], driver: str, metric: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["driver"] == driver and r["metric"] == metric and r["status"] == "ok" and r["median"]]


def first_rounds_width(rows: list[dict[str, Any]], k: int) -> list[float]:
    """Each paired row's ratio CI half-width from its first k rounds and its floor's (rows with fewer
    than k rounds are left out)."""
    by_label = {case_label(r): r for r in rows}
    widths = []
    for r in rows:
        base = by_label.get(r.get("baseline") or "")
        if base is None or len(r["samples"]) < k or len(base["samples"]) != len(r["samples"]):
            continue
        q = stats.summarize(stats.paired_ratios(r["samples"][:k], base["samples"][:k]))
        widths.append(half_width(q.ci_low, q.ci_high, q.median))
    return widths


DRIFT_BINS = (0, 2, 5, 10, 20, 40, 80, 160, 10**9)


def drift(doc: dict[str, Any], pairs: int = 200_000) -> list[str]:
    """The robust SD (1.4826 MAD) of two Python CPU rows' log-ratio residuals in one round, by the
    distance of their blocks in that round's order (rebuilt from the seed: shuffled runs only)."""
    c = doc.get("config") or {}
    if c.get("order", "shuffled") != "shuffled":
        return ["  --drift: not a shuffled run (its order is not rebuilt here)"]
    rows = [r for r in timed(doc["rows"], "python", "cpu_us") if r["samples"]]
    n_rounds = len(rows[0]["samples"]) if rows else 0
    if not rows or any(len(r["samples"]) != n_rounds for r in rows):
        return ["  --drift: the rows do not share their rounds"]
    slots: list[Any] = [*range(len(rows)), "probe"]
    rng, where = random.Random(c.get("seed", 0)), []
    for _ in range(n_rounds):
        where.append({case: at for at, case in enumerate(round_order(slots, "shuffled", rng))})
    logs = [[math.log(x) for x in r["samples"]] for r in rows]
    residual = [[x - statistics.median(v) for x in v] for v in logs]
    draw, by_bin = random.Random(0), {}
    for _ in range(pairs):
        i, j, k = draw.randrange(len(rows)), draw.randrange(len(rows)), draw.randrange(n_rounds)
        if i != j:
            apart = abs(where[k][i] - where[k][j])
            b = next(b for b in range(len(DRIFT_BINS) - 1) if apart < DRIFT_BINS[b + 1])
            by_bin.setdefault(b, []).append(residual[i][k] - residual[j][k])
    lines = []
    for b in sorted(by_bin):
        d = by_bin[b]
        mid = statistics.median(d)
        sd = 1.4826 * statistics.median(abs(x - mid) for x in d)
        top = DRIFT_BINS[b + 1] if DRIFT_BINS[b + 1] < 10**9 else "end"
        lines.append(f"  blocks {DRIFT_BINS[b]} to {top} apart: {len(d)} pairs, log-ratio robust SD {sd:.4f}")
    return lines


def describe(path: str, doc: dict[str, Any], rounds: list[int]) -> list[str]:
    c = doc.get("config") or {}
    phases = c.get("phase_seconds") or {}
    command = ((doc.get("env") or {}).get("cpp_driver_context") or {}).get("dbench_command", [])
    lines = [f"{Path(path).name}: order {c.get('order', 'shuffled')}, {c.get('rounds_done')} rounds of "
             f"{c.get('block_seconds', 0) * 1e3:.2f} ms, warm-up {c.get('warmup_seconds', 0) * 1e3:.0f} ms, "
             f"{c.get('gpu_rounds_done')} GPU rounds; phases {phases} = {sum(phases.values()):.1f} s",
             f"  C++ driver: {' '.join(command)}"]
    for driver, metric in CLASSES:
        rows = timed(doc["rows"], driver, metric)
        if not rows:
            continue
        absolute = [half_width(r["ci_low"], r["ci_high"], r["median"]) for r in rows]
        ratio = [half_width(r["ratio_ci_low"], r["ratio_ci_high"], r["ratio_median"])
                 for r in rows if r.get("ratio_median")]
        line = (f"  {driver} {metric}: {len(rows)} rows of {rows[0]['n']} samples; CI half-width, absolute: median "
                f"{statistics.median(absolute):.2f} % p90 {p90(absolute):.2f} %")
        if ratio:
            line += (f"; ratio to the floor: median {statistics.median(ratio):.2f} % p90 {p90(ratio):.2f} % "
                     f"({len(ratio)} rows)")
        lines.append(line)
        if rounds and ratio and metric == "cpu_us":
            at = [(k, w) for k in rounds if (w := first_rounds_width(rows, k))]
            if at:
                lines.append("    ratio CI half-width from the first K rounds, median: " + "; ".join(
                    f"K={k} {statistics.median(w):.2f} %" for k, w in at))
    return lines


def moved(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    left, right = ({row_identity(r): r for r in doc["rows"] if r["status"] == "ok"} for doc in (a, b))
    lines = []
    for driver, metric, field in MOVES:
        moves = [(right[k][field] / r[field] - 1) * 100 for k, r in left.items()
                 if k in right and (r["driver"], r["metric"]) == (driver, metric)
                 and r.get(field) and right[k].get(field)]
        if moves:
            size = [abs(m) for m in moves]
            lines.append(f"  {driver} {metric} {field}: {len(moves)} rows, "
                         f"moved median {statistics.median(moves):+.2f} %, "
                         f"|move| median {statistics.median(size):.2f} % p90 {p90(size):.2f} %")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--rounds", default="", help="K[,K...]: the ratio CIs from each row's first K rounds too")
    parser.add_argument("--drift", action="store_true", help="shuffled runs: two rows' scatter by their distance")
    args = parser.parse_args(argv)
    try:
        rounds = [int(k) for k in args.rounds.split(",") if k]
    except ValueError:
        parser.error(f"--rounds takes whole numbers, got {args.rounds!r}")
    if any(k < 1 for k in rounds):
        parser.error("--rounds: K must be at least 1")
    try:
        docs = [(str(p), d) for p, d in read_results(args.results, note=lambda text: print(f"schedule_study: {text}"))]
    except ResultFileError as exc:
        print(f"schedule_study: error: {exc}", file=sys.stderr)
        return 2
    for path, doc in docs:
        print("\n".join(describe(path, doc, rounds)))
        if args.drift:
            print("\n".join(drift(doc)))
    for i, (path_a, a) in enumerate(docs):
        for path_b, b in docs[i + 1:]:
            print(f"{Path(path_a).name} -> {Path(path_b).name}:")
            print("\n".join(moved(a, b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
