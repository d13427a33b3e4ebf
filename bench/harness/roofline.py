"""Roofs measured on the machine, and what a timed row achieved against them.

Roofs (``measure_roofs``), recorded in the result beside the datasheet's:

* GPU memory: the best of a device-to-device ``cudaMemcpyAsync`` (torch's
  ``copy_``), the suite's own copy kernel (``noop``), both counting bytes read
  plus bytes written, and a read-only pass (``torch.sum``), over buffers far
  larger than the L2. The read-only pass is there because HBM delivers more to
  a read-heavy mix than to a copy: on the H200 muladd (3 reads : 1 write) ran
  at 104 % of the copy roof, which is the memory system, not an error;
* GPU compute: cuBLAS through ``torch.mm``, the best of two large square sizes, per dtype;
* CPU: a large copy and a read, and the best of three matmul sizes on the one thread the runs
  use, each from its fastest block (a shared host only slows a block down).

Derived metrics (``derive``), from an op's declared work (ops.contract.Work)
and a time per call: achieved GB/s and TFLOP/s, arithmetic intensity, the
roof that applies, ``min(P, B * I)``, and the fraction of it reached,
``max(flops / P, bytes / B) / time``. A point more than ``ROOF_TOLERANCE``
above its roof is flagged ``above_roof``: a counting or timing error, which
tables show as such instead of a number. A warm working set that fits in the
cache (the GPU's L2, the CPU's last level) is not bounded by the memory roof:
its rates are reported and its fraction of roof is not.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch

# Measured roofs repeat within about 0.5 % (CUPTI): a point this far above is at the roof, no further.
ROOF_TOLERANCE = 0.02

# Vendor datasheet figures (dense, no sparsity), for the measured / datasheet ratio.
DATASHEETS: dict[str, dict[str, float]] = {
    "NVIDIA H200": {"memory_gbps": 4800.0, "bfloat16_tflops": 989.0, "float16_tflops": 989.0,
                    "float32_tflops": 67.0, "float64_tflops": 67.0},
    "NVIDIA H100 80GB HBM3": {"memory_gbps": 3350.0, "bfloat16_tflops": 989.0, "float16_tflops": 989.0,
                              "float32_tflops": 67.0, "float64_tflops": 67.0},
}
GPU_MEMORY_BYTES = 2 << 30  # per buffer: 2 GiB, far beyond any L2
# cuBLAS's best is the compute roof: a product of 4096^3 can run faster than one of 8192^3 (on the
# H200 808 against 798 TFLOP/s bf16 in one run: the longer kernel draws more power, at lower clocks).
GPU_GEMM_SIZES = (4096, 8192)
CPU_MEMORY_BYTES = 256 << 20
# The CPU's matmul rate depends on how much of the product its caches hold (on a 2-core VM with a
# 32 MiB L3, 256^3 ran 100 GFLOP/s and 1024^3 95 on one thread): the best of these sizes is the roof,
# as cuBLAS's best of two is on the GPU.
CPU_GEMM_SIZES = (256, 512, 1024)


@dataclass(frozen=True)
class Roof:
    value: float  # GB/s for memory, TFLOP/s for compute
    method: str  # how it was measured (the best candidate)
    candidates: dict[str, float]


def best_roof(rates: dict[str, float], digits: int) -> Roof:
    """The roof is the best of its candidates (each kept, rounded to `digits` decimals). The GPU
    roofs and the memory roof still spell this rule out inline: they move here once the change can
    run on a GPU."""
    best = max(rates, key=rates.__getitem__)
    return Roof(rates[best], best, {k: round(v, digits) for k, v in rates.items()})


def _fastest_seconds(fn: Callable[[], Any], calls: int, reps: int) -> float:
    """The fastest block's seconds per call of a CPU function. A roof is a bound: a shared host only
    ever slows a block down (one 1024^3 matmul median read 79-91 GFLOP/s in four tries on one VM),
    so the fastest block, not the median, is what the machine can do."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return min(times)


def gpu_seconds(fn: Callable[[], Any], device: str, timer: Any, label: str, calls: int = 5, reps: int = 7) -> float:
    """Median GPU time of one call of `fn`, from `timer` (CUPTI busy time, or events), blocks of `calls`."""
    from dbench.bench.core.case import Case
    from dbench.bench.core.runner import time_block

    dev = torch.device(device)
    case = Case(key={"op": "roof", "variant": label, "mode": "measure"}, call=fn,
                sync=lambda: torch.cuda.synchronize(dev))
    time_block(case, 2)  # warm-up: cuBLAS handles, allocator, clocks
    for _ in range(reps):
        time_block(case, calls, timer)
    return statistics.median(timer.results()[case.label].gpu_us) / 1e6


