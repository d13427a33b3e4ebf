"""Calibrate the regression gate from A/A data: per-row noise, minimum detectable effect and δ.

    python -m dbench.analysis.calibrate RUNS... --out FILE [--alpha-nightly 0.01] [--power 0.95]
                                 [--floor 0.02] [--processes N] [--split-files]
    python -m dbench.analysis.calibrate RUNS... --out FILE [--alpha-row A] --injected RUN... [--injected-row REGEX]
                                 [--injected-metric cpu_us|gpu_us]

RUNS are runs of identical code: each argument is one run (a file, or a folder whose files are
its processes; --split-files makes every file its own run), or A/B files whose two sides run
identical code. Per row and quantity (the CPU ratio to the in-run floor, the absolute median):

* sigma_log_*: σ of one process's log value within a run (pooled over runs; with one process
  per run, the spread of the runs), with df_*;
* sigma_run_log_*: σ of a whole run's shift that processes do not average away (one-way
  random-effects ANOVA over the runs; 0 when the runs agree as well as their processes do);
* mde_*: (z_{1-α} + z_{power})·σ·sqrt(2/n) for two independent runs of n processes each, σ being
  the effective per-process σ sqrt(σ_w² + n·σ_run²); ·σ_pair/sqrt(n) for n A/B pairs. α is
  Bonferroni's: the false alarms allowed per night divided by the rows judged per night;
* delta_* = max(mde_*, floor): the narrowest band at which an unchanged row is called `same`
  with about the stated power; the gate flags a slowdown once its CI clears the band, so the
  smallest slowdown flagged with that power is `detectable_*` (> δ);
* stable_absolute: the absolute median is at least as steady as the ratio to the floor (or the
  row has no floor ratio), so the gate judges it in µs.

With --injected, runs with a known slowdown in one variant (e.g. DBENCH_INJECT_NS on `cpp`) are
judged by the gate against each A/A run; it reports the false-alarm rate (rows called regression
or improvement over all pairs of A/A runs, in-sample) and the detection rate of the injected rows.

δ is capped at the widest band the gate reads (gate.MAX_CALIBRATED_DELTA). The file is written
atomically. Exit status: 0; 2 bad input, one line before any work where it can be checked: an
option that is not a finite number in its range, an --out path that cannot be written, an
unreadable or damaged result file, runs that cannot be compared or that say nothing of the noise.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

# Light imports only (numpy and scipy are imported where used): options, paths and files are
# checked before they load.
from dbench.analysis import gate as gatemod
from dbench.analysis import gate_stats as gs
from dbench.analysis.load import ResultFileError
from dbench.analysis.outputs import OutputPathError, check_output_file, write_output
from dbench.bench.harness.cli import Parser, path_value  # usage errors in one line, like run.py's
from dbench.bench.core.identity import identity_text

if TYPE_CHECKING:
    import numpy as np

EXIT_OK, EXIT_BAD_INPUT = 0, 2
QUANTITIES = (gatemod.RATIO, gatemod.ABSOLUTE)
SUFFIX = gatemod.SUFFIX

# The rows DBENCH_INJECT_NS slows down: the `cpp` variant's kernels, called from Python and through
# the dispatcher from C++ (typed and boxed); not its _autograd twin, the launcher or the stable op.
DEFAULT_INJECTED_ROW = r"/cpp/|/cpp_(typed|boxed)/"
MAX_DETECTABLE = 10.0  # an 11-fold slowdown: beyond it "detectable" says nothing useful
TARGET_EFFECT = 0.05  # the slowdown a nightly should catch: processes_for_target says what it takes
Run = Sequence[Mapping[str, Any]]  # the documents of one run


@dataclass(frozen=True)
class Noise:
    """Spread of one row's log values over a set of A/A runs."""

    sigma: float  # per process (per pair for A/B), within a run
    df: float
    sigma_run: float  # of a whole run's shift
    run_df: float
    n_obs: int
    processes: float  # median processes (pairs) per run


