"""Figures (analysis.figures): each draws the series of its data, and the files get written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure

from dbench.analysis import figures
from dbench.analysis.load import load_results
from dbench.bench.io.results import load_result

GOLDEN = Path(__file__).resolve().parent / "golden"
RUN_A, RUN_B = GOLDEN / "boundary-small-a.json", GOLDEN / "boundary-small-b.json"
COMPILE = GOLDEN / "compile-small.json"


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return load_results([RUN_A])


def _cpu(frame: pd.DataFrame, op: str, mode: str, metric: str = "cpu_us") -> pd.DataFrame:
    rows = frame[(frame["op"] == op) & (frame["mode"] == mode) & (frame["metric"] == metric)
                 & (frame["driver"] == "python") & (frame["status"] == "ok")]
    return rows.set_index("variant")


def _bars(ax: matplotlib.axes.Axes) -> list[BarContainer]:
    return [c for c in ax.containers if isinstance(c, BarContainer)]


def _bar_values(ax: matplotlib.axes.Axes, k: int = 0) -> dict[str, float]:
    """Bar width by the y tick label at the bar's centre."""
    labels = {round(t, 6): lbl.get_text() for t, lbl in zip(ax.get_yticks(), ax.get_yticklabels())}
    out = {}
    for bar in _bars(ax)[k]:
        y = round(bar.get_y() + bar.get_height() / 2, 6)
        name = labels.get(y) or min(labels.items(), key=lambda kv: abs(kv[0] - y))[1]
        out[name] = bar.get_width()
    return out


def _dashed(ax: matplotlib.axes.Axes) -> list[matplotlib.lines.Line2D]:
    return [line for line in ax.get_lines() if line.get_linestyle() == "--"]


def test_boundary_chart_one_bar_per_variant_sorted_with_ci_and_floor(frame: pd.DataFrame) -> None:
    fig = figures.boundary_chart(frame, "muladd")
    assert isinstance(fig, Figure) and fig.canvas.get_default_filetype() == "png"
    axes = fig.get_axes()
    assert [ax.get_title(loc="left").split()[0] for ax in axes] == ["inference", "fwd_requires_grad", "fwd_bwd"]
    for ax in axes:
        mode = ax.get_title(loc="left").split()[0]
        rows = _cpu(frame, "muladd", mode)
        (bars,) = _bars(ax)
        assert len(bars) == len(rows)
        drawn = _bar_values(ax)
        assert drawn == pytest.approx(rows["median"].to_dict())
        widths = [b.get_width() for b in bars]
        assert widths == sorted(widths, reverse=True)  # cheapest at the top (last bar drawn highest)
        errorbar = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))
        segments = errorbar.lines[2][0].get_segments()
        ends = sorted((round(s[0][0], 6), round(s[1][0], 6)) for s in segments)
        assert ends == sorted((round(lo, 6), round(hi, 6)) for lo, hi in zip(rows["ci_low"], rows["ci_high"]))
        floor = "raw" if mode == "inference" else "function_raw"
        floor_bar = next(b for b, name in zip(bars, _bar_values(ax)) if name == floor)
        assert floor_bar.get_facecolor() == matplotlib.colors.to_rgba(figures.FLOOR)
        assert sum(b.get_facecolor() == matplotlib.colors.to_rgba(figures.FLOOR) for b in bars) == 1
        assert [line.get_xdata()[0] for line in _dashed(ax)] == [pytest.approx(rows.loc[floor, "median"])]


def test_ratio_chart_draws_ratios_with_the_floor_at_one(frame: pd.DataFrame) -> None:
    fig = figures.ratio_chart(frame, "l2norm")
    ax = fig.get_axes()[0]
    rows = _cpu(frame, "l2norm", "inference")
    expected = rows["ratio_median"].fillna(1.0).to_dict()
    assert _bar_values(ax) == pytest.approx(expected) and expected["raw"] == 1.0
    assert [line.get_xdata()[0] for line in _dashed(ax)] == [1.0]


