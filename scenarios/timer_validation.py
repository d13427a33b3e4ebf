"""`timer_validation`: CUPTI vs CUDA events vs triton's do_bench on kernels of known length.

Kernels from about 2 µs to 5 ms: a spin kernel (torch.cuda._sleep, whose
length is set in clock cycles, calibrated here against CUPTI) and the suite's
own copy kernel (the `noop` launcher) on growing tensors. Each kernel is timed
three ways:

- cupti: summed GPU-busy time of the kernel records, per call, over blocks of
  back-to-back calls (bench/core/gputimer.py CuptiTimer): the kernel's own time;
- cupti_span: the same blocks, first kernel start to last kernel end, per call:
  kernel time plus the idle gaps between back-to-back kernels;
- events: a CUDA event pair around a block of back-to-back calls, span / calls
  (the queue stays ahead of the GPU, so launch latency is hidden as far as it
  can be), median over blocks;
- events/call: an event pair around every single call, median over calls;
- do_bench: triton.testing.do_bench(..., return_mode="median").

Per-call events and do_bench see the launch latency between the start event
and the kernel, so short kernels read long; the table shows from where on the
three agree.

The 2% verdict compares like with like: batched events measure elapsed GPU
time across the block, gaps included, so they are judged against CUPTI's span
of the same kind of block. The busy/span ratio beside it is what the gaps
cost: for a kernel of tens of µs launched back to back the GPU idles 1-2 µs
between kernels, which batched events count and CUPTI's kernel time does not.
"""

from __future__ import annotations

import functools
import statistics
from typing import Any, Callable

import torch

from dbench.bench.core import stats
from dbench.bench.core.gputimer import CuptiTimer, CuptiUnavailable

from . import DECLARATIONS
from .base import Scenario

SLEEP_TARGETS_US = (2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
COPY_ELEMENTS = (2**10, 2**16, 2**20, 2**24, 2**26, 2**28)
AGREEMENT = 0.02  # events vs CUPTI, for kernels of at least AGREEMENT_MIN_US
AGREEMENT_MIN_US = 50.0
REPS = 15


def _cupti_per_call(timer: CuptiTimer, label: str, fn: Callable[[], Any], calls: int,
                    reps: int) -> tuple[list[float], list[float]]:
    """GPU-busy and span µs per call, one of each per block."""
    for _ in range(reps):
        torch.cuda.synchronize()
        timer.begin_block(label)
        for _ in range(calls):
            fn()
        timer.calls_done(label)
        torch.cuda.synchronize()
        timer.end_block(label, calls)
    samples = timer.results()[label]
    return samples.gpu_us, samples.span_us


def _events_batched(fn: Callable[[], Any], calls: int, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / calls)
    return out


def _events_per_call(fn: Callable[[], Any], calls: int) -> list[float]:
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    torch.cuda.synchronize()
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) * 1e3 for start, end in pairs]


def _do_bench_us(fn: Callable[[], Any]) -> float | None:
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median")) * 1e3


def _calls_for(us: float) -> int:
    """Back-to-back calls per block: about 20 ms of GPU time, between 3 and 2000 calls."""
    return int(min(2000, max(3, 20_000 / max(us, 1.0))))


def kernels(device: str) -> list[tuple[str, str, float | None, Callable[[], Any]]]:
    """(kernel, size label, target µs or None, zero-arg launcher)."""
    from dbench.ops.libraries import raw

    out: list[tuple[str, str, float | None, Callable[[], Any]]] = []
    cycles_per_us = calibrate_sleep()
    for target in SLEEP_TARGETS_US:
        cycles = int(target * cycles_per_us)
        out.append(("sleep", f"{target}us", float(target), functools.partial(torch.cuda._sleep, cycles)))
    launcher = raw().noop
    for n in COPY_ELEMENTS:
        x = torch.randn(n, device=device)
        out.append(("copy", f"{n * 4 / 2**20:g}MiB", None, functools.partial(launcher, x)))
    return out


_CALIBRATION: dict[str, float] = {}


def calibrate_sleep() -> float:
    """Clock cycles per µs of torch.cuda._sleep, measured with CUPTI on a ~1 ms spin."""
    if "cycles_per_us" not in _CALIBRATION:
        timer = _timer()
        cycles = 2_000_000
        busy, _ = _cupti_per_call(timer, "calibrate", lambda: torch.cuda._sleep(cycles), 5, 3)
        us = statistics.median(busy)
        _CALIBRATION["cycles_per_us"] = cycles / us
    return _CALIBRATION["cycles_per_us"]


_TIMER: list[CuptiTimer] = []


def _timer() -> CuptiTimer:
    if not _TIMER:
        _TIMER.append(CuptiTimer())
    return _TIMER[0]


def _row(kernel: str, size: str, timer: str, samples: list[float], device: str, target: float | None) -> dict[str, Any]:
    """One kernel x size x timer: the timer is the variant under test, the size an axis (bench/core/identity.py)."""
    s = stats.summarize(samples)
    return {
        "scenario": "timer_validation", "op": kernel, "variant": timer, "mode": "gpu", "size": size,
        "axes": ["size"], "device": device, "driver": "python", "metric": "gpu_us", "unit": "us", "timer": timer,
        "status": "ok", "reason": None,
        "n": s.n, "median": s.median, "q1": s.q1, "q3": s.q3, "ci_low": s.ci_low, "ci_high": s.ci_high,
        "target_us": target, "samples": [round(x, 4) for x in samples],
    }


