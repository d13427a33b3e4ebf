"""The elementwise kernels' two signatures: the 16-byte vector path (every pointer 16-byte aligned)
and the general scalar path (a misaligned storage offset, or fewer elements than one vector).

The selection is a torch-free predicate (kernels.h: vector_path_ok), asked here through the raw
module's `vector_path` on real tensors, so it is tested without a GPU; the CPU kernels are checked on
the same misaligned and odd-sized inputs. On CUDA the two paths must agree bit for bit (copy and
muladd: the same single fma rounding) and match the reference at every size, including the tail
that is not a multiple of the vector width (8 elements per access for float16/bfloat16).

l2norm's forward also has two row schedules on CUDA (kernels.h: resolve_row_path): one warp per
row holding the row in registers, for rows of at most 32 x 8 accesses, and one block per row for
longer ones. `_dbench_raw.row_path` asks the predicate; the `kernel` variant's `path` forces either.
"""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICES, TOLERANCES, dtype_params, requires_cuda
from dbench.ops import libraries
from dbench.ops.shipped.l2norm import CONTRACT as L2NORM
from dbench.ops.shipped.l2norm import EPS as L2NORM_EPS

DTYPES = dtype_params()
WARP_ROW_PACKS = 8  # kernels.h kWarpRowPacks: accesses per lane of the warp schedule
ODD_SIZES = [1, 3, 5, 7, 33, 1023, 4099]


def _width(dtype: torch.dtype) -> int:
    return 16 // torch.empty((), dtype=dtype).element_size()


def _offset(values: torch.Tensor, offset: int) -> torch.Tensor:
    """The same values at `offset` elements into a fresh (aligned) allocation."""
    base = torch.empty(values.numel() + offset, dtype=values.dtype, device=values.device)
    view = base[offset:].view(values.shape)
    view.copy_(values)
    return view