def within_between(groups: Sequence[np.ndarray]) -> Noise | None:
    """One-way random-effects ANOVA of log values grouped by run."""
    import numpy as np

    groups = [g for g in groups if g.size]
    sizes = np.array([g.size for g in groups], dtype=float)
    n_total, k = float(sizes.sum()), len(groups)
    if n_total < 2:
        return None
    df_w = n_total - k
    if df_w == 0:  # one process per run: the runs' spread is all there is, and it is per process
        values = np.concatenate(groups)
        return Noise(float(np.std(values, ddof=1)), float(k - 1), 0.0, math.inf, int(n_total), 1.0)
    ms_w = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df_w
    sigma_run, run_df = 0.0, math.inf
    if k >= 2:
        grand = float(np.concatenate(groups).mean())
        ms_b = float(sum(g.size * (g.mean() - grand) ** 2 for g in groups)) / (k - 1)
        n0 = (n_total - float((sizes ** 2).sum()) / n_total) / (k - 1)
        sigma_run, run_df = math.sqrt(max(0.0, (ms_b - ms_w) / n0)), float(k - 1)
    return Noise(math.sqrt(ms_w), df_w, sigma_run, run_df, int(n_total), float(np.median(sizes)))


def pair_noise(groups: Sequence[np.ndarray]) -> Noise | None:
    """σ of one pair's log ratio, around each A/B run's own mean (pooled over runs)."""
    import numpy as np

    groups = [g for g in groups if g.size]
    n_total = sum(g.size for g in groups)
    df = n_total - len(groups)
    if df < 1:
        return None
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    return Noise(math.sqrt(ss / df), float(df), 0.0, math.inf, int(n_total),
                 float(np.median([g.size for g in groups])))


def row_groups(runs: Sequence[Run], paired: bool) -> tuple[dict[Any, dict[str, list[np.ndarray]]], dict[Any, dict]]:
    """Per row identity and quantity, one array of log values per run (log pair ratios for A/B)."""
    import numpy as np

    groups: dict[Any, dict[str, list[np.ndarray]]] = {}
    names: dict[Any, dict] = {}
    for run in runs:
        for key, row in gatemod.collect(run).items():
            if row.status != "ok":
                continue
            names.setdefault(key, row.row)
            for q in QUANTITIES:
                if paired:
                    pairs = [(b, a) for b, a in row.pairs[q] if b is not None and a is not None and b > 0 and a > 0]
                    x = np.log([b / a for b, a in pairs]) if pairs else np.array([])
                else:
                    x = gs.log_values(row.values[q])
                groups.setdefault(key, {}).setdefault(q, []).append(x)
    return groups, names


def check_runs(runs: Sequence[Run]) -> bool:
    """Whether the runs are A/B runs; refuses a mix, and runs of different environments."""
    flags = [gatemod.is_ab(d) for run in runs for d in run]
    if not flags:
        raise gatemod.GateInputError("no runs given")
    if any(flags) and not all(flags):
        raise gatemod.GateInputError("the runs mix A/B files and plain result files")
    docs = [d for run in runs for d in run]
    diffs = gatemod.env_differences(docs[0], [(f"run {i}", d) for i, d in enumerate(docs)])
    if diffs:
        raise gatemod.GateInputError(f"the A/A runs are not comparable ({'; '.join(sorted(set(diffs)))})")
    return all(flags)


def calibrate(runs: Sequence[Run], *, alpha_nightly: float = 0.01, power: float = 0.95, floor: float = 0.02,
              processes: float | None = None, sources: Sequence[str] = (),
              alpha_row: float | None = None, target: float = TARGET_EFFECT) -> dict[str, Any]:
    """The calibration document of a set of A/A runs (each a list of result documents).
    alpha_row, when given, is the per-row level itself (a false-alarm budget per row, not per night)."""
    import scipy.stats

    paired = check_runs(runs)
    groups, names = row_groups(runs, paired)
    estimated = {key: {q: (pair_noise if paired else within_between)(g) for q, g in by_q.items()}
                 for key, by_q in groups.items()}
    noise = {k: {q: v for q, v in by_q.items() if v is not None} for k, by_q in estimated.items()}
    noise = {k: v for k, v in noise.items() if v}
    if not noise:
        raise gatemod.GateInputError("no row has enough processes or runs to estimate its noise "
                                     "(give ≥ 2 runs, or runs of ≥ 2 processes)")
    if alpha_row is None:
        alpha_row = alpha_nightly / len(noise)  # each row is judged once a night, on one quantity
    else:
        alpha_nightly = alpha_row * len(noise)  # the false alarms a night then expects
    rows = {}
    for key, by_q in noise.items():
        n = processes or statistics.median(v.processes for v in by_q.values())
        rows[identity_text(key)] = row_entry(names[key], by_q, n, alpha_row, power, floor, paired, target)
    docs = [d for run in runs for d in run]
    env = docs[0].get("env") or {}
    return {
        "kind": gatemod.CALIBRATION_KIND, "version": 1, "design": "paired" if paired else "independent",
        "params": {"alpha_nightly": alpha_nightly, "alpha_row": alpha_row, "power": power, "floor": floor,
                   "target_effect": target,
                   "processes": processes, "rows": len(rows), "runs": len(runs),
                   "z_alpha": float(scipy.stats.norm.ppf(1 - alpha_row)),
                   "z_power": float(scipy.stats.norm.ppf(power))},
        "env": {**gatemod.environment(docs[0]), "hostname": env.get("hostname"), "cpu_model": env.get("cpu_model"),
                "sm_clock_mhz": env.get("sm_clock_mhz"), "time": [d.get("env", {}).get("time") for d in docs]},
        "sources": list(sources),
        "rows": rows,
    }


