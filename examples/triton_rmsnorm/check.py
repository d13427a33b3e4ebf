"""Run the example's kernels once per dtype and shape (ragged widths, one row, one column) and
compare forward and backward with the fp64 reference; meant to run under compute-sanitizer:

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 1 \
        python3 examples/triton_rmsnorm/check.py

Without the caching allocator every tensor is its own allocation, so an access past a row's end
is reported instead of landing in a neighbour's block. Exit 1 on a mismatch.
"""

from __future__ import annotations

import sys

import torch

from my_ops import reference, rmsnorm_bwd, rmsnorm_fwd

SHAPES = ((1, 1), (3, 7), (5, 1000), (8, 1024), (2, 3, 33))
TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 8e-2, torch.float32: 1e-4, torch.float64: 1e-10}


def check(shape: tuple[int, ...], dtype: torch.dtype, eps: float = 1e-6) -> list[str]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
    w = torch.randn(shape[-1:], device="cuda", dtype=dtype, generator=gen)
    g = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
    y, rstd = rmsnorm_fwd(x, w, eps)
    gx, gw = rmsnorm_bwd(g, x, w, rstd, eps)
    torch.cuda.synchronize()

    x64, w64 = x.double().requires_grad_(), w.double().requires_grad_()
    y64, rstd64 = reference(x64, w64, eps)
    gx64, gw64 = torch.autograd.grad(y64, (x64, w64), g.double())
    tol = TOLERANCE[dtype]
    errors = []
    for name, got, want in (("y", y, y64), ("rstd", rstd, rstd64), ("grad_x", gx, gx64), ("grad_w", gw, gw64)):
        scale = max(1.0, want.abs().max().item())
        err = (got.double() - want.detach()).abs().max().item() / scale
        if not err <= tol:
            errors.append(f"{tuple(shape)} {dtype} {name}: max error {err:.3g} > {tol:g}")
    return errors


def main() -> int:
    if not torch.cuda.is_available():
        print("check.py: needs a CUDA device", file=sys.stderr)
        return 2
    errors = [e for dtype in TOLERANCE for shape in SHAPES for e in check(shape, dtype)]
    for e in errors:
        print(e)
    print(f"{len(SHAPES) * len(TOLERANCE)} cases, {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
