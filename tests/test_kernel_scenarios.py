"""The kernel half: declared work, roof arithmetic and the above-roof flag, cold-cache blocks,
launch crossovers, and the roofline and launch scenarios end to end on the CPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from dbench.analysis.kernels import CPU_BOUNDARY_SHARE, GPU_BOUND_SHARE, crossovers, roofline_frame
from dbench.bench.core.gputimer import GpuSamples
from dbench.bench.harness.roofline import CPU_GEMM_SIZES, ROOF_TOLERANCE, attach, best_roof, derive, measure_roofs
from dbench.bench.core.runner import COLD_BLOCKS_PER_ROUND, Case, RunConfig, run, run_gpu
from dbench.ops import InputSpec
from dbench.ops.catalog import OPS

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "results" / "h200"
# Named, not globbed: a glob's order is the file system's, and the committed runs differ in ops and caches.
H200_ROOFLINE = H200 / "roofline-cuda0-20261202T132021Z-54fbab.json.gz"  # every op, warm and cold
H200_LAUNCH = H200 / "launch-cuda0-20261202T132457Z-261914.json.gz"


@pytest.fixture(scope="module")
def h200_roofline() -> pd.DataFrame:
    """The committed H200 roofline as a frame, read once for the figure tests."""
    from dbench.analysis.figures import result_frame
    from dbench.bench.io.results import load_result

    return result_frame(load_result(H200_ROOFLINE))


# ---------------------------------------------------------------------------
# Declared work.


@pytest.mark.parametrize(("op", "shape", "expected"), [
    ("noop", (4, 8), (32 * 4, 32 * 4, 0)),
    ("muladd", (4, 8), (3 * 32 * 4, 32 * 4, 2 * 32)),
    ("l2norm", (4, 8), (32 * 4, 32 * 4, 3 * 32)),
    ("mm", (64, 128, 32), ((64 * 128 + 128 * 32) * 4, 64 * 32 * 4, 2 * 64 * 32 * 128)),
])
def test_declared_work_matches_a_hand_count(op: str, shape: tuple[int, ...], expected: tuple[int, int, int]) -> None:
    work = OPS[op].work(OPS[op].make_inputs(InputSpec(shape)))
    assert (work.bytes_read, work.bytes_written, work.flops) == expected
    assert work.bytes == expected[0] + expected[1]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_declared_bytes_scale_with_the_element_size(dtype: torch.dtype) -> None:
    """The roofline's bytes per element come from element_size: 2 for the 16-bit types."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    for op, tensors_moved in (("noop", 2), ("muladd", 4), ("l2norm", 2), ("chain", 2)):
        work = OPS[op].work(OPS[op].make_inputs(InputSpec((4, 8), dtype)))
        assert work.bytes == tensors_moved * 32 * itemsize, op


def test_backward_work_of_l2norm_reads_grad_and_x() -> None:
    args = OPS["l2norm"].make_inputs(InputSpec((2, 16), torch.float64))
    work = OPS["l2norm"].backward_work(args)
    assert (work.bytes_read, work.bytes_written, work.flops) == (2 * 32 * 8, 32 * 8, 7 * 32)


# ---------------------------------------------------------------------------
# Roof arithmetic.


def test_memory_bound_point() -> None:
    # 1 GB in 0.5 ms = 2000 GB/s against a 4000 GB/s roof: half of it.
    d = derive(bytes_moved=10**9, flops=10**8, seconds=5e-4, memory_gbps=4000.0, compute_tflops=50.0)
    assert d["gbps"] == pytest.approx(2000.0) and d["tflops"] == pytest.approx(0.2)
    assert d["intensity"] == pytest.approx(0.1) and d["roof_tflops"] == pytest.approx(0.4)
    assert d["bound"] == "memory" and d["pct_of_roof"] == pytest.approx(0.5) and d["above_roof"] is False