def run(device: str, progress: Callable[[str], None] = lambda _: None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """All rows, and what to record in env (calibration, CUPTI meta)."""
    try:
        timer = _timer()
    except CuptiUnavailable as exc:
        raise SystemExit(f"timer_validation needs CUPTI to compare against: {exc}") from exc
    rows: list[dict[str, Any]] = []
    for kernel, size, target, fn in kernels(device):
        progress(f"{kernel} {size}")
        for _ in range(3):  # warm-up: JIT, allocator, clocks
            fn()
        torch.cuda.synchronize()
        cupti_us, span_us = _cupti_per_call(timer, f"{kernel}/{size}", fn, _calls_for(target or 10.0), REPS)
        rows.append(_row(kernel, size, "cupti", cupti_us, device, target))
        rows.append(_row(kernel, size, "cupti_span", span_us, device, target))
        calls = _calls_for(statistics.median(cupti_us))
        rows.append(_row(kernel, size, "events", _events_batched(fn, calls, REPS), device, target))
        rows.append(_row(kernel, size, "events_per_call", _events_per_call(fn, min(calls, 500)), device, target))
        bench_us = _do_bench_us(fn)
        if bench_us is not None:
            rows.append(_row(kernel, size, "do_bench", [bench_us], device, target))
    return rows, {"sleep_cycles_per_us": round(calibrate_sleep(), 2), **timer.meta()}


def ratio_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per kernel: the medians, their ratios to CUPTI, and the 2% verdict.

    The verdict (`within_2pct`) is events vs CUPTI span (both elapsed GPU time
    over a block of back-to-back calls), for kernels whose CUPTI busy time is at
    least AGREEMENT_MIN_US; None below that, or when a timer is missing.
    """
    by_kernel: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        entry = by_kernel.setdefault((r["op"], r["size"]), {"kernel": r["op"], "size": r["size"]})
        entry[r["timer"]] = r["median"]
    out = []
    for entry in by_kernel.values():
        cupti, span = entry.get("cupti"), entry.get("cupti_span")
        for other in ("events", "events_per_call", "do_bench", "cupti_span"):
            value = entry.get(other)
            entry[f"{other}/cupti"] = value / cupti if value is not None and cupti else None
        events = entry.get("events")
        entry["events/span"] = events / span if events is not None and span else None
        ratio = entry["events/span"]
        if cupti is not None and cupti >= AGREEMENT_MIN_US and ratio is not None:
            entry["within_2pct"] = abs(ratio - 1) <= AGREEMENT
        else:
            entry["within_2pct"] = None  # below the threshold the criterion does not apply
        out.append(entry)
    return out


def report(rows: list[dict[str, Any]], console: Any) -> int:
    """Print the ratio table; exit code 1 when events and CUPTI disagree above the threshold."""
    from rich.table import Table

    table = Table(title="GPU time per call (µs, median): CUPTI vs CUDA events vs do_bench", title_justify="left")
    for col in ("kernel", "size", "cupti", "span", "events", "events/call", "do_bench", "span/cupti", "events/span",
                "events/cupti", "events/call/cupti", "do_bench/cupti", "≤2%"):
        table.add_column(col, justify="left" if col in ("kernel", "size") else "right")
    lines = ratio_table(rows)

    def fmt(x: Any, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    for e in lines:
        verdict = {True: "yes", False: "[red]NO[/red]", None: ""}[e["within_2pct"]]
        table.add_row(e["kernel"], e["size"], fmt(e.get("cupti"), ".2f"), fmt(e.get("cupti_span"), ".2f"),
                      fmt(e.get("events"), ".2f"), fmt(e.get("events_per_call"), ".2f"), fmt(e.get("do_bench"), ".2f"),
                      fmt(e.get("cupti_span/cupti"), ".3f"), fmt(e.get("events/span"), ".3f"),
                      fmt(e.get("events/cupti"), ".3f"), fmt(e.get("events_per_call/cupti"), ".3f"),
                      fmt(e.get("do_bench/cupti"), ".3f"), verdict)
    console.print(table)
    console.print("[dim]cupti: kernel (busy) time; span: first start to last end of back-to-back calls, gaps "
                  "included. ≤2%: batched events vs CUPTI span (both elapsed GPU time), judged for kernels of at "
                  "least 50 µs; events/cupti shows what the gaps add.[/dim]")
    failed = [e for e in lines if e["within_2pct"] is False]
    console.print(f"events vs CUPTI span for kernels ≥ {AGREEMENT_MIN_US:g} µs: "
                  + ("all within 2%" if not failed else f"[red]{len(failed)} outside 2%[/red]"))
    return 1 if failed else 0


SCENARIO = Scenario(
    DECLARATIONS["timer_validation"],
    build=lambda sel: [],
    custom_run=run,
    custom_report=report,
)
