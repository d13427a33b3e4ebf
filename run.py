#!/usr/bin/env python3
"""Entry point: python run.py --scenario boundary [--device cpu|cuda] [...]

Parse and check the command line (no torch yet), pick the device, check the selection can time
something on it, then hand the run to one executor: in this process (`rounds.Run`), a scenario that
makes its own table or document, fresh processes one after another (--processes, --ab) or shards
side by side (--gpus, --shards). Show what it wrote (dbench.analysis.console) and, with --baseline,
gate it. Whatever ends the run leaves its result file with a final status (bench/harness/interrupts.py).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

STARTED = time.monotonic()  # the phase timings count from here (interpreter start-up excluded)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dbench.bench.harness import pycache, supervisor  # noqa: E402  (standard library only)
if __name__ == "__main__":  # the command, not the library: a supervisor ends the result of a run that crashes
    pycache.build_cache()  # before torch: where Python may not write bytecode, the build folder keeps it
    supervisor.supervise()  # returns in the worker process that runs the command; the supervisor exits with its status

from dbench.bench.harness.cli import UsageError  # noqa: E402  (torch-free)
from dbench.bench.harness import common  # noqa: E402
from dbench.bench.harness.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome  # noqa: E402
from dbench.bench.harness.interrupts import RESERVED, GracefulStop, interrupted  # noqa: E402
from dbench.bench.harness.options import RunOptions, child_options_file  # noqa: E402  (standard library only)
from dbench.bench.core.passes import Pass  # noqa: E402  (torch-free)
from dbench.bench.harness.guard import exit_with  # noqa: E402  (torch-free)


def in_process(scenario: Any, options: RunOptions, console: Any, stop: GracefulStop) -> Outcome:
    """The run object over this process's cases; its tables once the result is written."""
    from dbench.analysis.console import finished
    from dbench.bench.harness.rounds import Run
    from dbench.scenarios.select import selection

    end = Run(scenario, options, selection(scenario, options), console, stop, STARTED).execute()
    code = end.code
    if end.doc is not None and end.json_path is not None and end.csv_path is not None:
        code = finished(scenario, end.doc, end.json_path, end.csv_path, console, options.plot, end.code)
    return Outcome(code, end.json_path, end.doc)


def several(scenario: Any, options: RunOptions, shard_devices: list[str], argv: Sequence[str],
            console: Any) -> Outcome:
    """--processes / --ab (one after another) or --gpus / --shards (side by side), merged; its figures."""
    from dbench.analysis.console import plot, show_merged
    from dbench.bench.children.several import run_in_processes, run_in_shards
    from dbench.ops import OP_NAMES
    from dbench.scenarios.select import selected_ops

    show = lambda doc, note: show_merged(doc, console, note)  # noqa: E731
    if options.repeated:
        end = run_in_processes(scenario, options, argv, console, show)
    else:
        end = run_in_shards(scenario, options, shard_devices, selected_ops(scenario, options, OP_NAMES), argv,
                            console, show)
    if options.plot and end.path is not None and end.document is not None:
        return end._replace(code=max(end.code, plot(end.document, end.path, console)))
    return end


def dispatch(options: RunOptions, shard_devices: list[str], argv: Sequence[str], console: Any,
             stop: GracefulStop) -> Outcome:
    """Check the selection can time something on the device, and run it in its way."""
    from dbench.analysis.breakdown import run_scenario as own_document
    from dbench.bench.harness.custom import run_custom
    from dbench.scenarios import SCENARIOS
    from dbench.scenarios.select import check_selection

    scenario = SCENARIOS[options.scenario]
    check_selection(scenario, options, console)
    if stop.signalled:  # a Ctrl-C that an import caught and dropped: later ones would be ignored
        raise KeyboardInterrupt
    if options.repeated or len(shard_devices) > 1:
        stop.release()
        return several(scenario, options, shard_devices, argv, console)
    if scenario.makes(Pass.CUSTOM):  # it makes its own table, or writes its own document (breakdown)
        return own_document(options, console) if scenario.own_document else run_custom(scenario, options, console, stop)
    return in_process(scenario, options, console, stop)


def main(argv: Sequence[str] | None = None) -> int:
    return run_for_library(argv).code


def run_for_library(argv: Sequence[str] | None = None, given: Any = None) -> Outcome:
    """main's exit status, the result file it wrote and its document (None: none). `given`: options
    already checked (bench/harness/cli.py from_fields: dbench.run_scenario), in place of a command line. A
    child of a run (--processes, --ab, --gpus, --shards) gets its parent's resolved options as a file."""
    from dbench.bench.harness import cli
    from dbench.bench.harness.start import child_options
    from dbench.scenarios.select import resolved
    from dbench.ops.specs import OP_NAMES, USER_OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    RESERVED.clear()
    stop = GracefulStop(signal.SIGINT, signal.SIGTERM)  # from here on a signal, in any phase, ends as interrupted
    words = list(sys.argv[1:] if argv is None else argv)
    args: Any = None
    try:
        child_file = None if given is not None else child_options_file(words)
        args = given
        if child_file is None and given is None:
            args = cli.parse(words, tuple(DECLARATIONS), (*OP_NAMES, *USER_OP_NAMES), VARIANT_NAMES,
                             declarations=DECLARATIONS)
        supervisor.ready()  # a signal held since start-up (supervised) stops the run now, its command line known
        from rich.console import Console

        # A log keeps each message on one line; no emoji codes (a lazy import a signal could cut short).
        console = Console(soft_wrap=not sys.stdout.isatty(), emoji=False)
        with stop.deferred():  # a KeyboardInterrupt inside torch's C++ initialisers would abort the process
            import torch  # noqa: F401
        maybe, shard_devices = child_options(child_file) if child_file else resolved(args, console)
        if maybe is None:  # --list printed what it lists
            return Outcome(EXIT_OK, None)
        args = options = maybe  # an interrupt from here on marks the result these options name
        end = dispatch(options, shard_devices, words, console, stop)
        if options.baseline is None or end.path is None:
            return end
        if end.code not in (EXIT_OK, EXIT_FAILED):
            console.print(f"[yellow]not gated: the run ended with exit {end.code}[/yellow]")
            return end
        from dbench.analysis.console import gate

        # a FAILED case is never gated away
        return end._replace(code=max(end.code, gate(end.path, list(options.baseline_files), console)))
    except UsageError as exc:
        cli.remove_made_folders()  # a refused run leaves no folder behind
        print(f"{common.PROG}: error: {exc} (see {common.PROG} --help)", file=sys.stderr)
        return Outcome(EXIT_USAGE, None)
    except KeyboardInterrupt:  # before a way to run took over: nothing was measured
        return Outcome(interrupted(args), RESERVED[-1] if RESERVED else None)
    except Exception as exc:
        if stop.signalled:  # a Ctrl-C an import (torch's, an extension's) re-raised as another error
            return Outcome(interrupted(args), RESERVED[-1] if RESERVED else None)
        from dbench.bench.io.results import ResultWriteError

        if not isinstance(exc, ResultWriteError):  # a result file that could not be made: one line
            raise
        print(f"{common.PROG}: error: {exc}", file=sys.stderr)
        return Outcome(EXIT_USAGE, None)


if __name__ == "__main__":
    exit_with("run.py", main)  # main's status; a late Ctrl-C or an unwritable stdout is no traceback
