"""Exercise the CUDA kernels on small inputs (for compute-sanitizer), or time them (--bench).

    python3 scripts/kernel_check.py            # every path once, small sizes, results checked
    compute-sanitizer --tool memcheck python3 scripts/kernel_check.py
    compute-sanitizer --tool racecheck python3 scripts/kernel_check.py
    python3 scripts/kernel_check.py --bench    # mm vs torch.mm (cuBLAS) at 4096^3; copy/muladd GB/s

Checks: elementwise ops on the vector and the scalar path (aligned, offset, odd sizes), l2norm
forward/backward on both row paths, the chain kernels (fused and one step at a time, forward
and backward), every elementwise and row-wise kernel with forced int32 and int64 offsets, mm through the tensor-core kernel (cp.async chunks and
element-wise tile loads, edge tiles), the FMA kernel, and K = 0. Exits 1 on a wrong result.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# The `cpp` variant's kernels wait 2 µs inside themselves (the gate's GPU injection, read when
# the C++ library loads), so that path runs under the sanitizer too; the raw launcher that
# every other check uses is never wrapped.
os.environ.setdefault("DBENCH_INJECT_GPU_NS", "2000")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ops import native  # noqa: E402


def _offset(t: torch.Tensor, k: int) -> torch.Tensor:
    base = torch.empty(t.numel() + k, dtype=t.dtype, device=t.device)
    view = base[k:].view(t.shape)
    view.copy_(t)
    return view


def check() -> int:
    raw = native.raw()
    failures = []
    for dtype in (torch.float32, torch.float64):
        for n in (1, 3, 4, 5, 1023, 65537):
            a, b, c = (torch.randn(n, dtype=dtype, device="cuda") for _ in range(3))
            for name, args in (("aligned", (a, b, c)), ("offset", tuple(_offset(t, 1) for t in (a, b, c)))):
                if not torch.equal(raw.noop(args[0]), a):
                    failures.append(f"noop {dtype} n={n} {name}")
                ref = a.double() * b.double() + c.double()
                if not torch.allclose(raw.muladd(*args).double(), ref, rtol=1e-5, atol=1e-5):
                    failures.append(f"muladd {dtype} n={n} {name}")
        for cols in (3, 8, 1030):
            x, g = torch.randn(2, 5, cols, dtype=dtype, device="cuda"), torch.randn(2, 5, cols, dtype=dtype, device="cuda")
            for xs, gs in ((x, g), (_offset(x, 1), _offset(g, 1))):
                y = raw.l2norm(xs, 1e-6)
                ref = xs.double() * torch.rsqrt((xs.double() ** 2).sum(-1, keepdim=True) + 1e-6)
                if not torch.allclose(y.double(), ref, rtol=1e-5, atol=1e-5):
                    failures.append(f"l2norm {dtype} cols={cols}")
                raw.l2norm_backward(gs, xs, 1e-6)
    failures += check_chain_and_widths(raw)
    failures += check_in_kernel_delay()
    for dtype, bound in ((torch.bfloat16, 1e-2), (torch.float16, 2e-3), (torch.float32, 1e-5), (torch.float64, 1e-12)):
        for m, k, n in ((130, 72, 264), (17, 33, 65), (256, 64, 256), (5, 0, 7), (1, 1, 1)):
            a = torch.randn(m, k, dtype=dtype, device="cuda")
            b = torch.randn(k, n, dtype=dtype, device="cuda")
            for aa in (a, _offset(a, 1)):
                out = raw.mm(aa, b)
                ref = a.double() @ b.double()
                err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                if out.isnan().any() or err > bound:
                    failures.append(f"mm {dtype} {m}x{k}x{n}: relative error {err:.2e}")
    torch.cuda.synchronize()
    for f in failures:
        print("FAILED", f)
    print(f"{'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


def check_chain_and_widths(raw) -> list[str]:
    """The chain kernels (fused k = 1..8, one step at a time, backward) on both access paths, and
    every elementwise and row-wise kernel with forced int32 and int64 offsets: equal bit for bit."""
    from ops import chain

    failures = []
    kernels = raw.kernel
    for dtype in (torch.float32, torch.float64):
        for n in (1, 5, 1023, 65537):
            x, g = torch.randn(n, dtype=dtype, device="cuda"), torch.randn(n, dtype=dtype, device="cuda")
            for name, (xs, gs) in (("aligned", (x, g)), ("offset", (_offset(x, 1), _offset(g, 1)))):
                for k in range(1, chain.MAX_LENGTH + 1):
                    fused, unfused = raw.chain(xs, k), xs
                    for i in range(k):
                        unfused = kernels.chain(unfused, 1, i)
                    if not (torch.equal(fused, unfused) and torch.equal(fused, chain.aten_chain(xs, k))):
                        failures.append(f"chain {dtype} n={n} k={k} {name}")
                    for index in ("int32", "int64"):
                        if not torch.equal(kernels.chain(xs, k, index=index), fused):
                            failures.append(f"chain {dtype} n={n} k={k} {name} index={index}")
                        if not torch.equal(kernels.chain_backward(gs, xs, k, index=index), raw.chain_backward(gs, xs, k)):
                            failures.append(f"chain_backward {dtype} n={n} k={k} {name} index={index}")
                for index in ("int32", "int64"):
                    if not torch.equal(kernels.noop(xs, index=index), xs):
                        failures.append(f"noop {dtype} n={n} {name} index={index}")
                    if not torch.equal(kernels.muladd(xs, gs, xs, index=index), raw.muladd(xs, gs, xs)):
                        failures.append(f"muladd {dtype} n={n} {name} index={index}")
        for cols in (3, 8, 1030):
            x, g = torch.randn(3, cols, dtype=dtype, device="cuda"), torch.randn(3, cols, dtype=dtype, device="cuda")
            for index in ("int32", "int64"):
                if not torch.equal(kernels.l2norm(x, 1e-6, index=index), raw.l2norm(x, 1e-6)):
                    failures.append(f"l2norm {dtype} cols={cols} index={index}")
                if not torch.equal(kernels.l2norm_backward(g, x, 1e-6, index=index), raw.l2norm_backward(g, x, 1e-6)):
                    failures.append(f"l2norm_backward {dtype} cols={cols} index={index}")
    kernels.spin(torch.empty(1, device="cuda"), 0, 20_000)  # the injection's spin kernel
    return failures


def check_in_kernel_delay() -> list[str]:
    """The `cpp` variant's forward kernels with the injected in-kernel wait: same results as aten."""
    from ops import get_variant
    from ops.catalog import OPS

    failures = []
    x = torch.randn(3, 1030, device="cuda")
    for op, args in (("noop", (x,)), ("muladd", (x, x, x)), ("l2norm", (x, 1e-6)), ("chain", (x, 3))):
        out = get_variant("cpp", op).fn(*args)
        if not torch.allclose(out, OPS[op].reference(*args), rtol=1e-5, atol=1e-5):
            failures.append(f"{op} with the in-kernel delay")
    return failures


