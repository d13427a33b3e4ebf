"""GPU time per call of a timed block: CUPTI kernel records, or CUDA events.

The runner drains the GPU queue before and after every block (outside the CPU
timed region), so blocks never overlap on the GPU. A GPU timer brackets each
block:

    case.sync()
    timer.begin_block(label)          # right after the pre-block drain
    ... n calls ...                   # the CPU-timed loop
    timer.calls_done(label)           # right after the loop (optional hook)
    case.sync()
    timer.end_block(label, n)         # after the post-block drain
    ...
    timer.collect()                   # e.g. once per round: CUPTI flushes here

Two timers:

- ``CuptiTimer`` ("cupti"): CUPTI activity records (``_dbench_cupti``, built
  from bench/cupti/). Every kernel, memcpy and memset that *starts* inside the
  block's window [begin_block, end_block] is the block's, whichever thread
  launched it (autograd's backward runs on a worker thread). Per call: GPU-busy
  time (union of the activities' intervals, overlaps counted once), kernel
  count, summed kernel time, memcpys, memsets, and the kernels' names.
- ``EventTimer`` ("events"): two CUDA events on the current stream around the
  block; elapsed / n. That is the GPU-side *span* of the block, gaps between
  kernels included (launch-bound ops read as their launch rate), so it is an
  upper bound on kernel time; no kernel counts.

``make_gpu_timer`` picks CUPTI and falls back to events with a warning naming
the reason (no driver, libcupti missing, module not built, or another CUPTI
client such as Nsight Systems or torch.profiler holding CUPTI).

CUPTI tracing adds CPU cost to every launch, so CPU wall-clock samples taken
while a CuptiTimer is enabled are not comparable with plain ones: run the GPU
pass separately from the CPU pass.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

import torch

from dbench.bench.core.rows import GPU_METRICS, stat_row

TIMER_NAMES = ("cupti", "events")


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot be used in this process; the message says why."""


@functools.cache
def cupti_module() -> ModuleType:
    """The torch-free ``_dbench_cupti`` module; CuptiUnavailable if it was not built.

    Importing it never touches CUPTI or the driver (libcupti is dlopen'ed by
    ``enable``), so this works on CPU-only machines.
    """
    from dbench.bench.core.native_build import build_dir, built_extension, import_extension

    path = built_extension("_dbench_cupti")
    if path is None:
        raise CuptiUnavailable(
            f"_dbench_cupti not built (no {build_dir() / 'lib'}/_dbench_cupti*.so: it needs the CUDA toolkit's "
            "cupti.h at configure time; cmake -S . -B build && cmake --build build --target _dbench_cupti)"
        )
    try:
        return import_extension("_dbench_cupti", path)
    except ImportError as e:  # pragma: no cover - a broken build
        raise CuptiUnavailable(f"cannot import {path}: {e}") from e


def cupti_available() -> tuple[bool, str]:
    """(ok, reason): whether a CuptiTimer can be made here (without enabling CUPTI)."""
    try:
        module = cupti_module()
    except CuptiUnavailable as e:
        return False, str(e)
    ok, reason = module.available()
    return bool(ok), str(reason)


# ---------------------------------------------------------------------------
# Samples.


@dataclass
class GpuSamples:
    """One case's GPU samples: one entry per timed block, in block order."""

    gpu_us: list[float] = field(default_factory=list)  # GPU time per call (us)
    kernels: list[float] = field(default_factory=list)  # kernels per call (CUPTI only)
    kernel_us: list[float] = field(default_factory=list)  # summed kernel time per call (CUPTI only)
    span_us: list[float] = field(default_factory=list)  # first start .. last end, per call (CUPTI only)
    memcpy: list[float] = field(default_factory=list)  # memcpys per call (CUPTI only)
    memset: list[float] = field(default_factory=list)  # memsets per call (CUPTI only)
    names: dict[str, int] = field(default_factory=dict)  # kernel name -> launches, all blocks (CUPTI only)

    def truncate(self, n_blocks: int) -> None:
        """Keep the first n_blocks samples (e.g. drop an interrupted round; names are kept)."""
        for values in (self.gpu_us, self.kernels, self.kernel_us, self.span_us, self.memcpy, self.memset):
            del values[n_blocks:]


def _check_n(n_calls: int) -> None:
    if n_calls <= 0:
        raise ValueError(f"n_calls must be positive, got {n_calls}")


