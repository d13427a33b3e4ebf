"""scripts/paired_band.py recomputes the committed table behind the A/B band (DEFAULT_DELTA["paired"])."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NIGHTS = ROOT / "results" / "h100" / "gate" / "duet-nights"


@pytest.mark.slow
def test_the_committed_band_table_is_what_the_script_computes() -> None:
    committed = (NIGHTS / "band.txt").read_text()
    command = committed.splitlines()[0].removeprefix("$ ").split()
    assert command[:2] == ["python3", "scripts/paired_band.py"]
    done = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, cwd=ROOT, timeout=900,
                          check=True)
    assert done.stdout == "\n".join(committed.splitlines()[1:]) + "\n"
    # What the band was chosen on: no A/A row of a CPU class called at the A/B default of 3 %, and
    # none of its CIs above 1 by more than the band's margin.
    aa = [line.split() for line in done.stdout.splitlines() if re.match(r"^aa\S* +cpu-", line)]
    assert len(aa) >= 2 * 7  # two CPU classes on every A/A night
    header = next(line.split() for line in done.stdout.splitlines() if line.startswith("night"))
    column = header.index("δ3%") - 2  # the header's "max low" and "min high" are two words each
    assert all(int(row[column]) == 0 for row in aa)
    assert max(float(row[3]) for row in aa) < 1.0
