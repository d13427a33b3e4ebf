"""The run defaults, once: option -> (full run, --quick). Plain data of the timing core, which the
command line (bench/harness/cli.py) fills unset options from and the runner's RunConfig starts from."""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, tuple[Any, Any]] = {
    "rounds": (30, 6),
    "block_ms": (10.0, 2.0),
    "warmup_ms": (20.0, 5.0),  # warm-up per case after its block is sized
    "order": ("grouped", "grouped"),  # ORDERS
    "gpu_rounds": (8, 3),
    "cpp_repetitions": (9, 3),
    "cpp_min_time": (0.1, 0.01),
}
# A round's order (bench/core/runner.py round_order): "grouped" keeps each case near the floor it is
# paired with; "shuffled" draws every block's place at random, the design the gate was calibrated
# with (results/h200/gate).
ORDERS = ("grouped", "shuffled")
