"""Exercise the CUDA kernels on small inputs (for compute-sanitizer), or time them (--bench).

    python3 scripts/kernel_check.py            # every path once, small sizes, results checked
    compute-sanitizer --tool memcheck python3 scripts/kernel_check.py
    compute-sanitizer --tool racecheck python3 scripts/kernel_check.py
    python3 scripts/kernel_check.py --bench    # mm vs torch.mm (cuBLAS) at 4096^3; copy/muladd/l2norm GB/s

Checks (the elementwise and row-wise ones in float16, bfloat16, float32 and float64): elementwise
ops on the vector and the scalar path (aligned, offset, odd sizes), l2norm forward on both access
paths and both row schedules (warp per row and block per row, forced, at the edge of what a warp
holds) and backward, the chain kernels (fused and one step at a time, forward
and backward), every elementwise and row-wise kernel with forced int32 and int64 offsets, mm
through both tensor-core kernels (mma.sync, with cp.async chunks and element-wise tile loads;
wgmma where the build and the device have it) with edge tiles, the FMA kernel, and K = 0; and every
op sized in bytes from its declaration alone (forward and backward kernels against its CPU
kernels: an op added by its declaration is covered with no line here). Exits 1 on a wrong result.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

# The `cpp` variant's kernels wait 2 µs inside themselves (the gate's GPU injection, read when
# the C++ library loads), so that path runs under the sanitizer too; the raw launcher that
# every other check uses is never wrapped.
os.environ.setdefault("DBENCH_INJECT_GPU_NS", "2000")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dbench.ops import libraries
from dbench.ops.specs import MM_KERNEL_ENV, MM_KERNELS

ELEMENTWISE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Elementwise bounds against the fp64 reference: the 16-bit types round once (half an ulp).
TOLERANCE = {torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-12}
WARP_ROW_PACKS = 8  # kernels.h kWarpRowPacks: a warp holds rows of 32 x 8 accesses
# kernels.h kMaxBlocks and kWarpsPerBlock: the block schedule's grid covers GRID_BLOCKS rows, the
# warp schedule's WARPS_PER_BLOCK times as many; one row past each exercises its grid stride.
GRID_BLOCKS, WARPS_PER_BLOCK = 65535, 8


def _offset(t: torch.Tensor, k: int) -> torch.Tensor:
    base = torch.empty(t.numel() + k, dtype=t.dtype, device=t.device)
    view = base[k:].view(t.shape)
    view.copy_(t)
    return view


def check_elementwise(raw) -> list[str]:
    """noop and muladd on both access paths, l2norm forward and backward on the default schedule."""
    failures = []
    for dtype in ELEMENTWISE_DTYPES:
        tol = TOLERANCE[dtype]
        for n in (1, 3, 4, 5, 7, 8, 9, 1023, 65537):
            a, b, c = (torch.randn(n, dtype=dtype, device="cuda") for _ in range(3))
            for name, args in (("aligned", (a, b, c)), ("offset", tuple(_offset(t, 1) for t in (a, b, c)))):
                if not torch.equal(raw.noop(args[0]), a):
                    failures.append(f"noop {dtype} n={n} {name}")
                ref = a.double() * b.double() + c.double()
                if not torch.allclose(raw.muladd(*args).double(), ref, rtol=tol, atol=tol):
                    failures.append(f"muladd {dtype} n={n} {name}")
        for cols in (3, 8, 1030):
            x, g = (torch.randn(2, 5, cols, dtype=dtype, device="cuda") for _ in range(2))
            for xs, gs in ((x, g), (_offset(x, 1), _offset(g, 1))):
                y = raw.l2norm(xs, 1e-6)
                if not torch.allclose(y.double(), _l2norm_ref(xs), rtol=tol, atol=tol):
                    failures.append(f"l2norm {dtype} cols={cols}")
                raw.l2norm_backward(gs, xs, 1e-6)
    return failures


# Each tensor-core kernel DBENCH_MM_KERNEL can force (the Hopper wgmma kernel, the default where
# the build and the device have it; the mma.sync kernel) runs every check and bench.


@contextlib.contextmanager
def _mm_kernel(kernel: str) -> Iterator[None]:
    """DBENCH_MM_KERNEL=kernel inside (the kernel layer reads it on every call), unset after."""
    os.environ[MM_KERNEL_ENV] = kernel
    try:
        yield
    finally:
        del os.environ[MM_KERNEL_ENV]


def _mm_kernel_runs(raw, kernel: str) -> bool:
    with _mm_kernel(kernel):
        ones = [torch.ones(8, 8, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
        try:
            raw.mm(*ones)
        except RuntimeError as e:
            print(f"mm kernel {kernel}: not run here ({e})")
            return False
        assert raw.mm_kernel(*ones) == kernel, f"{kernel} forced, {raw.mm_kernel(*ones)} reported"
        return True


def check_mm(raw, kernel: str) -> list[str]:
    """mm in every dtype against an fp64 product: edge tiles in M, N and K (K past one 64-wide
    k tile, and not a multiple of it), an offset (misaligned) A, K = 0 and 1 x 1 x 1."""
    failures = []
    shapes = ((130, 72, 264), (17, 33, 65), (256, 64, 256), (300, 520, 776), (129, 136, 512), (5, 0, 7), (1, 1, 1))
    with _mm_kernel(kernel):
        for dtype, bound in ((torch.bfloat16, 1e-2), (torch.float16, 2e-3), (torch.float32, 1e-5),
                             (torch.float64, 1e-12)):
            for m, k, n in shapes:
                a = torch.randn(m, k, dtype=dtype, device="cuda")
                b = torch.randn(k, n, dtype=dtype, device="cuda")
                for aa in (a, _offset(a, 1)):
                    out = raw.mm(aa, b)
                    ref = a.double() @ b.double()
                    err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                    if out.isnan().any() or err > bound:
                        failures.append(f"mm [{kernel}] {dtype} {m}x{k}x{n}: relative error {err:.2e}")
                        if len(failures) == 1:
                            print(_error_map(out.double(), ref, 8 * bound))
    return failures


def _error_map(out: torch.Tensor, ref: torch.Tensor, bound: float) -> str:
    """Where a wrong product is wrong, in tile coordinates: rows mod 128 in groups of 8 (lines)
    against columns mod 256 in groups of 8 (characters), '#' where most elements are off, '+'
    where some are, '.' where none; the layout bug behind a failure usually shows as a pattern."""
    bad = ((out - ref).abs() > bound * ref.abs().mean().clamp_min(1e-30)) | out.isnan()
    m, n = bad.shape
    rows = torch.arange(m, device=bad.device) % 128 // 8
    cols = torch.arange(n, device=bad.device) % 256 // 8
    cell = (rows[:, None] * 32 + cols[None, :]).flatten()
    zeros = torch.zeros(16 * 32, dtype=torch.float64, device=bad.device)
    hits = zeros.clone().index_add_(0, cell, bad.flatten().double())
    total = zeros.clone().index_add_(0, cell, torch.ones(cell.numel(), dtype=torch.float64, device=bad.device))
    frac = (hits / total.clamp_min(1)).view(16, 32).cpu()
    lines = ["".join("#" if f > 0.5 else "+" if f > 0 else "." for f in row) for row in frac.tolist()]
    return f"  error map of {m}x{n} ({bad.double().mean().item():.1%} off):\n" + "\n".join("  " + ln for ln in lines)


def _l2norm_ref(x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    return x * torch.rsqrt((x**2).sum(-1, keepdim=True) + 1e-6)


def check_row_schedules(raw) -> list[str]:
    """l2norm forward with the warp and the block schedule forced: rows of one element, of one pack,
    ending in idle lanes or in a partial last pack, the longest a warp holds, and more rows than one
    grid covers, on both access paths; against the reference, and int32 against int64 offsets."""
    failures = []
    kernels = raw.kernel
    for dtype in ELEMENTWISE_DTYPES:
        width, tol = 16 // dtype.itemsize, TOLERANCE[dtype]
        longest = 32 * WARP_ROW_PACKS * width
        for rows, cols in ((3, 1), (5, width), (7, 31 * width), (3, 100 * width), (2, longest), (9, 256),
                           (GRID_BLOCKS + 1, 2 * width), (GRID_BLOCKS * WARPS_PER_BLOCK + 1, 2 * width)):
            x = torch.randn(rows, cols, dtype=dtype, device="cuda")
            for name, xs in (("aligned", x), ("offset", _offset(x, 1))):
                ref = _l2norm_ref(xs)
                paths = ("warp", "block") if raw.row_path([xs]) == "warp" else ("block",)
                if rows > GRID_BLOCKS + 1:  # the shape before covers the block grid's stride, at an
                    paths = ("warp",)       # eighth of the blocks (racecheck tracks each shared access)
                for path in paths:
                    y = kernels.l2norm(xs, 1e-6, path=path)
                    if not torch.allclose(y.double(), ref, rtol=tol, atol=tol):
                        failures.append(f"l2norm {dtype} {rows}x{cols} {name} path={path}")
                    for index in ("int32", "int64"):
                        if not torch.equal(kernels.l2norm(xs, 1e-6, index=index, path=path), y):
                            failures.append(f"l2norm {dtype} {rows}x{cols} {name} path={path} index={index}")
        if raw.row_path([torch.randn(2, longest, dtype=dtype, device="cuda")]) != "warp":
            failures.append(f"l2norm {dtype}: rows of {longest} elements must take the warp schedule")
        if raw.row_path([torch.randn(2, longest + width, dtype=dtype, device="cuda")]) != "block":
            failures.append(f"l2norm {dtype}: rows past {longest} elements must take the block schedule")
    return failures


def check_chain_and_widths(raw) -> list[str]:
    """The chain kernels (fused k = 1..8, one step at a time, backward) on both access paths, and
    every elementwise and row-wise kernel with forced int32 and int64 offsets: equal bit for bit."""
    from dbench.ops import chain

    failures = []
    kernels = raw.kernel
    for dtype in ELEMENTWISE_DTYPES:
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
                        got = kernels.chain_backward(gs, xs, k, index=index)
                        if not torch.equal(got, raw.chain_backward(gs, xs, k)):
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
    from dbench.ops import get_variant
    from dbench.ops.catalog import OPS

    failures = []
    for cols in (1030, 1024):  # l2norm: the block schedule, then the warp schedule
        x = torch.randn(3, cols, device="cuda")
        for op, args in (("noop", (x,)), ("muladd", (x, x, x)), ("l2norm", (x, 1e-6)), ("chain", (x, 3))):
            out = get_variant("cpp", op).fn(*args)
            if not torch.allclose(out, OPS[op].reference(*args), rtol=1e-5, atol=1e-5):
                failures.append(f"{op} cols={cols} with the in-kernel delay")
    return failures


# The declared ops' CUDA kernels against their CPU kernels (float16/bfloat16 are computed in float on
# the GPU, in double on the CPU: each differs by about one rounding of the output).
DECLARED_TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}


def check_declared(raw) -> list[str]:
    """Every shipped op sized in bytes (mm has its own check), from its declaration alone: the raw
    launcher's forward and backward kernels on CUDA in every dtype, at the boundary shape and odd
    ones, against the same launcher on the CPU (the CPU kernels round as the CUDA ones do, and are
    checked against the fp64 reference by the test suite). An op added by its declaration runs here,
    and under the sanitizer, with no line of its own."""
    from dbench.ops.catalog import OPS
    from dbench.ops.contract import InputSpec

    def close(got: object, want: object, tol: float) -> bool:
        got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        want = tuple(want) if isinstance(want, (tuple, list)) else (want,)
        return len(got) == len(want) and all(
            torch.allclose(g.cpu().double(), w.double(), rtol=tol, atol=tol * max(1.0, w.abs().max().item()))
            for g, w in zip(got, want))

    failures = []
    for contract in OPS.values():
        if contract.size_axis != "bytes":
            continue
        fwd = contract.launcher(contract.name)
        bwd = contract.launcher(contract.backward_op) if contract.backward_op else None
        for dtype in ELEMENTWISE_DTYPES:
            tol = DECLARED_TOLERANCE[dtype]
            for shape in (contract.boundary_shape, (1, 1), (3, 1030), (257, 33)):
                args = contract.make_inputs(InputSpec(shape=shape, dtype=dtype, device="cuda", seed=1))
                on_cpu = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
                what = f"{contract.name} {dtype} {shape}"
                if not close(fwd(*args), fwd(*on_cpu), tol):
                    failures.append(f"{what}: forward")
                if bwd is not None:
                    grad = torch.randn(args[0].shape, dtype=dtype, device="cuda")
                    if not close(bwd(grad, *args), bwd(grad.cpu(), *on_cpu), tol):
                        failures.append(f"{what}: backward")
    return failures


def check_mm_kernels(raw) -> list[str]:
    return [f for kernel in MM_KERNELS if _mm_kernel_runs(raw, kernel) for f in check_mm(raw, kernel)]


# --only's names, in the order the checks run.
CHECKS = {"elementwise": check_elementwise, "rows": check_row_schedules, "chain": check_chain_and_widths,
          "delay": lambda raw: check_in_kernel_delay(), "mm": check_mm_kernels, "declared": check_declared}
PARTS = tuple(CHECKS)


def check(parts: tuple[str, ...] = PARTS) -> int:
    raw = libraries.raw()
    failures = [f for name, run in CHECKS.items() if name in parts for f in run(raw)]
    torch.cuda.synchronize()
    for f in failures:
        print("FAILED", f)
    print(f"{'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


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
    raw = libraries.raw()
    for kernel in (k for k in MM_KERNELS if _mm_kernel_runs(raw, k)):
        with _mm_kernel(kernel):
            for dtype in (torch.bfloat16, torch.float16):
                for size in (4096, 8192):
                    a = torch.randn(size, size, dtype=dtype, device="cuda")
                    b = torch.randn(size, size, dtype=dtype, device="cuda")
                    ours = _time_ms(functools.partial(raw.mm, a, b))
                    cublas = _time_ms(functools.partial(torch.mm, a, b))
                    tflops = 2 * size**3 / 1e9
                    print(f"mm [{kernel:8}] {str(dtype):15} {size}^3: ours {tflops / ours:7.1f} TFLOP/s, torch.mm "
                          f"{tflops / cublas:7.1f} TFLOP/s, ratio {cublas / ours:.2f}")
    n = 1 << 28
    for dtype in ELEMENTWISE_DTYPES:
        x = torch.randn(n * 4 // dtype.itemsize, dtype=dtype, device="cuda")  # 1 GiB per tensor
        y, z = torch.randn_like(x), torch.randn_like(x)
        for name, args in (("aligned", (x, y, z)), ("offset", (x[1:], y[1:], z[1:]))):
            nbytes = args[0].numel() * args[0].element_size()
            t_copy = _time_ms(functools.partial(raw.noop, args[0]), 20)
            t_fma = _time_ms(functools.partial(raw.muladd, *args), 20)
            print(f"{str(dtype):14} {name:8} copy {2 * nbytes / t_copy / 1e6:7.0f} GB/s, "
                  f"muladd {4 * nbytes / t_fma / 1e6:7.0f} GB/s (vector path: {raw.vector_path(list(args))})")
    bench_l2norm(raw)
    return 0


def bench_l2norm(raw) -> None:
    """l2norm forward on 256 MiB of rows of 1024 elements (the roofline's rows) on both row
    schedules, against the copy kernel on the same tensor: the forward moves what a copy moves."""
    kernels = raw.kernel
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn((256 << 20) // dtype.itemsize // 1024, 1024, dtype=dtype, device="cuda")
        nbytes = 2 * x.numel() * x.element_size()
        t_copy = _time_ms(functools.partial(raw.noop, x), 20)
        line = f"l2norm {str(dtype):14} {list(x.shape)}: copy {nbytes / t_copy / 1e6:6.0f} GB/s"
        for path in ("warp", "block"):
            t = _time_ms(functools.partial(kernels.l2norm, x, 1e-6, path=path), 20)
            line += f", {path} {nbytes / t / 1e6:6.0f} GB/s ({t_copy / t:.1%} of copy)"
        print(line + f"; auto takes {raw.row_path([x])}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", action="store_true", help="time instead of checking")
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"comma-separated checks to run (default all: {','.join(PARTS)})")
    args = parser.parse_args()
    only = tuple(p for p in args.only.split(",") if p)
    if unknown := [p for p in only if p not in PARTS]:
        parser.error(f"--only: unknown check {', '.join(unknown)}; valid: {', '.join(PARTS)}")
    if not torch.cuda.is_available() or not libraries.has_cuda_kernels():
        print("needs a CUDA device and a build with CUDA kernels")
        sys.exit(2)
    sys.exit(bench() if args.bench else check(only))
