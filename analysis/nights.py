"""Synthetic nights: what the gate, at given settings, decides on nights made from real A/B pairs.

    python -m dbench.analysis.nights AA_RUN... [--pairs 6] [--nights 1000] [--seed 0] [--out FILE]
                               [--injected RUN... --injected-row REGEX [--injected-metric gpu_us]]
                               [--delta D] [--alpha-night A | --alpha A] [--target T] [--require CLASS]
                               [--calibration FILE]
    python -m dbench.analysis.nights plot STUDY.json... --out PNG

AA_RUN are A/B result files (`run.py --ab`) whose two sides ran identical code. Their pairs (pair i
of a file: side B's and side A's process i, adjacent in time) are pooled, keeping every row of one
pair together, since the host's state is shared by all rows of a process. A synthetic night draws
--pairs of them without replacement and swaps each pair's sides with probability 1/2 (under A/A the
labels are exchangeable), then is judged by the gate exactly as the nightly judges an A/B file. The
report is per night, as the nightly is judged: how many nights PASS, FAIL (a false alarm: any gating
regression on identical code) or have NO DECISION, which rows raised the alarms, and per class how
often it gated and how many of its rows were decided.

With --injected, A/B files whose side B carries a known slowdown in the rows matching
--injected-row: their pairs are drawn the same way (never swapped), and the report adds how often
each injected row was called `regression` and how many other rows were called regression.

`plot` draws studies of one pool at several --pairs: the share of nights per outcome, and each
class's detectable slowdown against the target.

The pairs are reused across nights, so the nights are not independent: a rate near 0 or 1 says the
pool never produced the other outcome, not that it cannot happen. The pool's size is printed. Exit 0;
2 on bad input (one line), before any night is judged.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from dbench.analysis import gate as gatemod
from dbench.analysis import gate_stats as gs
from dbench.analysis.load import ResultFileError
from dbench.analysis.outputs import OutputPathError, check_output_file, write_output
from dbench.bench.harness.cli import MAX_PROCESSES, MAX_SEED, Parser, name_list, path_value, seed_value, whole
from dbench.bench.core.identity import row_identity

# Per-process lists of an A/B row: side B's and side A's of each quantity the gate reads.
SIDES = (("process_medians", "a_process_medians"), ("process_ratio_medians", "a_process_ratio_medians"))


# Numbers the command line takes: a night draws 2 to all of the pool's pairs (at most --pairs' top in
# run.py). A night costs 20-30 ms on 2 cores and, with --injected, ~0.2 MB kept for the summary: 10^4
# nights are minutes and 2 GB, ten times the committed studies' 1000, and more nights of one pool add
# little (its pairs are reused); a bigger number would run for hours or run out of memory.
MAX_NIGHTS = 10_000
pairs_value = whole(2, MAX_PROCESSES // 2)


class NightsInputError(ValueError):
    """Input that cannot make a night; the message is one line."""


@dataclass(frozen=True)
class Pool:
    """The pairs of a set of A/B files: for each pair, per row, (B, A) of each quantity."""

    template: dict[str, Any]  # a document whose rows are replaced night by night
    keys: list[tuple[Any, ...]]  # row identities, in the template's order
    rows: dict[tuple[Any, ...], dict[str, Any]]  # the row each night's row is made from
    pairs: list[dict[tuple[Any, ...], list[tuple[float | None, float | None]]]]  # [pair][row] -> per SIDES
    sources: list[str]


def pool(docs: Sequence[tuple[str, Mapping[str, Any]]]) -> Pool:
    if not docs:
        raise NightsInputError("no A/B files")
    for source, doc in docs:
        if not gatemod.is_ab(doc):
            raise NightsInputError(f"{source}: not an A/B result (run.py --ab)")
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    pairs: list[dict[tuple[Any, ...], list[tuple[float | None, float | None]]]] = []
    for _, doc in docs:
        judged = [r for r in doc["rows"] if r.get("metric") in gatemod.JUDGED_METRICS]
        for row in judged:
            key = row_identity(row)
            if key not in rows or (rows[key].get("status") != "ok" and row.get("status") == "ok"):
                rows[key] = row
        n = max((len(r.get("process_medians") or []) for r in judged), default=0)
        for i in range(n):
            pair = {}
            for row in judged:
                ok = str(row.get("status") or "ok").lower() == "ok" and str(row.get("a_status") or "ok").lower() == "ok"
                pair[row_identity(row)] = [_at(row.get(b), i) if ok else None for b, _ in SIDES], \
                    [_at(row.get(a), i) if ok else None for _, a in SIDES]
            pairs.append({k: list(zip(*v)) for k, v in pair.items()})
    if len(pairs) < 2:
        raise NightsInputError(f"{len(pairs)} pair(s) in the files: a night needs at least 2")
    template = dict(docs[0][1])
    return Pool(template, list(rows), rows, pairs, [s for s, _ in docs])


def _at(values: Any, i: int) -> float | None:
    return values[i] if isinstance(values, list) and i < len(values) else None


def night(p: Pool, chosen: Sequence[int], swaps: Sequence[bool]) -> dict[str, Any]:
    """An A/B document of the chosen pairs (sides swapped where asked)."""
    out_rows = []
    for key in p.keys:
        row = {k: v for k, v in p.rows[key].items() if k not in ("samples", "a_samples")}
        lists: dict[str, list[float | None]] = {name: [] for side in SIDES for name in side}
        for index, swap in zip(chosen, swaps):
            per_side = p.pairs[index].get(key) or [(None, None)] * len(SIDES)
            for (b_name, a_name), (b, a) in zip(SIDES, per_side):
                b, a = (a, b) if swap else (b, a)
                lists[b_name].append(b)
                lists[a_name].append(a)
        timed = any(v is not None for v in lists["process_medians"])
        row.update(lists, samples=[])
        row["status"] = "ok" if timed else row.get("status") or "n/a"
        row["a_status"] = "ok" if any(v is not None for v in lists["a_process_medians"]) else row.get("a_status")
        out_rows.append(row)
    ab = {**p.template["ab"], "pairs": len(chosen), "order": "ABBA" * (len(chosen) // 2) + "AB" * (len(chosen) % 2)}
    return {**p.template, "rows": out_rows, "ab": ab}


@dataclass
class Tally:
    nights: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    alarm_rows: Counter[str] = field(default_factory=Counter)  # rows called regression (gating) on identical code
    advisory_alarms: int = 0  # nights with a regression in an advisory class only
    gating: Counter[str] = field(default_factory=Counter)  # per class: nights it gated
    decided: dict[str, list[float]] = field(default_factory=dict)  # per class: share of its judged rows decided
    detectable: dict[str, list[float]] = field(default_factory=dict)  # per class: median detectable slowdown
    alpha_row: list[float] = field(default_factory=list)
    # Per class, over every night: rows judged with a CI, rows called regression or improvement, rows
    # whose CI excludes 1 (the two-sided test of no change at 2α), and the prior's d0 of each pool.
    row_trials: Counter[str] = field(default_factory=Counter)
    row_alarms: Counter[str] = field(default_factory=Counter)
    row_excludes_one: Counter[str] = field(default_factory=Counter)
    d0: dict[str, list[float]] = field(default_factory=dict)
    tests: dict[str, Counter[str]] = field(default_factory=dict)  # per class: "test metric" -> nights

    def add(self, result: gatemod.GateResult) -> None:
        self.nights += 1
        self.outcomes[result.outcome] += 1
        alarms = [r for r in result.rows if r.verdict == gs.REGRESSION]
        self.alarm_rows.update(f"{r.label} [{r.metric}]" for r in alarms if result.gating(r))
        if alarms and not any(result.gating(r) for r in alarms):
            self.advisory_alarms += 1
        self.alpha_row.append(result.alpha)
        for key, c in result.classes.items():
            self.gating[key] += c.gating
            self.decided.setdefault(key, []).append(c.decided / c.judged if c.judged else 0.0)
            self.detectable.setdefault(key, []).append(math.inf if c.detectable is None else c.detectable)
            for t in c.tests:
                self.tests.setdefault(key, Counter())[f"{t.test} on {t.metric}"] += 1
                if t.test == gatemod.MODERATED and t.d0 is not None:
                    self.d0.setdefault(f"{key} {t.metric}", []).append(t.d0)
        for r in result.rows:
            if r.ci_low is not None and r.ci_high is not None:
                self.row_trials[r.row_class] += 1
                self.row_alarms[r.row_class] += r.verdict in (gs.REGRESSION, gs.IMPROVEMENT)
                self.row_excludes_one[r.row_class] += r.ci_low > 1 or r.ci_high < 1


def settings_of(args: Any) -> dict[str, Any]:
    return dict(delta=args.delta, alpha=args.alpha, alpha_night=args.alpha_night, target=args.target,
                require=args.require, pool=not args.per_row, calibration=args.calibration_doc)


def run_nights(p: Pool, pairs: int, nights: int, seed: int, swap: bool, settings: Mapping[str, Any],
               progress: bool = False) -> tuple[Tally, list[gatemod.GateResult]]:
    import numpy as np

    if not 2 <= pairs <= len(p.pairs):
        raise NightsInputError(f"--pairs {pairs}: the pool has {len(p.pairs)} pairs (a night takes 2 to all of them)")
    rng = np.random.default_rng(seed)
    tally, results = Tally(), []
    for i in range(nights):
        chosen = rng.choice(len(p.pairs), size=pairs, replace=False)
        swaps = rng.random(pairs) < 0.5 if swap else np.zeros(pairs, dtype=bool)
        result = gatemod.gate([night(p, chosen.tolist(), swaps.tolist())], **settings)
        tally.add(result)
        results.append(result)
        if progress and (i + 1) % max(1, nights // 10) == 0:
            print(f"[nights] {i + 1}/{nights}", file=sys.stderr, flush=True)
    return tally, results


def summary(tally: Tally, pool_size: int, pairs: int) -> dict[str, Any]:
    import numpy as np

    n = tally.nights
    return {
        "nights": n, "pairs_per_night": pairs, "pool_pairs": pool_size,
        "outcomes": {k: tally.outcomes[k] for k in (gatemod.PASS, gatemod.FAIL, gatemod.NO_DECISION)},
        "pass_rate": tally.outcomes[gatemod.PASS] / n,
        "false_alarm_nights": tally.outcomes[gatemod.FAIL] / n,
        "advisory_alarm_nights": tally.advisory_alarms / n,
        "alpha_row_median": float(np.median(tally.alpha_row)),
        "alarm_rows": dict(tally.alarm_rows.most_common()),
        "classes": {key: {"name": gatemod.CLASSES[key], "gating_nights": tally.gating[key] / n,
                          "decided_median": float(np.median(tally.decided[key])),
                          "detectable_median": _finite(float(np.median(tally.detectable[key]))),
                          "tests": dict(tally.tests.get(key, {})),
                          **row_rates(tally, key)}
                    for key in tally.decided},
        "d0": {pool: {"median": _finite(float(np.median(v))), "min": _finite(float(np.min(v))),
                      "max": _finite(float(np.max(v))), "infinite_nights": sum(math.isinf(x) for x in v)}
               for pool, v in sorted(tally.d0.items())},
        "rows": row_rates(tally),
    }


def row_rates(tally: Tally, key: str | None = None) -> dict[str, Any]:
    """Per-row false positives under A/A, of one class or all: verdicts regression or improvement
    (each at most α by construction), and CIs that exclude 1 (2α for a calibrated t: the sharper test)."""
    keys = [key] if key else list(tally.row_trials)
    trials = sum(tally.row_trials[k] for k in keys)
    alarms, excludes = sum(tally.row_alarms[k] for k in keys), sum(tally.row_excludes_one[k] for k in keys)
    return {"row_trials": trials, "row_alarms": alarms, "row_alarm_rate": alarms / trials if trials else None,
            "row_excludes_one": excludes, "row_excludes_one_rate": excludes / trials if trials else None}


def injected_summary(results: Sequence[gatemod.GateResult], pattern: str, metric: str | None) -> dict[str, Any]:
    rx = re.compile(pattern)

    def injected(r: gatemod.RowVerdict) -> bool:
        return bool(rx.search(r.label)) and (metric is None or r.metric.startswith(metric))

    per_row: dict[str, list[int]] = {}
    others = 0
    for result in results:
        for r in result.rows:
            if injected(r) and r.verdict in (*gatemod.DECIDED, gs.INCONCLUSIVE):
                per_row.setdefault(f"{r.label} [{r.metric}]", []).append(r.verdict == gs.REGRESSION)
            elif r.verdict == gs.REGRESSION and result.gating(r):
                others += 1
    hits = [h for v in per_row.values() for h in v]
    return {"rows": len(per_row), "row_trials": len(hits), "caught": sum(hits),
            "catch_rate": sum(hits) / len(hits) if hits else None,
            "nights_all_caught": sum(all(r.verdict == gs.REGRESSION for r in res.rows if injected(r))
                                     for res in results) / len(results),
            "other_rows_called_regression": others,
            "per_row": {k: sum(v) / len(v) for k, v in sorted(per_row.items())}}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def lines(doc: Mapping[str, Any]) -> list[str]:
    s = doc["aa"]
    out = [f"A/A: {s['nights']} synthetic nights of {s['pairs_per_night']} pairs drawn from {s['pool_pairs']} "
           f"(per-row α median {s['alpha_row_median']:.3g}): PASS {s['outcomes']['PASS']}, "
           f"FAIL {s['outcomes']['FAIL']} (false alarm), NO DECISION {s['outcomes']['NO DECISION']}; "
           f"nights with only advisory regressions {s['advisory_alarm_nights']:.1%}"]
    for c in s["classes"].values():
        det = "none" if c["detectable_median"] is None else f"+{c['detectable_median']:.1%}"
        out.append(f"  {c['name']}: gating on {c['gating_nights']:.1%} of nights; rows decided (median) "
                   f"{c['decided_median']:.1%}; detectable slowdown (median) {det}")
    out += [f"  false alarm: {k} on {v} night(s)" for k, v in list(s["alarm_rows"].items())[:10]]
    rows, alpha = s.get("rows"), s["alpha_row_median"]
    if rows and rows["row_trials"]:
        out.append(f"  per row: {rows['row_trials']} row verdicts with a CI; regression or improvement "
                   f"{rows['row_alarms']} ({rows['row_alarm_rate']:.2g}; α {alpha:.3g}); CI excluding 1 "
                   f"{rows['row_excludes_one']} ({rows['row_excludes_one_rate']:.2g}; 2α {2 * alpha:.3g})")
    for c in s["classes"].values():
        if c.get("row_trials"):
            out.append(f"  {c['name']}: CI excluding 1 on {c['row_excludes_one']} of {c['row_trials']} row verdicts "
                       f"({c['row_excludes_one_rate']:.2g}); tests " + ", ".join(
                           f"{t} on {v} night(s)" for t, v in c.get("tests", {}).items()))

    def show(x: float | None) -> str:
        return "∞" if x is None else f"{x:.1f}"

    for pool, d in (s.get("d0") or {}).items():
        out.append(f"  prior d0 of {pool}: median {show(d['median'])}, range {show(d['min'])}–{show(d['max'])}, "
                   f"∞ on {d['infinite_nights']} night(s)")
    inj = doc.get("injected")
    if inj:
        rate = "n/a" if inj["catch_rate"] is None else f"{inj['catch_rate']:.1%}"
        out.append(f"injected: {inj['nights']} nights of {inj['pairs_per_night']} pairs from {inj['pool_pairs']}: "
                   f"{inj['caught']} of {inj['row_trials']} injected row verdicts regression ({rate}); "
                   f"every injected row caught on {inj['nights_all_caught']:.1%} of nights; "
                   f"{inj['other_rows_called_regression']} other gating rows called regression; "
                   f"outcomes {inj['outcomes']}")
    return out


def study_label(doc: Mapping[str, Any]) -> str:
    """A study's settings in a few words: its pairs, and the gate settings it changed."""
    settings = doc.get("settings") or {}
    extra = [f"α {settings['alpha']:g} a row" if settings.get("alpha") else "",
             f"α {settings['alpha_night']:g} a night" if settings.get("alpha_night") else "",
             f"target {settings['target']:g}" if settings.get("target") else "",
             "all classes gate" if set(settings.get("require") or ()) == set(gatemod.CLASSES) else ""]
    return "\n".join([f"{doc['aa']['pairs_per_night']} pairs", *[e for e in extra if e]])


