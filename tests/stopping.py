"""Runs a test starts as a child process and stops with a signal: started() never leaves one
behind, interrupt() checks what the stop left."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path
from typing import Any, Iterator

from dbench.bench.io.results import load_result


@contextlib.contextmanager
def started(cmd: list[str], *, merged: bool = True, **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """The command running with its output piped (stderr into stdout when `merged`), killed on the
    way out if it still runs (a test that failed while waiting for it)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                            text=True, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def interrupt(proc: subprocess.Popen[str], folder: Path, sig: int = signal.SIGINT,
              timeout: float = 90) -> tuple[str, str, dict[str, Any]]:
    """Send `sig`, wait for the run to end, and check that it exited 130 leaving one result in
    `folder`: (its stdout, its stderr, that result)."""
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 130, (out or "")[-2000:] + (err or "")
    (path,) = Path(folder).glob("*.json")
    return out or "", err or "", load_result(path)
