"""When the children of a repeated run start: one group at a time (a process, or a --duet pair), or
(--overlap-pairs) each pair as soon as the pair before it has finished its CPU passes.

Under --duet a pair's two processes run their CPU passes side by side, then take turns on the GPU
(bench/harness/gpu_turn.py). Those turns are a third of a pair's time on an H100 host (results/h100/
gate/duet-nights: 36.8 s a pair with turns, 29.8 s without), and the next pair's CPU passes need
none of the GPU. With --overlap-pairs the next pair starts on the next cores once each process of
the pair before has said its CPU passes are done (the file `RunOptions.cpu_done`, made just before
its first GPU turn) or has ended; the GPU turn is then one lock for the whole run, so no two GPU
passes ever overlap, and at most two pairs run at once (a pair starts only once every pair before
the previous one has ended). Both sides of a pair still start together and meet the same neighbours.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dbench.bench.children.shard.process import (
    Child,
    finish_child,
    kill_children,
    poll_progress,
    reap,
    start_child,
    stop_children,
)

POLL_SECONDS = 0.5


def batches(children: Sequence[Child], duet: bool) -> list[list[Child]]:
    """The children that start at the same time, in time order: one at a time, or (--duet) a pair's
    two sides together (children 2p and 2p+1 are pair p: bench/io/ab.py abba)."""
    step = 2 if duet else 1
    return [list(children[i:i + step]) for i in range(0, len(children), step)]


def ended(child: Child) -> bool:
    return child.status is not None


def cpu_passes_done(child: Child) -> bool:
    """The child has said its CPU passes are over (its marker file), or it has ended."""
    marker = child.options.cpu_done
    return ended(child) or (marker is not None and marker.exists())


def may_start(k: int, groups: Sequence[Sequence[Child]], overlap: bool,
              done: Callable[[Child], bool] = cpu_passes_done, over: Callable[[Child], bool] = ended) -> bool:
    """Whether group k may start now: every group before it has ended; or, overlapping, the group
    just before it has finished its CPU passes and every earlier one has ended."""
    if k == 0:
        return True
    if not overlap:
        return all(over(c) for group in groups[:k] for c in group)
    return all(done(c) for c in groups[k - 1]) and all(over(c) for group in groups[:k - 1] for c in group)


def run_groups(groups: Sequence[Sequence[Child]], rounds: int, console: Any, repo_root: Path,
               cores: tuple[set[int], set[int]] | None, on_done: Callable[[], object],
               overlap: bool = False) -> bool:
    """Start each group when may_start says so, with a progress bar per child, and on_done() each
    time children end. A failed child starts no further group (those running end on their own).
    Ctrl-C or SIGTERM stops every running child after its round and starts none; True when interrupted."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    every = [child for group in groups for child in group]
    started, tasks, failed, interrupted = 0, {}, False, False
    previous_sigterm = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, auto_refresh=False, transient=True) as progress:
            while True:
                try:
                    while not failed and started < len(groups) and may_start(started, groups, overlap):
                        tasks.update({c.index: progress.add_task(f"{c.label()} starting", total=rounds)
                                      for c in groups[started]})
                        _start(groups[started], repo_root, cores)
                        started += 1
                    running = _running(every)
                    now_ended = _poll(running, progress, tasks, console)
                    if now_ended:
                        for child in now_ended:
                            progress.remove_task(tasks[child.index])
                        on_done()
                        failed |= any(c.status == "failed" for c in now_ended)
                    if len(now_ended) == len(running) and (failed or started == len(groups)):
                        break
                    time.sleep(POLL_SECONDS)
                except KeyboardInterrupt:
                    interrupted = True
                    running = _running(every)  # a child started just before the signal too
                    names = " and ".join(c.label() for c in running)
                    console.print(f"[yellow]interrupted: stopping {names} and starting no other "
                                  "(Ctrl-C again to kill it)[/yellow]")
                    stop_children(running, console)
                    for child in running:
                        finish_child(child, console, interrupted=True)
                    on_done()
                    break
    except KeyboardInterrupt:  # a second Ctrl-C
        interrupted = True
        kill_children(every, console)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        reap(every)  # whatever ends the run (a failed checkpoint write too), no child runs on
    return interrupted


def _running(children: Sequence[Child]) -> list[Child]:
    return [c for c in children if c.proc is not None and not ended(c)]


def _start(group: Sequence[Child], repo_root: Path, cores: tuple[set[int], set[int]] | None) -> None:
    """Start a group's children with every allowed core (each pins itself within them), then wait on
    the cores none of them pins to."""
    if cores:
        os.sched_setaffinity(0, cores[0])
    for child in group:
        start_child(child, repo_root)
    if cores:
        os.sched_setaffinity(0, cores[1])


def _poll(running: Sequence[Child], progress: Any, tasks: dict[int, Any], console: Any) -> list[Child]:
    """Each running child's progress; the ones that have exited, classified (finish_child)."""
    out = []
    for child in running:
        poll_progress(child, progress, tasks[child.index])
        if child.proc is not None and child.proc.poll() is not None:
            finish_child(child, console)
            progress.update(tasks[child.index], description=f"{child.label()} {child.status}")
            out.append(child)
    progress.refresh()
    return out
