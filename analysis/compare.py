"""Run-to-run comparison of two result files: per-row spread of the medians.

    python -m analysis.compare A.json B.json [--max-spread 0.03]

Prints, per op x variant x mode (x metric), both medians and their relative
spread |a - b| / mean, whether the variant ordering within each op x mode is
the same in both runs, and exits 1 when any spread exceeds --max-spread.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.load import load_results  # noqa: E402

KEY = ["op", "variant", "mode", "metric", "driver"]


def spreads(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    cols = KEY + ["median"]
    merged = a[a["status"] == "ok"][cols].merge(b[b["status"] == "ok"][cols], on=KEY, suffixes=("_a", "_b"))
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
    args = p.parse_args(argv)
    merged = spreads(load_results([args.a]), load_results([args.b]))
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
