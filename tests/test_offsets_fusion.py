"""Kernel-level variants: the offset-width predicate and forced widths (int32 vs int64), and the
elementwise chain (fused, unfused, eager, compiled) against its fp64 reference; the offsets and
fusion scenarios end to end on the CPU."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest
import torch

from conftest import HALF_DTYPES, TOLERANCES, dtype_params
from dbench.ops import chain, get_variant
from dbench.ops.catalog import OPS
from dbench.ops.libraries import raw

ROOT = Path(__file__).resolve().parent.parent
INT32_MAX = 2**31 - 1
KERNELS = raw().kernel


def meta(shape: tuple[int, ...], stride: tuple[int, ...] | None = None, offset: int = 0) -> torch.Tensor:
    """A tensor with no storage behind it: only sizes, strides and the storage offset exist."""
    base = torch.empty(0, device="meta")
    return base.as_strided(shape, stride or torch.empty(shape, device="meta").stride(), offset)


# ---------------------------------------------------------------------------
# The predicate, on meta tensors (nothing is allocated).


@pytest.mark.parametrize(("op", "tensors", "expected"), [
    ("muladd", [meta((4, 32))] * 3, "int32"),
    ("noop", [meta((1 << 30,))], "int32"),
    ("noop", [meta(((1 << 31) + (1 << 20),))], "int64"),  # more elements than int32 indexes
    ("noop", [meta((1, 4), (2**31, 1))], "int64"),  # a size-one dim whose stride alone is too wide
    ("noop", [meta((1, 4), (2**31 - 1, 1))], "int32"),  # ... and one that just fits
    ("noop", [meta((2,), (2**31 - 1,))], "int32"),  # reaches exactly INT32_MAX
    ("noop", [meta((3,), (2**30,))], "int64"),  # reaches 2^31: past it
    ("noop", [meta((4,), (1,), offset=2**31)], "int64"),  # the storage offset counts
    ("muladd", [meta((1, 8)), meta((1, 8)), meta((1, 8), (2**31, 1))], "int64"),  # any argument decides
    ("l2norm", [meta((1 << 21, 1024))], "int64"),  # rows * cols = 2^31
    ("l2norm", [meta((1 << 20, 1024))], "int32"),
    ("chain", [meta((0,), (2**40,))], "int64"),  # an empty view still carries its stride
])
def test_index_choice_reads_sizes_strides_and_offsets(op: str, tensors: list[torch.Tensor], expected: str) -> None:
    assert KERNELS.index_choice(op, tensors) == expected


def test_the_kernels_own_loop_slack_counts_not_just_numel() -> None:
    # n fits in int32, but the grid-stride loop computes indices up to about n + 9 x 256 x 65535.
    n = INT32_MAX - 1000
    assert KERNELS.index_choice("noop", [meta((n,))]) == "int64"


def test_ordinary_layouts_choose_int32() -> None:
    for t in (torch.randn(64, 32), torch.randn(32, 64).t(), torch.randn(8, 8)[::2],
              torch.randn(3, 1, 5).expand(3, 4, 5)):
        assert KERNELS.index_choice("noop", [t]) == "int32"


# ---------------------------------------------------------------------------
# Forced widths: int64 equals int32 bit for bit; a forced int32 that does not fit is refused.


def _kernel_calls(dtype: torch.dtype) -> dict[str, tuple[Callable[..., torch.Tensor], tuple[Any, ...]]]:
    g = torch.Generator().manual_seed(3)
    x, a, b, c, grad = (torch.randn(6, 40, generator=g, dtype=torch.float64).to(dtype) for _ in range(5))
    calls: dict[str, tuple[Callable[..., torch.Tensor], tuple[Any, ...]]] = {
        "noop": (KERNELS.noop, (x,)),
        "muladd": (KERNELS.muladd, (a, b, c)),
        "l2norm": (KERNELS.l2norm, (x, 1e-6)),
        "l2norm_block": (functools.partial(KERNELS.l2norm, path="block"), (x, 1e-6)),
        "l2norm_backward": (KERNELS.l2norm_backward, (grad, x, 1e-6)),
        "muladd_permuted": (KERNELS.muladd, (a.t(), b.t(), c.t())),
    }
    for k in range(1, chain.MAX_LENGTH + 1):
        calls[f"chain_k{k}"] = (KERNELS.chain, (x, k))
        calls[f"chain_backward_k{k}"] = (KERNELS.chain_backward, (grad, x, k))
    return calls


@pytest.mark.parametrize("dtype", dtype_params())
def test_forced_int64_equals_int32_bit_for_bit_forward_and_backward(dtype: torch.dtype) -> None:
    for name, (fn, args) in _kernel_calls(dtype).items():
        narrow, wide, auto = fn(*args, index="int32"), fn(*args, index="int64"), fn(*args)
        assert torch.equal(narrow, wide), name
        assert torch.equal(narrow, auto), name


def test_forced_int32_past_the_limit_is_refused_before_any_work() -> None:
    # Neither tensor has storage for its elements: a refusal that came after the contiguous copy
    # or the output allocation would try to allocate 8 GiB.
    wide_view = torch.zeros(1).expand((1 << 31) + 8)
    singleton = torch.zeros(1).as_strided((1, 1), (2**32, 1))
    for t in (wide_view, singleton):
        start = time.perf_counter()
        with pytest.raises(RuntimeError, match=r"dbench::noop: index=int32 refused: argument 'x' has a size, a stride"):
            KERNELS.noop(t, index="int32")
        assert time.perf_counter() - start < 1.0
    with pytest.raises(RuntimeError, match="dbench::chain: index=int32 refused"):
        KERNELS.chain(wide_view, 2, index="int32")
    with pytest.raises(RuntimeError, match="dbench::muladd: index=int32 refused: argument 'c'"):
        KERNELS.muladd(torch.zeros(1, 1), torch.zeros(1, 1), singleton, index="int32")


def test_each_declarations_kernel_knobs_are_bound_as_keywords_after_its_schema() -> None:
    """ops/native/<op>.h KernelKnobs -> _dbench_raw.kernel.<op>: the schema's arguments, then each
    knob with its default; a declaration without knobs (mm, rmsnorm) has no kernel variant."""
    def keywords(name: str) -> list[str]:
        first = getattr(KERNELS, name).__doc__.splitlines()[0]  # pybind11: "name(a: T, b: T = d) -> R"
        return [p.split(":")[0].strip() for p in first[first.index("(") + 1:first.rindex(") ->")].split(", ")]

    assert keywords("noop") == ["x", "index"]
    assert keywords("muladd") == ["a", "b", "c", "index"]
    assert keywords("l2norm") == ["x", "eps", "index", "path"]
    assert keywords("l2norm_backward") == ["grad", "x", "eps", "index"]
    assert keywords("chain") == ["x", "k", "first", "index"]
    assert keywords("chain_backward") == ["grad", "x", "k", "index"]
    assert not hasattr(KERNELS, "mm") and not hasattr(KERNELS, "rmsnorm")
    x = torch.randn(4, 8)
    assert torch.equal(KERNELS.l2norm(x, 1e-6), raw().l2norm(x, 1e-6))  # every knob at its default


def test_bad_index_names_and_chain_arguments_are_refused() -> None:
    x = torch.randn(8)
    with pytest.raises(RuntimeError, match="index must be 'auto', 'int32' or 'int64', got 'int16'"):
        KERNELS.noop(x, index="int16")
    with pytest.raises(RuntimeError, match=r"dbench::chain: k must be between 1 and 8, got 9"):
        raw().chain(x, 9)
    with pytest.raises(RuntimeError, match=r"k must be between 1 and 8, got 0"):
        raw().chain_backward(x, x, 0)
    with pytest.raises(RuntimeError, match=r"a chain starts at step 0, or is one step"):
        KERNELS.chain(x, 2, 1)


@pytest.mark.skipif(raw().has_cuda_kernels(), reason="a CUDA build has kernel attributes")
def test_kernel_attributes_need_cuda_kernels() -> None:
    with pytest.raises(RuntimeError, match="no CUDA kernels"):
        KERNELS.attributes("copy", "float32", "int32", True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_int64_specialisations_exist_and_report_registers() -> None:
    for kernel in ("copy", "muladd", "l2norm", "l2norm_warp", "l2norm_backward", "chain", "chain_backward"):
        for dtype in ("float32", "bfloat16"):
            for index in ("int32", "int64"):
                attrs = KERNELS.attributes(kernel, dtype, index, True, 8)
                assert 0 < attrs["registers"] <= 255 and attrs["max_threads"] >= 256
                assert attrs["local_bytes"] == 0, (kernel, dtype, index)  # nothing spilled
    with pytest.raises(RuntimeError, match="attributes of kernel 'l2norm_warp'"):
        KERNELS.attributes("l2norm_warp", "float32", "int32", True, 3)  # 1, 2, 4 or 8 accesses per lane


def test_spin_waits_at_least_the_time_asked() -> None:
    start = time.perf_counter_ns()
    KERNELS.spin(torch.zeros(1), 2_000_000, 0)
    assert time.perf_counter_ns() - start >= 2_000_000


def _fresh_process_lines(code: str, **env: str) -> list[list[str]]:
    """Runs `code` in a fresh interpreter with these variables set (the injection knobs are read
    when the C++ library loads) and returns its output lines, split into words."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return [line.split() for line in out.stdout.splitlines()]


