"""Every command's way out: its exit status, with a standard output that cannot be written reported
as one line on stderr (not a traceback), and a Ctrl-C after its result is written ignored. Standard
library only: run.py, `dbench` and the analysis commands import it before torch."""

from __future__ import annotations

import io
import os
import signal
import sys
from typing import Callable


class StdoutError(OSError):
    """A write to standard output failed: a full disk, a reader that went away (EPIPE), a bad descriptor."""


class _Stdout(io.FileIO):
    """Standard output's descriptor, its write errors raised as StdoutError, so the entry point tells
    them apart from any other OSError (a result file's has its own handling)."""

    def write(self, data: bytes) -> int:  # type: ignore[override]  # FileIO takes any buffer; stdout gets bytes
        try:
            return super().write(data)
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from None


def _say(prog: str, line: str) -> None:
    if sys.stderr is not None:
        print(f"{prog}: error: {line}", file=sys.stderr)


def guarded(prog: str, command: Callable[[], int | None]) -> int:
    """`command`'s exit status, standard output that cannot be written being one line on stderr, not a
    traceback: closed from the start, exit 2 before any work; a write that fails (> /dev/full, a closed
    pipe), exit 2, or 1 once a run has reserved its result (the file keeps what was measured)."""
    if sys.stdout is None:  # descriptor 1 was closed when the interpreter started
        _say(prog, "standard output is closed; give it somewhere to go (> FILE, or > /dev/null)")
        return 2
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured by a caller): as it is
        return int(command() or 0)
    old = sys.stdout
    old.flush()
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_Stdout(fd, "w", closefd=False)), encoding=old.encoding,
                                  errors=old.errors, line_buffering=bool(old.line_buffering),
                                  write_through=getattr(old, "write_through", False))
    try:
        status = int(command() or 0)
        sys.stdout.flush()
        return status
    except StdoutError as exc:
        from dbench.bench.harness.interrupts import RESERVED  # torch-free

        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)  # what is still buffered goes nowhere, not to a traceback
        _say(prog, f"cannot write to standard output: {exc.strerror}")
        return 1 if RESERVED else 2


def exit_with(prog: str, command: Callable[[], int | None]) -> None:
    """Exit with `command`'s status (guarded); a Ctrl-C after the result is written does not turn
    that status into a kill (Python's shutdown puts the default handlers back, an ignored signal
    stays ignored)."""
    status = guarded(prog, command)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(status)