def test_compute_bound_point() -> None:
    # 2 TFLOP over 1 GB: intensity 2000, far past the ridge (50 / 4 = 12.5): the compute roof applies.
    d = derive(bytes_moved=10**9, flops=2 * 10**12, seconds=0.1, memory_gbps=4000.0, compute_tflops=50.0)
    assert d["bound"] == "compute" and d["roof_tflops"] == pytest.approx(50.0)
    assert d["tflops"] == pytest.approx(20.0) and d["pct_of_roof"] == pytest.approx(0.4)


def test_a_point_above_its_roof_is_flagged_beyond_the_roofs_own_noise() -> None:
    at = derive(10**9, 0, (10**9 / 4000e9) / (1 + ROOF_TOLERANCE / 2), 4000.0, None)
    beyond = derive(10**9, 0, (10**9 / 4000e9) / (1 + 2 * ROOF_TOLERANCE), 4000.0, None)
    assert at["above_roof"] is False and at["pct_of_roof"] == pytest.approx(1 + ROOF_TOLERANCE / 2)
    assert beyond["above_roof"] is True


def test_cache_resident_points_are_not_judged_by_the_memory_roof() -> None:
    fast = derive(10**6, 10**5, 1e-7, 4000.0, 50.0, resident=True)  # 10 TB/s: from the cache
    assert fast["bound"] == "cache" and fast["pct_of_roof"] is None and fast["above_roof"] is False
    product = derive(10**6, 10**12, 0.05, 4000.0, 50.0, resident=True)  # compute-bound: still judged
    assert product["bound"] == "compute" and product["pct_of_roof"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="positive"):
        derive(0, 0, 1.0, 4000.0, None)


def test_a_roof_is_the_best_of_its_candidates() -> None:
    roof = best_roof({"mm 256^3": 0.0901234, "mm 512^3": 0.1104321, "mm 1024^3": 0.0951}, 4)
    assert (roof.value, roof.method) == (0.1104321, "mm 512^3")
    assert roof.candidates == {"mm 256^3": 0.0901, "mm 512^3": 0.1104, "mm 1024^3": 0.0951}


def test_the_cpu_roofs_keep_every_matmul_size_and_take_the_best() -> None:
    roofs = measure_roofs("cpu", (torch.float32,))
    compute = roofs["compute"]["float32"]
    assert [k.split("^")[0] for k in compute["candidates"]] == [f"torch.mm {n}" for n in CPU_GEMM_SIZES]
    assert compute["method"] in compute["candidates"]
    assert compute["value"] == pytest.approx(max(compute["candidates"].values()), abs=1e-4)
    assert set(roofs["memory"]["candidates"]) == {"copy_", "read (torch.sum)"} and roofs["memory"]["value"] > 0


def test_attach_adds_metrics_to_the_right_rows_only() -> None:
    from dbench.bench.core.identity import case_identity
    from dbench.ops.contract import Work

    row = {"scenario": "roofline", "op": "noop", "variant": "raw", "mode": "forward", "shape": [8], "dtype": "float32",
           "device": "cuda:0", "driver": "python", "size": 32, "cache": "cold", "axes": ["size", "cache"],
           "metric": "gpu_us", "status": "ok", "median": 0.5}
    cpu = {**row, "metric": "cpu_us"}
    roofs = {"memory": {"value": 4000.0}, "compute": {"float32": {"value": 50.0}}, "cache_bytes": 1 << 20}
    attach([row, cpu], {case_identity(row): Work(10**6, 10**6, 0)}, roofs, "gpu_us")
    assert row["gbps"] == pytest.approx(4000.0) and row["bound"] == "memory"  # cold: memory, although small
    assert "gbps" not in cpu


def test_roofline_frame_never_reports_a_rate_above_the_roof() -> None:
    rows = [{"scenario": "roofline", "op": "noop", "mode": "forward", "variant": v, "cache": "warm", "size": 1,
             "dtype": "float32", "metric": "gpu_us", "status": "ok", "reason": None, "median": 1.0,
             "gbps": g, "pct_of_roof": p, "above_roof": a} for v, g, p, a in (("raw", 1e4, 2.5, True),
                                                                               ("aten", 1e3, 0.25, False))]
    frame = roofline_frame(pd.DataFrame(rows))
    assert math.isnan(frame.loc[0, "gbps"]) and math.isnan(frame.loc[0, "pct_of_roof"])
    assert frame.loc[1, "gbps"] == 1e3


