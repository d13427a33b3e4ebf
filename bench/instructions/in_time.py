"""A breakdown in microseconds: each layer's instructions over the floor, at the speed of the
boundary's own code.

Callgrind counts instructions, not time. A native run of the same cases (the boundary scenario on
CPU tensors, after the collection) measures each case's overhead over its floor (its paired Δ µs,
with a CI). A case's extra instructions over its measured extra µs is the speed of its extra code,
in instructions per µs; in one mode the boundary's code (interpreter, bindings, dispatcher) runs at
about one speed on a machine whatever the op (a mode that records a graph runs slower per
instruction), so the median of those speeds over the run's *other* ops' cases of the same mode is
the speed each op's layers are converted at (over its own cases where the run has one op: then the
median case agrees by construction, and the rows say so). A layer's µs is its instructions over
the floor at that speed, with the interval the median's own 95 % CI gives. `explained`, the layers' µs over the
measured overhead, then says how far each case's extra code runs from the boundary's usual speed:
below 1 where it stalls more per instruction (cache misses, allocation, atomics), above where it
stalls less. Cases outside AGREEMENT of 1 are flagged, not adjusted.

(The floor's own speed, its instructions over its µs, is recorded beside it; it is no substitute:
where the floor runs the op's vectorised kernel it is far faster per instruction than the
boundary's code.)
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

from dbench.bench.core.identity import case_identity, case_label
from dbench.bench.instructions.breakdown import floor_of

AGREEMENT = 0.2  # a case's layers add up to its measured overhead within this fraction, or it is flagged
MIN_CASES = 3  # a mode's speed is taken from at least this many cases, or from every mode's


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    # The counts document names a user's op by file and declaration, a result by its full origin:
    # within one breakdown an op's name is unique, so the join leaves op_source out.
    return case_identity({k: v for k, v in row.items() if k != "op_source"})


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median: the order statistics the binomial(n, ½) puts
    around it (the sample's ends where n is too small for the level)."""
    from scipy.stats import binom

    ordered = sorted(values)
    n = len(ordered)
    low = int(binom.ppf((1 - level) / 2, n, 0.5))
    low = max(low - 1, 0)  # ppf gives a count; the order statistic below it is the interval's end
    return ordered[low], ordered[n - 1 - low]


def _speeds(cases: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
            ) -> dict[tuple[str, str], tuple[float, float, float, str]]:
    """Per op and mode: the speed its layers are converted at (instructions per µs, its CI's ends)
    and where it comes from. `cases`: each counted case over a floor, with its native row (None:
    not timed). A mode's extra code has its own speed, nearly the same for every op (a backward
    pass's runs at about half the speed of a call without a graph), so the other ops' cases of the
    same mode set it; where they are fewer than MIN_CASES, the other ops' cases of every mode do."""
    samples: dict[tuple[str, str], list[float]] = {}
    keys: set[tuple[str, str]] = set()
    for row, own in cases:
        keys.add((row["op"], row["mode"]))
        delta = _measured_delta(row, own)
        if delta is not None and delta > 0 and row["delta_total"] > 0:
            samples.setdefault((row["op"], row["mode"]), []).append(row["delta_total"] / delta)
    speeds = {}
    for op, mode in sorted(keys):
        others = ", ".join(sorted({o for o, _ in samples if o != op}))
        # (where from, its own op's cases or the others', this mode only, the fewest cases it takes)
        choices = ((f"other ops ({others}) in {mode}", False, True, MIN_CASES),
                   (f"other ops ({others}) in every mode (fewer than {MIN_CASES} in {mode})", False, False, 1),
                   (f"this op's own cases in {mode} (the run has no other op)", True, True, MIN_CASES),
                   ("this op's own cases in every mode (the run has no other op)", True, False, 1))
        for source, own_op, this_mode, fewest in choices:
            values = [v for (o, m), vs in samples.items() if (o == op) == own_op and (m == mode or not this_mode)
                      for v in vs]
            if len(values) >= fewest:
                low, high = median_ci(values)
                speeds[op, mode] = (statistics.median(values), low, high,
                                    f"the median over {len(values)} cases of {source}")
                break
    return speeds


def _measured_delta(row: Mapping[str, Any], own: Mapping[str, Any] | None) -> float | None:
    """The native run's paired Δ µs of a case over its floor (None: not timed, or paired otherwise)."""
    floor = floor_of(row)
    if own is None or own.get("status") != "ok" or floor is None:
        return None
    if own.get("baseline") != case_label(floor):  # the run's pairing names its baseline by its label, axes too
        return None
    return own.get("delta_median")


