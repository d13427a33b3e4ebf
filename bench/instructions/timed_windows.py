"""The breakdown where callgrind cannot go (CUDA tensors): torch's Python functions, each timed in a window.

Valgrind cannot run the CUDA driver, so on a GPU the breakdown cannot count instructions. What it
can do with no hardware counters is time what it can name. For each case, in one process and
round by round (so a slow minute of the host moves all of a round's figures together):

- the case's floor and the case, `calls` calls each (bench/core/runner.time_block: the GPU queue
  drained before and after each block, untimed); their difference is the round's overhead;
- each declared torch Python function the case calls (python_functions.py), in a pass of its own of
  `calls` calls, with a wall-clock window (perf_counter_ns) around its outermost calls only;
- the wrapper's own time inside a window, on a function that does nothing called with the same
  arguments, taken off per call (against callgrind's count of the same windows on CPU tensors, a
  median +0.07 µs a window: results/cpu-breakdown/windows).

Per case: the median over rounds with its distribution-free 95 % CI (in_time.median_ci). A window
is inclusive: it holds the Python frames and all the C++ beneath the function, and the op's own
launch where it runs inside (the table shows it beside the case's and the floor's µs). The
dispatcher's and autograd's C++ outside any declared function are not named by this method: they
are what the windows leave of the overhead. On CPU tensors callgrind counts the same windows, so the two methods
meet case by case (analysis/windows.py `agreement`).
"""

from __future__ import annotations

import gc
import re
import statistics
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from dbench.bench.core.case import Case
from dbench.bench.core.runner import time_block
from dbench.bench.instructions.in_time import median_ci
from dbench.bench.instructions.python_functions import Hook, Window, count_calls, hooks

SCHEMA = "dbench-windows/1"
DEFAULT_CALLS = 300  # calls per block and window: about 3-30 ms a block at 10-100 µs a call
DEFAULT_ROUNDS = 15  # the median's 95 % CI then spans the 4th to 12th of the sorted rounds
QUICK_ROUNDS = 5
WARMUP_CALLS = 20  # the wrapped path's first calls, outside any window
FLAME_CALLS = 50  # calls profiled for a case's flame graph (--flames)
# calls made under the profiler before those a graph keeps: the first calls under a fresh profiler
# carry its start (on the CPU VM, raw muladd's first call 41 µs against a median of 1.2 µs)
FLAME_SETTLE_CALLS = 5
FLAME_STEM = "stacks"  # a flame graph's file: stacks.<op>.<variant>.<mode>[.axis=value]
# what makes a frame's name differ from run to run: "<built-in method noop of pybind11_builtins.<type>
# object at 0x7f...>" reads "<built-in method noop>"
ADDRESS = re.compile(r" of \S+ object at 0x[0-9a-f]+")


class Stopwatch:
    """The wall-clock time between toggles, summed: switched on as a window opens and off as it
    closes. The clock is read last when switching on and first when switching off, so what this
    object itself costs lies outside the sum except one read (the calibration takes it off)."""

    def __init__(self) -> None:
        self.total_ns = 0
        self._started: int | None = None

    def toggle(self) -> None:
        if self._started is None:
            self._started = time.perf_counter_ns()
        else:
            self.total_ns += time.perf_counter_ns() - self._started
            self._started = None


@dataclass(frozen=True)
class Estimate:
    """A per-call figure in µs: the median over rounds and its 95 % CI's ends."""

    us: float
    low: float
    high: float

    @staticmethod
    def of(values: Iterable[float]) -> "Estimate":
        values = list(values)
        low, high = median_ci(values)
        return Estimate(round(statistics.median(values), 4), round(low, 4), round(high, 4))

    def fields(self, name: str) -> dict[str, float]:
        return {name: self.us, f"{name}_ci_low": self.low, f"{name}_ci_high": self.high}


def _absorb(*args: Any, **kwargs: Any) -> None:
    return None


