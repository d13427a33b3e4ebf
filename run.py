#!/usr/bin/env python3
"""Entry point: python run.py --scenario boundary [--device cpu|cuda] [...]

Parse and check the command line (no torch yet), pick the device, check the selection can time
something on it, then hand the run to one executor of dbench.bench.harness: in this process (the run
object, `rounds.Run`), a scenario that makes its own table, fresh processes one after another
(--processes, --ab) or shards side by side (--gpus, --shards). Show what it wrote
(dbench.analysis.console) and, with --baseline, gate it. Whatever ends the run leaves its result
file with a final status (bench/harness/interrupts.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

STARTED = time.monotonic()  # the phase timings count from here (interpreter start-up excluded)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dbench.bench.harness.supervisor import ready, supervise  # noqa: E402  (standard library only)
if __name__ == "__main__":  # the command, not the library: a supervisor ends the result of a run that crashes
    supervise()  # returns in the worker process that runs the command; the supervisor exits with its status

from dbench.bench.cli import UsageError  # noqa: E402  (torch-free)
from dbench.bench.harness import common  # noqa: E402
from dbench.bench.harness.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome  # noqa: E402
from dbench.bench.harness.interrupts import RESERVED, GracefulStop, interrupted  # noqa: E402
from dbench.bench.passes import Pass  # noqa: E402  (torch-free)
from dbench.main import exit_with  # noqa: E402  (torch-free)


def in_process(scenario: Any, device: str, args: argparse.Namespace, console: Any, stop: GracefulStop) -> Outcome:
    """The run object over this process's cases; its tables once the result is written."""
    from dbench.analysis.console import finished
    from dbench.bench.harness.rounds import Run
    from dbench.scenarios.select import selection

    end = Run(scenario, device, args, selection(scenario, device, args), console, stop, STARTED).execute()
    if end.doc is not None and end.json_path is not None and end.csv_path is not None:
        return finished(scenario, end.doc, end.json_path, end.csv_path, console, args.plot, end.code), end.json_path
    return end.code, end.json_path


def several(scenario: Any, device: str, shard_devices: list[str], argv: Sequence[str] | None,
            args: argparse.Namespace, console: Any) -> Outcome:
    """--processes / --ab (one after another) or --gpus / --shards (side by side), merged; its figures."""
    from dbench.analysis.console import plot, show_merged
    from dbench.bench.harness.several import run_in_processes, run_in_shards
    from dbench.bench.cli import option_strings
    from dbench.bench.results import load_result
    from dbench.ops import OP_NAMES
    from dbench.scenarios import DECLARATIONS
    from dbench.scenarios.select import selected_ops

    def show(doc: dict[str, Any], note: str) -> None:
        show_merged(doc, console, note)

    if args.processes is not None or args.ab is not None:
        code, json_path = run_in_processes(scenario, device, argv, args, console, option_strings(DECLARATIONS), show)
    else:
        code, json_path = run_in_shards(scenario, shard_devices, selected_ops(scenario, args, OP_NAMES), argv,
                                        args, console, option_strings(DECLARATIONS), show)
    if args.plot and json_path is not None:
        code = max(code, plot(load_result(json_path), json_path, console))
    return code, json_path


def dispatch(argv: Sequence[str] | None, args: argparse.Namespace, console: Any, stop: GracefulStop) -> Outcome:
    """Pick the device, check the selection can time something on it, and run it in its way."""
    from dbench.bench.cli import apply_defaults
    from dbench.bench.harness.custom import run_custom
    from dbench.bench.harness.device import resolve_device
    from dbench.scenarios import DECLARATIONS, SCENARIOS
    from dbench.scenarios.listing import load_user_ops, print_list
    from dbench.scenarios.select import check_selection

    if args.op:
        args.user_ops = load_user_ops(args)
    if args.list:
        print_list(console)
        return EXIT_OK, None
    repeated = args.processes is not None or args.ab is not None
    device, shard_devices = resolve_device(args, in_process=not repeated)
    # The defaults that waited for the device (cli.apply_defaults fills only what is still unset).
    declared = DECLARATIONS[args.scenario]
    apply_defaults(args, declared.defaults, declared.cuda_defaults, device, declared.repeated_cuda_defaults)
    scenario = SCENARIOS[args.scenario]
    check_selection(scenario, device, args, console)
    if stop.signalled:  # a Ctrl-C that an import caught and dropped: later ones would be ignored
        raise KeyboardInterrupt
    if repeated or len(shard_devices) > 1:
        stop.release()
        return several(scenario, device, shard_devices, argv, args, console)
    if scenario.makes(Pass.CUSTOM):
        return run_custom(scenario, device, args, console, stop)
    return in_process(scenario, device, args, console, stop)


def main(argv: Sequence[str] | None = None) -> int:
    return run_for_library(argv)[0]


def run_for_library(argv: Sequence[str] | None = None) -> tuple[int, Path | None]:
    """main's exit status and the result file it wrote (None: none), for dbench.run_scenario."""
    from dbench.bench import cli
    from dbench.ops.specs import OP_NAMES, USER_OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    RESERVED.clear()
    stop = GracefulStop(signal.SIGINT, signal.SIGTERM)  # from here on a signal, in any phase, ends as interrupted
    args: argparse.Namespace | None = None
    try:
        args = cli.parse(argv, tuple(DECLARATIONS), (*OP_NAMES, *USER_OP_NAMES), VARIANT_NAMES,
                         declarations=DECLARATIONS)
        ready()  # a signal held since start-up (supervised) stops the run now, its command line known
        from rich.console import Console

        # A log keeps each message on one line; no emoji codes (a lazy import a signal could cut short).
        console = Console(soft_wrap=not sys.stdout.isatty(), emoji=False)
        code, json_path = dispatch(argv, args, console, stop)
        if args.baseline is None or json_path is None:
            return code, json_path
        if code not in (EXIT_OK, EXIT_FAILED):
            console.print(f"[yellow]not gated: the run ended with exit {code}[/yellow]")
            return code, json_path
        from dbench.analysis.console import gate

        return max(code, gate(json_path, args.baseline_files, console)), json_path  # a FAILED case is never gated away
    except UsageError as exc:
        print(f"{common.PROG}: error: {exc} (see {common.PROG} --help)", file=sys.stderr)
        return EXIT_USAGE, None
    except KeyboardInterrupt:  # before a way to run took over: nothing was measured
        return interrupted(args), RESERVED[-1] if RESERVED else None
    except Exception as exc:
        if stop.signalled:  # a Ctrl-C an import (torch's, an extension's) re-raised as another error
            return interrupted(args), RESERVED[-1] if RESERVED else None
        from dbench.bench.results import ResultWriteError

        if not isinstance(exc, ResultWriteError):  # a result file that could not be made: one line
            raise
        print(f"{common.PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE, None


if __name__ == "__main__":
    exit_with("run.py", main)  # main's status; a late Ctrl-C or an unwritable stdout is no traceback
