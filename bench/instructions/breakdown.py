"""Where each variant's cost over its floor goes: the instruction counts of one callgrind run, by layer.

One collection (collect.py, one build of the cases) keeps callgrind's dumps; each timed case's dump
is split into layers (layers.py), per call. Each case is set beside its mode's floor (the boundary
table's pairing: `raw`, or `function_raw` once a graph is recorded), and the difference per layer
is what the variant adds in that layer. Counts are deterministic (the instruction counts' own
check shows how far they move: results/cpu-instructions/README.md), so one run is enough; what
they do not say is time: an instruction of the interpreter and one of a hash lookup cost different
nanoseconds.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from dbench.bench.core.identity import case_identity, case_label
from dbench.bench.io.atomic import write_atomic
from dbench.bench.instructions.collect import DUMP_STEM, CollectError, Config, collect, refuse_old_dumps
from dbench.bench.instructions.layers import LAYERS, Attribution, Function, attribute
from dbench.bench.instructions.profile import read_profiles

SCHEMA = "dbench-breakdown/1"
DEFAULT_CALLS = 2000  # counts repeat to the instruction at this many calls (the loop's cost is per call)
DEFAULT_TOP = 5  # functions listed per case and layer: those whose Ir grew most over the floor
FUNCTION_CALLS_MIN = 20  # calls in each Python function's window, at the least


def floor_of(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The key of the case this row is paired with, as the boundary table pairs it (None: a floor)."""
    from dbench.scenarios.boundary import paired_with

    paired = paired_with(row["op"], row["variant"], row["mode"])
    return None if paired is None else {**row, "variant": paired[0], "mode": paired[1]}


def _per_call(attribution: Attribution, calls: int) -> tuple[dict[str, float], dict[Function, tuple[str, float]]]:
    layers = {layer: ir / calls for layer, ir in attribution.layers.items()}
    functions = {f: (layer, ir / calls) for f, (layer, ir) in attribution.functions.items()}
    return layers, functions


def _top(case: dict[Function, tuple[str, float]], floor: dict[Function, tuple[str, float]], layer: str,
         count: int) -> list[dict[str, Any]]:
    """The layer's functions whose charged Ir per call grew most from the floor to the case."""
    grown = []
    for function in set(case) | set(floor):
        if case.get(function, floor.get(function, ("", 0.0)))[0] != layer:
            continue
        delta = case.get(function, (layer, 0.0))[1] - floor.get(function, (layer, 0.0))[1]
        if delta > 0:
            grown.append((delta, function))
    grown.sort(key=lambda g: (-g[0], g[1]))
    return [{"function": f[1], "object": f[0], "delta_instructions": round(delta, 1)} for delta, f in grown[:count]]


def breakdown_rows(counts: Mapping[str, Any], attributions: list[Attribution], calls: int,
                   top: int = DEFAULT_TOP) -> list[dict[str, Any]]:
    """One row per timed case and layer (Ir per call, and over the case's floor), plus one per case
    that was not timed (its status and reason). `attributions` come in the timed rows' order."""
    timed = [r for r in counts["rows"] if r.get("status") is None]
    if len(timed) != len(attributions):
        raise CollectError(f"{len(timed)} timed cases but {len(attributions)} profiles")
    per_case = {case_identity(r): _per_call(a, calls) for r, a in zip(timed, attributions)}
    by_case = {case_identity(r): r for r in timed}
    rows: list[dict[str, Any]] = []
    for row in counts["rows"]:
        # The case's identity: its core fields and the values of its axes (the args scenario's arity).
        base = {k: row[k] for k in ("scenario", "op", "variant", "mode", "device", "shape", "dtype", "axes", "driver",
                                    *(row.get("axes") or ())) if k in row}
        if row.get("status") is not None:
            rows.append({**base, "status": row["status"], "reason": row.get("reason")})
            continue
        layers, functions = per_case[case_identity(row)]
        floor_row = floor_of(row)
        floor = per_case.get(case_identity(floor_row)) if floor_row is not None else None
        total = sum(layers.values())
        shared = {**base, "status": None, "floor": floor_row["variant"] if floor_row else None,
                  "instructions_total": round(total, 1)}
        if floor_row is not None and floor is None:
            shared["floor_missing"] = f"its floor {case_label(floor_row)} was not timed: add it to --variants"
        if floor is not None:
            shared["delta_total"] = round(total - sum(floor[0].values()), 1)
        for layer in LAYERS:
            out = {**shared, "layer": layer, "instructions": round(layers[layer], 1)}
            if floor is not None:
                out["delta_instructions"] = round(layers[layer] - floor[0][layer], 1)
                out["top"] = _top(functions, floor[1], layer, top)
            if layer == "python" and "python_functions" in row:
                out["python_functions"] = _python_functions(row, by_case.get(case_identity(floor_row))
                                                            if floor_row is not None else None)
            rows.append(out)
    return rows