def calibration_ns(calls: int, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> float:
    """What a window costs inside itself, per outermost call: the wrapper around a function that
    does nothing, called `calls` times with the arguments a real call passed (passing them on
    costs the wrapper more than passing none: 100-150 ns on three arguments and a keyword)."""
    watch = Stopwatch()
    window = Window(watch.toggle)
    absorb = window.wrap(_absorb)
    kwargs = kwargs or {}
    window.armed = True
    gc.disable()
    try:
        for _ in range(calls):
            absorb(*args, **kwargs)
    finally:
        gc.enable()
    return watch.total_ns / max(window.calls, 1)


def arguments_of(case: Case, hook: Hook) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of the case's first call into the hooked function (none where it makes none)."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def recording(function: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            if not seen:
                seen.append((args, dict(kwargs)))
            return function(*args, **kwargs)
        return record

    hook.install(recording)
    assert case.call is not None
    try:
        with case.context() if case.context is not None else nullcontext():
            case.call()
    finally:
        hook.restore()
    return seen[0] if seen else ((), {})


def window_ns(case: Case, hook: Hook, calls: int) -> tuple[float, float]:
    """One pass of `calls` calls of the case with `hook`'s function in a window: its inclusive ns
    per call of the case (the wrapper's own time inside the window taken off, as calibrated in
    the same pass on the arguments of a real call), and its outermost calls per call."""
    args, kwargs = arguments_of(case, hook)
    wrapper_ns = calibration_ns(calls, args, kwargs)
    del args, kwargs  # no tensor of the case kept alive through its timed calls
    watch = Stopwatch()
    window = Window(watch.toggle)
    hook.install(window.wrap)
    call = case.call
    assert call is not None
    try:
        with case.context() if case.context is not None else nullcontext():
            for _ in range(WARMUP_CALLS):
                call()
            case.sync()
            gc.disable()
            window.armed = True
            for _ in range(calls):
                call()
            window.armed = False
            case.sync()
    finally:
        gc.enable()
        hook.restore()
    return (watch.total_ns - wrapper_ns * window.calls) / calls, window.calls / calls


def _close(open_: list[list[Any]], until: float, out: dict[str, float]) -> None:
    """Close the open events that end by `until`, adding each one's self time to its stack."""
    while open_ and open_[-1][0] <= until:
        _, path, own = open_.pop()
        out[path] = out.get(path, 0.0) + own


def _cut_below(stacks: dict[str, float], below: str) -> dict[str, float]:
    """The stacks through a frame named with `below`, each cut below that frame."""
    kept: dict[str, float] = {}
    for path, own in stacks.items():
        frames = path.split(";")
        cut = next((i for i, f in enumerate(frames) if below in f), None)
        if cut is not None and cut + 1 < len(frames):
            rest = ";".join(frames[cut + 1:])
            kept[rest] = kept.get(rest, 0.0) + own
    return kept


def fold(events: Iterable[Mapping[str, Any]], below: str = "", cut: list[str] | None = None,
         under: list[tuple[str, float]] | None = None) -> dict[str, float]:
    """Collapsed stacks from a Chrome trace's complete events ("ph": "X", ts and dur in µs): each
    event nested in the events of its thread that enclose it, its self time (its duration less its
    children's) summed per stack. With `below`, only the stacks through a frame named with it,
    cut below that frame.
    An event that outlasts the one enclosing it is cut at that one's end, and its stack (cut as the
    stacks are) added to `cut`, each distinct stack once. On an H100 host (torch 2.11), under each
    custom_op call, the events `<built-in method >` and `redispatch_boxed` ran on past every later
    call, which nested inside them, and the frames below `redispatch_boxed` were absent; on the CPU
    (torch 2.11 and 2.13) the same op's events nest. With the first calls under the profiler left
    out (folded_stacks), the frames below were there, and a few events per case still needed a cut.
    `under` (with `below`): each event directly under a frame named with `below`, as (name, µs)."""
    out: dict[str, float] = {}
    cut_paths: list[str] = []
    by_thread: dict[Any, list[Mapping[str, Any]]] = {}
    for event in events:
        by_thread.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    for thread in by_thread.values():
        open_: list[list[Any]] = []  # [end, stack, self µs]; each end within its parent's
        for event in sorted(thread, key=lambda e: (e["ts"], -e["dur"])):
            _close(open_, event["ts"], out)
            name = ADDRESS.sub("", str(event["name"])).replace(";", ":")
            path = f"{open_[-1][1]};{name}" if open_ else name
            end = event["ts"] + event["dur"]
            if open_ and end > open_[-1][0]:
                end = open_[-1][0]
                cut_paths.append(path)
            if open_:
                open_[-1][2] -= end - event["ts"]
                if under is not None and below and below in open_[-1][1].rsplit(";", 1)[-1]:
                    under.append((name, float(end - event["ts"])))
            open_.append([end, path, float(end - event["ts"])])
        _close(open_, float("inf"), out)
    if cut is not None:
        distinct = dict.fromkeys(cut_paths, 0.0)
        cut.extend(_cut_below(distinct, below) if below else distinct)
    return _cut_below(out, below) if below else out


def cut_note(cut: list[str]) -> str:
    """The line that names the events `fold` cut (`cut`: their stacks, each once)."""
    names = ", ".join(sorted({path.rsplit(";", 1)[-1] for path in cut}))
    return (f"  flame graph: events on {len(cut)} stacks outlasted their caller ({names}): the profiler left "
            "them open; each was cut at its caller's end, and the frames below them are missing")


@dataclass
class Flame:
    """A case's flame graph (collapsed stacks, ns) and each call's duration in the same trace, so
    with the profiler's cost: how much slower the profiled calls ran than the timed windows is what
    the graph's ns hold beyond the case's own time."""

    stacks: str
    call_us: list[float]  # each profiled call's event in the trace (empty: the trace held none)
    calls: int
    settle_us: list[float] = field(default_factory=list)  # the calls left out, the same way

    def fields(self) -> dict[str, Any]:
        graph_ns = sum(int(line.rsplit(" ", 1)[1]) for line in self.stacks.splitlines())
        per_call = {"median_call_us": round(statistics.median(self.call_us), 3),
                    "slowest_call_us": round(max(self.call_us), 3)} if self.call_us else {}
        return {"calls": self.calls, **per_call, "graph_us_per_call": round(graph_ns / 1000 / self.calls, 3),
                "left_out_calls_us": [round(us, 3) for us in self.settle_us]}


def flame_note(label: str, flame: Mapping[str, Any], timed_us: float) -> str:
    """The line that sets a graph's µs beside the case's timed µs (`flame`: Flame.fields)."""
    calls = (f"median {flame['median_call_us']:.2f} µs a call (slowest {flame['slowest_call_us']:.2f}), "
             if "median_call_us" in flame else "")
    left_out = flame.get("left_out_calls_us") or []
    before = f"; the {len(left_out)} calls before them, left out: {', '.join(f'{us:.2f}' for us in left_out)} µs" \
        if left_out else ""
    return (f"  flame graph of {label}: {flame['calls']} calls under the profiler, {calls}the graph "
            f"{flame['graph_us_per_call']:.2f} µs a call; timed without the profiler {timed_us:.2f} µs{before}")


def folded_stacks(case: Case, calls: int = FLAME_CALLS, say: Callable[[str], None] = lambda line: None) -> Flame:
    """A flame graph of the case: `calls` calls under torch.profiler with Python stacks (its Python
    functions and torch ops, nested by time), each stack's self time summed, in ns, one
    collapsed-stack line per stack ("frame;frame;... ns": speedscope and flamegraph.pl read it),
    after FLAME_SETTLE_CALLS calls under the profiler that the graph leaves out.
    The profiler's own cost per event is inside these times (it swells short frames: the method
    this module replaced), so the graph shows where the time goes; the windows say how much. Each
    kept call's duration in the trace comes with it (Flame.call_us): how far the profiler slowed it.
    Events the profiler left open are cut at their parent's end (`fold`), and `say` names them:
    the frames below such an event are missing from the trace, so its time is its own."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    call = case.call
    assert call is not None

    def settle_calls() -> None:
        for _ in range(FLAME_SETTLE_CALLS):
            call()
        case.sync()

    def profiled_calls() -> None:
        for _ in range(calls):
            call()
        case.sync()

    with case.context() if case.context is not None else nullcontext():
        for _ in range(WARMUP_CALLS):
            call()
        case.sync()
        with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
            settle_calls()
            profiled_calls()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = [e for e in json.loads(trace.read_text())["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in ("python_function", "cpu_op")]
    cut: list[str] = []
    under: list[tuple[str, float]] = []
    stacks = fold(events, below=profiled_calls.__name__, cut=cut, under=under)
    if cut:
        say(cut_note(cut))
    text = "".join(f"{path} {round(us * 1000)}\n" for path, us in sorted(stacks.items()) if us > 0)
    left_out: list[tuple[str, float]] = []
    fold(events, below=settle_calls.__name__, under=left_out)
    return Flame(text, _calls(under), calls, _calls(left_out))


def _calls(under: list[tuple[str, float]]) -> list[float]:
    """The durations of the calls among the frames directly under a loop of calls: the frame that
    comes most often (the loop's sync comes once)."""
    name = Counter(n for n, _ in under).most_common(1)[0][0] if under else None
    return [us for n, us in under if n == name]


@dataclass
class CaseWindows:
    """What the rounds measured of one case: µs per call, one value per round."""

    total: list[float]
    floor: list[float]  # the floor's µs per call in the same rounds (empty: a floor, or no floor timed)
    delta: list[float]  # over the floor, round by round
    functions: dict[str, list[float]]
    calls: dict[str, float]  # outermost calls into each function per call of the case


def measure(case: Case, floor: Case | None, found: list[Hook], calls: int, rounds: int,
            progress: Callable[[int], None] = lambda r: None) -> CaseWindows:
    """`rounds` rounds of: the floor's block and the case's (their order alternating), then each
    declared function the case calls in its own window."""
    assert case.call is not None
    called = count_calls(case.call, case.context, found)
    measured = [h for h in found if h.name in called]
    out = CaseWindows([], [], [], {h.name: [] for h in measured}, dict(called))
    for r in range(rounds):
        blocks = [case, floor] if r % 2 else [floor, case]
        ns = {id(c): time_block(c, calls) / calls for c in blocks if c is not None}
        out.total.append(ns[id(case)] / 1000)
        if floor is not None:
            out.floor.append(ns[id(floor)] / 1000)
            out.delta.append((ns[id(case)] - ns[id(floor)]) / 1000)
        for hook in measured:
            per_call, _ = window_ns(case, hook, calls)
            out.functions[hook.name].append(per_call / 1000)
        progress(r + 1)
    return out


def case_row(key: Mapping[str, Any], floor_label: str | None, measured: CaseWindows) -> dict[str, Any]:
    """A case's row: its µs per call and over its floor (each with a CI), and each declared
    function's inclusive window (most expensive first)."""
    row: dict[str, Any] = {**key, "status": None, "floor": floor_label, "rounds": len(measured.total),
                           **Estimate.of(measured.total).fields("total_us")}
    if measured.delta:
        row.update(Estimate.of(measured.floor).fields("floor_us"))
        row.update(Estimate.of(measured.delta).fields("delta_us"))
    functions = [{"function": name, "calls": round(measured.calls[name], 3), **Estimate.of(values).fields("us")}
                 for name, values in measured.functions.items()]
    row["python_functions"] = sorted(functions, key=lambda f: (-f["us"], f["function"]))
    return row


def with_floor_windows(rows: list[dict[str, Any]], floor_of: Callable[[Mapping[str, Any]], Any]) -> None:
    """Each function's window over the floor's window of the same function (0 where the floor
    does not call it), in place: `delta_us` on each of a row's python_functions."""
    from dbench.bench.core.identity import case_identity

    by_case = {case_identity(r): r for r in rows if r.get("status") is None}
    for row in by_case.values():
        floor_key = floor_of(row)
        floor = by_case.get(case_identity(floor_key)) if floor_key is not None else None
        if floor is None:
            continue
        below = {f["function"]: f["us"] for f in floor["python_functions"]}
        for f in row["python_functions"]:
            f["delta_us"] = round(f["us"] - below.get(f["function"], 0.0), 4)


def _timed_row(case: Case, by_identity: Mapping[Any, Case], found: list[Hook], calls: int,
               rounds: int) -> dict[str, Any]:
    """A runnable case's row, timed beside its floor (a floor not timed is named in the row)."""
    from dbench.bench.core.identity import case_identity, case_label
    from dbench.bench.instructions.breakdown import floor_of

    key = dict(case.key)
    floor_key = floor_of(key)
    floor = by_identity.get(case_identity(floor_key)) if floor_key is not None else None
    if floor is not None and not floor.runnable:
        floor = None
    row = case_row(key, None if floor is None else floor.key["variant"], measure(case, floor, found, calls, rounds))
    if floor_key is not None and floor is None:
        row["floor_missing"] = f"its floor {case_label(floor_key)} was not timed: add it to --variants"
    return row


def _add_flame(case: Case, row: dict[str, Any], flames: Path, say: Callable[[str], None]) -> None:
    """The case's flame graph written in `flames` as it is made, its fields in the row."""
    from dbench.bench.instructions.breakdown import flame_name
    from dbench.bench.io.atomic import write_atomic

    flame = folded_stacks(case, say=say)
    write_atomic(flames / flame_name(case.key, FLAME_STEM), flame.stacks.encode())
    row["flame"] = flame.fields()
    say(flame_note(case.label, row["flame"], row["total_us"]))


def collect_windows(ops: tuple[str, ...], variants: tuple[str, ...], device: str, calls: int = DEFAULT_CALLS,
                    rounds: int = DEFAULT_ROUNDS, say: Callable[[str], None] = lambda line: None,
                    flames: Path | None = None) -> dict[str, Any]:
    """The windows document of the boundary scenario's cases (the args scenario's, for its ops) of
    `ops` x `variants` on `device`: a row per case (n/a and failed cases with their reasons).
    flames: a folder for each timed case's flame graph (folded_stacks), written as it is made."""
    import importlib

    import torch

    from dbench.bench.core.identity import case_identity
    from dbench.bench.instructions.breakdown import floor_of
    from dbench.bench.instructions.collect import counted_scenario
    from dbench.bench.io import env as envmod
    from dbench.scenarios.base import Selection

    scenario = counted_scenario(ops)
    build = importlib.import_module(f"dbench.scenarios.{scenario}").build
    sel = Selection(ops=ops, variants=variants, device=device, dtype=torch.float32, seed=0, explicit_ops=True)
    cases = build(sel)
    by_identity = {case_identity(c.key): c for c in cases}
    found = hooks()
    if flames is not None:
        flames.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    timed, done = sum(1 for c in cases if c.runnable), 0
    stopped: str | None = None
    current = "the first case"
    try:
        for case in cases:
            key = dict(case.key)
            if not case.runnable:
                rows.append({**key, "status": "failed" if case.error else "n/a",
                             "reason": case.error or case.na_reason})
                continue
            done += 1
            current = f"case {done} of {timed}, {case.label}"
            say(f"[{done}/{timed}] {case.label}")
            rows.append(_timed_row(case, by_identity, found, calls, rounds))
            if flames is not None:
                _add_flame(case, rows[-1], flames, say)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM (the command's handler raises it once; later ones are ignored while the
        # result is written): the cases timed so far are kept, the one cut short is not.
        kept = sum(1 for r in rows if r.get("status") is None)
        stopped = f"interrupted during {current}: {kept} of {timed} cases timed and kept, the others not timed"
        say(stopped)
    with_floor_windows(rows, floor_of)
    status = {} if stopped is None else {"status": "interrupted", "error": stopped}
    return {"schema": SCHEMA, "method": "timed windows", **status,
            "config": {"scenario": scenario, "ops": list(ops), "variants": list(variants), "device": device,
                       "dtype": "float32", "calls": calls, "rounds": rounds, "warmup_calls": WARMUP_CALLS},
            "env": envmod.capture(device), "rows": rows}
