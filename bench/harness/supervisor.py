"""The command's supervisor: a crash of the run still leaves its result with a final status.

A run can die where no handler of its own runs: a user's op or an extension that segfaults or
aborts, the kernel's OOM killer. The command (run.py, `dbench run`; never the library API
`dbench.run_scenario`) therefore forks at start-up, before anything heavy is imported: the child
(the worker) runs the command as before, and this process, which imports nothing more, waits for
it. The worker tells it, through a pipe, every result file it reserves (interrupts.reserve). If
the worker dies by a signal, each of those files still `running` is marked (`failed`, "killed by
signal SIGSEGV"; `interrupted` for SIGINT / SIGTERM / SIGHUP), one line says so, and the exit
status is 1 (130 for an interrupt); otherwise the worker's exit status is the command's.

Signals: the worker stays in the command's process group (a terminal's Ctrl-C reaches it directly,
and a parent that kills the group kills it), so the supervisor forwards a SIGINT / SIGTERM / SIGHUP
only when it was sent to the supervisor alone (by kill(), a CI runner, `timeout`), not when the
terminal sent it to the whole group. The worker holds SIGINT and SIGTERM blocked from the fork
until the command has read its command line and installed its handler (`ready`), so a signal in
the first second is not lost: it stops the run as an interrupt, with a result file.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Collection
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
INTERRUPTS = frozenset(FORWARDED)  # a worker that died by one of these was stopped, not crashed
SI_KERNEL = 0x80  # si_code of a signal the kernel sent itself: the terminal's, to the whole foreground group

_channel: int | None = None  # in the worker: the pipe's end the reserved result files are told on
_held: set[int | signal.Signals] | None = None  # in the worker: the signal mask to restore once ready


def die_with_parent() -> Callable[[], None] | None:
    """A function, to call in a child after the fork (a preexec_fn), that has the kernel SIGKILL the
    child when this process dies, however it dies (SIGKILL included), so no child outlives the run
    that started it and goes on writing.

    The signal is tied to the thread that forks (the main thread here). A parent that died between
    the fork and the prctl would be missed: the child compares its parent with the one captured
    before the fork and exits if it changed. None where prctl is not available (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # libc, loaded before the fork
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _ignore(*_: object) -> None:
    """The supervisor's handler: never run (the signals stay blocked), but not SIG_IGN, whose signals
    the kernel drops before sigwaitinfo could see them."""


def supervise() -> None:
    """Fork the worker and return in it; in this process, wait for it and exit with the command's
    status. Returns at once, unsupervised, where fork or sigwaitinfo is missing."""
    global _channel, _held
    if not (hasattr(os, "fork") and hasattr(signal, "sigwaitinfo")):
        return
    watched = {*FORWARDED, signal.SIGCHLD}
    for sig in FORWARDED:
        signal.signal(sig, _ignore)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap the worker unseen
    held = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    bind = die_with_parent()
    read, write = os.pipe()
    _flush()
    worker = os.fork()
    if worker == 0:
        os.close(read)
        if bind is not None:
            bind()
        _channel, _held = write, held
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD, signal.SIGHUP} - held)
        return
    os.close(write)
    code = _wait(worker, watched, read)
    _flush()
    os._exit(code)


def _flush() -> None:
    """Flush what is buffered (never twice after the fork); a stream closed at start-up is None."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def ready() -> None:
    """In the worker, once the command's handlers are installed: the signals held since the fork are
    delivered now (a no-op unsupervised: the library API leaves the caller's mask alone)."""
    global _held
    if _held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _held)
        _held = None


def tell_reserved(path: Path) -> None:
    """In the worker: the supervisor learns a result file it must mark should the worker crash."""
    if _channel is not None:
        try:
            os.write(_channel, os.fsencode(str(path)) + b"\n")
        except OSError:  # the supervisor is gone: the worker dies with it anyway
            pass


def _wait(worker: int, watched: Collection[int], channel: int) -> int:
    """Forward the signals sent to this process alone until the worker ends; its exit status, or
    after a death by signal the status of a crashed (1) or interrupted (130) run, its files marked."""
    while True:
        info = signal.sigwaitinfo(watched)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(worker, os.WNOHANG)
            if done:
                break
        elif info.si_code != SI_KERNEL:  # the terminal's reached the worker too; this one did not
            try:
                os.kill(worker, info.si_signo)
            except ProcessLookupError:
                pass
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else _killed(signal.Signals(-code), _told(channel))


def _told(channel: int) -> list[Path]:
    """The result files the worker reserved (what it wrote before it died: the pipe is not waited on,
    in case something the worker forked still holds it)."""
    os.set_blocking(channel, False)
    data = b""
    while True:
        try:
            chunk = os.read(channel, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return [Path(os.fsdecode(line)) for line in data.splitlines() if line]


def end_running(path: Path, status: str, error: str) -> bool:
    """The result file `path`, while still `running`, rewritten with its final `status` and why (what
    it measured kept); False when its way to run wrote its own final status. Standard library only
    (an interrupt may have cut an import short; the supervisor imports nothing heavy). Raises
    OSError or ValueError when the file cannot be read or written."""
    import json

    from dbench.bench.io.atomic import write_atomic
    from dbench.bench.io.result_types import ResultDocument

    text = path.read_text()
    doc = json.loads(text) if text.strip() else {}
    if doc.get("status") not in (None, "running"):
        return False
    if doc.get("rows") and status == "interrupted":
        error = "interrupted before the run wrote its final status"
    config = dict(doc.get("config") or {})
    if not doc.get("rows"):  # stopped before the run wrote its config: nothing measured, no round done
        config.setdefault("rounds_done", 0)
    ended = ResultDocument.from_json(doc)
    ended.config, ended.status, ended.error = config, status, error
    write_atomic(path, json.dumps(ended.to_json(), indent=1) + "\n")
    return True


def _killed(sig: signal.Signals, reserved: list[Path]) -> int:
    """A worker killed by `sig`: its result files still `running` marked, one line on stderr."""
    from dbench.bench.harness import common
    from dbench.bench.harness.common import EXIT_FAILED, EXIT_INTERRUPTED, shown

    stopped = sig in INTERRUPTS
    status, error = (("interrupted", f"interrupted by {sig.name}") if stopped
                     else ("failed", f"killed by signal {sig.name}"))
    marked: list[Path] = []
    finished: list[Path] = []  # its run wrote a final status before the signal came
    for path in reserved:
        try:
            (marked if end_running(path, status, error) else finished).append(path)
        except (OSError, ValueError) as exc:
            print(f"{common.PROG}: error: {path} could not be marked {status}: {exc}", file=sys.stderr)
    said = []
    if marked:
        said.append(f"result: {', '.join(str(shown(p)) for p in marked)} (status {status})")
    if finished:
        said.append(f"result: {', '.join(str(shown(p)) for p in finished)} (written before the signal, "
                    "its status as the run wrote it)")
    where = "; ".join(said) or "no result written"
    what = "interrupted" if stopped else f"error: the run was killed by signal {sig.name}"
    print(f"{common.PROG}: {what}; {where}", file=sys.stderr)
    return EXIT_INTERRUPTED if stopped else EXIT_FAILED
