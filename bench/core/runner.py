"""Interleaved-rounds runner for CPU wall-clock per call.

Every round visits every runnable case once, in a fresh random order, and
times one block of calls per case. In the grouped order (the default) the cases paired with one
floor lie together in each round: the groups in a random order, each group's cases in a random
order, so that a case's block and its floor's are at most one group apart in time. Blocks are
sized during warm-up so the timer's own cost is at most 1e-4 of a block; the garbage collector is off
inside blocks. Every per-round sample is kept: statistics and paired
differences are computed from them afterwards (bench/core/stats.py).
"""

from __future__ import annotations

import gc
import math
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from dbench.bench.core import stats
from dbench.bench.core.case import CASE_ERRORS, Case, failure
from dbench.bench.core.defaults import DEFAULTS
from dbench.bench.core.gputimer import GpuTimer, nvtx_range

TIMER = "perf_counter_ns"
TIMER_OVERHEAD_FRACTION = 1e-4
COLD_BLOCKS_PER_ROUND = 10  # cold-cache cases: one-call blocks, each after an L2 flush
# GPU-pass blocks last at least this long: CUPTI's busy time of a block counts its first kernels,
# which start on an idle GPU, and in 2.5 ms blocks of ~1 µs kernels they moved GPU rows by up to 5 %
# (results/h200/README.md); 10 ms blocks had repeated within 0.4 %.
GPU_MIN_BLOCK_SECONDS = 0.01
REFRESH_SECONDS = 0.25  # progress bars redraw at most this often (a redraw costs ~0.4 ms)


@dataclass(frozen=True)
class RunConfig:
    rounds: int = DEFAULTS["rounds"][0]
    block_seconds: float = DEFAULTS["block_ms"][0] / 1e3
    warmup_seconds: float = DEFAULTS["warmup_ms"][0] / 1e3
    seed: int = 0
    order: str = DEFAULTS["order"][0]  # bench/core/defaults.py ORDERS: how a round's blocks are ordered
    adaptive: bool = False
    min_rounds: int = 10
    rel_precision: float = 0.01  # adaptive stop: CI half-width / median for every case
    max_seconds: float | None = None


@dataclass
class RunOutcome:
    rounds_done: int
    stop_reason: str
    seconds: float
    timer_overhead_ns: float