_ONE_CALL_EACH = ("import time, torch\nfrom ops import get_variant\nx = torch.randn(4, 32)\n"
                  "for v in ('cpp', 'raw', 'define_impl', 'function_define_impl', 'custom_op', 'cpp_autograd'):\n"
                  "    fn = get_variant(v, 'muladd').fn; fn(x, x, x)\n"
                  "    t = time.perf_counter_ns(); fn(x, x, x); print(v, time.perf_counter_ns() - t)\n")


@pytest.mark.parametrize("knob", ["DBENCH_INJECT_CPU_NS", "DBENCH_INJECT_NS"])
def test_injected_cpu_cost_lands_in_the_cpp_variant_only(knob: str) -> None:
    # Read when the C++ library loads: a fresh process. DBENCH_INJECT_NS is the older name.
    took = {v: int(ns) for v, ns in _fresh_process_lines(_ONE_CALL_EACH, **{knob: "5000000"})}
    assert took["cpp"] >= 5_000_000
    # Not wrapped: none of them can have waited 5 ms (the `_autograd` twin included).
    assert max(took[v] for v in ("raw", "define_impl", "custom_op", "cpp_autograd")) < 5_000_000, took


def test_injected_python_cost_lands_in_the_define_impl_kernel_only() -> None:
    # DBENCH_INJECT_PY_NS wraps the Python kernel of `define_impl`: the variants that call that
    # registration (itself and its autograd.Function wrapper) wait; the others do not.
    took = {v: int(ns) for v, ns in _fresh_process_lines(_ONE_CALL_EACH, DBENCH_INJECT_PY_NS="5000000")}
    assert min(took["define_impl"], took["function_define_impl"]) >= 5_000_000, took
    assert max(took[v] for v in ("cpp", "raw", "custom_op", "cpp_autograd")) < 5_000_000, took


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_injected_gpu_delay_lengthens_the_cpp_variants_own_kernels() -> None:
    # DBENCH_INJECT_GPU_NS makes the `cpp` variant's forward kernels wait inside themselves (no
    # extra launch): a lower bound on each one's event time, the raw launcher's kernels untouched,
    # and the results unchanged. The GPU first sleeps 10 ms, so the call and its end event are queued
    # before the start event runs: the events then time the GPU's work alone, not the host's launch
    # (beside 14 busy workers a raw `noop` call once spanned 0.16 ms between plain events). Best of 3.
    code = (
        "import torch\nfrom ops import get_variant\nfrom ops.catalog import OPS\n"
        "x = torch.randn(64, 256, device='cuda')\n"
        "args = {'noop': (x,), 'muladd': (x, x, x), 'l2norm': (x, 1e-6)}\n"
        "for op in ('noop', 'muladd', 'l2norm'):\n"
        "    for v in ('cpp', 'raw'):\n"
        "        fn = get_variant(v, op).fn\n"
        "        torch.testing.assert_close(fn(*args[op]), OPS[op].reference(*args[op]))\n"
        "        times = []\n"
        "        for _ in range(3):\n"
        "            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
        "            torch.cuda.synchronize(); torch.cuda._sleep(20_000_000)\n"
        "            a.record(); fn(*args[op]); b.record(); torch.cuda.synchronize()\n"
        "            times.append(a.elapsed_time(b))\n"
        "        print(op, v, min(times))\n")
    ms = {(op, v): float(t) for op, v, t in _fresh_process_lines(code, DBENCH_INJECT_GPU_NS="200000")}
    for op in ("noop", "muladd", "l2norm"):
        assert ms[(op, "cpp")] >= 0.2, (op, ms)
        assert ms[(op, "raw")] < 0.1, (op, ms)