def measure_roofs(device: str, dtypes: tuple[torch.dtype, ...], timer: Any = None) -> dict[str, Any]:
    """The machine's memory roof and compute roof per dtype, with datasheet figures where known."""
    from dbench.ops.libraries import raw

    memory: dict[str, float] = {}
    compute: dict[str, Roof] = {}
    if device.startswith("cuda"):
        n = GPU_MEMORY_BYTES // 4
        src = torch.randn(n, device=device)
        dst = torch.empty_like(src)
        moved = 2 * src.numel() * src.element_size()
        copy_kernel = raw().noop
        memory["cudaMemcpyAsync"] = moved / gpu_seconds(lambda: dst.copy_(src), device, timer, "memcpy") / 1e9
        memory["copy kernel"] = moved / gpu_seconds(lambda: copy_kernel(src), device, timer, "copy") / 1e9
        read = src.numel() * src.element_size()
        memory["read (torch.sum)"] = read / gpu_seconds(lambda: torch.sum(src), device, timer, "read") / 1e9
        del src, dst
        for dt in dtypes:
            rates: dict[str, float] = {}
            for size in GPU_GEMM_SIZES:
                a, b = torch.randn(size, size, device=device).to(dt), torch.randn(size, size, device=device).to(dt)
                seconds = gpu_seconds(functools.partial(torch.mm, a, b), device, timer, f"mm-{dt}-{size}",
                                      calls=3, reps=5)
                rates[f"torch.mm (cuBLAS) {size}^3"] = 2 * size**3 / seconds / 1e12
            best = max(rates, key=lambda k: rates[k])
            compute[_name(dt)] = Roof(rates[best], best, {k: round(v, 1) for k, v in rates.items()})
        gpu = torch.cuda.get_device_name(torch.device(device))
        cache_bytes: int | None = torch.cuda.get_device_properties(torch.device(device)).L2_cache_size
    else:
        src = torch.randn(CPU_MEMORY_BYTES // 4)
        dst = torch.empty_like(src)
        moved = 2 * src.numel() * src.element_size()
        memory["copy_"] = moved / _fastest_seconds(lambda: dst.copy_(src), 3, 5) / 1e9
        read = src.numel() * src.element_size()
        memory["read (torch.sum)"] = read / _fastest_seconds(lambda: torch.sum(src), 3, 5) / 1e9
        for dt in dtypes:
            rates = {}
            for size in CPU_GEMM_SIZES:
                a, b = torch.randn(size, size).to(dt), torch.randn(size, size).to(dt)
                calls = max(1, (512 // size) ** 3)  # about the work of one 512^3 product per block
                seconds = _fastest_seconds(functools.partial(torch.mm, a, b), calls, 5)
                rates[f"torch.mm {size}^3, {torch.get_num_threads()} thread(s)"] = 2 * size**3 / seconds / 1e12
            compute[_name(dt)] = best_roof(rates, 4)  # about 0.1 TFLOP/s on one core
        gpu = None
        cache_bytes = cpu_cache_bytes()
    best = max(memory, key=lambda k: memory[k])
    roofs: dict[str, Any] = {
        "memory": asdict(Roof(memory[best], best, {k: round(v, 1) for k, v in memory.items()})),
        "compute": {k: asdict(v) for k, v in compute.items()},
        "cache_bytes": cache_bytes,  # a warm working set this small is served by the cache, not memory
    }
    sheet = DATASHEETS.get(gpu or "")
    if sheet:
        roofs["datasheet"] = {"source": f"{gpu} datasheet (dense)", **sheet}
        ratios = {"memory": roofs["memory"]["value"] / sheet["memory_gbps"]}
        for name, roof in roofs["compute"].items():
            if f"{name}_tflops" in sheet:
                ratios[name] = roof["value"] / sheet[f"{name}_tflops"]
        roofs["measured_over_datasheet"] = {k: round(v, 3) for k, v in ratios.items()}
    return roofs


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def cpu_cache_bytes() -> int | None:
    """The CPU's largest cache (last level), from sysfs."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def derive(bytes_moved: int, flops: int, seconds: float, memory_gbps: float, compute_tflops: float | None,
           resident: bool = False) -> dict[str, Any]:
    """Achieved rates and the fraction of the applicable roof for one call of `seconds`.

    resident: the working set fits in a warm cache, so the memory roof (device memory) does not
    bound it: a memory-bound point then reports its rates, no fraction of roof (None), and is
    never flagged; a compute-bound one is still judged against the compute roof.
    """
    if seconds <= 0 or bytes_moved <= 0:
        raise ValueError(f"need a positive time and byte count, got {seconds} s and {bytes_moved} B")
    gbps = bytes_moved / seconds / 1e9
    tflops = flops / seconds / 1e12
    intensity = flops / bytes_moved
    peak = compute_tflops if compute_tflops else math.inf
    roof_tflops = min(peak, memory_gbps * intensity / 1e3)
    compute_s = flops / (peak * 1e12) if flops else 0.0
    memory_s = bytes_moved / (memory_gbps * 1e9)
    bound = "memory" if memory_s >= compute_s else "compute"
    if resident and bound == "memory":  # served by the cache: no roof measured here bounds it
        bound = "cache"
    pct = None if bound == "cache" else max(compute_s, memory_s) / seconds
    return {
        "bytes": bytes_moved, "flops": flops, "gbps": round(gbps, 3), "tflops": round(tflops, 6),
        "intensity": round(intensity, 6), "roof_tflops": None if math.isinf(roof_tflops) else round(roof_tflops, 6),
        "bound": bound, "pct_of_roof": None if pct is None else round(pct, 6),
        "above_roof": pct is not None and pct > 1 + ROOF_TOLERANCE,
    }


def attach(rows: list[dict[str, Any]], works: dict[tuple[Any, ...], Any], roofs: dict[str, Any], metric: str) -> None:
    """Add the derived metrics to every ok row of `metric` whose case declared its work
    (works: case identity -> Work)."""
    from dbench.bench.core.identity import case_identity

    memory, cache = roofs["memory"]["value"], roofs.get("cache_bytes")
    for row in rows:
        work = works.get(case_identity(row))
        if row.get("metric") != metric or row.get("status") != "ok" or work is None or not row.get("median"):
            continue
        peak = (roofs["compute"].get(str(row.get("dtype"))) or {}).get("value")
        resident = row.get("cache", "warm") != "cold" and cache is not None and work.resident_bytes <= cache
        row.update(derive(work.bytes, work.flops, row["median"] / 1e6, memory, peak, resident))
