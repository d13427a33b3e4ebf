"""The tables as data (analysis.table) and the console sink: values, order, flags, whole names."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from dbench.analysis.table import GPU_BOUND_GLYPH, NOISY_GLYPH, cell_grid, cell_text, print_tables, table_data, tables
from dbench.bench.io.results import load_result

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
SMALL = GOLDEN / "boundary-small-a.json"
H200 = REPO_ROOT / "results" / "h200" / "boundary-cuda0-20261129T094430Z.json.gz"


@pytest.fixture(scope="module")
def small() -> dict:
    return load_result(SMALL)


def _rows(doc: dict) -> pd.DataFrame:
    return pd.DataFrame(doc["rows"])


def test_table_data_holds_the_rows_numbers_in_declaration_order(small: dict) -> None:
    frame = _rows(small)
    table = table_data(frame, "muladd")
    assert table is not None and table.axis == "mode"
    assert table.variants == ["raw", "define_impl", "custom_op_autograd", "function_raw", "cpp_autograd", "triton_op"]
    assert table.columns == ("inference", "fwd_requires_grad", "fwd_bwd")
    source = frame[(frame["op"] == "muladd") & (frame["metric"] == "cpu_us") & (frame["driver"] == "python")]
    merged = table.data.merge(source, on=["variant", "mode"], suffixes=("", "_src"))
    assert len(merged) == len(source) == len(table.data)
    for col in ("median", "ci_low", "ci_high", "delta_median", "ratio_median", "ratio_ci_low", "ratio_ci_high"):
        pd.testing.assert_series_equal(merged[col], merged[f"{col}_src"], check_names=False)
    floors = table.data[table.data["floor"]][["variant", "mode"]].values.tolist()
    assert floors == [["raw", "inference"], ["function_raw", "fwd_requires_grad"], ["function_raw", "fwd_bwd"]]
    na = table.data[table.data["status"] == "n/a"]
    assert set(na["variant"]) == {"raw", "define_impl"} and na["reason"].str.len().gt(0).all()


def test_gpu_table_carries_kernels_per_call_and_cpp_table_its_own_order(small: dict) -> None:
    frame = _rows(small)
    gpu = table_data(frame, "muladd", "gpu_us")
    assert gpu is not None and gpu.timer == "cupti"
    fwd_bwd = gpu.data[(gpu.data["variant"] == "cpp_autograd") & (gpu.data["mode"] == "fwd_bwd")].iloc[0]
    assert fwd_bwd["kernels_per_call"] == pytest.approx(3.0)
    cpp = table_data(frame, "muladd", "cpu_us", "cpp")
    assert cpp is not None and cpp.variants == ["cpp_direct", "cpp_typed", "cpp_autograd_typed"]
    assert table_data(frame, "noop") is None
    assert [(t.op, t.driver, t.metric) for t in tables(frame)] == [
        ("muladd", "python", "cpu_us"), ("muladd", "python", "gpu_us"), ("muladd", "cpp", "cpu_us"),
        ("l2norm", "python", "cpu_us"), ("l2norm", "python", "gpu_us"), ("l2norm", "cpp", "cpu_us")]


def test_cells_get_their_glyphs_only_when_rendered(small: dict) -> None:
    row = pd.Series({"status": "ok", "median": 12.345, "delta_median": 3.2, "gpu_bound": True, "noisy": True})
    assert cell_text(row, "cpu_us") == f"12.35 (+3.20) {GPU_BOUND_GLYPH} {NOISY_GLYPH}"
    plain = pd.Series({**row, "gpu_bound": False, "noisy": False, "delta_median": None})
    assert cell_text(plain, "cpu_us") == "12.35"
    assert cell_text(pd.Series({**row, "status": "n/a"}), "cpu_us") == "n/a"
    assert cell_text(pd.Series({**row, "kernels_per_call": 3.0}), "gpu_us") == "12.35 ×3"
    table = table_data(_rows(small), "muladd")
    assert table is not None
    data = table.data.set_index(["variant", "mode"])
    assert not data[["median", "ratio_median"]].map(lambda v: isinstance(v, str)).any().any()  # data, not text
    grid = cell_grid(table)
    assert grid.loc["define_impl", "fwd_bwd"] == "n/a"
    median = data.loc[("custom_op_autograd", "fwd_bwd"), "median"]
    assert grid.loc["custom_op_autograd", "fwd_bwd"].startswith(f"{median:.2f}")


def test_timer_columns_when_one_case_is_timed_several_ways() -> None:
    rows = [{"op": "copy", "variant": v, "mode": "gpu", "driver": "python", "metric": "gpu_us", "timer": t,
             "status": "ok", "reason": None, "median": m, "baseline": None}
            for v, m0 in (("4MiB", 4.0), ("64MiB", 65.0)) for t, m in (("cupti", m0), ("events", m0 + 1))]
    table = table_data(pd.DataFrame(rows), "copy", "gpu_us")
    assert table is not None and table.axis == "timer" and table.columns == ("cupti", "events")
    assert cell_grid(table).loc["64MiB", "events"] == "66.00"


def _variant_names(doc: dict) -> set[str]:
    return {r["variant"] for r in doc["rows"]}


def test_non_terminal_console_keeps_every_name_whole() -> None:
    doc = load_result(H200)
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, color_system=None)
    assert not console.is_terminal
    print_tables(_rows(doc), doc["env"], console, note="a note")
    text = buffer.getvalue()
    assert "…" not in text
    names = {line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")}
    assert _variant_names(doc) <= names
    assert console.width == 80  # restored for what the caller prints next


def test_narrow_terminal_squeezes_numbers_not_names(small: dict) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=60, force_terminal=True, color_system=None)
    print_tables(_rows(small), small["env"], console)
    names = {line.split("│")[1].strip() for line in buffer.getvalue().splitlines() if line.startswith("│")}
    assert _variant_names(small) <= names


def test_redirected_output_keeps_every_name_whole(tmp_path: Path) -> None:
    """What a nightly log gets: stdout redirected to a file, the default Console."""
    script = ("import sys, pandas as pd; sys.path.insert(0, sys.argv[1]);"
              "from dbench.analysis.table import print_tables; from dbench.bench.io.results import load_result;"
              "d = load_result(sys.argv[2]); print_tables(pd.DataFrame(d['rows']), d['env'])")
    log = tmp_path / "log.txt"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", script, str(REPO_ROOT), str(H200)], stdout=out, check=True,
                       env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, cwd=tmp_path)
    text = log.read_text()
    assert "…" not in text and "custom_op_autograd " in text
    names = {line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")}
    assert _variant_names(load_result(H200)) <= names
    assert any("n/a" in line and "define_impl" in line for line in text.splitlines())
