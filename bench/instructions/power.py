"""What the instruction-count check gets wrong and right, measured against the committed file.

The check compares one collection with the expected file. Two things move a row's count without a
change to the code it measures: the heap layout (any edit to code imported before the cases moves
every later allocation) and nothing else once the environment is fixed (environment.py, staging.py).
So the study runs, with the code as it is:

* A/A collections under layouts the expected file was not made with: `--heap-pad N` keeps N small
  objects alive before the cases are built, like an unrelated edit. A row beyond its margin there is
  a false alarm.
* Injected collections: every timed row gets a known extra cost of `effect` × its expected count
  (inject.py), under one more layout. A row flagged `regression` there is a detection. The pad's
  wrapper has a fixed cost, so on cheap rows it adds more than the effect: those rows are listed
  apart (`overshot_rows`), not counted as trials of it.

Each verdict is taken twice, with the file's own per-row margins and with a flat margin (±1 %), so
the cost of the widened rows is visible. One collection is one trial per row.
"""

from __future__ import annotations

import math

import datetime as dt
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

from dbench.bench.instructions.check import compare
from dbench.bench.instructions.collect import Config, collect
from dbench.bench.instructions.inject import PAD_FIXED, PAD_PER_ITERATION, iterations_for

DEFAULT_PADS: tuple[int, ...] = (300, 2500, 8000)  # none of them is the expected file's (0)
DEFAULT_EFFECTS: tuple[float, ...] = (0.01, 0.02, 0.05)
INJECTED_PAD = 1700  # heap pad of the injected collections: one more layout
FLAT_MARGIN = 0.01


@dataclass(frozen=True)
class Trial:
    kind: str  # "aa" | "injected"
    heap_pad: int
    effect: float  # 0 for A/A


def plan(pads: tuple[int, ...], effects: tuple[float, ...]) -> list[Trial]:
    if any(p < 0 for p in pads) or len(set(pads)) != len(pads):
        raise ValueError(f"heap pads must be distinct and >= 0 (got {pads})")
    if any(not 0 < e < 1 for e in effects):
        raise ValueError(f"effects must be fractions in (0, 1) (got {effects})")
    return [Trial("aa", p, 0.0) for p in pads] + [Trial("injected", INJECTED_PAD, e) for e in effects]


# A row is a trial of an effect when the pad can add about that much: the wrapper alone costs
# PAD_FIXED, which on the cheapest row (about 7 200 instructions a call) is a 28 % slowdown.
ON_TARGET = 1.25


def injections(expected: dict[str, Any], effect: float) -> tuple[tuple[str, int], ...]:
    """(label, pad iterations) adding at least `effect` of each timed row's expected count."""
    from dbench.bench.core.identity import case_label

    return tuple((case_label(r), iterations_for(float(r["instructions"]), effect))
                 for r in expected["rows"] if r.get("instructions") is not None)


def planned_fraction(count: float, iterations: int) -> float:
    """The extra cost a pad of `iterations` adds to a row of `count` instructions, as a fraction."""
    return (PAD_FIXED + PAD_PER_ITERATION * iterations) / count


def _flat(expected: dict[str, Any], margin: float) -> dict[str, Any]:
    rows = [{k: v for k, v in r.items() if k != "margin"} for r in expected["rows"]]
    return {**expected, "default_margin": margin, "rows": rows}


def judge(trial: Trial, expected: dict[str, Any], actual: dict[str, Any], flat_margin: float,
          pads: dict[str, int]) -> dict[str, Any]:
    """One collection's verdicts under both margin rules: per row the change, and what was called.
    pads: the pad iterations each row was given (none for A/A)."""
    own = compare(expected, actual)
    flat = {v.label: v for v in compare(_flat(expected, flat_margin), actual)}
    rows = []
    for v in own:
        row: dict[str, Any] = {"row": v.label, "change": None if v.change is None else round(v.change, 6),
               "margin": v.margin, "verdict": v.status, "verdict_flat": flat[v.label].status}
        if v.label in pads and v.expected:
            row["injected"] = round(planned_fraction(v.expected, pads[v.label]), 6)
            row["on_target"] = row["injected"] <= ON_TARGET * trial.effect
        rows.append(row)
    return {"kind": trial.kind, "heap_pad": trial.heap_pad, "effect": trial.effect,
            "source_digest": actual["env"].get("source_digest"), "wall_s": actual["env"].get("wall_s"), "rows": rows}