def timer_overhead_ns(trials: int = 2000) -> float:
    """Median cost of one perf_counter_ns() read."""
    reads = []
    for _ in range(trials):
        t0 = time.perf_counter_ns()
        t1 = time.perf_counter_ns()
        reads.append(t1 - t0)
    reads.sort()
    return float(reads[len(reads) // 2])


def time_block(case: Case, n: int, gpu_timer: GpuTimer | None = None) -> int:
    """Nanoseconds for n calls, GPU queue drained before (and after, untimed).

    With a GPU timer the block is also bracketed for GPU time: its window opens
    after the pre-block drain and closes after the post-block drain, so no other
    block's kernels can fall inside it.
    """
    call = case.call
    assert call is not None
    case.sync()
    if gpu_timer is not None:
        gpu_timer.begin_block(case.label)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with case.context() if case.context is not None else nullcontext():
            t0 = time.perf_counter_ns()
            for _ in range(n):
                call()
            t1 = time.perf_counter_ns()
    finally:
        if gc_was_enabled:
            gc.enable()
        if gpu_timer is not None:  # closed even when a call raised, so the timer's next block can open
            gpu_timer.calls_done(case.label)
            try:
                case.sync()
            finally:
                gpu_timer.end_block(case.label, n)
    if gpu_timer is None:
        case.sync()
    return t1 - t0


def calibrate(case: Case, config: RunConfig, overhead_ns: float) -> int:
    """Grow the block until it lasts block_seconds and dwarfs the timer.

    The block's length counts the drain of the GPU queue after it: a kernel that runs longer than
    its launch costs would otherwise get thousands of calls per block (the launches return at
    once), and every block would leave seconds of GPU work to wait for.
    """
    target_ns = max(config.block_seconds * 1e9, overhead_ns / TIMER_OVERHEAD_FRACTION)
    n = 1
    while True:
        start = time.perf_counter_ns()
        time_block(case, n)
        elapsed = time.perf_counter_ns() - start
        if elapsed >= target_ns:
            return n
        if elapsed <= 0:
            n *= 10
            continue
        n = max(n + 1, min(n * 10, math.ceil(n * target_ns * 1.1 / elapsed)))


def warm_up(case: Case, config: RunConfig) -> None:
    deadline = time.perf_counter() + config.warmup_seconds
    with case.context() if case.context is not None else nullcontext():
        case.call()  # type: ignore[misc]  # first call: lazy init, JIT, caches
    while time.perf_counter() < deadline:
        time_block(case, max(1, case.block // 4))


class Reporter(Protocol):
    """What a pass shows while it runs (bench/harness/progress.py draws it on a terminal): tasks with a total,
    advanced per block, redrawn between blocks, and a line per case that failed."""

    def __enter__(self) -> Reporter: ...
    def __exit__(self, *exc: Any) -> None: ...
    def start(self, description: str, total: int) -> Any: ...
    def advance(self, task: Any) -> None: ...
    def refresh(self, force: bool = False) -> None: ...
    def failed(self, label: str, error: str, where: str) -> None: ...


class Silent:
    """A Reporter that shows nothing (the default: a caller that wants bars passes one)."""

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def start(self, description: str, total: int) -> Any:
        return None

    def advance(self, task: Any) -> None:
        return None

    def refresh(self, force: bool = False) -> None:
        return None

    def failed(self, label: str, error: str, where: str) -> None:
        return None


def _drop(case: Case, error: str, reporter: Reporter) -> None:
    """A case that raised: it is FAILED with its error and timed no further; its samples go (a
    partial series would not pair with the other cases' rounds)."""
    case.error = error
    case.samples.clear()
    reporter.failed(case.label, error, "the other cases go on")


class Throttled:
    """Calls fn at most once per `seconds` (and always when forced): progress redraws between
    blocks, checkpoints of the result file between rounds."""

    def __init__(self, fn: Callable[[], Any], seconds: float = REFRESH_SECONDS) -> None:
        self.fn, self.seconds, self.last = fn, seconds, -math.inf

    def __call__(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self.last >= self.seconds:
            self.last = now
            self.fn()


def _warm_all(cases: list[Case], config: RunConfig, overhead: float, reporter: Reporter) -> list[Case]:
    """Each case's block sized and warmed up; the cases that did not raise."""
    warm = reporter.start("warm-up ", len(cases))
    for case in cases:
        try:
            with nvtx_range(f"warm-up {case.label}"):
                case.block = calibrate(case, config, overhead)
                warm_up(case, config)
        except CASE_ERRORS as exc:  # one broken case must not end the run
            _drop(case, failure("during warm-up", exc), reporter)
        reporter.advance(warm)
        reporter.refresh()
    return [c for c in cases if c.runnable]


def pairing_groups(cases: list[Case]) -> list[list[Case]]:
    """The cases in groups of one floor: a case with its baseline (followed to the case that has
    none), in the order the cases come; a case whose baseline is not among them is its own floor."""
    by_label = {c.label: c for c in cases}

    def floor(case: Case) -> str:
        path = [case.label]
        while case.baseline in by_label:
            if case.baseline in path:  # a cycle (a broken declaration): one group, whichever case entered it
                return min(path[path.index(case.baseline):])
            case = by_label[case.baseline]
            path.append(case.label)
        return case.label

    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(floor(case), []).append(case)
    return list(groups.values())


def round_order(cases: list[Case], order: str, rng: random.Random) -> list[Case]:
    """One round's blocks. The H200 host's CPU speed drifts within a round: two blocks' per-call
    ratio scatters less the closer they lie in time (results/h200/README.md), so "grouped" keeps a
    case near its floor; "shuffled" draws every block's place at random."""
    if order == "shuffled":
        shuffled = cases[:]
        rng.shuffle(shuffled)
        return shuffled
    groups = pairing_groups(cases)
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    return [case for group in groups for case in group]


def _converged(cases: list[Case], config: RunConfig) -> bool:
    return all(stats.summarize(c.samples).rel_ci_halfwidth <= config.rel_precision for c in cases)


def run(cases: list[Case], config: RunConfig, on_round: Callable[[int], None] | None = None,
        reporter: Reporter | None = None) -> RunOutcome:
    """Time every runnable case for config.rounds interleaved rounds.

    Ctrl-C (or SIGTERM turned into KeyboardInterrupt by the caller) stops after
    discarding the unfinished round, so all cases keep the same rounds and
    stay paired; on_round is called after each completed round (checkpoint).
    """
    runnable = [c for c in cases if c.runnable and c.flush is None]  # cold cases: GPU pass only
    rng = random.Random(config.seed)
    overhead = timer_overhead_ns()
    start = time.perf_counter()
    rounds_done, stop_reason = 0, "rounds"
    with reporter or Silent() as shown:
        try:
            runnable = _warm_all(runnable, config, overhead, shown)
            # What exists now lives through the rounds: moved out of the collector's reach, the
            # collection between rounds scans only what a round made (~0.15 s less per round).
            gc.collect()
            gc.freeze()
            task = shown.start("rounds  ", config.rounds * len(runnable))
            for r in range(config.rounds):
                gc.collect()
                for case in round_order(runnable, config.order, rng):
                    try:
                        with nvtx_range(case.label):
                            elapsed = time_block(case, case.block)
                    except CASE_ERRORS as exc:
                        _drop(case, failure(f"in round {r + 1}", exc), shown)
                        continue
                    case.samples.append(elapsed / case.block / 1e3)
                    shown.advance(task)
                    shown.refresh()
                shown.refresh(force=True)
                runnable = [c for c in runnable if c.runnable]
                rounds_done = r + 1
                if on_round:
                    on_round(rounds_done)
                if config.max_seconds and time.perf_counter() - start > config.max_seconds:
                    stop_reason = "time budget"
                    break
                if config.adaptive and rounds_done >= config.min_rounds and _converged(runnable, config):
                    stop_reason = f"converged (CI half-width <= {config.rel_precision:.1%} of median)"
                    break
        except KeyboardInterrupt:
            stop_reason = "interrupted"
            for case in runnable:
                del case.samples[rounds_done:]
        finally:
            gc.unfreeze()
    return RunOutcome(rounds_done, stop_reason, time.perf_counter() - start, overhead)


def run_gpu(
    cases: list[Case],
    config: RunConfig,
    timer: GpuTimer,
    rounds: int,
    reporter: Reporter | None = None,
) -> tuple[int, bool]:
    """GPU pass, after the CPU pass: the cases' blocks, interleaved, bracketed by `timer`, each
    lengthened to at least GPU_MIN_BLOCK_SECONDS (cold cases: one call each).

    A separate pass because CUPTI tracing adds CPU cost to every launch: the
    CPU samples of this pass are discarded. Returns the rounds completed; an
    interrupted round is dropped from every case, as in run().
    """
    for case in cases:
        if case.runnable and case.flush is not None:
            case.block = 1
    runnable = [c for c in cases if c.runnable and c.block]
    scale = max(1, math.ceil(GPU_MIN_BLOCK_SECONDS / config.block_seconds - 1e-9))
    calls = {c.label: c.block if c.flush is not None else c.block * scale for c in runnable}
    rng = random.Random(config.seed + 1)
    done, interrupted = 0, False
    with reporter or Silent() as shown:
        task = shown.start(f"gpu/{timer.name}", rounds * len(runnable))
        try:
            for case in runnable:  # untimed: whatever enabling the timer costs lands here
                try:
                    time_block(case, max(1, case.block // 4))
                except CASE_ERRORS as exc:
                    case.gpu_error = failure("in the GPU pass", exc)
            for r in range(rounds):
                order = [c for c in runnable if c.gpu_error is None]
                rng.shuffle(order)
                for case in order:
                    try:
                        for _ in range(COLD_BLOCKS_PER_ROUND if case.flush is not None else 1):
                            if case.flush is not None:
                                case.flush()
                            with nvtx_range(f"{case.label} x{calls[case.label]}"):
                                time_block(case, calls[case.label], timer)
                    except CASE_ERRORS as exc:
                        case.gpu_error = failure(f"in GPU round {r + 1}", exc)
                        shown.failed(case.label, case.gpu_error, "GPU pass")
                    shown.advance(task)
                    shown.refresh()
                shown.refresh(force=True)
                timer.collect()
                done = r + 1
        except KeyboardInterrupt:
            interrupted = True
            results = timer.results()
            for case in runnable:
                if case.label in results:
                    results[case.label].truncate(done * (COLD_BLOCKS_PER_ROUND if case.flush is not None else 1))
    return done, interrupted
