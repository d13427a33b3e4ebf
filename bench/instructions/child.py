"""The process that runs under callgrind (started by collect.py; not meant to be run by hand).

It builds the CPU cases of the boundary scenario (or, with --scenario args, the args scenario's)
`--layouts` times, each build after another batch of small objects kept alive, so that each
build's objects lie elsewhere in the heap (a count depends on where the hot objects land: see
environment.py). Then it switches callgrind's instrumentation
on (imports, registrations and builds are not measured, and run several times faster without it)
and, case by case and build by build: warm-up calls, a full garbage collection, and the timed
calls with callgrind's collection toggled on around them only, the collector off. Each ends in a
dump (`torch._C._valgrind_toggle_and_dump_stats`): after the calibration dump, dumps
1 + k·L + j hold case k in build j. With --python-functions, a dump of the wrapper's own cost and
then one per case and declared torch Python function it calls follow (python_functions.py). A
manifest, written last, names the cases and those windows.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

import torch

from dbench.bench.instructions.environment import aslr_disabled
from dbench.bench.instructions.inject import padded, parse_injections
from dbench.bench.instructions.python_functions import Hook, Window, count_calls, hooks

CALIBRATION = "loop"  # dump 1: the timing loop around a call that does nothing
LAYOUT_STEP = 1237  # small objects kept alive before each further build (about 150 kB)


def instrumentation_on(log: Path) -> None:
    """callgrind_control --instr=on for this process (torch only binds the collection toggle).

    Its output goes to a file, read only on failure. Read through a pipe (as many reads as the
    scheduler makes, each a buffer allocated and freed just before the cases), it came with counts
    that moved from run to run: function_cpp/fwd_requires_grad took three values 1.3 % apart over
    six runs of the same code, and 0.03 % apart over four runs with the file (README)."""
    with open(log, "wb") as out:
        code = subprocess.run(["callgrind_control", "--instr=on", str(os.getpid())], stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise SystemExit(f"error: callgrind_control --instr=on failed (is this running under callgrind?): "
                         f"{log.read_text(errors='replace').strip()[:300]}")


def measure(call: Callable[[], Any], calls: int, warmup: int) -> None:
    for _ in range(warmup):
        call()
    gc.collect()
    gc.disable()  # a collection inside the window would land in one case's count
    try:
        torch._C._valgrind_toggle()
        for _ in range(calls):
            call()
        torch._C._valgrind_toggle_and_dump_stats()
    finally:
        gc.enable()


def _nothing() -> None:
    return None


def _dump() -> None:
    """End a window whose collection the wrappers switched: on, then off with the dump."""
    torch._C._valgrind_toggle()
    torch._C._valgrind_toggle_and_dump_stats()


def function_windows(timed: list[Any], called: list[dict[str, float]], found: list[Hook], calls: int,
                     warmup: int) -> dict[str, Any]:
    """After the cases' dumps: a calibration dump (the wrapper around a function that does nothing,
    `calls` times), then one dump per case and declared function it calls, each `calls` calls of the
    case with collection on only inside that function (python_functions.py). What the manifest says."""
    calibration = Window(torch._C._valgrind_toggle)
    nothing = calibration.wrap(_nothing)
    calibration.armed = True
    gc.disable()
    try:
        for _ in range(calls):
            nothing()
        _dump()
    finally:
        gc.enable()
    done = []
    for i, (case, functions) in enumerate(zip(timed, called)):
        for hook in (h for h in found if h.name in functions):
            window = Window(torch._C._valgrind_toggle)
            hook.install(window.wrap)
            try:
                with case.context() if case.context is not None else nullcontext():
                    for _ in range(min(warmup, 20)):  # the wrapped path's first calls, outside the window
                        case.call()
                    gc.collect()
                    gc.disable()
                    window.armed = True
                    for _ in range(calls):
                        case.call()
                    window.armed = False
                    _dump()
            finally:
                gc.enable()
                hook.restore()
            done.append({"case": i, "function": hook.name, "outermost_calls": window.calls})
    return {"calls": calls, "calibration_calls": calibration.calls, "windows": done}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dbench.bench.instructions.child")
    p.add_argument("--op", action="append", default=[], help="a user's op file, FILE.py[:NAME] (loaded first)")
    p.add_argument("--scenario", choices=("boundary", "args"), default="boundary",
                   help="whose cases: the boundary scenario's, or the args scenario's generated ops")
    p.add_argument("--ops", required=True)
    p.add_argument("--variants", required=True)
    p.add_argument("--calls", type=int, required=True, help="timed calls per case and build")
    p.add_argument("--layouts", type=int, default=1, help="builds of the cases, each timed")
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--instrumentation-on", action="store_true", help="valgrind runs with --instr-atstart=no")
    p.add_argument("--heap-pad", type=int, default=0,
                   help="sensitivity tests only: keep N small objects alive before the cases are built")
    p.add_argument("--inject", default="", help="power tests only: LABEL=ITERATIONS[;...] (inject.py)")
    p.add_argument("--python-functions", type=int, default=0, metavar="CALLS",
                   help="after the cases: each declared torch Python function a case calls, in its own window of "
                        "CALLS calls (python_functions.py); 0: none")
    args = p.parse_args(argv)

    import importlib

    from dbench.ops.declare import load_all
    from dbench.scenarios.base import Selection

    build = importlib.import_module(f"dbench.scenarios.{args.scenario}").build

    load_all(args.op)  # checked by the parent (collect.load_op_files) before valgrind started
    torch.set_num_threads(1)
    # Moves every later allocation, as an unrelated change to the code would (environment.py).
    heap_pad = [bytearray(24 + i % 200) for i in range(args.heap_pad)]
    sel = Selection(ops=tuple(args.ops.split(",")), variants=tuple(args.variants.split(",")),
                    device="cpu", dtype=torch.float32, seed=0, explicit_ops=True)
    injections = parse_injections(args.inject)
    builds: list[list[Any]] = []
    spacers: list[list[bytearray]] = []
    for j in range(args.layouts):
        spacers.append([bytearray(24 + i % 200) for i in range(j * LAYOUT_STEP)])
        cases = build(sel)
        timed = [c for c in cases if c.runnable]
        unknown = set(injections) - {c.label for c in timed}
        if unknown:
            raise SystemExit(f"error: --inject names cases that are not timed: {', '.join(sorted(unknown))}")
        for case in timed:
            if case.label in injections and case.call is not None:
                case.call = padded(case.call, injections[case.label])
        if builds and [c.label for c in timed] != [c.label for c in builds[0]]:
            raise SystemExit("error: the builds of the cases differ in which cases are timed")
        builds.append(timed)
    timed = builds[0]
    found = hooks() if args.python_functions else []
    called = [count_calls(c.call, c.context, found) if found and c.call is not None else {} for c in timed]
    gc.collect()
    gc.freeze()  # the imports' objects out of every later collection: each case's gc.collect stays short
    if args.instrumentation_on:
        instrumentation_on(args.manifest.with_name("callgrind_control.log"))
    measure(_nothing, args.calls, args.warmup)
    for i, case in enumerate(timed):
        # Progress before the case, and no timings: a string whose length varies from run to run
        # would move later allocations, and with them hash-table collisions (see environment.py).
        print(f"[{i + 1}/{len(timed)}] {case.label}", file=sys.stderr, flush=True)
        for built in builds:
            call, context = built[i].call, built[i].context
            assert call is not None
            with context() if context is not None else nullcontext():  # the mode's, as the runner enters it
                measure(call, args.calls, args.warmup)
    windows = function_windows(timed, called, found, args.python_functions, args.warmup) if found else None
    manifest = {
        "calibration": CALIBRATION,
        **({"python_functions": windows} if windows is not None else {}),
        "cases": [{"key": c.key, "status": "timed" if c.runnable else "failed" if c.error else "n/a",
                   "reason": c.error or c.na_reason} for c in cases],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "num_threads": torch.get_num_threads(),
        "injected": injections,
        "heap_pad": len(heap_pad),
        "layouts": len(builds),
        "aslr_disabled": aslr_disabled(os.getpid()),
    }
    args.manifest.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
