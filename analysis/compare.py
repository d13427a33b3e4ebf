"""Run-to-run comparison of two result files: per-row spread of the medians.

    python -m dbench.analysis.compare A.json B.json [--max-spread 0.03] [--value median|ratio_median]

Prints, per op x variant x mode (x metric), both values and their relative
spread |a - b| / mean, and whether the variant ordering within each op x mode
is the same in both runs.

Before any number it checks that the two runs can be compared: the same
scenario, device kind, GPU, torch and dtype (refused, exit 2, unless
--allow-different-env). Rows FAILED in either run, and rows timed in one run
only, are listed and fail the comparison.

Exit status: 0 within --max-spread; 1 a spread over the limit, or a failed or
missing row (a row marked ok without a value counts as missing); 2 bad input (an
unreadable or non-result file, a non-finite or non-positive time in one, a
--max-spread that is not a finite number >= 0, a --csv path that cannot be
written, incomparable runs).
--value ratio_median compares each row's ratio to its baseline (paired per
round) instead of its absolute median. When both runs carry a speed probe
(bench/core/probe.py), its medians are printed first: a machine that ran X% slower
in one run moves every absolute median by about X%.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from dbench.bench.io.escape import terminal
from dbench.analysis.load import read_result, rows_frame
from dbench.analysis.outputs import OutputPathError, check_output_file, write_output
from dbench.bench.harness.cli import Parser, path_value  # usage errors in one line, like run.py's

if TYPE_CHECKING:
    import pandas as pd

KEY = ["row_id"]  # bench/core/identity.py: every field that says which case and metric a row is
SHOWN = ["op", "variant", "mode", "metric", "driver"]  # what the printout names a row by
EXIT_OK, EXIT_DIFFERENT, EXIT_BAD_INPUT = 0, 1, 2


def environment(doc: dict[str, Any]) -> dict[str, Any]:
    """What must match for two runs' numbers to be comparable."""
    env = doc.get("env") or {}
    device = str(env.get("device") or "")
    return {"scenario": doc.get("scenario"), "device": "cuda" if device.startswith("cuda") else device or None,
            "gpu": env.get("gpu_name"), "torch": env.get("torch"), "dtype": (doc.get("config") or {}).get("dtype")}


def env_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    ea, eb = environment(a), environment(b)
    return [f"{k}: A {ea[k]!r}, B {eb[k]!r}" for k in ea if ea[k] != eb[k]]


