"""Run-to-run tools: paired ratios, the speed probe, and analysis.compare on synthetic result files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dbench.analysis import compare
from dbench.bench.core import stats
from dbench.bench.core.probe import UNSTABLE, instability_note, probe_summary, reference_workload
from dbench.bench.core.rows import stat_row


def test_paired_ratios_cancel_a_slow_round() -> None:
    # Round 2 ran on a machine 1.6x slower: the ratio does not see it, the difference does.
    case, base = [12.0, 19.2, 12.0], [10.0, 16.0, 10.0]
    assert stats.paired_ratios(case, base).tolist() == pytest.approx([1.2, 1.2, 1.2])
    assert stats.paired_differences(case, base).tolist() == pytest.approx([2.0, 3.2, 2.0])


@pytest.mark.parametrize(("case", "base", "message"), [([1.0], [1.0, 2.0], "equal rounds"),
                                                        ([1.0, 2.0], [1.0, 0.0], "positive baseline")])
def test_paired_ratios_reject_bad_input(case: list[float], base: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stats.paired_ratios(case, base)


def test_stat_row_has_ratio_fields_only_with_a_baseline() -> None:
    key = {"op": "o", "variant": "v", "mode": "inference"}
    paired = stat_row(key, metric="cpu_us", unit="us", timer="t", samples=[2.0, 3.0, 6.0],
                      base_samples=[1.0, 1.0, 2.0], baseline="o/raw/inference")
    assert paired["ratio_median"] == pytest.approx(3.0)  # ratios 2, 3, 3
    assert paired["delta_median"] == pytest.approx(2.0)  # differences 1, 2, 4
    alone = stat_row(key, metric="cpu_us", unit="us", timer="t", samples=[2.0, 3.0])
    assert alone["ratio_median"] is None and alone["delta_median"] is None


def test_probe_summary_and_instability_note() -> None:
    steady = probe_summary([4.0] * 20)
    assert steady["spread"] == 0.0 and steady["rel_iqr"] == 0.0 and instability_note(steady) is None
    # Half the rounds in a state 1.5x slower, as seen on a shared VM.
    bimodal = probe_summary([4.0] * 10 + [6.0] * 10)
    assert bimodal["median"] == pytest.approx(5.0) and bimodal["spread"] == pytest.approx(0.5)
    note = instability_note(bimodal)
    assert note is not None and "50%" in note and bimodal["spread"] > UNSTABLE
    assert probe_summary([])["median"] is None and instability_note(probe_summary([])) is None


def test_reference_workload_is_deterministic() -> None:
    assert reference_workload() == reference_workload()


def _result(path: Path, medians: dict[str, float], ratios: dict[str, float], probe: float | None) -> Path:
    rows: list[dict[str, Any]] = []
    for variant, median in medians.items():
        rows.append({"scenario": "boundary", "op": "muladd", "variant": variant, "mode": "inference",
                     "device": "cpu", "driver": "python", "metric": "cpu_us", "unit": "us", "timer": "t",
                     "status": "ok", "median": median, "q1": median, "q3": median, "ci_low": median,
                     "ci_high": median, "samples": [median], "ratio_median": ratios.get(variant)})
    doc: dict[str, Any] = {"env": {}, "rows": rows}
    if probe is not None:
        doc["speed_probe"] = {"median": probe}
    path.write_text(json.dumps(doc))
    return path


def test_compare_medians_and_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Run B on a machine 30% slower: every median moves 30%, the ratios to raw do not.
    a = _result(tmp_path / "a.json", {"raw": 10.0, "custom_op": 30.0}, {"custom_op": 3.0}, probe=4.0)
    b = _result(tmp_path / "b.json", {"raw": 13.0, "custom_op": 39.0}, {"custom_op": 3.03}, probe=5.2)
    assert compare.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "speed probe: A 4.000 µs, B 5.200 µs (B/A 1.300)" in out
    assert "rows over limit 2" in out
    assert compare.main([str(a), str(b), "--value", "ratio_median"]) == 0
    out = capsys.readouterr().out
    assert "rows 1, median spread 1.00%" in out


def test_compare_rejects_a_missing_file(tmp_path: Path) -> None:
    a = _result(tmp_path / "a.json", {"raw": 1.0}, {}, probe=None)
    assert compare.main([str(a), str(tmp_path / "missing.json")]) == 2


def test_spreads_is_symmetric_and_exact() -> None:
    from dbench.analysis.load import rows_frame

    frame = lambda m: rows_frame({"env": {}, "rows": [{"op": "o", "variant": "v", "mode": "inference",  # noqa: E731
                                                      "metric": "cpu_us", "driver": "python", "status": "ok",
                                                      "median": m}]})
    ab, ba = compare.spreads(frame(9.0), frame(11.0)), compare.spreads(frame(11.0), frame(9.0))
    assert ab["spread"].iloc[0] == ba["spread"].iloc[0] == pytest.approx(0.2)
    assert np.isfinite(ab["spread"]).all()
