"""scripts/night_spread.py recomputes the committed figures of results/h200/gate/grouped-nights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "results" / "h200" / "gate"


def test_the_grouped_design_narrows_the_cpp_rows_and_the_injected_rows_stand_out(tmp_path: Path) -> None:
    nights = [*sorted((GATE / "aa-nights").glob("*.json.gz")), GATE / "grouped-nights" / "aa-20261205T040049Z.json.gz"]
    injected = GATE / "grouped-nights" / "injectcpu500-20261205T040705Z.json.gz"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "night_spread.py"), str(tmp_path / "f.png"),
                           *map(str, nights), "--injected", str(injected)], capture_output=True, text=True, check=True)
    assert (tmp_path / "f.png").stat().st_size > 10_000
    medians = {(line.split()[0], line.split()[1]): float(line.split()[3])
               for line in done.stdout.splitlines() if line.startswith("aa-")}
    assert medians == {(n, d): float(v) for n, d, v in (line.split()[:2] + [line.split()[3]]
                       for line in (GATE / "grouped-nights" / "spread.txt").read_text().splitlines()
                       if line.startswith("aa-"))}  # what is committed is what the script computes
    assert medians[("aa-20261205T040049Z", "cpp")] < 0.02 < 0.1 < min(
        v for (n, d), v in medians.items() if d == "cpp" and n.startswith("aa-20261204"))