# ---------------------------------------------------------------------------
# Cold-cache blocks.


class RecordingTimer:
    """A GpuTimer stand-in that records its blocks (CPU-only test)."""

    name = "fake"

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []
        self._results: dict[str, GpuSamples] = {}

    def begin_block(self, label: str) -> None:
        self.events.append(("begin", label, 0))

    def calls_done(self, label: str) -> None:
        pass

    def end_block(self, label: str, n_calls: int) -> None:
        self.events.append(("end", label, n_calls))
        self._results.setdefault(label, GpuSamples()).gpu_us.append(1.0)

    def collect(self) -> None:
        pass

    def results(self) -> dict[str, GpuSamples]:
        return self._results


def test_cold_cases_get_one_call_blocks_each_after_a_flush_and_no_cpu_rows() -> None:
    from dbench.bench.io.results import case_rows

    order: list[str] = []
    warm = Case(key={"op": "noop", "variant": "raw", "mode": "forward"}, call=lambda: order.append("warm"))
    cold = Case(key={"op": "noop", "variant": "raw", "mode": "cold"}, call=lambda: order.append("cold"),
                flush=lambda: order.append("flush"))
    config = RunConfig(rounds=2, block_seconds=1e-4, warmup_seconds=1e-4)
    run([warm, cold], config)
    assert len(warm.samples) == 2 and cold.samples == [] and cold.block == 0, "cold cases skip the CPU pass"
    timer = RecordingTimer()
    order.clear()
    done, interrupted = run_gpu([warm, cold], config, timer, rounds=3)
    assert done == 3 and not interrupted and cold.block == 1
    cold_blocks = [e for e in timer.events if e[1] == cold.label and e[0] == "end"]
    assert len(cold_blocks) == 3 * COLD_BLOCKS_PER_ROUND and {e[2] for e in cold_blocks} == {1}
    # Every timed cold call follows a flush (the first, untimed warm-up block has none).
    timed = order[order.index("flush"):]
    assert all(timed[i - 1] == "flush" for i, x in enumerate(timed) if x == "cold")
    assert [r["mode"] for r in case_rows([warm, cold])] == ["forward"]


@pytest.mark.parametrize(("block_seconds", "scale"), [(0.0025, 4), (0.01, 1), (0.02, 1), (0.003, 4)])
def test_gpu_pass_blocks_last_at_least_the_gpu_minimum(block_seconds: float, scale: int) -> None:
    from dbench.bench.core.runner import GPU_MIN_BLOCK_SECONDS

    case = Case(key={"op": "noop", "variant": "raw", "mode": "forward"}, call=lambda: None)
    case.block = 7  # as the CPU pass calibrated it for block_seconds
    timer = RecordingTimer()
    run_gpu([case], RunConfig(rounds=1, block_seconds=block_seconds), timer, rounds=2)
    ends = [e[2] for e in timer.events if e[0] == "end"]
    assert ends == [7 * scale] * 2 and scale * block_seconds >= GPU_MIN_BLOCK_SECONDS * (1 - 1e-9)
    assert case.block == 7  # the CPU pass's block is left as it was


# ---------------------------------------------------------------------------
# Launch crossovers.


def _launch_rows(variant: str, cpu: list[float], gpu: list[float] | None, ratio: list[float] | None = None
                 ) -> list[dict[str, Any]]:
    sizes = [4**k for k in range(len(cpu))]
    rows = [{"scenario": "launch", "op": "muladd", "variant": variant, "size": s, "metric": "cpu_us", "status": "ok",
             "median": c, "ratio_median": None if ratio is None else ratio[i]}
            for i, (s, c) in enumerate(zip(sizes, cpu))]
    if gpu is not None:
        rows += [{"scenario": "launch", "op": "muladd", "variant": variant, "size": s, "metric": "gpu_us",
                  "status": "ok", "median": g} for s, g in zip(sizes, gpu)]
    return rows


