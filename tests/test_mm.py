"""mm beyond the shared parametrization: sizes that are not multiples of any tile, zero-size
dimensions, the 16-bit dtypes (CPU kernel and, on a GPU, the tensor-core kernel), through every
available variant.

Error bounds for the 16-bit types are ||out - ref|| / ||ref|| against a float64 product of the
rounded inputs: one rounding of the output (float32 accumulation adds far less) is 2^-9 for
bfloat16 and 2^-12 for float16, per element at most.
"""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICES, TOLERANCES, requires_cuda, variant_cases
from dbench.ops.catalog import OPS
from dbench.ops.specs import MM_KERNEL_ENV, MM_KERNELS
from dbench.ops.contract import InputSpec
from dbench.ops.variants import Variant

MM = OPS["mm"]
REL_BOUND = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
ODD_SIZES = [(1, 1, 1), (17, 33, 65), (130, 70, 257)]
EMPTY_SIZES = [(0, 5, 3), (4, 0, 3), (4, 5, 0)]
# On CUDA: whole tiles (mma.sync 128 x 256 x 32, wgmma 128 x 256 x 64); partial edge tiles with rows
# still 16-byte chunks (cp.async path); rows that are not (element-wise tile loads); one k-tile; long K.
CUDA_SIZES = [(256, 512, 64), (384, 256, 512), (130, 72, 264), (17, 33, 65), (130, 70, 257), (96, 8, 40),
              (64, 4096, 64), (1, 1, 1)]


def _ids(sizes: list[tuple[int, int, int]]) -> list[str]:
    return ["x".join(map(str, s)) for s in sizes]