def figure(studies: Sequence[Mapping[str, Any]]) -> Any:
    """Synthetic nights of several studies (one pool; by pairs per night, other settings named under
    them): left, the share of A/A nights that PASS, FAIL or decide nothing; right, each class's
    detectable slowdown (median row) against the target, below which the class gates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dbench.analysis.figures import SERIES_COLORS

    if not studies:
        raise NightsInputError("no study to draw")
    studies = sorted(studies, key=lambda d: (d["aa"]["pairs_per_night"], study_label(d).count("\n") == 0))
    labels = [study_label(d) for d in studies]
    x = list(range(len(studies)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    bottom = [0.0] * len(studies)
    for outcome, color in ((gatemod.PASS, SERIES_COLORS[2]), (gatemod.NO_DECISION, "#B0B0B0"),
                           (gatemod.FAIL, SERIES_COLORS[3])):
        share = [d["aa"]["outcomes"][outcome] / d["aa"]["nights"] for d in studies]
        left.bar(x, share, bottom=bottom, color=color, label=outcome, width=0.7)
        for i, (b, v) in enumerate(zip(bottom, share)):
            if v >= 0.005:
                left.annotate(f"{v:.1%}", (i, b + v / 2), ha="center", va="center", fontsize=7)
        bottom = [b + v for b, v in zip(bottom, share)]
    left.set(ylabel="share of A/A nights", ylim=(0, 1), xticks=x, xticklabels=labels,
             title=f"outcome of {studies[0]['aa']['nights']} synthetic nights each")
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=3, fontsize=8, frameon=False)
    for i, key in enumerate(gatemod.CLASSES):
        found = [(j, d["aa"]["classes"][key]["detectable_median"]) for j, d in enumerate(studies)
                 if (d["aa"]["classes"].get(key) or {}).get("detectable_median") is not None]
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        # The gate's defaults as a line over pairs; a study with other settings as a lone marker.
        default = [(j, v) for j, v in found if "\n" not in labels[j]]
        other = [(j, v) for j, v in found if "\n" in labels[j]]
        if default:
            right.plot([j for j, _ in default], [100 * v for _, v in default], marker="o", color=color,
                       label=gatemod.CLASSES[key])
        if other:
            right.plot([j for j, _ in other], [100 * v for _, v in other], marker="D", mfc="none", ls="none",
                       color=color, label=None if default else gatemod.CLASSES[key])
    given = next((d["settings"].get("target") for d in studies if d["settings"].get("target")), None)
    targets: dict[float, list[str]] = {}
    for key, name in gatemod.CLASSES.items():
        targets.setdefault(given or gatemod.DEFAULT_TARGETS[key], []).append(name)
    for (target, names), style in zip(targets.items(), ("--", ":")):  # named in the legend, not over the data
        right.axhline(100 * target, color="black", linestyle=style, lw=1,
                      label=f"target +{target:.0%} ({', '.join(names)}): a class below it gates")
    right.set(ylabel="slowdown flagged with 95 % power (%)", yscale="log", xticks=x, xticklabels=labels,
              title="what each class detects (median row)")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2, fontsize=7, frameon=False)
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="y")
    return fig


def plot_main(argv: list[str], prog: str = "python -m dbench.analysis.nights plot") -> int:
    """`nights plot STUDY.json... --out PNG`: the figure of studies written by --out."""
    p = Parser(prog=prog, description=(figure.__doc__ or "").split("\n")[0])
    p.add_argument("studies", type=path_value, nargs="+")
    p.add_argument("--out", type=path_value, required=True)
    args = p.parse_args(argv)
    try:
        check_output_file(args.out, "--out")
        studies = []
        for path in args.studies:
            doc = gatemod.read_json(path, "nights study")
            if not isinstance(doc, dict) or doc.get("kind") != "dbench-nights":
                raise NightsInputError(f"{path}: not a study written by analysis.nights --out")
            studies.append(doc)
        fig = figure(studies)
    except (NightsInputError, ResultFileError, OutputPathError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    from dbench.analysis.figures import save

    save(fig, args.out)
    print(f"wrote {args.out}")
    return 0


def load_ab(paths: Sequence[Path]) -> list[tuple[str, dict[str, Any]]]:
    return [item for path in paths for item in gatemod.load_run(path)]


def _check(args: Any) -> None:
    """Every option checked before any night is drawn (NightsInputError / GateInputError: exit 2)."""
    if args.injected and not args.injected_row:
        raise NightsInputError("--injected needs --injected-row (which rows carry the slowdown)")
    try:
        re.compile(args.injected_row)
    except re.error as exc:
        raise NightsInputError(f"--injected-row is not a regular expression: {exc}") from None
    gatemod.check_delta(args.delta)
    gatemod.check_alpha(args.alpha_night, "--alpha-night")
    gatemod.check_alpha(args.alpha, "--alpha")
    gatemod.check_delta(args.target, "--target")
    gatemod.check_classes(args.require, "--require")
    if args.out:
        check_output_file(args.out, "--out")


def main(argv: list[str] | None = None, prog: str = "python -m dbench.analysis.nights") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plot"]:
        return plot_main(argv[1:], f"{prog} plot")
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("aa", type=path_value, nargs="+", help="A/A A/B result files or folders")
    p.add_argument("--pairs", type=pairs_value, default=6,
                   help=f"pairs per night, 2 to {MAX_PROCESSES // 2} (the nightly's --pairs; default 6)")
    p.add_argument("--nights", type=whole(1, MAX_NIGHTS), default=1000, help=f"1 to {MAX_NIGHTS} (default 1000)")
    p.add_argument("--seed", type=seed_value, default=0, help=f"0 to {MAX_SEED} (default 0)")
    p.add_argument("--injected", type=path_value, nargs="+", default=[],
                   help="A/B files with a known slowdown on side B")
    p.add_argument("--injected-row", default="", help="regular expression of the injected rows' labels")
    p.add_argument("--injected-metric", choices=gatemod.JUDGED_METRICS, help="only this metric is injected")
    p.add_argument("--injected-pairs", type=pairs_value, help="pairs per injected night (default --pairs)")
    p.add_argument("--delta", type=float)
    p.add_argument("--alpha-night", type=float)
    p.add_argument("--alpha", type=float, help="a per-row α instead of the night's shared one (as the gate's)")
    p.add_argument("--target", type=float)
    p.add_argument("--require", type=name_list, action="append", default=[], metavar="CLASS[,CLASS]")
    p.add_argument("--calibration", type=path_value)
    p.add_argument("--per-row", action="store_true", help="each row on its own pairs (the gate's --per-row)")
    p.add_argument("--out", type=path_value, help="write the summary as JSON here")
    args = p.parse_args(argv)
    args.require = [c for names in args.require for c in names]
    try:
        _check(args)
        args.calibration_doc = gatemod.load_calibration(args.calibration) if args.calibration else None
        aa_pool = pool(load_ab(args.aa))
        inj_pool = pool(load_ab(args.injected)) if args.injected else None
        settings = settings_of(args)
        tally, _ = run_nights(aa_pool, args.pairs, args.nights, args.seed, True, settings, progress=True)
        doc: dict[str, Any] = {"kind": "dbench-nights", "aa_sources": aa_pool.sources,
                               "settings": {**{k: v for k, v in settings.items() if k != "calibration"},
                                            "calibration": str(args.calibration) if args.calibration else None,
                                            "seed": args.seed},
                               "aa": summary(tally, len(aa_pool.pairs), args.pairs)}
        if inj_pool is not None:
            k = args.injected_pairs or args.pairs
            tally_i, results = run_nights(inj_pool, k, args.nights, args.seed + 1, False, settings, progress=True)
            doc["injected"] = {"sources": inj_pool.sources, "row": args.injected_row, "metric": args.injected_metric,
                               "nights": tally_i.nights, "pairs_per_night": k, "pool_pairs": len(inj_pool.pairs),
                               "outcomes": dict(tally_i.outcomes),
                               **injected_summary(results, args.injected_row, args.injected_metric)}
    except (NightsInputError, gatemod.GateInputError, ResultFileError, OutputPathError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines(doc)))
    if args.out:
        try:
            write_output(args.out, json.dumps(doc, indent=1) + "\n")
        except OutputPathError as exc:  # checked above, then failed: a full disk, the folder gone
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("nights", main)