def test_gpu_crossover_is_the_first_size_from_which_every_larger_one_is_gpu_bound() -> None:
    # GPU-bound at size 4 once (noise), then from size 64 on for good.
    rows = _launch_rows("cpp", cpu=[10, 10, 10, 10, 12], gpu=[1, 10, 2, 9.5, 40])
    rows += _launch_rows("triton_op", cpu=[80, 80, 80, 80, 80], gpu=[1, 1, 2, 9, 40])
    found = crossovers(pd.DataFrame(rows)).set_index("variant")
    assert found.loc["cpp", "crossover_elements"] == 64
    assert found.loc["cpp", "share_at"] == pytest.approx(0.95) and 0.95 >= GPU_BOUND_SHARE
    assert math.isnan(found.loc["triton_op", "crossover_elements"]), "never GPU-bound: not reached"


def test_cpu_crossover_uses_the_ratio_to_raw() -> None:
    rows = _launch_rows("raw", cpu=[1, 2, 8, 30], gpu=None)
    rows += _launch_rows("custom_op", cpu=[8, 9, 15, 32], gpu=None, ratio=[8.0, 4.5, 1.05, CPU_BOUNDARY_SHARE])
    found = crossovers(pd.DataFrame(rows))
    assert list(found["variant"]) == ["custom_op"], "raw is the baseline itself"
    assert found.iloc[0]["crossover_elements"] == 16


def test_a_compiled_form_is_first_called_on_its_example_then_serves_every_size_without_recompiling() -> None:
    from torch._inductor import config as inductor

    from dbench.scenarios.kernels import compile_tuned

    examples: list[int] = []

    def example() -> tuple[torch.Tensor, ...]:
        examples.append(1)
        return tuple(torch.randn(4096) for _ in range(3))

    caches = (inductor.fx_graph_cache, inductor.autotune_local_cache)
    fn = compile_tuned(torch.addcmul, example)
    assert examples == [1]  # called once, at once, before any size of the run
    assert (inductor.fx_graph_cache, inductor.autotune_local_cache) == caches  # the patch is undone
    a, b, c = (torch.randn(777) for _ in range(3))
    with torch.compiler.set_stance("fail_on_recompile"):  # one dynamic graph: no recompile per size
        assert torch.allclose(fn(a, b, c), torch.addcmul(a, b, c))
    assert examples == [1]


# ---------------------------------------------------------------------------
# The scenarios end to end (CPU), and their figures.


def _run(*args: str, out: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), *args, "--device", "cpu", "--quick", "--no-pin",
                           "--out", str(out), "--plot"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.json")
    return json.loads(path.read_text())


@pytest.mark.slow
def test_roofline_on_the_cpu(tmp_path: Path) -> None:
    doc = _run("--scenario", "roofline", "--ops", "muladd,mm", out=tmp_path)
    assert doc["status"] == "complete" and doc["roofs"]["memory"]["value"] > 0
    assert doc["roofs"]["compute"]["float32"]["value"] > 0 and doc["roofs"]["cache_bytes"]
    timed = [r for r in doc["rows"] if r["status"] == "ok"]
    assert {r["op"] for r in timed} == {"muladd", "mm"} and {r["variant"] for r in timed} == {"raw", "aten"}
    for r in timed:
        assert r["metric"] == "cpu_us" and r["gbps"] > 0 and r["bound"] in ("memory", "compute", "cache")
        assert (r["pct_of_roof"] is None) == (r["bound"] == "cache")
        assert r["above_roof"] == (r["pct_of_roof"] is not None and r["pct_of_roof"] > 1 + ROOF_TOLERANCE)
    na = {(r["variant"], r["mode"]): r["reason"] for r in doc["rows"] if r["status"] == "n/a"}
    assert "GPU-only" in na[("compiled", "forward")] and "no backward kernel" in na[("raw", "backward")]
    assert [p.name for p in tmp_path.glob("*.png")] == [f"{Path(doc_name).stem}-roofline.png"
                                                        for doc_name in tmp_path.glob("*.json")]


