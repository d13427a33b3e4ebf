"""The examples/ ops, run as their users would: a copy of the example's file in a folder outside the
repository, given to run.py with --op. The CPU example (C++ through load_inline, the author's own
TORCH_LIBRARY op) runs everywhere; the public libraries' (torch-scatter and torchao, which
scripts/setup_examples.sh installs, as CI does) where they are installed; the Triton one needs CUDA and triton."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _run(tmp_path: Path, example: str, *argv: str, name: str = "rmsnorm", code: int = 0) -> list[dict]:
    """Copy the example beside nothing of the suite's, run one scenario on it (exit status `code`),
    return its rows."""
    work = tmp_path / "user"
    work.mkdir(exist_ok=True)
    shutil.copy(EXAMPLES / example / "my_ops.py", work / "my_ops.py")
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "run.py"), "--op", f"my_ops.py:{name}", "--quick",
                           "--out", str(out), *argv], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == code, _failed_rows(out) + done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = sorted(out.glob("*.json"))[-1:]
    keep = os.environ.get("DBENCH_KEEP_EXAMPLE_RESULTS")  # a CI artifact folder: the example runs' results
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(result, Path(keep) / f"{example}-{result.name}")
    return json.loads(result.read_text())["rows"]


def _failed_rows(out: Path) -> str:
    """The FAILED rows of the run's result, with their reasons (the console's tail may not reach them)."""
    from dbench.bench.core.identity import case_label

    failed = [f"{case_label(r)} {r.get('metric')}: {r.get('reason')}"
              for path in sorted(out.glob("*.json")) if not path.name.endswith(".gbench.json")
              for r in json.loads(path.read_text()).get("rows", []) if r.get("status") == "failed"]
    return "FAILED rows:\n" + "\n".join(failed) + "\n" if failed else ""


def _cpu_boundary(tmp_path: Path, example: str, name: str, *argv: str,
                  code: int = 0) -> tuple[list[dict], set[tuple[str, str]]]:
    """The example's op through the boundary scenario on the CPU: its rows, and the (variant, mode)
    pairs timed; every row is the example file's op."""
    rows = _run(tmp_path, example, "--scenario", "boundary", "--device", "cpu", "--rounds", "3", "--no-cpp", *argv,
                name=name, code=code)
    assert {r["op_source"].split("@")[0] for r in rows} == {f"my_ops.py:{name}"}
    return rows, {(r["variant"], r["mode"]) for r in rows if r["status"] == "ok"}


def _needs(module: str, library: str) -> pytest.MarkDecorator:
    """Skipped where a public library an example uses is not installed (never on CI: .ci/run installs it)."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{library} is not installed: `bash scripts/setup_examples.sh` installs it "
                                     "(.ci/run does, so CI never skips this)")


@pytest.mark.slow
def test_cpu_load_inline_example_passes_every_check(tmp_path: Path) -> None:
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("load_inline needs a C++ compiler")
    rows, timed = _cpu_boundary(tmp_path, "cpu_load_inline", "rmsnorm")
    assert not [r for r in rows if r["status"] == "failed"]
    # The author's own C++ op (with its Python autograd formula) and the PyTorch formula beside the
    # generated variants, in every mode.
    for variant in ("raw", "custom_op", "custom_op_autograd", "function_raw", "registered", "aten"):
        assert (variant, "inference") in timed
    for variant in ("registered", "custom_op_autograd", "autograd_key_py", "function_define_impl"):
        assert (variant, "fwd_bwd") in timed


@pytest.mark.slow
@_needs("torch_scatter", "torch-scatter")
def test_public_library_example_times_its_integer_input_op(tmp_path: Path) -> None:
    """torch_scatter's segment_sum_csr over int64 CSR offsets: every generated variant and the aten
    row pass their checks and are timed in every mode; the library's own registered op is FAILED with
    its real cause (a catch-all registration that cannot be traced), not a fault of the declaration."""
    # exit 1: a FAILED row (the library's own registered op)
    rows, timed = _cpu_boundary(tmp_path, "scatter_segment", "segment_sum", code=1)
    failed = {r["variant"]: r["reason"] for r in rows if r["status"] == "failed"}
    assert set(failed) == {"registered"}, failed
    assert "torch_scatter::segment_sum_csr has only a CompositeImplicitAutograd kernel" in failed["registered"]
    for variant in ("raw", "custom_op", "custom_op_autograd", "function_raw", "aten"):
        assert (variant, "inference") in timed
    for variant in ("custom_op_autograd", "autograd_key_py", "function_define_impl", "aten"):
        assert (variant, "fwd_bwd") in timed


@pytest.mark.slow
@_needs("torchao", "torchao")
def test_public_library_quantizer_example_times_its_registered_op(tmp_path: Path) -> None:
    """torchao's quantize_affine (int32 zero points in, int8 out, compared exactly): every variant
    passes its checks, the library's own registered op (SymInt[], ScalarType and Scalar? arguments
    through registered_args) included, and the gradient modes are n/a (no backward declared)."""
    # Two shapes: one block of 64 a row, and two (each block its own scale and zero point).
    rows, timed = _cpu_boundary(tmp_path, "ao_quantize", "quantize_int8", "--shape", "64,64", "--shape", "32,128")
    assert {tuple(r["shape"]) for r in rows if r["status"] == "ok"} == {(64, 64), (32, 128)}
    assert not [r for r in rows if r["status"] == "failed"], [r["reason"] for r in rows if r["status"] == "failed"]
    for variant in ("raw", "define_impl", "custom_op", "nested_custom_op", "registered"):
        assert {(variant, m) for m in ("inference", "no_grad", "inference_mode")} <= timed, variant
    assert not {m for v, m in timed if m in ("fwd_requires_grad", "fwd_bwd")}


requires_triton = pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("triton") is None,
    reason="the Triton example needs a CUDA device and triton")


@pytest.mark.gpu
@requires_triton
# The roofline sizes the example up to 4 GiB a tensor and takes most of the GPU's memory, so it runs
# alone (marker gpu_memory). On an 80 GB H100 its aten backward's full-size check (an fp64 reference)
# does not fit even alone (72.7 GiB in use, 2026-12-06): that row is n/a there, not FAILED.
@pytest.mark.parametrize("scenario", ["boundary", "launch", pytest.param("roofline", marks=pytest.mark.gpu_memory)])
def test_triton_example_runs_through_each_scenario(tmp_path: Path, scenario: str) -> None:
    rows = _run(tmp_path, "triton_rmsnorm", "--scenario", scenario, "--device", "cuda", "--no-cpp")
    assert not [r for r in rows if r["status"] == "failed"], [r["reason"] for r in rows if r["status"] == "failed"]
    variants = {r["variant"] for r in rows if r["status"] == "ok"}
    if scenario == "boundary":
        assert {"triton_op", "custom_op_autograd", "function_raw", "aten"} <= variants
        assert any(r["metric"] == "gpu_us" for r in rows if r["status"] == "ok")
    if scenario == "roofline":
        modes = {r["mode"] for r in rows if r["status"] == "ok"}
        assert modes == {"forward", "backward"}
