"""Change points over nightly results (analysis.history) on synthetic histories."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ruptures", reason="dbench.analysis.history needs ruptures (requirements.txt)")

from dbench.analysis import history
from test_gate import make_doc, make_row, write

FLAT, DRIFTING = 20, 10


def nightly(rng: np.random.Generator, nights: int = FLAT + DRIFTING) -> list[dict[str, Any]]:
    """Nights of three rows: `cpp` steps up 5 % on night 20 (a new torch), `custom_op` drifts +1 % a
    night from night 20 on, `raw`'s GPU time stays flat; σ 0.5 % a night, 3 processes a night."""
    docs = []
    start = dt.datetime(2026, 11, 1, 2, tzinfo=dt.timezone.utc)
    for i in range(nights):
        step = 1.05 if i >= FLAT else 1.0
        drift = 1.01 ** max(0, i - FLAT + 1)
        rows = [
            make_row("muladd", "cpp", absolute=[8.0] * 3, ratio=list(1.3 * step * np.exp(rng.normal(0, 0.005, 3)))),
            make_row("muladd", "custom_op", absolute=[18.0] * 3,
                     ratio=list(3.0 * drift * np.exp(rng.normal(0, 0.005, 3)))),
            make_row("muladd", "raw", metric="gpu_us", absolute=list(0.95 * np.exp(rng.normal(0, 0.005, 3)))),
        ]
        docs.append(make_doc(rows, time=(start + dt.timedelta(days=i)).isoformat(),
                             git={"sha": f"{i:02d}" + "ab" * 19, "dirty": False},
                             torch="2.12.0" if i >= FLAT else "2.11.0"))
    return docs


def found(rows: list[history.RowHistory], label: str) -> history.RowHistory:
    return next(h for h in rows if h.series.label == label)


def test_a_step_is_found_on_its_night_with_its_size() -> None:
    rows = history.history(nightly(np.random.default_rng(0)))
    cpp = found(rows, "muladd/cpp/inference")
    assert cpp.series.metric == "cpu_us/floor"
    assert [c.index for c in cpp.changes] == [FLAT]
    assert cpp.changes[0].step == pytest.approx(0.05, abs=0.005)


def test_a_slow_drift_under_the_band_is_caught() -> None:
    docs = nightly(np.random.default_rng(1))
    series = found(history.history(docs), "muladd/custom_op/inference")
    values = np.asarray(series.series.values)
    assert np.max(np.abs(np.diff(np.log(values)))) < math.log(1.05)  # no night moves by δ
    assert series.changes, "the drift went unnoticed"
    assert FLAT - 1 <= series.changes[0].index <= FLAT + DRIFTING // 2  # found while it drifts
    assert series.changes[-1].level == pytest.approx(1.01 ** (DRIFTING * 0.75) - 1, abs=0.03)


def test_flat_series_have_no_change_point() -> None:
    rows = history.history(nightly(np.random.default_rng(2)))
    gpu = found(rows, "muladd/raw/inference")
    assert gpu.series.metric == "gpu_us" and gpu.changes == []
    # Pure noise, 40 nights: the penalty keeps spurious steps rare (about 2 % of such series).
    spurious = sum(bool(history.change_points(list(np.exp(np.random.default_rng(seed).normal(0, 0.01, 40))))[1])
                   for seed in range(40))
    assert spurious <= 3


def test_cli_names_the_night_sha_and_torch_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = nightly(np.random.default_rng(0))
    for i, doc in enumerate(docs):  # file names in reverse time order: the history must sort by env.time
        write(tmp_path / f"night-{len(docs) - i:02d}.json", doc)
    png = tmp_path / "history.png"
    assert history.main([str(tmp_path), "--row", "cpp", "--format", "md", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    line = next(li for li in out.splitlines() if li.startswith("| muladd/cpp/inference"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2].startswith("2026-11-21") and cells[3] == f"night-{FLAT + DRIFTING - FLAT:02d}.json"
    assert cells[4].startswith(f"{FLAT:02d}abab") and cells[5] == "2.12.0"
    assert 0.04 <= float(cells[8].rstrip("%")) / 100 <= 0.06
    assert "custom_op" not in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert history.main([str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{")
    assert history.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "broken.json" in err and len(err.strip().splitlines()) == 1


def test_without_ruptures_it_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "n.json", nightly(np.random.default_rng(0), nights=1)[0])
    monkeypatch.setitem(__import__("sys").modules, "ruptures", None)  # makes `import ruptures` fail
    assert history.main([str(tmp_path)]) == 2
    assert "pip install ruptures" in capsys.readouterr().err