def test_launch_on_the_cpu(tmp_path: Path) -> None:
    doc = _run("--scenario", "launch", "--ops", "muladd", "--variants", "raw,cpp,aten", out=tmp_path)
    rows = [r for r in doc["rows"] if r["status"] == "ok"]
    sizes = sorted({r["size"] for r in rows})
    assert sizes[0] == 1 and len(sizes) == 6 and {r["variant"] for r in rows} == {"raw", "cpp", "aten"}
    cpp = [r for r in rows if r["variant"] == "cpp"]
    assert all(r["baseline"] == f"muladd/raw/inference[size={r['size']}]" and r["ratio_median"] for r in cpp)


def test_roofline_and_crossover_figures_from_the_h200_results(h200_roofline: pd.DataFrame) -> None:
    from dbench.analysis.figures import crossover_chart, result_frame, roofline_chart
    from dbench.bench.io.results import load_result

    fig = roofline_chart(h200_roofline)
    left, right = fig.axes
    assert len(left.lines) == len(h200_roofline.attrs["roofs"]["compute"])  # one roof per dtype
    # ops x modes x variants, cold cache: noop/muladd/l2norm forward x 3 variants + l2norm backward x 2
    assert len(right.lines) == 3 * 3 + 2 + 1  # + the memory roof
    launch = result_frame(load_result(H200_LAUNCH))
    lines = crossover_chart(launch, "muladd").axes[0].lines
    assert lines[0].get_label().startswith("GPU µs per call")
    assert len([line for line in lines if line.get_label().startswith("CPU µs per call")]) == 6


@pytest.mark.parametrize(("ops", "kept"), [(("mm",), "intensity"), (("noop",), "bytes per tensor")])
def test_a_roofline_figure_leaves_out_the_panel_it_has_nothing_for(h200_roofline: pd.DataFrame,
                                                                    ops: tuple[str, ...], kept: str) -> None:
    # `--ops mm` has no memory-bound op to draw by size; `--ops noop` has no FLOPs to draw on the
    # roofline. The panel left would be empty, with an empty legend (matplotlib warns of that).
    from dbench.analysis.figures import roofline_chart

    subset = h200_roofline[h200_roofline["op"].isin(ops)].copy()
    subset.attrs = h200_roofline.attrs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = roofline_chart(subset)
    (ax,) = fig.axes
    assert kept in ax.get_xlabel() and ax.get_legend() is not None and ax.get_legend().get_texts()


# ---------------------------------------------------------------------------
# The declared axes are the loop: the cases are the product of each scenario's axes (values by
# selection and op), so a new size or axis value is a change of data.