def row_class(metric: str, label: str) -> str:
    """The name of a row's class (the gate's CLASSES), for a calibration row or a verdict."""
    return gatemod.CLASSES[gatemod.row_class(metric, label)]


def summary_lines(doc: Mapping[str, Any]) -> list[str]:
    """Per class of row: δ and the detectable slowdown at this design, and the processes per side
    (pairs) that would flag the target slowdown with the stated power."""
    unit = "pairs" if doc.get("design") == "paired" else "processes per side"
    target, out = doc["params"].get("target_effect", TARGET_EFFECT), []
    def class_of(r: Mapping[str, Any]) -> str:
        return row_class(str(r.get("metric") or ""), str(r.get("label") or ""))

    def text(x: float) -> str:
        return "never" if math.isinf(x) else f"{x:g}"

    for name in sorted({class_of(r) for r in doc["rows"].values()}):
        rows = [r for r in doc["rows"].values() if class_of(r) == name]
        deltas = sorted(r["delta"] for r in rows)
        det = sorted(r[f"detectable_{SUFFIX[gatemod.ABSOLUTE if r['stable_absolute'] else gatemod.RATIO]}"]
                     or math.inf for r in rows)
        need = sorted(r.get("processes_for_target") or math.inf for r in rows)
        out.append(f"  {name}: {len(rows)} rows; δ median {statistics.median(deltas):.1%}, max {deltas[-1]:.1%}; "
                   f"flagged at 95 %: median {statistics.median(det):.1%}; {unit} to flag +{target:.0%}: "
                   f"median {text(statistics.median(need))}, 90th percentile {text(need[int(0.9 * (len(need) - 1))])}")
    return out


def _within_reach(effect: float) -> float | None:
    """A detectable slowdown above MAX_DETECTABLE (x-fold) is no promise: None."""
    return effect if math.isfinite(effect) and effect <= MAX_DETECTABLE else None


@dataclass(frozen=True)
class Design:
    """What a gate of n processes per side (pairs), each as long as in the A/A runs, makes of a
    row's noise under the calibration rule: σ per process, MDE, δ, the effect's SE and df."""

    sigma: float  # per process (pair), run shifts included
    mde: float  # relative
    delta: float
    se: float  # of the log effect
    df: float

    @classmethod
    def of(cls, noise: Noise, n: float, alpha: float, power: float, floor: float, paired: bool) -> "Design":
        eff = math.sqrt(noise.sigma ** 2 + n * noise.sigma_run ** 2)
        m = gs.beyond_float(math.expm1, gs.mde(eff, n, alpha, power, paired))
        # With ≥ 2 processes the gate uses each side's own spread; with one, the calibrated σ.
        df = (n - 1 if paired else 2 * (n - 1)) if n >= 2 else noise.df
        # δ stays within what the gate accepts: a row this noisy is inconclusive at any δ it could use.
        delta = min(max(m, floor), gatemod.MAX_CALIBRATED_DELTA)
        return cls(eff, m, delta, eff * math.sqrt(1 / n if paired else 2 / n), df)

    def detectable(self, alpha: float, power: float) -> float:
        """The slowdown this design flags with `power` (δ plus about one MDE)."""
        return gs.detectable(self.delta, self.se, self.df, alpha, power)