@runtime_checkable
class GpuTimer(Protocol):
    """Brackets timed blocks and keeps per-label, per-block GPU samples."""

    name: str  # "cupti" | "events": the `timer` field of the result rows

    def begin_block(self, label: str) -> None:
        """Call right after the pre-block device sync, just before the first call."""

    def calls_done(self, label: str) -> None:
        """Call right after the last call, before the post-block sync (optional)."""

    def end_block(self, label: str, n_calls: int) -> None:
        """Call after the post-block device sync; n_calls calls were made."""

    def collect(self) -> None:
        """Bring finished blocks into results() (CUPTI: flushes its buffers)."""

    def results(self) -> dict[str, GpuSamples]:
        """Per-label samples of every block ended so far (collects first)."""

    def dropped(self) -> int:
        """Activity records lost (CUPTI buffers full); 0 for events."""

    def meta(self) -> dict[str, Any]:
        """What to record about the timer in the result's env."""

    def close(self) -> None:
        """Release the timer (CUPTI: flush and detach). Idempotent."""


# ---------------------------------------------------------------------------
# CUPTI.


# Block ids are unique per process: the collector is a process-wide singleton
# (CUPTI allows one activity client), shared by every CuptiTimer.
_BLOCK_IDS = itertools.count(1)


class CuptiTimer:
    """GPU activity per block from CUPTI records (see the module docstring)."""

    name = "cupti"

    def __init__(self, module: Any = None, *, external_correlation: bool = False) -> None:
        """module: the _dbench_cupti module (default) or a stand-in with its API."""
        self._m = module if module is not None else cupti_module()
        ok, reason = self._m.available()
        if not ok:
            raise CuptiUnavailable(reason)
        try:
            self._m.enable(external_correlation=external_correlation)
        except RuntimeError as e:
            raise CuptiUnavailable(str(e)) from e
        self._open: tuple[str, int] | None = None
        self._pending: dict[int, tuple[str, int]] = {}  # block id -> (label, n_calls)
        self._results: dict[str, GpuSamples] = {}
        self._missing = 0
        self._closed = False
        atexit.register(self.close)

    def begin_block(self, label: str) -> None:
        if self._open is not None:
            raise RuntimeError(f"begin_block({label!r}): block of {self._open[0]!r} still open")
        block_id = next(_BLOCK_IDS)
        self._m.begin_block(block_id)
        self._open = (label, block_id)

    def calls_done(self, label: str) -> None:
        pass  # the window ends after the post-block drain

    def end_block(self, label: str, n_calls: int) -> None:
        _check_n(n_calls)
        if self._open is None or self._open[0] != label:
            raise RuntimeError(f"end_block({label!r}): no such open block")
        block_id = self._open[1]
        self._m.end_block(block_id)
        self._open = None
        self._pending[block_id] = (label, n_calls)

    def collect(self) -> None:
        if not self._pending:
            return
        blocks = self._m.flush()
        for block_id in sorted(self._pending):
            stats = blocks.get(block_id)
            if stats is None:  # not closed in the collector: cannot happen after end_block
                self._missing += 1
                continue
            label, n = self._pending[block_id]
            s = self._results.setdefault(label, GpuSamples())
            s.gpu_us.append(stats["busy_ns"] / n / 1e3)
            s.kernels.append(stats["kernels"] / n)
            s.kernel_us.append(stats["kernel_ns"] / n / 1e3)
            s.span_us.append(stats["span_ns"] / n / 1e3)
            s.memcpy.append(stats["memcpy"] / n)
            s.memset.append(stats["memset"] / n)
            for kname, count in stats["names"].items():
                s.names[kname] = s.names.get(kname, 0) + int(count)
        self._pending.clear()

    def results(self) -> dict[str, GpuSamples]:
        self.collect()
        return self._results

    def dropped(self) -> int:
        return int(self._m.dropped())

    def meta(self) -> dict[str, Any]:
        return {
            "gpu_timer": self.name,
            "gpu_timer_dropped_records": self.dropped(),
            "gpu_timer_missing_blocks": self._missing,
            "gpu_timer_counters": dict(self._m.counters()),
            "gpu_timer_cupti": dict(self._m.info()),
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        with contextlib.suppress(Exception):
            self.collect()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # cuptiFinalize wants the device idle and the buffers flushed
        # DBENCH_CUPTI_DETACH=0: disable and flush only, no cuptiFinalize (an escape hatch).
        self._m.finalize(detach=os.environ.get("DBENCH_CUPTI_DETACH", "1") != "0")


# ---------------------------------------------------------------------------
# CUDA events.


class EventTimer:
    """Elapsed time between two CUDA events on the current stream around a block."""

    name = "events"

    def __init__(self, device: torch.device | str | int | None = None) -> None:
        self.device = torch.device("cuda") if device is None else torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"EventTimer needs a CUDA device, got {self.device}")
        self._events: tuple[Any, Any] | None = None  # made on first use
        self._open: str | None = None
        self._end_recorded = False
        self._results: dict[str, GpuSamples] = {}

    def _stream(self) -> Any:
        return torch.cuda.current_stream(self.device)

    def begin_block(self, label: str) -> None:
        if self._open is not None:
            raise RuntimeError(f"begin_block({label!r}): block of {self._open!r} still open")
        if self._events is None:
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        self._open = label
        self._end_recorded = False
        self._events[0].record(self._stream())

    def calls_done(self, label: str) -> None:
        # Recording here, before the post-block sync, keeps the sync's latency out of the span.
        if self._open == label and self._events is not None:
            self._events[1].record(self._stream())
            self._end_recorded = True

    def end_block(self, label: str, n_calls: int) -> None:
        _check_n(n_calls)
        if self._open != label or self._events is None:
            raise RuntimeError(f"end_block({label!r}): no such open block")
        start, end = self._events
        if not self._end_recorded:
            end.record(self._stream())
        end.synchronize()
        ms = start.elapsed_time(end)
        self._open = None
        self._results.setdefault(label, GpuSamples()).gpu_us.append(ms * 1e3 / n_calls)

    def collect(self) -> None:
        pass  # samples are final at end_block

    def results(self) -> dict[str, GpuSamples]:
        return self._results

    def dropped(self) -> int:
        return 0

    def meta(self) -> dict[str, Any]:
        return {"gpu_timer": self.name}

    def close(self) -> None:
        self._events = None