def summarise(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """False alarms over the A/A rows, detections per injected effect, under each margin rule."""
    out: dict[str, Any] = {}
    for rule, key in (("own_margins", "verdict"), ("flat_margin", "verdict_flat")):
        aa = [r for t in trials if t["kind"] == "aa" for r in t["rows"]]
        alarms = sum(r[key] != "ok" for r in aa)
        detection = {}
        for t in trials:
            if t["kind"] == "injected":
                on = [r for r in t["rows"] if r.get("on_target")]
                hit = sum(r[key] == "regression" for r in on)
                detection[f"{t['effect']:.0%}"] = {
                    "detected": hit, "trials": len(on), "rate": hit / len(on) if on else None,
                    # rows the pad could only slow down by more than the effect: caught, but no trial of it
                    "overshot_rows": len(t["rows"]) - len(on),
                    "overshot_detected": sum(r[key] == "regression" for r in t["rows"] if not r.get("on_target"))}
        out[rule] = {"false_alarms": alarms, "aa_trials": len(aa), "false_alarm_rate": alarms / len(aa) if aa else None,
                     "detection": detection}
    aa_changes = [abs(r["change"]) for t in trials if t["kind"] == "aa" for r in t["rows"] if r["change"] is not None]
    if aa_changes:
        aa_changes.sort()
        out["aa_abs_change"] = {"median": aa_changes[len(aa_changes) // 2], "max": aa_changes[-1]}
    return out


# A row whose count moved in the study's A/A trials gets 1.5 x its largest shift, rounded up to
# this step (results/cpu-instructions/README.md, "The margins").
MARGIN_FACTOR, MARGIN_STEP = 1.5, 0.005


def margins_from(study: dict[str, Any]) -> dict[str, float]:
    """Per row label, the margin its A/A shifts in `study` call for: 1.5 x the largest |change|,
    rounded up to 0.5 %; rows that did not move beyond 2/3 of the default margin are left out."""
    from dbench.bench.instructions.check import DEFAULT_MARGIN

    shifts: dict[str, float] = {}
    for trial in study.get("trials", []):
        if trial.get("kind") != "aa":
            continue
        for r in trial["rows"]:
            if r.get("change") is not None:
                shifts[r["row"]] = max(shifts.get(r["row"], 0.0), abs(r["change"]))
    return {row: math.ceil(round(MARGIN_FACTOR * shift / MARGIN_STEP, 6)) * MARGIN_STEP
            for row, shift in shifts.items() if MARGIN_FACTOR * shift > DEFAULT_MARGIN}


def run(expected: dict[str, Any], trials: list[Trial], flat_margin: float = FLAT_MARGIN,
        on_trial: Callable[[int, Trial], None] | None = None,
        on_result: Callable[[dict[str, Any]], None] | None = None,
        collect_fn: Callable[[Config, int], dict[str, Any]] = lambda config, worker: collect(config),
        jobs: int = 1) -> dict[str, Any]:
    """Every trial, `jobs` at a time (collect_fn gets the worker index 0..jobs-1, which picks its
    stage); `on_result` gets the document after each one (status running, then complete), so an
    interrupted study keeps the trials it finished. Trials keep their planned order."""
    base = Config.from_dict(expected["config"])
    done: dict[int, dict[str, Any]] = {}

    def document(status: str) -> dict[str, Any]:
        return {"schema": "dbench-instructions-power/1", "status": status,
                "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "expected_env": {k: expected["env"].get(k) for k in ("time", "source_digest", "build_digest", "torch")},
                "config": expected["config"], "flat_margin": flat_margin, "planned": len(trials),
                "summary": summarise(judged()), "trials": judged()}

    def judged() -> list[dict[str, Any]]:
        return [done[i] for i in sorted(done)]

    free: queue.Queue[int] = queue.Queue()
    for worker in range(jobs):
        free.put(worker)
    lock = threading.Lock()

    def one(i: int, trial: Trial) -> None:
        worker = free.get()
        try:
            if on_trial is not None:
                on_trial(i + 1, trial)
            inject = injections(expected, trial.effect) if trial.kind == "injected" else ()
            config = replace(base, heap_pad=trial.heap_pad, inject=inject)
            result = judge(trial, expected, collect_fn(config, worker), flat_margin, dict(inject))
        finally:
            free.put(worker)
        with lock:
            done[i] = result
            if on_result is not None:
                on_result(document("running" if len(done) < len(trials) else "complete"))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(one, i, t) for i, t in enumerate(trials)]:
            future.result()  # the first failure ends the study (the finished trials are written)
    return document("complete")


def add_collection(study: dict[str, Any], expected: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """`study` with one more A/A trial: `actual`, a collection made elsewhere (another commit's
    code: an unrelated edit moves the heap as a pad does), judged against `expected`."""
    trial = judge(Trial("aa", 0, 0.0), expected, actual, float(study.get("flat_margin", FLAT_MARGIN)), {})
    trial["against_source_digest"] = expected["env"].get("source_digest")
    trials = [*study.get("trials", []), trial]
    return {**study, "planned": len(trials), "summary": summarise(trials), "trials": trials}


def report(document: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout  # looked up at the call: a caller may have replaced it
    s = document["summary"]
    for rule in ("own_margins", "flat_margin"):
        r = s[rule]
        name = "the file's margins" if rule == "own_margins" else f"a flat ±{document['flat_margin']:.0%}"
        print(f"{name}: false alarms {r['false_alarms']}/{r['aa_trials']} A/A row-trials"
              + "".join(f"; +{e} detected {d['detected']}/{d['trials']} (+{d['overshot_rows']} rows the pad "
                        f"overshoots)" for e, d in r["detection"].items()), file=out)
    if "aa_abs_change" in s:
        print(f"A/A |change|: median {s['aa_abs_change']['median']:.3%}, max {s['aa_abs_change']['max']:.3%}", file=out)
