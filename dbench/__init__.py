"""dbench: what each way of exposing a kernel to PyTorch costs per call, how close the kernel runs to
the machine's roofs, and whether either regressed.

    from dbench import Op
    my_op = Op(name="my_op", forward=my_launcher, inputs=("x",), reference=my_reference)

then `dbench run --scenario boundary --op my_ops.py:my_op` (or `python3 run.py ...` in a checkout).

The suite's packages are dbench.bench (timing core and process orchestration), dbench.ops (op
contracts and the variants generated from them), dbench.scenarios and dbench.analysis. Installed,
they live in this package's folder; in a checkout they are the top-level folders beside it, which
this package's path names (so one name, dbench.*, imports them in both).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if not (_HERE / "bench").is_dir() and (_HERE.parent / "bench" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))  # a checkout: dbench.bench is <checkout>/bench

# The public names, imported on first use: `import dbench.bench.harness.cli` stays free of torch (a command
# line is checked before torch is imported).
_PUBLIC = {
    "Op": "dbench.ops.declare",
    "DeclarationError": "dbench.ops.declare",
    "Work": "dbench.ops.contract",
    "elementwise_work": "dbench.ops.contract",
    "run_scenario": "dbench.api",
    "Result": "dbench.api",
    "load_results": "dbench.api",
    "frame": "dbench.api",
    "UsageError": "dbench.bench.harness.cli",
}
# Public modules: dbench.inputs (typed inputs of a declaration: integers, offsets, constant, absent).
_MODULES = {"inputs": "dbench.ops.inputs"}
__all__ = ["Op", "DeclarationError", "Work", "elementwise_work", "run_scenario", "Result", "load_results", "frame",
           "UsageError", "inputs"]  # _PUBLIC and _MODULES (spelled out: static readers need plain strings)


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
        globals()[name] = value
        return value
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'dbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