def _random(shape: tuple[int, ...] | int, dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_aligned_tensors_take_the_vector_path(device: str, dtype: torch.dtype) -> None:
    raw = libraries.raw()
    x = _random(64, dtype, device, 0)
    assert raw.vector_path([x]) and raw.vector_path([x, x.clone(), x.clone()])
    assert raw.vector_path([x[_width(dtype):]])  # an offset of exactly 16 bytes keeps the alignment
    assert raw.vector_path([x[:_width(dtype) + 1]])  # one vector and a tail


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_misaligned_storage_offset_takes_the_scalar_path(device: str, dtype: torch.dtype) -> None:
    raw = libraries.raw()
    base = _random(65, dtype, device, 0)
    assert base[1:].storage_offset() == 1
    assert not raw.vector_path([base[1:]])
    assert not raw.vector_path([base[:64], base[1:]])  # one misaligned input is enough
    assert not raw.vector_path([base[1:].view(8, 8)])
    assert raw.vector_path([base[1:].clone()])  # a copy is aligned again (contiguous() would not copy)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fewer_elements_than_one_vector_take_the_scalar_path(device: str, dtype: torch.dtype) -> None:
    x = _random(8, dtype, device, 0)
    assert not libraries.raw().vector_path([x[: _width(dtype) - 1]])
    assert not libraries.raw().vector_path([x[:0]])


def test_vector_path_names_bad_input() -> None:
    with pytest.raises(RuntimeError, match="vector_path: argument 'tensor' has unsupported dtype Int"):
        libraries.raw().vector_path([torch.ones(8, dtype=torch.int32)])


def test_16_bit_types_move_8_elements_per_access() -> None:
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.zeros(16, dtype=dtype)
        assert _width(dtype) == 8
        assert libraries.raw().vector_path([x[:8]]) and not libraries.raw().vector_path([x[:7]])
        assert libraries.raw().vector_path([x[8:]]) and not libraries.raw().vector_path([x[4:]])  # 8 bytes in


def _elementwise_cases(device: str, dtype: torch.dtype, n: int) -> dict[str, tuple[torch.Tensor, ...]]:
    a, b, c = (_random(n, dtype, device, seed) for seed in (1, 2, 3))
    return {"aligned": (a, b, c), "misaligned": tuple(_offset(t, 1) for t in (a, b, c)),
            "mixed": (a, _offset(b, 1), c)}


@pytest.mark.parametrize("n", ODD_SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_both_paths_compute_the_same(device: str, dtype: torch.dtype, n: int) -> None:
    """Same values, vector or scalar path: noop is an exact copy, muladd one fma (CUDA) or a * b + c
    (CPU) on every path, so the paths agree exactly and match the reference at every size."""
    raw = libraries.raw()
    cases = _elementwise_cases(device, dtype, n)
    assert raw.vector_path(list(cases["aligned"])) == (n >= _width(dtype))
    assert not raw.vector_path(list(cases["misaligned"])) and not raw.vector_path(list(cases["mixed"]))
    results = {name: (raw.noop(t[0]), raw.muladd(*t)) for name, t in cases.items()}
    a, b, c = cases["aligned"]
    ref = a.double() * b.double() + c.double()
    for name, (copied, fused) in results.items():
        torch.testing.assert_close(copied, a, rtol=0, atol=0, msg=lambda m, name=name: f"noop, {name}: {m}")
        torch.testing.assert_close(fused, results["aligned"][1], rtol=0, atol=0,
                                   msg=lambda m, name=name: f"muladd, {name}: {m}")
        torch.testing.assert_close(fused.double(), ref, **TOLERANCES[dtype])


@pytest.mark.parametrize("cols", [1, 3, 8, 33, 256, 1030])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_l2norm_rows_on_both_paths(device: str, dtype: torch.dtype, cols: int) -> None:
    """Rows take the vector path when every row starts aligned (cols a multiple of the width);
    a storage offset or an odd row length takes the scalar path. Both match the reference."""
    raw = libraries.raw()
    x, g = (_random((5, cols), dtype, device, seed) for seed in (4, 5))
    for xs, gs in ((x, g), (_offset(x, 1), _offset(g, 1))):
        y = raw.l2norm(xs, L2NORM_EPS)
        torch.testing.assert_close(y.double(), L2NORM.reference_fp64((xs, L2NORM_EPS)), **TOLERANCES[dtype])
        xr = xs.detach().double().requires_grad_(True)
        (want,) = torch.autograd.grad(L2NORM.reference(xr, L2NORM_EPS), xr, gs.double())
        torch.testing.assert_close(raw.l2norm_backward(gs, xs, L2NORM_EPS).double(), want, **TOLERANCES[dtype])


@requires_cuda
@pytest.mark.parametrize("n", [2**22, 2**22 + 3, 3 * 2**20 + 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_inputs_on_cuda_agree_across_paths(dtype: torch.dtype, n: int) -> None:
    """Many grid-stride steps (the unrolled body, its remainder loop and the tail) on both paths."""
    raw = libraries.raw()
    cases = _elementwise_cases("cuda", dtype, n)
    assert raw.vector_path(list(cases["aligned"])) and not raw.vector_path(list(cases["misaligned"]))
    vec = (raw.noop(cases["aligned"][0]), raw.muladd(*cases["aligned"]))
    sca = (raw.noop(cases["misaligned"][0]), raw.muladd(*cases["misaligned"]))
    torch.testing.assert_close(vec[0], cases["aligned"][0], rtol=0, atol=0)
    torch.testing.assert_close(sca[0], cases["aligned"][0], rtol=0, atol=0)
    torch.testing.assert_close(vec[1], sca[1], rtol=0, atol=0)
    a, b, c = (t.double() for t in cases["aligned"])
    torch.testing.assert_close(vec[1].double(), a * b + c, **TOLERANCES[dtype])


# ---------------------------------------------------------------------------
# l2norm's row schedules.


def _row_fits_a_warp(cols: int, dtype: torch.dtype, vector: bool) -> bool:
    return -(-cols // (_width(dtype) if vector else 1)) <= 32 * WARP_ROW_PACKS


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_that_fit_a_warp_take_the_warp_schedule(dtype: torch.dtype) -> None:
    """Up to 32 x 8 accesses per row: 8 x 16 bytes per lane on the vector path (1024 float32, 2048
    float16), 256 elements on the scalar path; longer rows take the block schedule."""
    raw = libraries.raw()
    width = _width(dtype)
    longest = 32 * WARP_ROW_PACKS * width
    expected = {1: "warp", width: "warp", 256: "warp", 257: "block", longest: "warp", longest + width: "block",
                256 * width + 1: "block"}
    for cols, path in expected.items():
        x = _random((2, cols), dtype, "cpu", 0)  # a fresh tensor is aligned: the row length decides the path
        assert _row_fits_a_warp(cols, dtype, cols % width == 0) == (path == "warp")
        assert raw.row_path([x]) == path, cols
    # A storage offset takes the scalar path: the same row is too long for a warp there.
    base = _random(2 * longest + 1, dtype, "cpu", 0)
    assert raw.row_path([base[:-1].view(2, longest)]) == "warp"
    assert raw.row_path([base[1:].view(2, longest)]) == "block"


def test_the_h200_roofline_row_takes_the_warp_schedule() -> None:
    """The roofline scenario's l2norm rows (1024 float32) are the case the warp schedule is for."""
    assert libraries.raw().row_path([torch.zeros(4, 1024)]) == "warp"


def test_a_forced_warp_schedule_that_does_not_fit_is_refused() -> None:
    kernels = libraries.raw().kernel
    x = torch.randn(2, 32 * WARP_ROW_PACKS + 1)  # odd: the scalar path, one element per access
    with pytest.raises(RuntimeError, match=r"dbench::l2norm: path=warp refused: rows of 257 elements"):
        kernels.l2norm(x, L2NORM_EPS, path="warp")
    with pytest.raises(RuntimeError, match="path must be 'auto', 'warp' or 'block', got 'lane'"):
        kernels.l2norm(x, L2NORM_EPS, path="lane")
    torch.testing.assert_close(kernels.l2norm(x, L2NORM_EPS, path="block"), libraries.raw().l2norm(x, L2NORM_EPS),
                               rtol=0, atol=0)


ROW_CASES = [(1, 0), (3, 0), (8, 0), (33, 0), (256, 0), (257, 0), (1024, 0), (1024, 1), (2048, 0), (1030, 0)]


@pytest.mark.parametrize(("cols", "offset"), ROW_CASES, ids=[f"{c}{'-offset' if o else ''}" for c, o in ROW_CASES])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_both_row_schedules_match_the_reference(device: str, dtype: torch.dtype, cols: int, offset: int) -> None:
    """Forced warp and forced block schedules (CPU: the one loop) against the fp64 reference, on
    both access paths, for rows that fit a warp exactly, partly (idle lanes, a partial last pack)
    and not at all (the block schedule only)."""
    kernels = libraries.raw().kernel
    x = _offset(_random((37, cols), dtype, device, 6), offset)
    want = L2NORM.reference_fp64((x, L2NORM_EPS))
    fits = libraries.raw().row_path([x]) == "warp"
    assert fits == _row_fits_a_warp(cols, dtype, offset == 0 and cols % _width(dtype) == 0)
    paths = ("auto", "block", "warp") if fits else ("auto", "block")
    results = {p: kernels.l2norm(x, L2NORM_EPS, path=p) for p in paths}
    for path, y in results.items():
        torch.testing.assert_close(y.double(), want, **TOLERANCES[dtype], msg=lambda m, path=path: f"path={path}: {m}")
    assert torch.equal(results["auto"], results["warp" if fits else "block"])
    for index in ("int32", "int64"):  # both offset widths of the schedule auto takes
        assert torch.equal(kernels.l2norm(x, L2NORM_EPS, index=index), results["auto"])


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_many_rows_on_cuda_on_both_schedules(dtype: torch.dtype) -> None:
    """More rows than one grid covers (grid-stride over rows: 65535 blocks x 8 warps)."""
    kernels = libraries.raw().kernel
    x = _random((65535 * 8 + 77, 64), dtype, "cuda", 7)
    want = L2NORM.reference_fp64((x, L2NORM_EPS))
    for path in ("warp", "block"):
        torch.testing.assert_close(kernels.l2norm(x, L2NORM_EPS, path=path).double(), want, **TOLERANCES[dtype])