@pytest.mark.parametrize(("scenario", "ops", "variants", "axes"), [
    ("launch", ("muladd",), ("raw",), {"size": (256, 4096)}),
    ("fusion", ("chain",), ("unfused", "fused"), {"k": (1, 3), "size": (16 << 10, 64 << 10)}),
    ("offsets", ("muladd",), ("raw",), {"dtype": ("float32",), "size": (64 << 10,), "index": ("int32", "int64")}),
    ("roofline", ("noop",), ("raw", "aten"), {"size": (64 << 10, 256 << 10), "cache": ("warm",)}),
])
def test_a_scenarios_declared_axes_are_the_loop_that_builds_its_cases(
        scenario: str, ops: tuple[str, ...], variants: tuple[str, ...], axes: dict[str, tuple[Any, ...]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import itertools

    from dbench.scenarios import SCENARIOS, Selection
    from dbench.scenarios.base import Axis

    module = importlib.import_module(f"dbench.scenarios.{scenario}")
    declared = SCENARIOS[scenario].axes
    assert declared is module.AXES and [a.name for a in declared] == list(axes)
    # other values for every axis, as data: the built cases take exactly those
    monkeypatch.setattr(module, "AXES", tuple(Axis(name, values) for name, values in axes.items()))
    sel = Selection(ops=ops, variants=variants, device="cpu", dtype=torch.float32, seed=0, quick=True)
    cases = [c for c in SCENARIOS[scenario].build(sel) if c.key.get("index") != "auto"]
    for op in ops:
        points = {tuple(c.key[name] for name in axes) for c in cases if c.key["op"] == op}
        assert points == set(itertools.product(*axes.values())), (op, points)
    assert all(c.key["axes"] == list(axes) for c in cases)
    assert all(c.error is None for c in cases), [(c.label, c.error) for c in cases if c.error]


def test_an_axis_takes_its_values_by_device_quick_and_op() -> None:
    from dbench.scenarios import Selection, roofline

    def sizes(device: str, quick: bool, op: str) -> tuple[int, ...]:
        sel = Selection(ops=(op,), variants=("raw",), device=device, dtype=torch.float32, seed=0, quick=quick)
        return roofline.AXES[0].values_for(sel, op)

    assert sizes("cuda", False, "noop") == roofline.SIZES_CUDA and sizes("cpu", False, "noop") == roofline.SIZES_CPU
    # mm is sized by its side (OpContract.size_axis), not by bytes per tensor.
    assert sizes("cuda", False, "mm") == roofline.SIDES_CUDA and sizes("cpu", True, "mm") == roofline.SIDES_CPU[::2]


def test_a_case_that_does_not_fit_the_gpu_is_n_a_with_the_allocators_figures() -> None:
    """On an 80 GB H100 the Triton example's 4 GiB backward check (fp64 reference) ran out of memory
    and the row was FAILED; it is this device's limit, not the case's fault: n/a, saying how much."""
    from dbench.scenarios.kernels import check_against

    message = ("CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 79.18 GiB of which "
               "6.50 GiB is free. Including non-PyTorch memory, this process has 72.67 GiB memory in use. Of the "
               "allocated memory 70.1 GiB is allocated by PyTorch. See documentation for Memory Management")

    def reference() -> torch.Tensor:
        raise torch.OutOfMemoryError(message)

    case = Case(key={"op": "rmsnorm", "variant": "aten", "mode": "backward"}, call=None)
    check_against(case, lambda: torch.ones(3), reference, torch.float32)
    assert case.call is None and case.error is None
    assert case.na_reason == ("does not fit in this GPU's memory (full-size check against PyTorch): CUDA out of "
                              "memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 79.18 GiB of "
                              "which 6.50 GiB is free. Including non-PyTorch memory, this process has 72.67 GiB "
                              "memory in use")
    # Any other error of the check is still the case's failure.
    broken = Case(key={"op": "rmsnorm", "variant": "aten", "mode": "backward"}, call=None)
    check_against(broken, lambda: torch.ones(3), lambda: torch.ones(2), torch.float32)
    assert broken.na_reason is None and "shape [3] instead of [2]" in str(broken.error)


def test_the_full_size_check_takes_a_declared_bound() -> None:
    """A long float32 sum carries more rounding than REL_ERROR allows: an op that declares its rtol
    is held to that instead, and the reason says which bound failed."""
    from dbench.scenarios.kernels import check_against

    want = torch.ones(1000, dtype=torch.float64)
    got = (want * (1 + 3e-5)).float()
    default = Case(key={"op": "sum", "variant": "raw", "mode": "forward"}, call=None)
    check_against(default, lambda: got, lambda: want, torch.float32)
    assert default.call is None and "bound 1e-05" in str(default.error)
    declared = Case(key={"op": "sum", "variant": "raw", "mode": "forward"}, call=None)
    check_against(declared, lambda: got, lambda: want, torch.float32, bound=1e-4)
    assert declared.call is not None and declared.error is None
    too_tight = Case(key={"op": "sum", "variant": "raw", "mode": "forward"}, call=None)
    check_against(too_tight, lambda: got, lambda: want, torch.float32, bound=1e-6)
    assert "bound 1e-06 (the op's declared rtol)" in str(too_tight.error)
