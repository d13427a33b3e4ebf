"""scripts/schedule_study.py: the numbers that chose the boundary's schedule on CUDA, recomputed from
the committed H200 results (gzip-compressed), as results/h200/README.md quotes them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "schedule_study.py"
H200 = ROOT / "results" / "h200"
GROUPED = H200 / "boundary-cuda0-20261204T142756Z-cd9c97.json.gz"
SHUFFLED = H200 / "boundary-cuda0-20261204T142903Z-dbf1ec.json.gz"
# The main job at its 30-round defaults, twice back to back, the first after a bare host's setup.
DEFAULT_RUNS = (H200 / "boundary-cuda0-20261204T172714Z-e740a6.json.gz",
                H200 / "boundary-cuda0-20261204T172808Z-e8b44f.json.gz")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_the_schedule_study_recomputes_the_quoted_figures(tmp_path: Path) -> None:
    done = _run(str(GROUPED), str(SHUFFLED), "--rounds", "30,40,60", cwd=tmp_path)  # from any folder
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "order grouped, 40 rounds of 2.50 ms, warm-up 5 ms" in out and "order shuffled, 60 rounds" in out
    # The first 30 grouped rounds against 60 shuffled ones, Python and C++ ratio CIs (medians over rows).
    assert "K=30 1.59 %; K=40 1.43 %" in out and "K=30 4.00 %; K=40 3.15 %; K=60 2.30 %" in out
    assert "K=30 1.28 %" in out  # the C++ driver's rounds
    assert "cpp cpu_us: 51 rows of 12 samples; CI half-width, absolute: median 13.64 %" in out
    assert "--dbench_rounds=40" in out and "--benchmark_enable_random_interleaving=true" in out
    assert "python cpu_us ratio_median: 183 rows, moved median +0.47 %" in out


def test_the_30_round_defaults_figures_as_quoted() -> None:
    done = _run(*map(str, DEFAULT_RUNS))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("order grouped, 30 rounds of 2.50 ms, warm-up 5 ms, 5 GPU rounds") == 2
    assert "ratio to the floor: median 1.48 % p90 2.32 % (183 rows)" in out  # Python, first run
    assert "ratio to the floor: median 1.73 % p90 2.57 % (183 rows)" in out  # Python, second run
    # The first run's C++ pass met the host's slow state for 17 rounds: wide absolute, paired ratio 3 %.
    assert "absolute: median 28.85 % p90 31.19 %; ratio to the floor: median 3.23 % p90 6.27 % (36 rows)" in out
    assert "ratio to the floor: median 1.76 % p90 2.47 % (36 rows)" in out
    assert "python cpu_us ratio_median: 183 rows, moved median -0.76 %, |move| median 1.18 % p90 3.03 %" in out
    assert "cpp cpu_us ratio_median: 36 rows, moved median -1.23 %, |move| median 1.29 % p90 4.01 %" in out


def test_the_schedule_study_refuses_what_is_not_a_result(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    done = _run(str(bad))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "x.json" in done.stderr
    assert _run(str(GROUPED), "--rounds", "0").returncode == 2


def test_drift_rebuilds_a_shuffled_runs_order_and_skips_a_grouped_one() -> None:
    done = _run(str(H200 / "boundary-cuda0-20261204T120825Z-7dc36c.json.gz"), str(GROUPED), "--drift")
    assert done.returncode == 0, done.stderr
    # The host drifts within a round: blocks far apart scatter more than adjacent ones.
    assert "blocks 0 to 2 apart: 2099 pairs, log-ratio robust SD 0.0517" in done.stdout
    assert "blocks 80 to 160 apart: 63988 pairs, log-ratio robust SD 0.0751" in done.stdout
    assert "--drift: not a shuffled run" in done.stdout