def _time_ms(fn, reps: int = 50) -> float:
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def bench() -> int:
    raw = native.raw()
    for dtype in (torch.bfloat16, torch.float16):
        for size in (4096, 8192):
            a = torch.randn(size, size, dtype=dtype, device="cuda")
            b = torch.randn(size, size, dtype=dtype, device="cuda")
            ours, cublas = _time_ms(lambda: raw.mm(a, b)), _time_ms(lambda: torch.mm(a, b))
            tflops = 2 * size**3 / 1e9
            print(f"mm {str(dtype):15} {size}^3: ours {tflops / ours:7.1f} TFLOP/s, torch.mm {tflops / cublas:7.1f} "
                  f"TFLOP/s, ratio {cublas / ours:.2f}")
    n = 1 << 28
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(n // (dtype.itemsize // 4), dtype=dtype, device="cuda")
        y, z = torch.randn_like(x), torch.randn_like(x)
        for name, args in (("aligned", (x, y, z)), ("offset", (x[1:], y[1:], z[1:]))):
            nbytes = args[0].numel() * args[0].element_size()
            t_copy = _time_ms(lambda: raw.noop(args[0]), 20)
            t_fma = _time_ms(lambda: raw.muladd(*args), 20)
            print(f"{str(dtype):14} {name:8} copy {2 * nbytes / t_copy / 1e6:7.0f} GB/s, "
                  f"muladd {4 * nbytes / t_fma / 1e6:7.0f} GB/s (vector path: {raw.vector_path(list(args))})")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", action="store_true", help="time instead of checking")
    if not torch.cuda.is_available() or not native.has_cuda_kernels():
        print("needs a CUDA device and a build with CUDA kernels")
        sys.exit(2)
    sys.exit(bench() if parser.parse_args().bench else check())
