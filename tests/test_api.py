"""dbench.run_scenario: options as Python values, checked before any work; the result from memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

import dbench


def _refusing(real: Callable[..., Any], during: dict[str, bool]) -> Callable[..., Any]:
    """`real`, refused while during["run"]: a module that imports it in the meantime keeps a working copy."""
    def read(*args: Any, **kwargs: Any) -> Any:
        if during["run"]:
            raise AssertionError("the library read a result back from disk")
        return real(*args, **kwargs)
    return read


def test_a_declared_op_runs_in_process_and_its_result_comes_from_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalogue: None) -> None:
    import dbench.bench.io.document as document
    import dbench.bench.io.results as results

    during = {"run": True}
    monkeypatch.setattr(document, "read_result", _refusing(document.read_result, during))
    monkeypatch.setattr(results, "load_result", _refusing(results.load_result, during))
    twice = dbench.Op(name="api_twice", forward=lambda x: x * 2, reference=lambda x: x * 2)
    result = dbench.run_scenario("boundary", [twice], device="cpu", out=tmp_path, quick=True, rounds=2,
                                 variants=["raw", "define_impl"], modes=("inference",), no_cpp=True)
    during["run"] = False
    assert result.status == 0 and result.path is not None and result.path.parent == tmp_path
    rows = [r for r in result.document["rows"] if r["metric"] == "cpu_us"]
    assert {(r["op"], r["variant"], r["mode"], r["status"]) for r in rows} == {
        ("api_twice", "raw", "inference", "ok"), ("api_twice", "define_impl", "inference", "ok")}
    assert result.document["config"]["rounds_done"] == 2
    on_disk = json.loads(result.path.read_text())  # what it wrote is what it returned
    assert on_disk["rows"] == result.document["rows"] and on_disk["status"] == result.document["status"]
    assert set(result.frame()["variant"]) == {"raw", "define_impl"}


def test_several_shapes_in_one_run_through_the_api(tmp_path: Path, catalogue: None) -> None:
    """shape=[(8, 64), (4, 32)]: every case at both shapes, one table each; shape=(8, 64) is one shape."""
    import pandas as pd

    from dbench.analysis.table import tables

    twice = dbench.Op(name="api_shapes", forward=lambda x: x * 2, reference=lambda x: x * 2)
    result = dbench.run_scenario("boundary", [twice], device="cpu", out=tmp_path, quick=True, rounds=2,
                                 variants=["raw", "define_impl"], modes=("inference",), shape=[(8, 64), (4, 32)])
    rows = [r for r in result.document["rows"] if r["metric"] == "cpu_us"]
    assert sorted((r["variant"], tuple(r["shape"]), r["status"]) for r in rows) == [
        ("define_impl", (4, 32), "ok"), ("define_impl", (8, 64), "ok"), ("raw", (4, 32), "ok"), ("raw", (8, 64), "ok")]
    assert [t.point for t in tables(pd.DataFrame(rows))] == ["shape [8, 64], float32", "shape [4, 32], float32"]
    one = dbench.run_scenario("boundary", [twice], device="cpu", out=tmp_path, quick=True, rounds=2,
                              variants=["raw"], modes=("inference",), shape=(8, 64))
    assert [r["shape"] for r in one.document["rows"]] == [[8, 64]]


def test_axis_keeps_only_the_values_asked_for(tmp_path: Path) -> None:
    """--axis size=256,65536 (axis={"size": ...} from Python): the launch scenario times those sizes only."""
    result = dbench.run_scenario("launch", ["muladd"], device="cpu", out=tmp_path, quick=True, rounds=2,
                                 variants=["raw", "define_impl"], axis={"size": (256, 65536)})
    assert result.status == 0
    assert {r["size"] for r in result.document["rows"] if r["metric"] == "cpu_us"} == {256, 65536}


@pytest.mark.parametrize("options, said", [
    ({"rounds": 0}, "argument --rounds"),
    ({"rounds": "many"}, "argument --rounds"),
    ({"order": "random"}, "argument --order: invalid choice 'random'"),
    ({"quick": "yes"}, "argument --quick: True or False"),
    ({"ab": ("env:",)}, "argument --ab: two values"),
    ({"variants": ["raw", "no_such_variant"]}, "no_such_variant"),
    ({"roundz": 3}, "unknown option 'roundz'"),
    ({"pairs": 3}, "--pairs"),
])
def test_a_bad_option_raises_before_any_work(tmp_path: Path, options: dict[str, Any], said: str) -> None:
    with pytest.raises(dbench.UsageError, match=said.replace("(", r"\(")):
        dbench.run_scenario("boundary", ["noop"], device="cpu", out=tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()  # nothing reserved, nothing made


def test_a_sequence_and_its_comma_text_mean_the_same() -> None:
    from dbench.bench.harness import cli
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    def given(**fields: Any) -> Any:
        return cli.from_fields({"scenario": "boundary", **fields}, tuple(DECLARATIONS), OP_NAMES, VARIANT_NAMES,
                               declarations=DECLARATIONS)

    assert given(variants=["raw", "custom_op"]).variants == given(variants="raw,custom_op").variants
    assert given(rounds=7).rounds == 7 and given(block_ms=2.5).block_ms == given(block_ms="2.5").block_ms
    parsed = cli.parse(["--scenario", "boundary", "--ab", "env:", "env:X=1", "--rounds", "7"], tuple(DECLARATIONS),
                       OP_NAMES, VARIANT_NAMES, declarations=DECLARATIONS)
    fields = given(ab=("env:", "env:X=1"), rounds=7)
    assert vars(fields) == vars(parsed)  # the same checked options as the command line's


def _blockwise_absmax(x: Any) -> Any:  # needs (rows, 64): a 1-D input cannot be blocked
    return x / x.abs().amax(dim=1, keepdim=True).clamp_min(1e-12)


@pytest.mark.parametrize("sized, shapes", [
    (None, {256: [4, 64], 4096: [64, 64]}),  # the declared shape's trailing block kept, the rows scaled
    (lambda n: (max(1, n // 128), 128), {1: [1, 128], 16: [1, 128], 256: [2, 128], 4096: [32, 128]}),
])
def test_launch_sizes_a_user_op_from_its_own_shape_family(tmp_path: Path, catalogue: None, sized: Any,
                                                         shapes: dict[int, list[int]]) -> None:
    op = dbench.Op(name="blockwise_absmax", forward=_blockwise_absmax, reference=_blockwise_absmax,
                   native=_blockwise_absmax, shape=(4, 64), sized=sized)
    result = dbench.run_scenario("launch", [op], device="cpu", out=tmp_path, quick=True, rounds=2,
                                 variants=["raw", "custom_op"], time_budget=30)
    rows = [r for r in result.document["rows"] if r["metric"] == "cpu_us" and r["variant"] == "raw"]
    got = {r["size"]: (r["status"], r["shape"]) for r in rows}
    for size, shape in shapes.items():
        assert got[size] == ("ok", shape), (size, got[size])
    if sized is None:  # sizes below one (64,) block are n/a, said why; never a 1-D shape
        small = [r for r in rows if r["size"] < 64]
        assert small and all(r["status"] == "n/a" and "fewer than one (64,) block" in r["reason"] for r in small)
    assert all(len(r["shape"]) == 2 for r in rows)