def test_launch_chart_one_cpu_and_one_gpu_bar_per_variant(frame: pd.DataFrame) -> None:
    fig = figures.launch_chart(frame, "muladd")
    axes = fig.get_axes()
    assert len(axes) == 3
    for ax in axes:
        mode = ax.get_title(loc="left").split()[0]
        cpu, gpu = _cpu(frame, "muladd", mode), _cpu(frame, "muladd", mode, "gpu_us")
        assert len(_bars(ax)) == 2 and all(len(b) == len(cpu) for b in _bars(ax))
        assert _bar_values(ax, 0) == pytest.approx(cpu["median"].to_dict(), rel=1e-3)
        assert ax.get_xscale() == "log"
        assert _bar_values(ax, 1) == pytest.approx(gpu["median"].to_dict(), rel=1e-3)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["CPU wall-clock per call",
                                                                  "GPU kernel time per call (cupti)"]


def test_compile_chart_one_bar_per_mode_and_n_a_where_it_cannot_compile() -> None:
    frame = load_results([COMPILE])
    fig = figures.compile_chart(frame, "muladd")
    (ax,) = fig.get_axes()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["eager", "compiled", "cudagraph"]
    bars = _bars(ax)
    assert len(bars) == 3 and all(len(b) == 4 for b in bars)
    compiled = _cpu(frame, "muladd", "compiled")
    drawn = [b.get_width() for b in bars[1]]
    assert sum(np.isnan(drawn)) == 1 and sorted(w for w in drawn if not np.isnan(w)) == pytest.approx(
        sorted(compiled["median"]))
    assert any(t.get_text() == "n/a" for t in ax.texts)


def test_history_chart_one_line_per_variant_one_point_per_run() -> None:
    runs = load_results([RUN_B, RUN_A])
    fig = figures.history_chart(runs, "muladd", "inference")
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    variants = list(_cpu(runs[runs["source"] == str(RUN_A)], "muladd", "inference").index)
    assert [ax.get_title(loc="left") for ax in axes] == variants
    times = sorted(pd.to_datetime(runs["env_time"].unique()))
    for ax in axes:
        (errorbar,) = ax.containers
        line = errorbar.lines[0]
        label = ax.get_title(loc="left")
        expected = [float(_cpu(runs[runs["env_time"] == t.isoformat()], "muladd", "inference").loc[label, "median"])
                    for t in times]
        assert list(line.get_ydata()) == pytest.approx(expected)
        assert len(line.get_xdata()) == 2
    ratio = figures.history_chart(runs, "muladd", "inference", value="ratio_median")
    assert "raw" not in [ax.get_title(loc="left") for ax in ratio.get_axes()]  # the floor has no ratio to itself


def test_scenario_figures_writes_the_files_of_the_scenario(tmp_path: Path) -> None:
    written = figures.scenario_figures(load_result(RUN_A), tmp_path, "run")
    assert sorted(p.name for p in written) == sorted(
        f"run-{op}-{kind}.png" for op in ("muladd", "l2norm") for kind in ("cpu", "ratio", "launch"))
    assert all(p.stat().st_size > 10_000 and p.read_bytes()[:4] == b"\x89PNG" for p in written)
    made = figures.scenario_figures(load_results([COMPILE]), tmp_path, "c")
    assert [p.name for p in made] == ["c-muladd-compile.png"]
    cpu_only = {**load_result(RUN_A), "rows": [r for r in load_result(RUN_A)["rows"] if r["metric"] == "cpu_us"]}
    assert not any("launch" in p.name for p in figures.scenario_figures(cpu_only, tmp_path / "cpu", "cpu"))
    other = {**load_result(RUN_A), "scenario": "timer_validation"}
    assert figures.scenario_figures(other, tmp_path / "none", "t") == []


