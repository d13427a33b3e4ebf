"""Run-to-run comparison of two result files: per-row spread of the medians.

    python -m analysis.compare A.json B.json [--max-spread 0.03] [--value median|ratio_median]

Prints, per op x variant x mode (x metric), both values and their relative
spread |a - b| / mean, whether the variant ordering within each op x mode is
the same in both runs, and exits 1 when any spread exceeds --max-spread.
--value ratio_median compares each row's ratio to its baseline (paired per
round) instead of its absolute median. When both runs carry a speed probe
(bench/probe.py), its medians are printed first: a machine that ran X% slower
in one run moves every absolute median by about X%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.load import rows_frame  # noqa: E402
from bench.results import load_result  # noqa: E402

KEY = ["op", "variant", "mode", "metric", "driver"]


def spreads(a: pd.DataFrame, b: pd.DataFrame, value: str = "median") -> pd.DataFrame:
    """Rows present and ok in both runs, with `value` as median_a / median_b and their spread."""
    if value not in a.columns or value not in b.columns:
        return pd.DataFrame(columns=KEY + ["median_a", "median_b", "spread"])
    a = a[(a["status"] == "ok") & a[value].notna()][KEY + [value]].rename(columns={value: "median"})
    b = b[(b["status"] == "ok") & b[value].notna()][KEY + [value]].rename(columns={value: "median"})
    merged = a.merge(b, on=KEY, suffixes=("_a", "_b"))
    mean = (merged["median_a"] + merged["median_b"]) / 2
    merged["spread"] = (merged["median_a"] - merged["median_b"]).abs() / mean
    return merged


def same_ordering(merged: pd.DataFrame) -> pd.DataFrame:
    """Per op x mode x metric: is the ranking of variants identical in both runs?"""
    out = []
    for (op, mode, metric, driver), g in merged.groupby(["op", "mode", "metric", "driver"]):
        ra = list(g.sort_values("median_a")["variant"])
        rb = list(g.sort_values("median_b")["variant"])
        out.append({"op": op, "mode": mode, "metric": metric, "driver": driver, "same_order": ra == rb,
                    "order_a": " < ".join(ra), "order_b": " < ".join(rb)})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--max-spread", type=float, default=0.03)
    p.add_argument("--csv", type=Path, help="write the per-row spreads here")
    p.add_argument("--value", choices=("median", "ratio_median"), default="median",
                   help="compare absolute medians (default) or ratios to the baseline")
    args = p.parse_args(argv)
    for path in (args.a, args.b):
        if not path.is_file():
            p.error(f"no such result file: {path}")
    docs = [load_result(path) for path in (args.a, args.b)]
    probes = [(doc.get("speed_probe") or {}).get("median") for doc in docs]
    if all(x is not None for x in probes):
        print(f"speed probe: A {probes[0]:.3f} µs, B {probes[1]:.3f} µs (B/A {probes[1] / probes[0]:.3f})")
    merged = spreads(rows_frame(docs[0], str(args.a)), rows_frame(docs[1], str(args.b)), args.value)
    if merged.empty:
        print("no common rows")
        return 1
    pd.set_option("display.width", 200)
    print(merged.sort_values("spread", ascending=False).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    order = same_ordering(merged)
    print()
    print(order[["op", "mode", "metric", "driver", "same_order"]].to_string(index=False))
    for _, row in order[~order["same_order"]].iterrows():
        print(f"  {row['op']}/{row['mode']}: A {row['order_a']}\n  {'':{len(row['op']) + len(row['mode']) + 1}}  B {row['order_b']}")
    worst = merged["spread"].max()
    for (driver, metric), g in merged.groupby(["driver", "metric"]):
        print(f"  {driver} {metric}: rows {len(g)}, median spread {g['spread'].median():.2%}, "
              f"max {g['spread'].max():.2%}, over limit {(g['spread'] > args.max_spread).sum()}")
    print(f"\nrows {len(merged)}, median spread {merged['spread'].median():.2%}, max spread {worst:.2%} "
          f"(limit {args.max_spread:.0%}), rows over limit {(merged['spread'] > args.max_spread).sum()}")
    if args.csv:
        merged.to_csv(args.csv, index=False)
    return 0 if worst <= args.max_spread else 1


if __name__ == "__main__":
    sys.exit(main())
