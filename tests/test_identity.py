"""Row identity (bench/core/identity.py) and scenario axes: two sizes of one op/variant/mode never collide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from dbench.bench.core.identity import case_identity, case_label, check_unique_labels, row_identity
from dbench.bench.io.results import mark_gpu_bound
from dbench.bench.children.shard import merge_results
from dbench.scenarios.base import Axis, Selection, axis_points, case_grid, make_call


def _row(size: int, median: float, metric: str = "cpu_us", device: str = "cpu", **extra: Any) -> dict[str, Any]:
    return {"scenario": "roofline", "op": "muladd", "variant": "raw", "mode": "inference", "shape": [size],
            "dtype": "float32", "device": device, "driver": "python", "size": size, "axes": ["size"],
            "metric": metric, "unit": "us", "timer": "t", "status": "ok", "reason": None, "median": median,
            "q1": median, "q3": median, "ci_low": median, "ci_high": median, "samples": [median], **extra}


def test_identity_separates_axes_shapes_and_dtypes_but_not_the_gpu_index() -> None:
    small, large = _row(1024, 1.0), _row(4096, 2.0)
    assert case_identity(small) != case_identity(large)
    assert case_identity(small) != case_identity({**small, "dtype": "float64"})
    assert case_identity(small) != case_identity({**small, "shape": [32, 32]})
    assert case_identity({**small, "device": "cuda:0"}) == case_identity({**small, "device": "cuda:1"})
    assert case_identity({**small, "size": 1024.0}) == case_identity(small), "pandas floats read as the same size"
    assert row_identity(small) != row_identity({**small, "metric": "gpu_us"})
    # A schema-1 row (no axes field, driver missing) is an axis-free row of the python driver.
    v1 = {k: v for k, v in small.items() if k not in ("axes", "size", "driver")}
    assert case_identity(v1) == case_identity({**v1, "axes": [], "driver": "python"})


def test_labels_name_the_axes_and_must_be_unique() -> None:
    assert case_label(_row(1024, 1.0)) == "muladd/raw/inference[size=1024]"
    assert case_label({"op": "noop", "variant": "cpp", "mode": "fwd_bwd", "axes": []}) == "noop/cpp/fwd_bwd"
    one = {"scenario": "s", "op": "noop", "variant": "raw", "mode": "inference", "shape": [4], "axes": []}
    with pytest.raises(ValueError, match="declare what tells them apart as a scenario axis"):
        check_unique_labels([one, {**one, "shape": [8]}])
    with pytest.raises(ValueError, match="appears twice"):
        check_unique_labels([one, dict(one)])


def test_axis_product_with_skips_and_pairing_at_the_same_point() -> None:
    axes = (Axis("size", (8, 64)), Axis("cache", ("warm", "cold")))
    sel = Selection(ops=("muladd",), variants=("raw", "cpp"), device="cpu", dtype=torch.float32)
    assert axis_points(axes, sel) == [{"size": 8, "cache": "warm"}, {"size": 8, "cache": "cold"},
                                      {"size": 64, "cache": "warm"}, {"size": 64, "cache": "cold"}]
    assert axis_points((), sel) == [{}]
    by_op = (Axis("size", lambda s, op: (4,) if op == "mm" else (8, 64)),)  # values from the selection and op
    assert axis_points(by_op, sel, "mm") == [{"size": 4}] and len(axis_points(by_op, sel, "muladd")) == 2

    def fill(case: Any, variant: Any, contract: Any, mode: str, spec: Any) -> None:
        case.call = make_call(variant, contract, mode, spec)

    cases = case_grid(sel, "toy", ("inference",), lambda op, v, mode: ("raw", mode) if v != "raw" else None, fill,
                      axes=axes, shape=lambda contract, point: (point["size"],),
                      skip=lambda contract, v, mode, point: "cold needs a GPU" if point["cache"] == "cold" else None)
    assert len(cases) == 2 * 4
    by_label = {c.label: c for c in cases}
    cpp = by_label["muladd/cpp/inference[size=64,cache=warm]"]
    assert cpp.baseline == "muladd/raw/inference[size=64,cache=warm]" and cpp.baseline in by_label
    assert cpp.key["shape"] == [64] and cpp.key["axes"] == ["size", "cache"] and cpp.runnable
    assert by_label["muladd/cpp/inference[size=8,cache=cold]"].na_reason == "cold needs a GPU"
    assert cpp.call is not None and cpp.call().shape == (64,)


def test_several_shapes_are_an_axis_the_labels_name_and_the_identity_does_not_repeat() -> None:
    """--shape twice: each case's shape is its own, its label says which (8x64) and pairs it with the
    floor of the same shape; its identity is what one shape alone gives (a baseline of a one-shape run
    still pairs with it)."""
    def fill(case: Any, variant: Any, contract: Any, mode: str, spec: Any) -> None:
        case.call = make_call(variant, contract, mode, spec)

    sel = Selection(ops=("muladd",), variants=("raw", "define_impl"), device="cpu", shapes=((8, 64), (4, 32)))
    cases = case_grid(sel, "boundary", ("inference",), lambda op, v, mode: ("raw", mode) if v != "raw" else None, fill)
    by_label = {c.label: c for c in cases}
    assert set(by_label) == {"muladd/raw/inference[shape=8x64]", "muladd/define_impl/inference[shape=8x64]",
                             "muladd/raw/inference[shape=4x32]", "muladd/define_impl/inference[shape=4x32]"}
    wide = by_label["muladd/define_impl/inference[shape=8x64]"]
    assert wide.baseline == "muladd/raw/inference[shape=8x64]" and wide.call is not None
    assert wide.call().shape == (8, 64) and wide.key["shape"] == [8, 64] and wide.key["axes"] == ["shape"]
    (alone,) = [c for c in case_grid(Selection(ops=("muladd",), variants=("define_impl",), device="cpu",
                                               shapes=((8, 64),)), "boundary", ("inference",),
                                     lambda op, v, mode: None, fill)]
    assert alone.label == "muladd/define_impl/inference" and alone.key["axes"] == []
    assert case_identity(alone.key) == case_identity(wide.key)
    assert case_identity(by_label["muladd/define_impl/inference[shape=4x32]"].key) != case_identity(wide.key)


def test_gpu_rows_mark_the_cpu_row_of_their_own_size() -> None:
    rows = [_row(1024, 5.0), _row(4096, 5.0), _row(1024, 1.0, "gpu_us"), _row(4096, 9.0, "gpu_us")]
    mark_gpu_bound(rows)
    assert [r.get("gpu_bound") for r in rows if r["metric"] == "cpu_us"] == [False, True]


def test_merge_keeps_two_sizes_apart_and_folds_duplicate_baselines() -> None:
    doc = lambda rows: {"scenario": "roofline", "status": "complete", "config": {}, "env": {}, "rows": rows}  # noqa: E731
    merged = merge_results([doc([_row(1024, 1.0), _row(4096, 2.0)]), doc([_row(1024, 1.1)])])
    assert sorted(r["size"] for r in merged["rows"]) == [1024, 4096]
    assert [r["size"] for r in merged["duplicate_baseline_rows"]] == [1024]


def test_compare_pairs_each_size_with_its_own_partner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.analysis import compare

    def write(name: str, rows: list[dict[str, Any]]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"scenario": "roofline", "config": {}, "env": {"device": "cpu"}, "rows": rows}))
        return path

    a = write("a.json", [_row(1024, 1.0), _row(4096, 4.0)])
    b = write("b.json", [_row(4096, 4.0), _row(1024, 1.0)])
    assert compare.main([str(a), str(b), "--max-spread", "0"]) == 0  # swapped order, same values
    c = write("c.json", [_row(1024, 4.0), _row(4096, 1.0)])
    assert compare.main([str(a), str(c)]) == 1
    assert "rows 2," in capsys.readouterr().out


def test_tables_keep_two_sizes_of_one_case_apart() -> None:
    import pandas as pd

    from dbench.analysis.table import tables, title

    rows = [_row(1024, 1.0), _row(4096, 2.0)]
    found = tables(pd.DataFrame(rows))
    assert [t.point for t in found] == ["size=1024, shape [1024], float32", "size=4096, shape [4096], float32"]
    assert [t.data["median"].tolist() for t in found] == [[1.0], [2.0]]
    assert "[size=4096" in title(found[1], {}) and tables(pd.DataFrame(rows[:1]))[0].point == ""
