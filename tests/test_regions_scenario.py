"""The regions scenario: chains of N calls eager, compiled (graph breaks counted, never dropped) and
captured (n/a on a CPU); its break-even arithmetic on synthetic rows; and a --quick run on the CPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from dbench.analysis.kernels import break_even, regions_frame, regions_grids
from dbench.scenarios.base import Selection
from dbench.scenarios.compile import CUDA_GRAPHS_NEED_CUDA, fresh_function
from dbench.scenarios.regions import (
    captured_region, chain_inputs, check_chain, compiled_region, lengths, plan,
)
from dbench.ops import InputSpec
from dbench.ops.catalog import OPS

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# The chain and its cases, in process.


def test_a_chain_is_n_calls_each_fed_the_last_output_with_a_code_object_of_its_own() -> None:
    calls: list[float] = []

    def step(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls.append(float(x[0]))
        return x * b + 1

    chain = fresh_function(step, 2, calls=3)
    out = chain(torch.ones(2), torch.full((2,), 2.0))
    assert calls == [1.0, 3.0, 7.0] and out.tolist() == [15.0, 15.0]
    assert fresh_function(step, 2, calls=3).__code__ is not chain.__code__


def test_the_chain_stays_bounded_and_is_checked_against_the_fp64_chain() -> None:
    contract = OPS["muladd"]
    args = chain_inputs(contract, InputSpec((4, 32)))
    assert all(float(a.abs().max()) <= 0.9 + 1e-6 for a in args[1:])
    out = fresh_function(contract.aten, 3, calls=64)(*args)
    assert out.isfinite().all() and float(out.abs().max()) < 100
    assert check_chain(out, contract, args, 64) is None
    assert "chain of 64 differs" in (check_chain(out + 1e-2, contract, args, 64) or "")


@pytest.mark.slow
def test_a_graph_break_is_counted_and_the_chain_still_compiled() -> None:
    def breaks(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return a * b

    args = (torch.ones(4), torch.full((4,), 0.5))
    (call, out, reason), facts = compiled_region(lambda: fresh_function(breaks, 2, calls=3), args, lambda: None)
    assert reason is None and call is not None and torch.equal(out, torch.full((4,), 0.125))
    assert facts["graph_breaks"] >= 3 and "graph_break()" in facts["graph_break_reason"]
    assert facts["first_call_s"] > 0


def test_a_clean_chain_has_one_graph_and_no_break() -> None:
    args = (torch.ones(4), torch.full((4,), 0.5))
    (call, out, reason), facts = compiled_region(lambda: fresh_function(torch.mul, 2, calls=4), args, lambda: None)
    assert reason is None and call is not None and torch.equal(call(), torch.full((4,), 0.0625))
    assert (facts["graph_breaks"], facts["graphs"], facts["graph_break_reason"]) == (0, 1, None)


def test_cuda_graphs_are_na_on_the_cpu_in_the_plan_and_the_cases() -> None:
    args = (torch.ones(4), torch.ones(4))
    (call, out, reason), facts = captured_region(fresh_function(torch.mul, 2, calls=2), args)
    assert (call, out, reason, facts) == (None, None, CUDA_GRAPHS_NEED_CUDA, {})
    sel = Selection(ops=("muladd",), variants=("cpp", "aten"), device="cpu", quick=True)
    planned = plan(sel)
    assert {p.mode for p in planned} == {"eager", "compiled", "cudagraph"}
    assert all((p.na_reason == CUDA_GRAPHS_NEED_CUDA) == (p.mode == "cudagraph") for p in planned)
    assert lengths(sel) == (1, 4, 16) and lengths(Selection(ops=(), variants=(), device="cpu")) == (1, 4, 16, 64)


# ---------------------------------------------------------------------------
# Break-even on synthetic rows.


def _row(variant: str, mode: str, length: int, median: float | None, status: str = "ok", **extra: Any
         ) -> dict[str, Any]:
    return {"scenario": "regions", "op": "muladd", "variant": variant, "mode": mode, "length": length,
            "metric": "cpu_us", "status": status,
            "reason": None if status == "ok" else "CUDA graphs need a CUDA device",
            "median": median, "ratio_median": None, **extra}


def _synthetic(cuda: bool = False) -> pd.DataFrame:
    eager = {1: 10.0, 4: 40.0, 16: 160.0, 64: 640.0}  # 10 µs per op
    # compiled: 60 µs of wrapper plus 2 µs per op; the paired ratio below 1 from N = 16 on
    compiled = {n: 60.0 + 2.0 * n for n in eager}
    # a variant that dips below eager at N = 4 only: its break-even is where it stays below (64)
    dips = {1: 12.0, 4: 39.0, 16: 170.0, 64: 600.0}
    rows = []
    for n, e in eager.items():
        rows.append(_row("fast", "eager", n, e))
        rows.append(_row("fast", "compiled", n, compiled[n], ratio_median=compiled[n] / e, graph_breaks=0,
                         first_call_s=0.5))
        # a CUDA graph replays the whole chain for 3 µs of CPU: it pays from N = 1 on
        rows.append(_row("fast", "cudagraph", n, 3.0, ratio_median=3.0 / e, first_call_s=0.02) if cuda
                    else _row("fast", "cudagraph", n, None, status="n/a"))
        rows.append(_row("dips", "eager", n, e))
        rows.append(_row("dips", "compiled", n, dips[n], graph_breaks=n, first_call_s=2.0,
                         graph_break_reason="Attempted to call function marked as skipped Explanation: ..."))
        rows.append(_row("slow", "eager", n, e))
        rows.append(_row("slow", "compiled", n, e * 1.5, ratio_median=1.5, graph_breaks=0, first_call_s=1.0))
    return pd.DataFrame(rows)


def test_break_even_n_and_the_calls_that_pay_the_first_call_back() -> None:
    found = break_even(_synthetic()).set_index(["variant", "mode"])
    fast = found.loc[("fast", "compiled")]
    assert fast["break_even_n"] == 16 and fast["ratio"] == pytest.approx(188 / 640)
    # 0.5 s of compile over (640 - 188) µs saved per call of the 64-long chain
    assert fast["saved_us"] == pytest.approx(452.0) and fast["payback_calls"] == pytest.approx(0.5e6 / 452)
    assert fast["graph_breaks"] == "0"
    dips = found.loc[("dips", "compiled")]
    assert dips["break_even_n"] == 64 and dips["payback_calls"] == pytest.approx(2e6 / 40)  # unpaired: no ratio rows
    assert dips["graph_breaks"] == "1, 4, 16, 64" and dips["graph_break_reason"].startswith("Attempted")
    slow = found.loc[("slow", "compiled")]
    assert math.isnan(slow["break_even_n"]) and slow["payback_calls"] == math.inf
    assert found.loc[("fast", "cudagraph"), "status"] == "n/a: CUDA graphs need a CUDA device"


def test_the_regions_tables_show_per_op_cost_breaks_and_break_even() -> None:
    frame = _synthetic()
    assert regions_frame(frame).set_index(["variant", "mode", "length"]).loc[("fast", "eager", 64), "per_op"] == 10.0
    grids = dict(regions_grids(frame))
    assert set(grids) == {"regions muladd/eager: CPU µs per op (per chain call ÷ N)",
                          "regions muladd/compiled: CPU µs per op (per chain call ÷ N)",
                          "regions muladd: compiled against eager, break-even and first-call cost"}  # no cudagraph: n/a
    per_op = grids["regions muladd/compiled: CPU µs per op (per chain call ÷ N)"]
    assert list(per_op.columns) == ["N=1", "N=4", "N=16", "N=64"]
    assert per_op.loc["dips", "N=1"] == "12.00 (1 break)" and per_op.loc["fast", "N=64"] == "2.94"
    table = grids["regions muladd: compiled against eager, break-even and first-call cost"]
    assert table.loc["fast", "break-even N"] == "16" and table.loc["slow", "break-even N"] == "not reached"
    assert table.loc["slow", "calls to pay back at N=64"] == "never"
    assert table.loc["fast", "calls to pay back at N=64"] == "1,106"
    assert table.loc["dips", "graph breaks (each N)"] == "1, 4, 16, 64: Attempted to call function marked as skipped"


def test_on_cuda_the_cudagraph_mode_gets_its_tables_and_panel() -> None:
    from dbench.analysis.figures import regions_chart

    frame = _synthetic(cuda=True)
    replayed = break_even(frame).set_index(["variant", "mode"]).loc[("fast", "cudagraph")]
    assert replayed["break_even_n"] == 1 and replayed["payback_calls"] == pytest.approx(0.02e6 / 637)
    grids = dict(regions_grids(frame))
    assert grids["regions muladd/cudagraph: CPU µs per op (per chain call ÷ N)"].loc["fast", "N=64"] == "0.05"
    table = grids["regions muladd: cudagraph against eager, break-even and first-call cost"]
    assert list(table.index) == ["fast"] and table.loc["fast", "graph breaks (each N)"] == ""
    panels = [ax.get_title(loc="left") for ax in regions_chart(frame.assign(device="cuda"), "muladd").axes]
    assert [p.split()[0] for p in panels] == ["eager", "compiled", "cudagraph"]


def test_the_regions_figure_has_a_panel_per_timed_mode_and_dashes_a_broken_graph() -> None:
    from dbench.analysis.figures import regions_chart

    fig = regions_chart(_synthetic().assign(device="cpu"), "muladd")
    eager, compiled = [ax for ax in fig.axes if ax.get_visible()]
    assert eager.get_title(loc="left").startswith("eager") and compiled.get_title(loc="left").startswith("compiled")
    styles = {line.get_label(): line.get_linestyle() for line in compiled.lines if not line.get_label().startswith("_")}
    assert styles == {"fast": "-", "dips": "--", "slow": "-"}
    assert "cudagraph: n/a here" in fig.get_suptitle()


# ---------------------------------------------------------------------------
# Through run.py on the CPU.


def _run(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "regions", *args, "--device", "cpu",
                           "--quick", "--no-pin", "--out", str(out)], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_regions_on_the_cpu(tmp_path: Path) -> None:
    proc = _run("--ops", "muladd", "--variants", "raw,custom_op,cpp,aten", "--plot", out=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = tmp_path.glob("*.json")
    rows = [r for r in json.loads(path.read_text())["rows"] if r["metric"] == "cpu_us"]
    got = {(r["variant"], r["mode"], r["length"]): r for r in rows}
    assert set(got) == {(v, m, n) for v in ("raw", "custom_op", "cpp", "aten")
                        for m in ("eager", "compiled", "cudagraph") for n in (1, 4, 16)}
    for (variant, mode, n), r in got.items():
        assert r["status"] == ("n/a" if mode == "cudagraph" else "ok"), (variant, mode, n, r["reason"])
        if mode == "cudagraph":
            assert r["reason"] == CUDA_GRAPHS_NEED_CUDA
        if mode == "compiled":
            assert r["baseline"] == f"muladd/{variant}/eager[length={n}]" and r["first_call_s"] > 0
            # raw (a pybind11 launcher) breaks the graph at every call; the registered ops trace whole.
            # Dynamo counts a chain's breaks N (torch 2.13) or N + 1 (torch 2.11) times.
            assert (n <= r["graph_breaks"] <= n + 1) if variant == "raw" else r["graph_breaks"] == 0, (variant, n)
            assert (r["graph_break_reason"] is not None) == (variant == "raw")
    assert "muladd/raw breaks the graph" in proc.stdout and "break-even N" in proc.stdout
    assert [p.name for p in tmp_path.glob("*.png")] == [f"{path.stem}-muladd-regions.png"]


def test_a_mode_regions_does_not_declare_exits_2(tmp_path: Path) -> None:
    proc = _run("--modes", "inference", out=tmp_path)
    assert proc.returncode == 2 and "unknown mode 'inference'; valid modes: eager, compiled, cudagraph" in proc.stderr


@pytest.mark.slow
def test_a_user_op_with_several_outputs_chains_its_first(tmp_path: Path) -> None:
    """A user's RMSNorm (outputs y and rstd): each call's y is the next call's x, checked against the
    fp64 chain of its reference; its raw form (plain PyTorch) traces whole."""
    from tests.test_user_ops import RMSNORM

    (tmp_path / "my_ops.py").write_text(RMSNORM.format(name="user_rmsnorm"))
    out = tmp_path / "r"
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "regions",
                           "--op", "my_ops.py:user_rmsnorm", "--variants", "raw,custom_op", "--device", "cpu",
                           "--quick", "--no-pin", "--rounds", "3", "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.json")
    rows = [r for r in json.loads(path.read_text())["rows"] if r["metric"] == "cpu_us" and r["mode"] != "cudagraph"]
    assert {(r["variant"], r["mode"], r["length"]) for r in rows} == {
        (v, m, n) for v in ("raw", "custom_op") for m in ("eager", "compiled") for n in (1, 4, 16)}
    assert all(r["status"] == "ok" and r["op"] == "user_rmsnorm" for r in rows), [r["reason"] for r in rows]
    assert all(r["graph_breaks"] == 0 for r in rows if r["mode"] == "compiled")


def test_an_op_that_cannot_chain_exits_2_saying_why(tmp_path: Path) -> None:
    proc = _run("--ops", "mm", out=tmp_path)
    assert proc.returncode == 2
    assert ("mm's first output ((64, 32), float32) cannot be its next call's first input ((64, 128), float32)"
            in proc.stderr)
    assert not list(tmp_path.glob("*.json"))


def test_the_chain_rule_says_why_an_op_cannot_chain() -> None:
    from dbench.ops.declare import Op, contract_of
    from dbench.scenarios.regions import chain_rule

    def rowsum(x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1)

    def broken(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("no fake for you")

    assert chain_rule(contract_of(Op(name="same", forward=torch.neg, reference=torch.neg), "t.py:same@0")) is None
    assert "first output ((4,), float32) cannot be its next call's first input ((4, 32), float32)" in \
        chain_rule(contract_of(Op(name="rowsum", forward=rowsum, reference=rowsum), "t.py:rowsum@0"))
    assert "fake failed on its boundary inputs (ValueError: no fake for you)" in \
        chain_rule(contract_of(Op(name="broken", forward=torch.neg, reference=torch.neg, fake=broken), "t.py:broken@0"))