def with_time(document: Mapping[str, Any], timed: Iterable[Mapping[str, Any]],
              source: Mapping[str, Any]) -> dict[str, Any]:
    """The breakdown document with µs: `timed` are a native boundary run's rows (its Python
    driver's cpu_us rows join the counts' cases); `source` says what that run was (its config)."""
    measured = {_key(r): r for r in timed
                if r.get("metric") == "cpu_us" and (r.get("driver") or "python") == "python"}
    over_floor = {_key(r): r for r in document["rows"] if r.get("status") is None and r.get("delta_total") is not None}
    speeds = _speeds((row, measured.get(key)) for key, row in over_floor.items())
    rows: list[dict[str, Any]] = []
    for row in document["rows"]:
        out = dict(row)
        rows.append(out)
        if row.get("status") is not None:
            continue
        floor_key = floor_of(row)
        if floor_key is not None and row.get("delta_total") is None:
            out["time_missing"] = "its floor was not counted"
            continue
        own = measured.get(_key(row))
        if own is None or own.get("status") != "ok":
            out["time_missing"] = ("the native run has no such case" if own is None else
                                   f"the native run: {own.get('status')} ({own.get('reason')})")
            continue
        out["measured_us"] = own["median"]
        floor = own if floor_key is None else measured.get(_key(floor_key))
        floor_ir = row["instructions_total"] - (row.get("delta_total") or 0.0)
        if floor is not None and floor.get("status") == "ok" and floor.get("median") and floor_ir > 0:
            out["floor_instructions_per_us"] = round(floor_ir / floor["median"], 1)
        if floor_key is None:
            continue
        delta = _measured_delta(row, own)
        if delta is None:
            out["time_missing"] = f"the native run paired it with {own.get('baseline')}, not its floor"
            continue
        if (row["op"], row["mode"]) not in speeds:
            out["time_missing"] = "no case of the run had a measured overhead to take the boundary's speed from"
            continue
        per_us, low, high, speed_from = speeds[row["op"], row["mode"]]
        out["instructions_per_us"], out["speed_from"] = round(per_us, 1), speed_from
        ends = sorted((row["delta_instructions"] / high, row["delta_instructions"] / low))
        out["delta_us"], out["delta_us_ci_low"], out["delta_us_ci_high"] = _rounded(
            row["delta_instructions"] / per_us, *ends)
        out["delta_us_total"] = round(row["delta_total"] / per_us, 4)
        out["measured_delta_us"] = delta
        out["measured_delta_ci_low"], out["measured_delta_ci_high"] = own.get("delta_ci_low"), own.get("delta_ci_high")
        if delta > 0:
            out["explained"] = round(row["delta_total"] / per_us / delta, 3)
            out["agrees"] = abs(out["explained"] - 1) <= AGREEMENT
    return {**document, "time": {**source, "agreement": AGREEMENT}, "rows": rows}


def native_rows(config: Mapping[str, Any], quick: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The counted scenario's run (boundary, or args) of a counts document's cases on CPU tensors, in this process, as
    run.py would run it (its defaults, the Python driver only): its rows, and what the run was.
    RuntimeError when it timed nothing."""
    import tempfile
    import time

    from rich.console import Console

    from dbench.bench.harness import cli
    from dbench.bench.harness.interrupts import GracefulStop
    from dbench.bench.harness.options import resolve
    from dbench.bench.harness.rounds import Run
    from dbench.bench.instructions.collect import counted_scenario
    from dbench.ops.specs import OP_NAMES, USER_OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIOS
    from dbench.scenarios.select import selection

    started = time.monotonic()
    scenario = SCENARIOS[counted_scenario(tuple(config["ops"]))]
    with tempfile.TemporaryDirectory(prefix="dbench-breakdown-time-") as tmp:
        fields = {"scenario": scenario.name, "device": "cpu", "ops": list(config["ops"]),
                  "variants": list(config["variants"]), "dtype": config.get("dtype", "float32"), "no_cpp": True,
                  "quick": quick, "out": tmp}
        args = cli.from_fields(fields, tuple(DECLARATIONS), (*OP_NAMES, *USER_OP_NAMES), VARIANT_NAMES,
                               declarations=DECLARATIONS)
        options = resolve(args, DECLARATIONS[scenario.name], "cpu")
        end = Run(scenario, options, selection(scenario, options), Console(stderr=True), GracefulStop(),
                  started).execute()
    doc = end.doc or {}
    if not doc.get("rows") or doc.get("status") != "complete":
        raise RuntimeError(f"the native timing run ended {doc.get('status') or 'without a result'}")
    env = doc.get("env", {})
    return doc["rows"], {"scenario": scenario.name, "driver": "python", "rounds": options.rounds,
                         "time": env.get("time"), "torch": env.get("torch"), "cpu_model": env.get("cpu_model")}


def _rounded(*values: float | None) -> tuple[float | None, ...]:
    return tuple(None if v is None else round(v, 4) for v in values)
