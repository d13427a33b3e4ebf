"""Which per-process statistic of a row's per-round ratios scatters least from pair to pair.

    python3 scripts/round_estimators.py NIGHT.json[.gz]...

An A/B night judges each CPU row on its per-pair log ratio B/A of one number per process: today the
median over the process's rounds of the row's time over its floor's in the same round. Each row's
samples hold every round of every process in order (process by process), so the per-round ratios
can be rebuilt and summarised another way. Per night and driver this prints the median over rows of
the per-pair SD of log(B/A) under each statistic: the smaller, the less the gate's CI needs. The
last column is what the rounds alone would make of the median's: the SD a pair's difference would
have if each process's median varied only by its own rounds' scatter (a seeded bootstrap of each
process's rounds, both sides). Close to the median's column, more rounds a process would narrow the
night; far below it, the processes differ among themselves and only more pairs would.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dbench.bench.core.identity import case_label
from dbench.bench.io.document import ResultFileError, read_result


def hodges_lehmann(x: np.ndarray) -> float:
    walsh = (x[:, None] + x[None, :]) / 2
    return float(np.median(walsh[np.triu_indices(len(x))]))


STATISTICS: dict[str, Callable[[np.ndarray], float]] = {
    "median": lambda x: float(np.median(x)),
    "mean": lambda x: float(np.mean(x)),
    "trimmed 10 %": lambda x: float(stats.trim_mean(x, 0.1)),
    "trimmed 25 %": lambda x: float(stats.trim_mean(x, 0.25)),
    "Hodges-Lehmann": hodges_lehmann,
}


ROUNDS_ONLY = "median: rounds"


def round_logs(row: dict[str, Any], floor: dict[str, Any], side: str) -> np.ndarray | None:
    """log(row / floor) per round, one line per process (None: the processes' rounds differ)."""
    counts = row.get(f"{side}process_n") or []
    values, floors = row.get(f"{side}samples") or [], floor.get(f"{side}samples") or []
    if not counts or len(set(counts)) != 1 or len(values) != counts[0] * len(counts) or len(floors) != len(values):
        return None
    return np.log(np.asarray(values, float) / np.asarray(floors, float)).reshape(len(counts), counts[0])


def rounds_only(b: np.ndarray, a: np.ndarray, rng: np.random.Generator, draws: int = 300) -> float:
    """The SD of a pair's median difference from each process's rounds alone (bootstrap)."""
    def se(x: np.ndarray) -> float:
        return float(np.median(x[rng.integers(0, len(x), (draws, len(x)))], axis=1).std())

    return float(np.sqrt(np.mean([se(b[p]) ** 2 + se(a[p]) ** 2 for p in range(b.shape[0])])))


def spreads(doc: dict[str, Any], driver: str) -> dict[str, list[float]]:
    floors = {(case_label(r), r["driver"]): r for r in doc["rows"] if r.get("metric") == "cpu_us"}
    out: dict[str, list[float]] = {name: [] for name in (*STATISTICS, ROUNDS_ONLY)}
    rng = np.random.default_rng(0)
    for row in doc["rows"]:
        floor = floors.get((row.get("baseline"), driver))
        if row.get("driver") != driver or row.get("metric") != "cpu_us" or floor is None:
            continue
        b, a = round_logs(row, floor, ""), round_logs(row, floor, "a_")
        if b is None or a is None or b.shape != a.shape:
            continue
        for name, statistic in STATISTICS.items():
            pairs = [statistic(b[p]) - statistic(a[p]) for p in range(b.shape[0])]
            out[name].append(float(np.std(pairs, ddof=1)))
        out[ROUNDS_ONLY].append(rounds_only(b, a, rng))
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:  # every file read before any line is printed
        docs = [(path, read_result(path)) for path in map(Path, paths)]
    except ResultFileError as exc:
        print(f"round_estimators.py: error: {exc}", file=sys.stderr)
        return 2
    print(f"{'night':<34} {'driver':<7} {'rows':>5}  " + "  ".join(f"{n:>14}" for n in (*STATISTICS, ROUNDS_ONLY)))
    for path, doc in docs:
        for driver in ("python", "cpp"):
            found = spreads(doc, driver)
            cells = "  ".join(f"{np.median(v) * 100:>13.2f}%" for v in found.values())
            print(f"{path.name.split('.json')[0]:<34} {driver:<7} {len(found['median']):>5}  {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
