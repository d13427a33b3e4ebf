"""Taking turns on the GPU: a duet run's processes time their GPU passes one at a time.

Under `--duet` the two processes of an A/B pair run at once, each on its own cores: good for their
CPU rows (a slowdown of the host lands on both sides in the same rounds), bad for their GPU rows
when both time kernels together, since the GPU then time-slices their contexts and CUPTI's kernel
durations take in the other's share. So the parent gives the run's processes one lock file
(`RunOptions.gpu_turn`); a GPU pass (the Python one and the C++ driver's) holds it while it runs,
and the CPU rounds never wait for it. One lock for the run, not one a pair: with --overlap-pairs
a pair's GPU passes run while the next pair makes its CPU passes (bench/children/schedule.py).
The lock is `flock` on a file in the run's own work folder: the kernel releases it when its holder
exits, however it ends, so a crashed partner never blocks.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def gpu_turn(lock: Path | None, waited: dict[str, float] | None = None) -> Iterator[None]:
    """Hold the run's GPU turn for the block (no lock: no turn to take). `waited["gpu_turn_wait_s"]`
    adds the seconds spent waiting for the partner, which the result's config reports."""
    if lock is None:
        yield
        return
    # O_NOFOLLOW: a link planted at the name is refused, never followed (the folder is the run's own).
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        start = time.monotonic()
        fcntl.flock(fd, fcntl.LOCK_EX)
        if waited is not None:
            waited["gpu_turn_wait_s"] = round(waited.get("gpu_turn_wait_s", 0.0) + time.monotonic() - start, 2)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
