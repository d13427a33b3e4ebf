"""Whatever ends a run leaves its result with a final status: the signal handler that turns the
first Ctrl-C / SIGTERM into a clean stop, the result files this process reserved, and the marking
of one that an interrupt left `running`."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from dbench.bench.harness import common
from dbench.bench.harness.common import EXIT_INTERRUPTED, shown
from dbench.bench.harness.supervisor import end_running, tell_reserved  # standard library only

RESERVED: list[Path] = []  # the result files this process reserved (one left `running` is marked interrupted)


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM noted inside the block and handled once it is done, by the handlers it
    found. They wait in Python, not in the thread's signal mask: the kernel gives a signal sent to
    the process to any thread that does not block it (torch starts several), and Python then runs
    the handler in the main thread whatever that thread's mask. Main thread only (signal.signal)."""
    came: list[int] = []
    found = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    held = {sig: handler for sig, handler in found.items() if handler is not None}  # None: not Python's
    for sig in held:
        signal.signal(sig, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)  # handled now, by the handler the block found


def reserve(folder: Path, scenario: str, label: str) -> Path:
    """A new result file (bench/io/results.py), remembered so an interrupt can always mark it.
    SIGINT and SIGTERM wait while the file is made and remembered: one that came between the two
    left the reserved file `running` and a second, interrupted one beside it (seen under load)."""
    from dbench.bench.io.results import reserve_result_path

    with stop_signals_held():
        path = reserve_result_path(folder, scenario, label)
        RESERVED.append(path)
        tell_reserved(path)  # the command's supervisor marks it should this process be killed
    return path


class GracefulStop:
    """SIGINT / SIGTERM: the first one stops the run (KeyboardInterrupt, so the runner drops its
    unfinished round), later ones are noted and ignored, so the final write cannot be cut short.
    The command installs it for SIGINT before anything else (a Ctrl-C in any phase ends as an
    interrupted run); the ways to run that time in this process add SIGTERM."""

    def __init__(self, *signals: int) -> None:
        self.requested = False  # set by a signal, or by the run once its final write begins
        self.signalled = False  # a signal came
        self._deferring = False
        self.install(*signals)

    def install(self, *signals: int) -> None:
        for sig in signals:
            signal.signal(sig, self._handle)

    @staticmethod
    def release() -> None:
        """SIGINT raising KeyboardInterrupt every time again: --processes, --ab and --shards count a
        second Ctrl-C themselves (bench/children/processes.py, bench/children/shard)."""
        signal.signal(signal.SIGINT, signal.default_int_handler)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A signal only noted inside, raised (KeyboardInterrupt) once the block is done: around
        `import torch`, whose C++ initialisers run Python code, where a KeyboardInterrupt cannot
        unwind through C++ and aborts the process (SIGABRT, no result) instead of stopping it."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self.signalled:
            raise KeyboardInterrupt

    def _handle(self, signum: int, _frame: Any) -> None:
        if self._deferring:
            self.requested = self.signalled = True
            return
        if self.requested:
            # Plain stderr: rich may be in the middle of the import the first signal interrupted.
            sys.stderr.write("already stopping: writing the result\n")
            return
        self.requested = self.signalled = True
        raise KeyboardInterrupt


def mark_interrupted(args: Any) -> Path | None:
    """The result of a run whose Ctrl-C reached the command: the file it reserved, while still
    `running`, marked interrupted; with none reserved yet (the machine's folder is not known before
    torch is), a new one in --out or the default folder. Standard library only: the interrupt may
    have cut an import short. None when there is nowhere to write (the command line was not read)."""
    from dbench.bench.io.atomic import create_unique
    from dbench.bench.io.result_types import ResultDocument
    from dbench.bench.core.trust import make_output_folder

    error = "interrupted before any measurement was kept"  # a breakdown's callgrind child may have counted some
    try:
        if RESERVED:
            end_running(RESERVED[-1], "interrupted", error)  # unless its way to run ended it
            return RESERVED[-1]
        if args is None:
            return None
        folder = args.out or args.default_out
        make_output_folder(folder)  # refused (UntrustedPathError) where others could plant files
        now = dt.datetime.now(dt.timezone.utc)
        doc = ResultDocument(args.scenario, "interrupted", error=error,
                             env={"time": now.isoformat(timespec="seconds"), "device": args.device}).to_json()
        stem = f"{args.scenario}-{(args.device or 'unknown').replace(':', '')}-{now.strftime('%Y%m%dT%H%M%SZ')}"
        return create_unique(folder, stem, ".json", json.dumps(doc, indent=1) + "\n")
    except (OSError, ValueError) as exc:
        print(f"{common.PROG}: error: the interrupted run's result could not be written: {exc}", file=sys.stderr)
    return None


def interrupted(args: Any) -> int:
    """Exit status 130, after mark_interrupted, with one line saying where the result is."""
    path = mark_interrupted(args)
    print(f"interrupted; {f'result: {shown(path)}' if path else 'no result written'}", file=sys.stderr)
    return EXIT_INTERRUPTED