def _inputs(size: tuple[int, int, int], dtype: torch.dtype, device: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    return MM.make_inputs(InputSpec(size, dtype=dtype, device=device, seed=seed))


def _rel_error(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    ref = a.double().cpu() @ b.double().cpu()
    return ((out.double().cpu() - ref).norm() / ref.norm()).item()


def _poisoned_output(device: str, size: tuple[int, int, int], dtype: torch.dtype) -> None:
    """Leave a NaN-filled block of the output's size in the caching allocator, which hands it to the op's
    output next: an element the kernel fails to write then reads NaN instead of a stale plausible value."""
    if device.startswith("cuda"):
        torch.full((size[0], size[2]), float("nan"), dtype=dtype, device=device)  # freed at once, kept cached


@pytest.mark.parametrize("size", ODD_SIZES, ids=_ids(ODD_SIZES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"]))
def test_mm_sizes_off_every_tile(device: str, v: Variant, dtype: torch.dtype, size: tuple[int, int, int]) -> None:
    a, b = _inputs(size, dtype, device)
    out = v.fn(a, b)
    assert out.shape == (size[0], size[2]) and out.dtype == dtype and out.is_contiguous()
    torch.testing.assert_close(out.double(), MM.reference_fp64((a, b)), **TOLERANCES[dtype])


@pytest.mark.parametrize("size", EMPTY_SIZES, ids=_ids(EMPTY_SIZES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"]))
def test_mm_zero_size_dimensions(device: str, v: Variant, dtype: torch.dtype, size: tuple[int, int, int]) -> None:
    """K = 0 gives zeros (a sum of nothing), M = 0 or N = 0 an empty output."""
    a, b = _inputs(size, dtype, device)
    _poisoned_output(device, size, dtype)
    out = v.fn(a, b)
    assert out.shape == (size[0], size[2]) and out.dtype == dtype
    torch.testing.assert_close(out.double(), MM.reference_fp64((a, b)), rtol=0, atol=0)


@pytest.mark.parametrize("size", ODD_SIZES, ids=_ids(ODD_SIZES))
@pytest.mark.parametrize("dtype", list(REL_BOUND), ids=["bfloat16", "float16"])
@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"], devices=["cpu"]))
def test_mm_16_bit_on_cpu(device: str, v: Variant, dtype: torch.dtype, size: tuple[int, int, int]) -> None:
    a, b = _inputs(size, dtype, device)
    out = v.fn(a, b)
    assert out.dtype == dtype and out.shape == (size[0], size[2])
    assert _rel_error(out, a, b) < REL_BOUND[dtype]


def test_mm_16_bit_on_cpu_rounds_once() -> None:
    """The CPU kernel accumulates in float32 and rounds once: on inputs whose products and sums are
    exact in float32 it matches the float64 product rounded to the dtype, bit for bit."""
    from dbench.ops import libraries

    gen = torch.Generator().manual_seed(3)
    for dtype in REL_BOUND:
        a = torch.randint(-8, 9, (33, 40), generator=gen).to(dtype) / 4
        b = torch.randint(-8, 9, (40, 27), generator=gen).to(dtype) / 8
        out = libraries.raw().mm(a, b)
        torch.testing.assert_close(out, (a.double() @ b.double()).to(dtype), rtol=0, atol=0)


# ---------------------------------------------------------------------------
# CUDA: the tensor-core kernel (16-bit) and the FMA kernel (float32/float64).


@requires_cuda
@pytest.mark.parametrize("size", CUDA_SIZES, ids=_ids(CUDA_SIZES))
@pytest.mark.parametrize("dtype", list(REL_BOUND), ids=["bfloat16", "float16"])
@pytest.mark.parametrize(("device", "v"), variant_cases(ops=["mm"], devices=["cuda"]))
def test_mm_tensor_cores_on_cuda(device: str, v: Variant, dtype: torch.dtype, size: tuple[int, int, int]) -> None:
    for seed in (0, 1):  # fresh inputs each time: the same function on any valid input
        a, b = _inputs(size, dtype, device, seed=seed)
        _poisoned_output(device, size, dtype)
        out = v.fn(a, b)
        assert out.dtype == dtype and out.shape == (size[0], size[2]) and out.device == a.device
        assert not out.isnan().any(), "an output element was not written (or the kernel made a NaN)"
        err = _rel_error(out, a, b)
        assert err < REL_BOUND[dtype], f"relative error {err:.2e}"


@requires_cuda
@pytest.mark.parametrize("dtype", list(REL_BOUND), ids=["bfloat16", "float16"])
def test_mm_tensor_cores_on_offset_and_transposed_inputs(dtype: torch.dtype) -> None:
    """A storage offset (rows no longer 16-byte aligned: the element-wise tile loads) and a
    transposed view (made contiguous by the launcher) give the same product."""
    from dbench.ops import libraries

    a, b = _inputs((192, 264, 136), dtype, "cuda")
    base = torch.empty(a.numel() + 1, dtype=dtype, device="cuda")
    a_off = base[1:].view(a.shape)
    a_off.copy_(a)
    assert a_off.data_ptr() % 16 != 0
    want = libraries.raw().mm(a, b)
    for got in (libraries.raw().mm(a_off, b), libraries.raw().mm(a, b.t().contiguous().t())):
        assert not got.isnan().any()
        assert _rel_error(got, a, b) < REL_BOUND[dtype]
        # Same k order in both paths and one rounding: equal up to the last bit of the output.
        torch.testing.assert_close(got, want, rtol=2 ** -7, atol=1e-2)


def _select_mm_kernel(monkeypatch: pytest.MonkeyPatch, kernel: str) -> None:
    """DBENCH_MM_KERNEL (read by the kernel layer on every call). The wgmma kernel exists on
    compute capability 9.0 alone, where the build must have it; elsewhere its cases skip."""
    monkeypatch.setenv("DBENCH_MM_KERNEL", kernel)
    if kernel == "wgmma" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma kernel needs compute capability 9.0")


@requires_cuda
@pytest.mark.parametrize("kernel", MM_KERNELS)
@pytest.mark.parametrize("size", CUDA_SIZES, ids=_ids(CUDA_SIZES))
@pytest.mark.parametrize("dtype", list(REL_BOUND), ids=["bfloat16", "float16"])
def test_mm_each_tensor_core_kernel(
    monkeypatch: pytest.MonkeyPatch, kernel: str, dtype: torch.dtype, size: tuple[int, int, int]
) -> None:
    """Both 16-bit kernels on every size, aligned and with a misaligned A (which the wgmma kernel
    hands to the mma.sync kernel's element-wise loads)."""
    from dbench.ops import libraries

    _select_mm_kernel(monkeypatch, kernel)
    a, b = _inputs(size, dtype, "cuda", seed=2)
    base = torch.empty(a.numel() + 1, dtype=dtype, device="cuda")
    a_off = base[1:].view(a.shape)
    a_off.copy_(a)
    aligned = size[1] % 8 == 0 and size[2] % 8 == 0
    expected = {a: kernel if aligned else "mma_sync_elementwise", a_off: "mma_sync_elementwise"}
    for lhs in (a, a_off):
        assert libraries.raw().mm_kernel(lhs, b) == expected[lhs]
        _poisoned_output("cuda", size, dtype)
        out = libraries.raw().mm(lhs, b)
        assert not out.isnan().any(), "an output element was not written (or the kernel made a NaN)"
        assert _rel_error(out, a, b) < REL_BOUND[dtype]


@pytest.mark.parametrize("device", DEVICES)
def test_mm_kernel_names_the_kernel_that_runs(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """The default ("auto"): wgmma on compute capability 9.0 for aligned rows, mma_sync on other
    tensor-core GPUs, the FMA kernel for float32 and float64; "cpu" for CPU tensors."""
    from dbench.ops import libraries

    raw = libraries.raw()
    monkeypatch.delenv(MM_KERNEL_ENV, raising=False)
    a, b = _inputs((64, 64, 64), torch.bfloat16, device)
    if device == "cpu":
        assert raw.mm_kernel(a, b) == "cpu"
        return
    cc = torch.cuda.get_device_capability()
    assert raw.mm_kernel(a, b) == ("wgmma" if cc == (9, 0) else "mma_sync" if cc >= (8, 0) else "fma")
    assert raw.mm_kernel(a.float(), b.float()) == "fma"
    monkeypatch.setenv(MM_KERNEL_ENV, "mma_sync")
    assert raw.mm_kernel(a, b) == ("mma_sync" if cc >= (8, 0) else "fma")
    monkeypatch.setenv(MM_KERNEL_ENV, "cublas")
    with pytest.raises(RuntimeError, match="DBENCH_MM_KERNEL must be"):
        raw.mm_kernel(a, b)


def test_mm_kernel_refuses_what_is_not_two_matrices() -> None:
    from dbench.ops import libraries

    with pytest.raises(RuntimeError, match="mm_kernel: expected two matrices, got 1-D and 2-D"):
        libraries.raw().mm_kernel(torch.ones(4), torch.ones(4, 4))


@requires_cuda
def test_mm_refuses_an_unknown_kernel_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbench.ops import libraries

    a, b = _inputs((64, 64, 64), torch.bfloat16, "cuda")
    monkeypatch.setenv("DBENCH_MM_KERNEL", "cublas")
    with pytest.raises(RuntimeError, match="DBENCH_MM_KERNEL must be"):
        libraries.raw().mm(a, b)
    monkeypatch.delenv("DBENCH_MM_KERNEL")
    assert _rel_error(libraries.raw().mm(a, b), a, b) < REL_BOUND[torch.bfloat16]  # nothing left broken


@requires_cuda
def test_mm_wgmma_is_refused_where_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbench.ops import libraries

    if torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("compute capability 9.0 runs the wgmma kernel (test_mm_each_tensor_core_kernel)")
    monkeypatch.setenv("DBENCH_MM_KERNEL", "wgmma")
    a, b = _inputs((64, 64, 64), torch.bfloat16, "cuda")
    with pytest.raises(RuntimeError, match="needs a build with the sm_90a kernel"):
        libraries.raw().mm(a, b)


@requires_cuda
@pytest.mark.parametrize("size", CUDA_SIZES[:5], ids=_ids(CUDA_SIZES[:5]))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_mm_fma_kernel_on_cuda(dtype: torch.dtype, size: tuple[int, int, int]) -> None:
    from dbench.ops import libraries

    a, b = _inputs(size, dtype, "cuda")
    _poisoned_output("cuda", size, dtype)
    out = libraries.raw().mm(a, b)
    ref = MM.reference_fp64((a, b))
    # float32 accumulation over K terms: bound the error by K ulps of the summed magnitudes.
    scale = (a.double().abs() @ b.double().abs()).cpu()
    eps = torch.finfo(dtype).eps
    assert ((out.double().cpu() - ref.cpu()).abs() <= size[1] * eps * scale + 1e-30).all()


@requires_cuda
def test_mm_backward_on_cuda_uses_the_op() -> None:
    """bf16 gradients of the C++ autograd op against the float64 product formulas."""
    from dbench.ops.variants import get_variant

    v = get_variant("cpp_autograd", "mm", "cuda")
    a, b = (t.requires_grad_(True) for t in _inputs((130, 72, 264), torch.bfloat16, "cuda"))
    out = v.fn(a, b)
    g = torch.randn_like(out)
    ga, gb = torch.autograd.grad(out, (a, b), g)
    assert _rel_error(ga, g, b.detach().t()) < REL_BOUND[torch.bfloat16]
    assert _rel_error(gb, a.detach().t(), g) < REL_BOUND[torch.bfloat16]


# ---------------------------------------------------------------------------
# Scenarios: mm is timed only when asked for, and its fwd_bwd calls get an output-shaped gradient.


@pytest.mark.parametrize(("ops", "explicit", "has_mm"), [
    (None, None, False),           # run.py's default: every op
    (("mm",), None, True),         # --ops mm
    (("noop", "mm"), None, True),
    (None, True, True),            # every op, named one by one on the command line
])
def test_scenarios_leave_mm_out_unless_asked(ops: tuple[str, ...] | None, explicit: bool | None, has_mm: bool) -> None:
    from dbench.ops.specs import OP_NAMES
    from dbench.scenarios.base import Selection, case_grid

    from dbench.ops.catalog import OPS

    sel = Selection(ops=ops or OP_NAMES, variants=("raw",), device="cpu", explicit_ops=explicit)
    cases = case_grid(sel, "test", ("inference",), lambda *_: None, lambda *_: None)
    assert ("mm" in {c.key["op"] for c in cases}) == has_mm
    # The other kernel-level op (chain) follows the same rule: in when asked for, out by default.
    opt_in = {name for name, op in OPS.items() if not op.boundary}
    expected = set(sel.ops) if has_mm else set(sel.ops) - opt_in
    assert {c.key["op"] for c in cases} == expected


def test_scenario_fwd_bwd_call_of_mm() -> None:
    from dbench.ops.variants import get_variant
    from dbench.scenarios.base import make_call, preflight

    v = get_variant("function_raw", "mm", "cpu")
    spec = InputSpec((8, 16, 4), requires_grad=True)
    assert preflight(v, MM, "fwd_bwd", spec) is None
    grads = make_call(v, MM, "fwd_bwd", spec)()
    assert [g.shape for g in grads] == [(8, 16), (16, 4)]
