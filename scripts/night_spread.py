"""How much the CPU ratio rows of real A/B nights scatter from pair to pair, by night and driver,
and how an injected night's rows sit against the gate's band: a table and one figure.

    python3 scripts/night_spread.py OUT.png NIGHT.json[.gz] ... [--injected NIGHT --injected-row REGEX]

Per row (a `cpu_us` row with a floor), the spread is the SD over the night's pairs of the log of
B's ratio-to-floor over A's (each the process's median of per-round ratios): the quantity whose
size, with the number of pairs, decides what the gate can detect. The table gives per night and
driver the rows' median and 90th percentile. With --injected, the figure's second panel shows that
night's ratio rows of the C++ driver with their 95 % t-intervals (not the gate's: its α is far
smaller), injected rows apart from the others, and the band an A/B night holds CPU rows to.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dbench.analysis.gate import DEFAULT_DELTA


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def pair_logs(row: dict[str, Any]) -> np.ndarray | None:
    """The per-pair log ratios B/A of a row's ratio to its floor (None: no floor, or a side missing)."""
    b, a = row.get("process_ratio_medians"), row.get("a_process_ratio_medians")
    if not b or not a or any(x is None for x in (*a, *b)):
        return None
    return np.log(np.asarray(b, float) / np.asarray(a, float))


def label(row: dict[str, Any]) -> str:
    return f"{row['op']}/{row['variant']}/{row['mode']}"


def spreads(doc: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per driver, the per-pair SD of every ratio row's log ratio."""
    out: dict[str, list[float]] = {}
    for row in doc["rows"]:
        logs = pair_logs(row) if row.get("metric") == "cpu_us" else None
        if logs is not None and len(logs) >= 2:
            out.setdefault(row["driver"], []).append(float(np.std(logs, ddof=1)))
    return {k: np.asarray(v) for k, v in out.items()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("figure", type=Path)
    p.add_argument("nights", type=Path, nargs="+")
    p.add_argument("--injected", type=Path, help="a night with an injected slowdown (also one of NIGHTS or not)")
    p.add_argument("--injected-row", default=r"/cpp_(typed|boxed)/", help="regex over op/variant/mode")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.ticker
    import matplotlib.pyplot as plt
    import scipy.stats

    panels = 2 if args.injected else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 5.2), squeeze=False)
    ax = axes[0][0]
    print(f"{'night':<40} {'driver':<7} {'rows':>5} {'median SD':>10} {'p90 SD':>8}")
    styles = {"python": "-", "cpp": "--"}
    names = [path.name.split(".json")[0] for path in args.nights]
    machines = []
    for i, path in enumerate(args.nights):
        doc = load(path)
        env = doc.get("env", {})
        machines.append(env.get("gpu_name") or f"{env.get('cpu_model', 'a CPU')} ({env.get('cpu_count', '?')} cores)")
        # Two nights of one name (aa-1 of two designs) are told apart by their folder.
        name = names[i] if names.count(names[i]) == 1 else f"{path.parent.name}/{names[i]}"
        design = "duet" if doc["config"].get("duet") else doc["config"].get("order", "shuffled")
        for driver, sd in sorted(spreads(doc).items()):
            print(f"{name:<40} {driver:<7} {len(sd):>5} {np.median(sd):>10.4f} {np.percentile(sd, 90):>8.4f}")
            xs = np.sort(sd) * 100
            what = "C++ driver" if driver == "cpp" else "Python"
            ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), styles.get(driver, ":"), where="post",
                    color=f"C{i % 10}", label=f"{name[:28]} ({design}), {what}")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("a row's spread from pair to pair (SD of log B/A ratio-to-floor, %)")
    ax.set_ylabel("fraction of rows")
    where = ", ".join(dict.fromkeys(machines))
    ax.set_title(f"CPU ratio rows of real A/B nights on {where}\n(solid: Python, dashed: C++ driver)", fontsize=10)
    ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax.grid(alpha=0.3, which="both")
    if args.injected:
        pattern = re.compile(args.injected_row)
        doc = load(args.injected)
        rows = [r for r in doc["rows"] if r["driver"] == "cpp" and r.get("metric") == "cpu_us"]
        rows = [(r, pair_logs(r)) for r in rows]
        rows = sorted(((r, lg) for r, lg in rows if lg is not None),
                      key=lambda t: (not pattern.search(label(t[0])), label(t[0])))
        ax2 = axes[0][1]
        for i, (r, lg) in enumerate(rows):
            mean, half = lg.mean(), scipy.stats.t.ppf(0.975, len(lg) - 1) * lg.std(ddof=1) / np.sqrt(len(lg))
            hit = bool(pattern.search(label(r)))
            centre = np.exp(mean)
            ax2.errorbar(centre, i, xerr=[[centre - np.exp(mean - half)], [np.exp(mean + half) - centre]],
                         fmt="o", ms=3, color="tab:red" if hit else "tab:gray", elinewidth=1)
        band = 1 + DEFAULT_DELTA["paired"]["cpu_us"]
        ax2.axvspan(1 / band, band, color="tab:green", alpha=0.12, label=f"the gate's ±{band - 1:.0%} band")
        ax2.axvline(1.0, color="k", lw=0.6)
        ax2.set_yticks(range(len(rows)), [label(r) for r, _ in rows], fontsize=5)
        ax2.invert_yaxis()
        ax2.set_xlabel("B / A, ratio to floor (95 % t-interval over the pairs)")
        night = args.injected.name.split(".json")[0]
        ax2.set_title(f"{night}: C++ driver rows\n(red: the injected op's rows)", fontsize=10)
        ax2.legend(fontsize=7, loc="lower right")
        ax2.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.figure, dpi=130)
    print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