def _timed_status(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """A row marked ok without a `value` was not timed: its status reads "untimed", so it can never
    be compared as if it had been."""
    untimed = (frame["status"] == "ok") & (frame[value].isna() if value in frame else True)
    return frame.assign(status=frame["status"].mask(untimed, "untimed"))


def unmatched(a: pd.DataFrame, b: pd.DataFrame, value: str = "median") -> pd.DataFrame:
    """Rows that fail a comparison: FAILED in either run, or timed (ok with a value) in one run and
    not the other. Rows timed in neither run are not compared and not listed."""
    import pandas as pd

    a, b = _timed_status(a, value), _timed_status(b, value)
    cols = KEY + ["status", "reason"]
    sides = a.reindex(columns=cols).merge(b.reindex(columns=cols), on=KEY, how="outer", suffixes=("_a", "_b"))
    shown = pd.concat([a[KEY + SHOWN], b[KEY + SHOWN]]).drop_duplicates(KEY)
    sides = sides.merge(shown, on=KEY, how="left")
    failed = (sides["status_a"] == "failed") | (sides["status_b"] == "failed")
    one_sided = (sides["status_a"] == "ok") != (sides["status_b"] == "ok")
    out = sides[failed | one_sided].copy()
    out["problem"] = [
        "failed" if f else f"missing in {'B' if sa == 'ok' else 'A'}"
        for f, sa in zip(failed[failed | one_sided], out["status_a"])
    ]
    return out


def spreads(a: pd.DataFrame, b: pd.DataFrame, value: str = "median") -> pd.DataFrame:
    """Rows present and ok in both runs, with `value` as median_a / median_b and their spread."""
    import pandas as pd

    if value not in a.columns or value not in b.columns:
        return pd.DataFrame(columns=SHOWN + KEY + ["group_id", "median_a", "median_b", "spread"])
    a = a[(a["status"] == "ok") & a[value].notna()][SHOWN + KEY + ["group_id", value]].rename(columns={value: "median"})
    b = b[(b["status"] == "ok") & b[value].notna()][KEY + [value]].rename(columns={value: "median"})
    merged = a.merge(b, on=KEY, suffixes=("_a", "_b"))
    mean = (merged["median_a"] + merged["median_b"]) / 2
    merged["spread"] = (merged["median_a"] - merged["median_b"]).abs() / mean
    return merged


def same_ordering(merged: pd.DataFrame) -> pd.DataFrame:
    """Per op x mode x metric: is the ranking of variants identical in both runs?"""
    import pandas as pd

    out = []
    for _, g in merged.groupby("group_id", sort=False):
        op, mode, metric, driver = (g[c].iloc[0] for c in ("op", "mode", "metric", "driver"))
        ra = list(g.sort_values("median_a")["variant"])
        rb = list(g.sort_values("median_b")["variant"])
        out.append({"op": op, "mode": mode, "metric": metric, "driver": driver, "same_order": ra == rb,
                    "order_a": " < ".join(ra), "order_b": " < ".join(rb)})
    return pd.DataFrame(out)


def _print_comparison(merged: Any, problems: Any, max_spread: float) -> None:
    """The per-row spreads, worst first; whether each group keeps its order; the totals; the rows not
    compared. Names and reasons come from the files: shown through bench/io/escape.py `terminal`."""
    import pandas as pd

    from dbench.bench.io.escape import frame

    pd.set_option("display.width", 200)
    print(frame(merged.drop(columns=KEY + ["group_id"]).sort_values("spread", ascending=False), terminal)
          .to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    order = frame(same_ordering(merged), terminal)
    print()
    print(order[["op", "mode", "metric", "driver", "same_order"]].to_string(index=False))
    for _, row in order[~order["same_order"]].iterrows():
        indent = " " * (len(row["op"]) + len(row["mode"]) + 1)
        print(f"  {row['op']}/{row['mode']}: A {row['order_a']}\n  {indent}  B {row['order_b']}")
    for (driver, metric), g in merged.groupby(["driver", "metric"]):
        print(f"  {terminal(driver)} {terminal(metric)}: rows {len(g)}, median spread {g['spread'].median():.2%}, "
              f"max {g['spread'].max():.2%}, over limit {(g['spread'] > max_spread).sum()}")
    print(f"\nrows {len(merged)}, median spread {merged['spread'].median():.2%}, max spread "
          f"{merged['spread'].max():.2%} (limit {max_spread:.0%}), "
          f"rows over limit {(merged['spread'] > max_spread).sum()}")
    if not problems.empty:
        print(f"\n{len(problems)} row(s) not compared (these fail the comparison):")
        for _, r in problems.iterrows():
            reason = r["reason_a"] if isinstance(r["reason_a"], str) else r["reason_b"]
            print(terminal(f"  {r['problem']}: {r['op']}/{r['variant']}/{r['mode']} {r['metric']} ({r['driver']})"
                           f"{f' — {reason}' if isinstance(reason, str) else ''}"))


def main(argv: list[str] | None = None, prog: str = "python -m dbench.analysis.compare") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("a", type=path_value)
    p.add_argument("b", type=path_value)
    p.add_argument("--max-spread", type=float, default=0.03)
    p.add_argument("--csv", type=path_value, help="write the per-row spreads here")
    p.add_argument("--value", choices=("median", "ratio_median"), default="median",
                   help="compare absolute medians (default) or ratios to the baseline")
    p.add_argument("--allow-different-env", action="store_true",
                   help="compare runs of different scenarios, devices, GPUs, torch builds or dtypes (with a warning)")
    args = p.parse_args(argv)
    try:
        if not (math.isfinite(args.max_spread) and args.max_spread >= 0):
            raise ValueError(f"--max-spread must be a finite number >= 0 (0.03 = 3 %), not {args.max_spread}")
        if args.csv is not None:
            check_output_file(args.csv, "--csv")
        docs = [read_result(path) for path in (args.a, args.b)]
    except ValueError as exc:  # ResultFileError, OutputPathError and the checks above
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    differences = env_differences(*docs)
    if differences and not args.allow_different_env:
        print(f"{prog}: error: the runs are not comparable ({terminal('; '.join(differences))}); "
              "pass --allow-different-env to compare them anyway", file=sys.stderr)
        return EXIT_BAD_INPUT
    for d in differences:
        print(f"warning: different environments, {terminal(d)}")
    probe_a, probe_b = ((doc.get("speed_probe") or {}).get("median") for doc in docs)
    if probe_a is not None and probe_b is not None:
        print(f"speed probe: A {probe_a:.3f} µs, B {probe_b:.3f} µs (B/A {probe_b / probe_a:.3f})")
    rows_a, rows_b = rows_frame(docs[0], str(args.a)), rows_frame(docs[1], str(args.b))
    problems = unmatched(rows_a, rows_b, args.value)
    merged = spreads(rows_a, rows_b, args.value)
    if merged.empty:
        print("no common rows")
        return EXIT_DIFFERENT
    _print_comparison(merged, problems, args.max_spread)
    worst = merged["spread"].max()
    if args.csv:
        try:
            write_output(args.csv, merged.to_csv(index=False))
        except OutputPathError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    return EXIT_OK if worst <= args.max_spread and problems.empty else EXIT_DIFFERENT


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("compare", main)