def processes_for(target: float, noise: Noise, alpha: float, power: float, floor: float, paired: bool) -> int | None:
    """The fewest processes per side (pairs) whose design flags a `target` slowdown with `power`
    (None: none up to gs.MAX_PROCESSES, e.g. when run-to-run shifts alone exceed it, or δ's floor
    does)."""
    if target <= floor:
        return None
    return gs.smallest_n(lambda n: Design.of(noise, n, alpha, power, floor, paired).detectable(alpha, power) <= target)


def row_entry(row: Mapping[str, Any], by_q: Mapping[str, Noise], n: float, alpha: float, power: float,
              floor: float, paired: bool, target: float = TARGET_EFFECT) -> dict[str, Any]:
    entry: dict[str, Any] = {"label": gatemod.row_label(row), "metric": row.get("metric"), "n": n}
    effective = {}
    for q, v in by_q.items():
        s = SUFFIX[q]
        design = Design.of(v, n, alpha, power, floor, paired)
        effective[q] = design.sigma
        entry.update({f"sigma_log_{s}": v.sigma, f"df_{s}": v.df, f"sigma_run_log_{s}": v.sigma_run,
                      f"run_df_{s}": v.run_df if math.isfinite(v.run_df) else None,
                      f"n_obs_{s}": v.n_obs, f"mde_{s}": design.mde if math.isfinite(design.mde) else None,
                      f"delta_{s}": design.delta,
                      f"detectable_{s}": _within_reach(design.detectable(alpha, power))})
    for name in ("sigma_log", "sigma_run_log", "df", "run_df", "n_obs", "mde", "delta", "detectable"):
        for s in SUFFIX.values():  # a quantity without data (no floor ratio) reads as null
            entry.setdefault(f"{name}_{s}", None)
    # The gate judges GPU rows, and rows without a floor ratio, in absolute terms whatever the noise.
    stable = (row.get("metric") != "cpu_us" or gatemod.RATIO not in effective
              or effective.get(gatemod.ABSOLUTE, math.inf) <= effective[gatemod.RATIO])
    q = gatemod.ABSOLUTE if stable else gatemod.RATIO
    needed = processes_for(target, by_q[q], alpha, power, floor, paired) if q in by_q else None
    entry.update(stable_absolute=bool(stable), mde=entry[f"mde_{SUFFIX[q]}"], delta=entry[f"delta_{SUFFIX[q]}"],
                 processes_for_target=needed)
    return entry


# ---------------------------------------------------------------------------------------------
# Evaluation with a known injected slowdown


@dataclass(frozen=True)
class Evaluation:
    aa_trials: int
    aa_rows: int  # row judgements over the A/A trials
    false_alarms: int
    nights_with_alarm: int
    injected_trials: int  # injected row judgements
    detected: int
    claimed_power: float | None  # what the calibration promises at the observed injected effect
    observed_effect: float | None  # geometric mean ratio of the injected rows over trials
    # Per class of injected row (Python CPU, C++ driver CPU, GPU): verdicts, detections, observed effect.
    classes: dict[str, tuple[int, int, float | None]] = field(default_factory=dict)

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.aa_rows if self.aa_rows else math.nan

    @property
    def detection_rate(self) -> float:
        return self.detected / self.injected_trials if self.injected_trials else math.nan

    def lines(self, alpha_row: float, alpha_nightly: float) -> list[str]:
        return [
            f"A/A: {self.aa_trials} comparisons, {self.aa_rows} row verdicts, {self.false_alarms} called "
            f"regression/improvement: false-alarm rate {self.false_alarm_rate:.4f} per row "
            f"(target ≤ {alpha_row:.4g}); "
            f"{self.nights_with_alarm} comparisons with any alarm (target ≤ {alpha_nightly:g} of them)",
            f"injected: {self.injected_trials} row verdicts, {self.detected} regression: detection rate "
            f"{self.detection_rate:.3f}" + ("" if self.claimed_power is None else
                                            f" (claimed power at the observed effect "
                                            f"{self.observed_effect:.4f}: {self.claimed_power:.3f})"),
            *(f"  {name}: {n} verdicts, {hit} regression ({hit / n:.3f})"
              + ("" if effect is None else f", observed ratio {effect:.4f}")
              for name, (n, hit, effect) in self.classes.items()),
        ]