def test_cli_writes_per_run_and_history_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert figures.main([str(RUN_A), str(RUN_B), "--out", str(tmp_path), "--kinds", "cpu,history"]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([f"{RUN_A.stem}-muladd-cpu.png", f"{RUN_A.stem}-l2norm-cpu.png",
                            f"{RUN_B.stem}-muladd-cpu.png", f"{RUN_B.stem}-l2norm-cpu.png",
                            "history-muladd-inference.png", "history-muladd-inference-ratio.png",
                            "history-l2norm-inference.png", "history-l2norm-inference-ratio.png"])
    assert len(capsys.readouterr().out.splitlines()) == len(names)
    for kinds, message in (("bogus", "unknown kinds ['bogus']"), (",", "expected one or more comma-separated names")):
        try:
            code = figures.main([str(RUN_A), "--out", str(tmp_path / "k"), "--kinds", kinds])
        except SystemExit as exc:  # an empty list is refused at parse time (bench.harness.cli.name_list)
            code = exc.code
        assert code == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "k").exists()  # refused before the output folder was made


def _only(variants: set[str]) -> dict:
    """RUN_A with the rows of these variants alone."""
    doc = load_result(RUN_A)
    return {**doc, "rows": [r for r in doc["rows"] if r["variant"] in variants]}


def test_a_ratio_chart_without_its_floor_is_one_note_not_a_numpy_error(tmp_path: Path) -> None:
    """--variants raw : no variant timed beside its floor, so no ratio to draw."""
    doc = _only({"raw", "define_impl"})  # raw: inference's floor, beside define_impl
    assert sorted(p.name for p in figures.scenario_figures(doc, tmp_path, "r", kinds=("ratio",))) == \
        ["r-l2norm-ratio.png", "r-muladd-ratio.png"]
    alone = _only({"raw"})
    with pytest.raises(ValueError, match="no ratio to the floor for op 'muladd': it needs a variant and its floor"):
        figures.ratio_chart(figures.result_frame(alone), "muladd")
    notes: list[str] = []
    assert figures.scenario_figures(alone, tmp_path / "alone", "a", on_skip=notes.append) != []  # the cpu charts
    assert sorted(notes) == [f"a-{op}-ratio.png: not drawn: no ratio to the floor for op {op!r}: it needs a "
                             "variant and its floor timed in one run" for op in ("l2norm", "muladd")]


def test_a_figure_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk after the output folder was checked: the figures command ends with one line."""
    import contextlib
    import errno
    import os

    from dbench.analysis import outputs

    @contextlib.contextmanager
    def full(path: object):  # bench.io.atomic.atomic_path on a full disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        yield  # pragma: no cover

    monkeypatch.setattr(outputs, "atomic_path", full)
    assert figures.main([str(RUN_A), "--out", str(tmp_path), "--kinds", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m dbench.analysis.figures: error: cannot write "), err
    assert "No space left on device" in err, err
    assert err.count("\n") == 1


RUN = ["--scenario", "boundary", "--device", "cpu", "--ops", "noop", "--variants", "raw", "--modes", "inference",
       "--rounds", "2", "--block-ms", "0.2", "--no-cpp", "--no-pin", "--plot"]


def test_run_plot_with_only_the_floor_notes_the_ratio_chart(run_main: Any, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """run.py --plot --variants raw (once: a traceback from numpy): the cost chart, a note for the ratio."""
    assert run_main.main([*RUN, "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "not drawn: no ratio to the floor for op 'noop'" in captured.out
    assert [p.name.split("-")[-1] for p in tmp_path.glob("*.png")] == ["cpu.png"]


def test_run_plot_on_a_full_disk_is_one_line_and_exit_1(run_main: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The result is written; its figure cannot be: one line on stderr, exit 1 (an output of the run failed)."""
    import contextlib
    import errno
    import os

    from dbench.analysis import outputs

    @contextlib.contextmanager
    def full(path: object):  # bench.io.atomic.atomic_path on a full disk; the result's writes are not touched
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        yield  # pragma: no cover

    monkeypatch.setattr(outputs, "atomic_path", full)
    assert run_main.main([*RUN, "--variants", "raw,define_impl", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]  # (the rest: progress)
    assert len(errors) == 1 and errors[0].startswith(f"run.py: error: cannot write {tmp_path}"), err
    assert errors[0].endswith(".png: No space left on device") and "Traceback" not in err, err
    (result,) = tmp_path.glob("*.json")
    assert load_result(result)["status"] == "complete" and not list(tmp_path.glob("*.png"))