def _python_functions(row: Mapping[str, Any], floor: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The declared torch Python functions the case calls, each inclusive (its Python frames and
    the C++ beneath them), per call of the case and over its floor's (0 where the floor does not
    call it), most grown first."""
    own, below = row["python_functions"], (floor or {}).get("python_functions") or {}
    out = [{"function": name, "instructions": c["instructions"], "calls": c["calls"],
            **({"delta_instructions": round(c["instructions"] - below.get(name, {}).get("instructions", 0.0), 1)}
               if floor is not None else {})}
           for name, c in own.items()]
    return sorted(out, key=lambda f: (-f.get("delta_instructions", f["instructions"]), f["function"]))


def flame_name(row: Mapping[str, Any], stem: str = DUMP_STEM) -> str:
    """The file a case's dump is written to with --flames: callgrind's own name first, so kcachegrind
    lists it; speedscope reads it by its content (a flame graph from the call graph, its best guess).
    The timed windows' flame graphs take the same name after their own stem."""
    axes = "".join(f".{a}={row[a]}" for a in row.get("axes") or ())
    return f"{stem}.{row['op']}.{row['variant']}.{row['mode']}{axes}".replace("/", "_").replace(" ", "")


def copy_into(folder: Path, files: Mapping[str, Path]) -> None:
    """Copy `files` (name -> source) into `folder`, each written atomically: a name another user
    planted there (a link to a file of root's) is replaced, never written through."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        write_atomic(Path(folder) / name, source.read_bytes())


def collect_breakdown(config: Config, keep_dumps: Path | None = None, top: int = DEFAULT_TOP,
                      flames: Path | None = None) -> dict[str, Any]:
    """One callgrind run of the config's cases, split into layers: the breakdown document. flames:
    a folder for each timed case's own dump, named by its case (flame_name)."""
    refuse_old_dumps(keep_dumps)
    refuse_old_dumps(flames)
    # One build: one dump per case; then each declared torch Python function a case calls, in a
    # window of its own of a tenth of the calls (inclusive counts of a few hundred calls repeat to ~1 %).
    config = replace(config, layouts=1, python_function_calls=max(config.calls // 10, FUNCTION_CALLS_MIN))
    # The dumps are read from this run's private folder, then copied to the one to keep.
    with tempfile.TemporaryDirectory(prefix="dbench-breakdown-") as tmp:
        counts = collect(config, keep_dumps=Path(tmp))
        timed = [r for r in counts["rows"] if r.get("status") is None]
        # part 1: the calibration loop; then a part per case (the Python functions' windows after them)
        profiles = [p for p in read_profiles(Path(tmp), DUMP_STEM) if p.part > 0][:len(timed) + 1]
        if keep_dumps is not None:
            copy_into(keep_dumps, {p.name: p for p in Path(tmp).iterdir() if p.is_file()})
        if flames is not None:
            copy_into(flames, {flame_name(row): Path(tmp) / f"{DUMP_STEM}.{profile.part}"
                               for row, profile in zip(timed, profiles[1:])})  # part 1: the calibration loop
    attributions = [attribute(p) for p in profiles[1:]]  # part 1: the calibration loop
    return {"schema": SCHEMA, "config": counts["config"], "env": counts["env"], "layers": dict(LAYERS),
            "rows": breakdown_rows(counts, attributions, config.calls_per_layout, top)}