def _geomean_ratio(verdicts: Sequence[gatemod.RowVerdict]) -> float | None:
    import numpy as np

    ratios = [v.ratio for v in verdicts if v.ratio]
    return float(math.exp(np.mean(np.log(ratios)))) if ratios else None


def _judged(result: gatemod.GateResult) -> list[gatemod.RowVerdict]:
    return [r for r in result.rows if r.verdict in (gs.REGRESSION, gs.IMPROVEMENT, gs.SAME, gs.INCONCLUSIVE)]


def claimed_power(calibration: Mapping[str, Any], row_id: str, effect: float) -> float | None:
    """The calibration's promise: P(regression) for this row at a true ratio `effect`."""
    entry = calibration["rows"].get(row_id)
    if entry is None:
        return None
    s = SUFFIX[gatemod.ABSOLUTE if entry.get("stable_absolute") else gatemod.RATIO]
    sigma = math.sqrt(entry[f"sigma_log_{s}"] ** 2 + entry["n"] * entry[f"sigma_run_log_{s}"] ** 2)
    n, paired = entry["n"], calibration.get("design") == "paired"
    se = sigma * math.sqrt(1 / n if paired else 2 / n)
    df = max(n - 1 if paired else 2 * (n - 1), 1.0)
    return gs.power(math.log(effect), entry[f"delta_{s}"], se, df, calibration["params"]["alpha_row"])


def evaluate(aa_runs: Sequence[Run], injected_runs: Sequence[Run], calibration: Mapping[str, Any],
             injected_row: str = DEFAULT_INJECTED_ROW, injected_metric: str | None = None) -> Evaluation:
    """False alarms over every pair of A/A runs (each A/B run alone), and detection of the injected
    rows (labels matching the regular expression `injected_row`, metrics starting with
    `injected_metric` when given) in every injected run against every A/A run (each A/B run alone)."""
    import numpy as np

    paired = calibration.get("design") == "paired"
    aa = [gatemod.gate(r, calibration=calibration) for r in aa_runs] if paired else \
        [gatemod.gate(b, a, calibration=calibration) for a, b in combinations(aa_runs, 2)]
    judged = [_judged(r) for r in aa]
    alarms = [sum(v.verdict in (gs.REGRESSION, gs.IMPROVEMENT) for v in j) for j in judged]
    inj = [gatemod.gate(r, calibration=calibration) for r in injected_runs] if paired else \
        [gatemod.gate(r, a, calibration=calibration) for r in injected_runs for a in aa_runs]
    pattern = re.compile(injected_row)
    hits = [v for r in inj for v in _judged(r) if pattern.search(v.label)
            and (injected_metric is None or v.metric.startswith(injected_metric))]
    observed = _geomean_ratio(hits)
    claimed = [claimed_power(calibration, v.row_id, observed) for v in hits] if observed else []
    promised = [p for p in claimed if p is not None]
    classes: dict[str, tuple[int, int, float | None]] = {}
    for name in sorted({row_class(v.metric, v.label) for v in hits}):
        group = [v for v in hits if row_class(v.metric, v.label) == name]
        classes[name] = (len(group), sum(v.verdict == gs.REGRESSION for v in group), _geomean_ratio(group))
    return Evaluation(len(aa), sum(map(len, judged)), sum(alarms), sum(a > 0 for a in alarms), len(hits),
                      sum(v.verdict == gs.REGRESSION for v in hits),
                      float(np.mean(promised)) if promised else None, observed, classes)


# ---------------------------------------------------------------------------------------------
# Command line


def load_runs(paths: Sequence[Path], split_files: bool) -> list[tuple[list[str], list[dict[str, Any]]]]:
    runs = []
    for path in paths:
        items = gatemod.load_run(path)
        runs += [([s], [d]) for s, d in items] if split_files else [([s for s, _ in items], [d for _, d in items])]
    return runs


def _in(value: float | None, low: float, high: float, *, closed_low: bool = False) -> bool:
    """A finite number in (low, high), or [low, high) with closed_low."""
    return value is not None and math.isfinite(value) and (low <= value if closed_low else low < value) and value < high


