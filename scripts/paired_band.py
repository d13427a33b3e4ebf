"""What band ±δ an A/B night's rows need: how far from 1 the gate's CIs reach on real A/A nights, and
which rows each band calls on real injected nights.

    python3 scripts/paired_band.py --aa NIGHT.json[.gz]... [--injected NIGHT... --injected-row REGEX]
                                   [--deltas 0.01,0.02,0.03,0.05]

On identical code (A/A) a row's CI lies above 1 only by chance (α per bound) or by a bias between the
sides that the band must absorb; so per A/A night and class the table gives the largest CI lower
bound and the smallest upper bound of any row, and the rows each δ would call. On an injected night,
per δ and class: the injected rows called (of those judged) and every other row called. Each night
is judged by the gate at its defaults except δ (dbench.analysis.gate.gate, pooled per class).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dbench.analysis import gate


Night = tuple[Path, list[dict[str, Any]]]  # a night's file and its documents


def judged(night: Night, delta: float | None) -> list[tuple[str, gate.RowVerdict]]:
    result = gate.gate(night[1], delta=delta)
    return [(gate.row_class(r.metric.split("/")[0], r.label), r) for r in result.rows if r.ci_low is not None]


def name(path: Path) -> str:
    return path.name.split(".json")[0]


def aa_table(nights: list[Night], deltas: list[float]) -> None:
    print("A/A nights: per class, the largest CI lower bound and the smallest upper bound of any row, "
          "and the rows called at each δ")
    print(f"{'night':<40} {'class':<11} {'rows':>5} {'max low':>8} {'min high':>9}  "
          + " ".join(f"δ{d:.0%}".rjust(5) for d in deltas))
    for night in nights:
        calls = {d: judged(night, d) for d in deltas}
        rows = calls[deltas[0]]
        for key in gate.CLASSES:
            mine = [r for c, r in rows if c == key]
            if not mine:
                continue
            called = [sum(c == key and r.verdict in ("regression", "improvement") for c, r in calls[d]) for d in deltas]
            print(f"{name(night[0]):<40} {key:<11} {len(mine):>5} {max(r.ci_low for r in mine):>8.3f} "
                  f"{min(r.ci_high for r in mine):>9.3f}  " + " ".join(f"{n:>5}" for n in called))


def injected_table(nights: list[Night], pattern: re.Pattern[str], deltas: list[float]) -> None:
    print("\ninjected nights: per δ and class, injected rows called / judged, and other rows called")
    for night in nights:
        for d in deltas:
            rows = judged(night, d)
            cells = []
            for key in gate.CLASSES:
                hit = [r for c, r in rows if c == key and pattern.search(r.label)]
                other = [r for c, r in rows if c == key and not pattern.search(r.label)]
                caught = sum(r.verdict == "regression" for r in hit)
                wrong = sum(r.verdict == "regression" for r in other)
                cells.append(f"{key} {caught}/{len(hit)} (+{wrong} other)")
            print(f"{name(night[0]):<40} δ{d:.0%}: " + "; ".join(cells))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--aa", type=Path, nargs="+", required=True)
    p.add_argument("--injected", type=Path, nargs="*", default=[])
    p.add_argument("--injected-row", default=r"/(cpp|function_cpp|cpp_typed|cpp_boxed)/")
    p.add_argument("--deltas", default="0.01,0.02,0.03,0.05")
    args = p.parse_args()
    try:
        deltas = [float(v) for v in args.deltas.split(",")]
        pattern = re.compile(args.injected_row)
    except (ValueError, re.error) as exc:
        p.error(str(exc))
    try:  # every input checked before any table is printed
        for d in deltas:
            gate.check_delta(d, "--deltas")
        aa = [(path, [d for _, d in gate.load_run(path)]) for path in args.aa]
        injected = [(path, [d for _, d in gate.load_run(path)]) for path in args.injected]
    except (gate.ResultFileError, gate.GateInputError) as exc:
        p.error(str(exc))
    aa_table(aa, deltas)
    if injected:
        injected_table(injected, pattern, deltas)
    return 0


if __name__ == "__main__":
    sys.exit(main())
