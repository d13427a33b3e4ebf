"""Instruction counts per call under callgrind: a deterministic CPU channel for CI.

Wall-clock medians on a shared CI machine move by percents between runs; the number of
instructions a call retires, counted by callgrind on a fixed interpreter and torch, moves by far
less. `collect` runs the boundary scenario's CPU cases in one process under
`valgrind --tool=callgrind`, with collection switched on only around each case's timed calls;
`check` compares a collection with the committed expected file (results/cpu-instructions/).

    python3 -m dbench.bench.instructions collect [--out FILE] [--calls N] [--layouts L]
    python3 -m dbench.bench.instructions check [--expected FILE] [--actual FILE] [--op FILE.py:NAME]
                                               [--update-expected [--write]] [--strict]
    python3 -m dbench.bench.instructions power --out FILE [--heap-pads 300,2500,8000]
                                               [--effects 0.01,0.02,0.05] [--jobs N]
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECTED_PATH = REPO_ROOT / "results" / "cpu-instructions" / "expected.json"
SCHEMA = "dbench-instructions/1"
METRIC = "instructions"
UNIT = "Ir/call"