# ---------------------------------------------------------------------------
# Selection.


def make_gpu_timer(device: torch.device | str | int | None, prefer: str = "cupti") -> GpuTimer | None:
    """The GPU timer for `device`: None on the CPU; CUPTI, else CUDA events with a warning."""
    if prefer not in TIMER_NAMES:
        raise ValueError(f"prefer must be one of {TIMER_NAMES}, got {prefer!r}")
    dev = torch.device("cpu") if device is None else torch.device(device)
    if dev.type != "cuda":
        return None
    if not torch.cuda.is_available():
        warnings.warn(f"no GPU timer for {dev}: torch.cuda.is_available() is False", stacklevel=2)
        return None
    if prefer == "cupti":
        try:
            return CuptiTimer()
        except CuptiUnavailable as e:
            warnings.warn(f"CUPTI unavailable, timing GPU blocks with CUDA events instead: {e}", stacklevel=2)
    return EventTimer(dev)


# ---------------------------------------------------------------------------
# NVTX.


def _noop(*_: Any) -> None:
    return None


@functools.cache
def _nvtx() -> tuple[Callable[[str], Any], Callable[[], Any]]:
    if not torch.cuda.is_available():
        return _noop, _noop
    try:
        m = cupti_module()
        if m.NVTX:
            return m.nvtx_push, m.nvtx_pop
    except CuptiUnavailable:
        pass
    return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX range (seen by Nsight Systems); a no-op without CUDA."""
    push, pop = _nvtx()
    push(name)
    try:
        yield
    finally:
        pop()


# ---------------------------------------------------------------------------
# Result rows (same shape as bench.io.results.case_rows, one metric per row; GPU_METRICS
# from bench.core.rows).


def gpu_rows(cases: Iterable[Any], timer: GpuTimer) -> list[dict[str, Any]]:
    """Rows for every runnable case timed by `timer`: gpu_us, and kernels_per_call for CUPTI.

    `cases` are bench.core.runner.Case objects (key, label, baseline, block). The
    per-round deltas against the baseline are paired like the CPU rows.
    """
    results = timer.results()
    metrics = GPU_METRICS if timer.name == "cupti" else GPU_METRICS[:1]
    rows: list[dict[str, Any]] = []
    for case in cases:
        if getattr(case, "gpu_error", None):
            rows.extend(stat_row(case.key, metric=metric, unit=unit, timer=timer.name, samples=[],
                                 baseline=case.baseline, status="failed", reason=case.gpu_error)
                        for metric, unit in metrics)
            continue
        samples = results.get(case.label)
        if samples is None:
            continue
        base = results.get(case.baseline or "")
        for metric, unit in metrics:
            values = samples.gpu_us if metric == "gpu_us" else samples.kernels
            base_values = None if base is None else (base.gpu_us if metric == "gpu_us" else base.kernels)
            extra: dict[str, Any] = {"block_calls": case.block or None}
            if metric == "gpu_us" and timer.name == "cupti":
                extra["kernel_names"] = dict(sorted(samples.names.items()))
            rows.append(stat_row(case.key, metric=metric, unit=unit, timer=timer.name, samples=values,
                                 base_samples=base_values, baseline=case.baseline, **extra))
    return rows