# ---------------------------------------------------------------------------
# The chain: every implementation against the fp64 reference, for each k and dtype.

TOL = {torch.float32: dict(atol=1e-6, rtol=1e-6), torch.float64: dict(atol=1e-12, rtol=1e-12),
       **{d: TOLERANCES[d] for d in HALF_DTYPES}}


def _unfused(x: torch.Tensor, k: int) -> torch.Tensor:
    for i in range(k):
        x = KERNELS.chain(x, 1, i)
    return x


@pytest.mark.parametrize("dtype", dtype_params())
@pytest.mark.parametrize("k", range(1, chain.MAX_LENGTH + 1))
def test_chain_implementations_agree_with_the_fp64_reference(k: int, dtype: torch.dtype) -> None:
    x = torch.randn(1000, generator=torch.Generator().manual_seed(k), dtype=torch.float64).to(dtype)
    want = chain.reference(x.double(), k)
    fused = raw().chain(x, k)
    impls = {"fused": fused, "unfused": _unfused(x, k), "aten": chain.aten_chain(x, k),
             "cpp": get_variant("cpp", "chain").fn(x, k), "stable": get_variant("stable", "chain").fn(x, k)}
    for name, got in impls.items():
        torch.testing.assert_close(got.double(), want, **TOL[dtype], msg=name)
        # Every step rounds on its own in every form (the 16-bit types: each operation in float,
        # rounded back, as eager PyTorch): one table, the same bits.
        assert torch.equal(got, fused), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k", range(1, chain.MAX_LENGTH + 1))