def check_options(args: argparse.Namespace) -> None:
    """Every number finite and in range, and the pattern a regular expression: GateInputError naming
    the option (in one line) before any file is read."""
    ranges = [("--alpha-nightly", args.alpha_nightly, 0.0, 1.0), ("--power", args.power, 0.0, 1.0),
              ("--floor", args.floor, 0.0, 1.0)]
    if args.alpha_row is not None:
        ranges.append(("--alpha-row", args.alpha_row, 0.0, 0.5))  # the gate's range for α
    for name, value, low, high in ranges:
        if not _in(value, low, high):
            raise gatemod.GateInputError(f"{name} must lie in ({low:g}, {high:g}), not {value}")
    if not _in(args.target_effect, 0.0, MAX_DETECTABLE):
        raise gatemod.GateInputError(f"--target-effect must be a positive slowdown (0.05 = +5 %) below "
                                     f"{MAX_DETECTABLE:g}, not {args.target_effect}")
    if args.processes is not None and not _in(args.processes, 1.0, gs.MAX_PROCESSES + 1, closed_low=True):
        raise gatemod.GateInputError(f"--processes must be a number of processes (pairs) from 1 to "
                                     f"{gs.MAX_PROCESSES}, not {args.processes}")
    try:
        re.compile(args.injected_row)
    except re.error as exc:
        raise gatemod.GateInputError(f"--injected-row {args.injected_row!r}: not a regular expression ({exc})") \
            from None


def main(argv: list[str] | None = None, prog: str = "python -m dbench.analysis.calibrate") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("runs", type=path_value, nargs="+", help="A/A runs: files or folders (one run each)")
    p.add_argument("--out", type=path_value, required=True, help="the calibration file to write")
    p.add_argument("--alpha-nightly", type=float, default=0.01,
                   help="false alarms allowed per night, all rows together (Bonferroni: per row, this / rows)")
    p.add_argument("--alpha-row", type=float,
                   help="the per-row false-alarm level itself, instead of --alpha-nightly / rows")
    p.add_argument("--power", type=float, default=0.95)
    p.add_argument("--floor", type=float, default=0.02, help="the narrowest band δ, whatever the noise")
    p.add_argument("--target-effect", type=float, default=TARGET_EFFECT,
                   help="the slowdown whose cost in processes (pairs) each row reports (processes_for_target)")
    p.add_argument("--processes", type=float, help="processes (pairs) per side of a nightly (default: as in RUNS)")
    p.add_argument("--split-files", action="store_true", help="every file of a folder is its own run")
    p.add_argument("--injected", type=path_value, nargs="+", help="runs with a known injected slowdown, to evaluate")
    p.add_argument("--injected-row", default=DEFAULT_INJECTED_ROW,
                   help="regular expression matching the labels of the injected rows")
    p.add_argument("--injected-metric", choices=("cpu_us", "gpu_us"),
                   help="judge the detection on this metric's rows only (a GPU spin also costs CPU time)")
    args = p.parse_args(argv)
    try:
        check_options(args)
        check_output_file(args.out, "--out")
        runs = load_runs(args.runs, args.split_files)
        injected = load_runs(args.injected, args.split_files) if args.injected else []
        doc = calibrate([d for _, d in runs], alpha_nightly=args.alpha_nightly, power=args.power,
                        floor=args.floor, processes=args.processes, sources=[s for ss, _ in runs for s in ss],
                        alpha_row=args.alpha_row, target=args.target_effect)
        write_output(args.out, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    except (ResultFileError, gatemod.GateInputError, OutputPathError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    deltas = sorted(r["delta"] for r in doc["rows"].values())
    print(f"{args.out}: {len(deltas)} rows from {len(runs)} runs ({doc['design']}); per-row α "
          f"{doc['params']['alpha_row']:.3g}; δ median {statistics.median(deltas):.2%}, max {deltas[-1]:.2%}")
    for line in summary_lines(doc):
        print(line)
    if injected:
        try:
            ev = evaluate([d for _, d in runs], [d for _, d in injected], doc, args.injected_row, args.injected_metric)
        except (ResultFileError, gatemod.GateInputError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        for line in ev.lines(doc["params"]["alpha_row"], doc["params"]["alpha_nightly"]):
            print(line)
    return EXIT_OK


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("calibrate", main)
