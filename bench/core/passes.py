"""The passes a run makes over a scenario's cases, in the order the harness makes them. A scenario
declares the passes it needs (scenarios/declaration.py) and the harness makes exactly those: no pass
is chosen by a scenario's name."""

from __future__ import annotations

from enum import Enum


class Pass(str, Enum):
    CPU_ROUNDS = "cpu_rounds"  # interleaved CPU rounds over every case and the speed probe
    GPU = "gpu"  # on a CUDA device, the same cases timed on the GPU (CUPTI, or CUDA events)
    ROOFS = "roofs"  # the machine's roofs measured in the same run: each row's rates and % of roof
    CPP_DRIVER = "cpp_driver"  # the scenario's ops called from C++ (the Google Benchmark driver)
    CUSTOM = "custom"  # the scenario runs itself and makes its own table (no cases, no other pass)


# What a scenario without its own declaration of passes gets.
TABLE_PASSES: tuple[Pass, ...] = (Pass.CPU_ROUNDS, Pass.GPU)