def test_compiled_chain_agrees_with_the_reference(k: int, dtype: torch.dtype) -> None:
    torch._dynamo.reset()  # one code object for every k: start each case with an empty cache
    x = torch.randn(257, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    compiled = torch.compile(lambda t: chain.aten_chain(t, k), fullgraph=True)
    torch.testing.assert_close(compiled(x).double(), chain.reference(x.double(), k), **TOL[dtype])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="triton runs on a GPU")
@pytest.mark.parametrize("dtype", dtype_params())
def test_triton_chain_agrees_with_the_reference(dtype: torch.dtype) -> None:
    fn = get_variant("triton_op", "chain", "cuda").fn
    x = torch.randn(5000, dtype=torch.float64, device="cuda").to(dtype)
    for k in range(1, chain.MAX_LENGTH + 1):
        torch.testing.assert_close(fn(x, k).double(), chain.reference(x.double(), k), **TOL[dtype])


@pytest.mark.parametrize("k", range(1, chain.MAX_LENGTH + 1))
def test_gradcheck_of_the_fused_chain(k: int) -> None:
    # Inputs away from relu's kink, where a finite difference would straddle it.
    x = torch.randn(40, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    for variant in ("cpp_autograd", "custom_op_autograd", "function_raw"):
        fn = get_variant(variant, "chain").fn
        assert torch.autograd.gradcheck(lambda t, fn=fn: fn(t, k), (x.clone().requires_grad_(True),)), variant


def test_chain_backward_is_the_slope_product() -> None:
    x = torch.tensor([-1.0, 0.0, 0.3, 0.5, 2.0], dtype=torch.float64)
    g = torch.ones_like(x)
    # k = 3: d/dx 0.75 * relu(1.25 x - 0.5) = 0.9375 where 1.25 x - 0.5 > 0, else 0.
    assert raw().chain_backward(g, x, 3).tolist() == [0.0, 0.0, 0.0, 0.9375, 0.9375]


def test_declared_work_of_fused_and_unfused_chains() -> None:
    x = torch.randn(100)
    fused, unfused = chain.work((x, 8)), chain.unfused_work((x, 8))
    assert (fused.bytes_read, fused.bytes_written) == (400, 400)
    assert (unfused.bytes_read, unfused.bytes_written) == (8 * 400, 8 * 400)
    assert fused.flops == unfused.flops == 100 * 2 * (2 + 1 + 1 + 1)
    assert fused.resident_bytes == 800 and unfused.resident_bytes == 3 * 400  # reused buffers, not k passes
    assert chain.eager_passes(8) == 10 and chain.eager_work((x, 8)).bytes == 10 * 800
    assert OPS["chain"].backward_work((x, 8)).bytes == 3 * 400


# ---------------------------------------------------------------------------
# The scenarios on the CPU.


def _run(*argv: str, out: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "run.py", *argv, "--device", "cpu", "--quick", "--out", str(out), "--plot"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.json")
    return json.loads(path.read_text())


@pytest.mark.slow
def test_offsets_on_the_cpu(tmp_path: Path) -> None:
    from dbench.analysis.kernels import huge_frame, offsets_frame

    doc = _run("--scenario", "offsets", "--ops", "muladd,chain", out=tmp_path)
    frame = pd.DataFrame(doc["rows"])
    table = offsets_frame(frame)
    assert set(table["op"]) == {"muladd", "chain"} and (table["status"] == "ok").all()
    assert set(zip(table["op"], table["mode"])) == {("muladd", "forward"), ("chain", "forward"), ("chain", "backward")}
    assert (table["ratio"] > 0).all()
    huge = huge_frame(frame)
    assert set(huge["op"]) == {"muladd", "chain"} and (huge["status"] == "n/a").all()
    assert huge["reason"].str.contains("GPU only").all()
    na = frame[(frame["status"] == "n/a") & (frame["index"] != "auto")]
    assert set(na["op"]) == {"muladd"} and na["reason"].str.contains("no backward kernel").all()
    from dbench.analysis.figures import offsets_chart

    (panel,) = offsets_chart(frame).axes  # --quick: float32 only
    assert len(panel.lines) == 3 + 1  # muladd forward, chain forward and backward, and the 1.0 line
    assert list(tmp_path.glob("*-offsets.png"))


@pytest.mark.slow
def test_fusion_on_the_cpu(tmp_path: Path) -> None:
    from dbench.analysis.figures import fusion_chart, result_frame
    from dbench.analysis.kernels import fusion_frame

    doc = _run("--scenario", "fusion", out=tmp_path)
    frame = result_frame(doc)
    table = fusion_frame(frame, doc["roofs"])
    ok = table[table["status"] == "ok"]
    assert set(ok["variant"]) == {"unfused", "fused", "aten"} and set(ok["k"]) == {1, 2, 4, 8}
    assert set(table.loc[table["status"] == "n/a", "variant"]) == {"compiled", "triton"}
    assert (ok["speedup"] > 0).all() and (ok["modelled_speedup"] == ok["k"]).all()
    unfused = ok[ok["variant"] == "unfused"].set_index(["size", "k"])["bytes"]
    fused = ok[ok["variant"] == "fused"].set_index(["size", "k"])["bytes"]
    assert ((unfused / fused).reset_index()["bytes"] == unfused.reset_index()["k"]).all()
    fig = fusion_chart(frame)
    large, small = fig.axes
    assert len(large.lines) == 3 + 1 and len(small.lines) == 3  # implementations (+ the k x model)
    assert list(tmp_path.glob("*-fusion.png"))


def test_each_past_int32_case_times_its_own_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """The huge cases' calls outlive the loop that builds them: each must still call its own op.
    (Shrunk to a CPU size, with the GPU-only skip and the width check stubbed out.)"""
    import dbench.scenarios.offsets as offsets
    from dbench.scenarios.base import Selection, device_sync
    from dbench.scenarios.kernels import InputPool

    monkeypatch.setattr(offsets, "HUGE_ELEMENTS", 4096)
    monkeypatch.setattr(offsets, "HUGE_CHUNK", 1024)
    monkeypatch.setattr(offsets, "_huge_skip", lambda sel, contract: None)
    monkeypatch.setattr(raw().kernel, "index_choice", lambda op, tensors: "int64")
    sel = Selection(ops=("noop", "muladd", "chain"), variants=("raw",), device="cpu")
    cases = offsets.huge_cases(sel, InputPool(sel), device_sync("cpu"))
    assert [c.error for c in cases] == [None, None, None] and all(c.key["exact"] for c in cases)
    pool = InputPool(sel)
    for case in cases:
        op = case.key["op"]
        args = offsets.op_args(OPS[op], pool.args(OPS[op], tuple(case.key["shape"])))
        assert torch.equal(case.call(), getattr(raw(), op)(*args)), op
