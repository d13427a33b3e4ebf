"""Every native op is registered everywhere the suite calls it from, and nowhere it is not declared.

The dispatcher's list of what libdbench_ops.so defines is the source. For each forward op there
must be its `_autograd` twin, its stable-ABI op, its raw (pybind) launcher and a catalogue entry
with those flavours. For each `_backward` op there must be a raw launcher. The boundary ops must
also have the C++ driver's benchmarks, one per kind. An op added to one place and missing from
another fails here, and the message names where it is missing.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from dbench.bench.io.cpp_results import CPP_VARIANTS, driver_path
from dbench.ops.catalog import OPS
from dbench.ops.libraries import load_cpp_ops, load_stable_ops, raw

AUTOGRAD, BACKWARD = "_autograd", "_backward"


def _defined(namespace: str) -> set[str]:
    prefix = f"{namespace}::"
    return {n[len(prefix):] for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefix)}


@pytest.fixture(scope="module")
def native() -> set[str]:
    load_cpp_ops()
    return _defined("dbench")


def _forward(native: set[str]) -> set[str]:
    return {n for n in native if not n.endswith((AUTOGRAD, BACKWARD))}


def test_every_native_op_has_each_registration(native: set[str]) -> None:
    forward = _forward(native)
    assert forward, "libdbench_ops.so defined no dbench:: op"
    stable = _defined("dbench_stable") if load_stable_ops() else None
    missing = []
    for op in sorted(forward):
        missing += [f"dbench::{op}{AUTOGRAD} (torch_library.cpp)"] * (f"{op}{AUTOGRAD}" not in native)
        missing += [f"dbench_stable::{op} (stable_library.cpp)"] * (stable is not None and op not in stable)
        missing += [f"_dbench_raw.{op} (raw_module.cpp)"] * (not hasattr(raw(), op))
        missing += [f"OPS[{op!r}] (ops/catalog.py)"] * (op not in OPS)
    for op in sorted(n for n in native if n.endswith(BACKWARD)):
        missing += [f"_dbench_raw.{op} (raw_module.cpp)"] * (not hasattr(raw(), op))
    assert missing == []


def test_every_catalogue_op_with_native_flavours_is_a_native_op(native: set[str]) -> None:
    declared = {op for op, c in OPS.items() if not c.origin and c.has_flavour("cpp")}
    assert declared == _forward(native)


def test_the_cpp_driver_times_each_boundary_op_in_every_kind(native: set[str]) -> None:
    path = driver_path()
    if not path.is_file():
        pytest.skip("dbench_cpp_driver is not built (no Google Benchmark): tests/test_cpp_driver.py says why")
    listed = subprocess.run([str(path), "--benchmark_list_tests=true"], capture_output=True, text=True, timeout=120,
                            check=True).stdout.split()
    kinds: dict[str, set[str]] = {}
    for name in listed:
        op, kind = name.split("/")[:2]
        kinds.setdefault(op, set()).add(kind)
    boundary = {op for op in _forward(native) if OPS[op].boundary}
    assert set(kinds) == boundary
    assert {op: k for op, k in kinds.items() if k != set(CPP_VARIANTS)} == {}


def test_every_native_declaration_is_registered_and_nothing_else(native: set[str]) -> None:
    """ops/native/<op>.h is the one native declaration of each op: the ops libdbench_ops.so defines
    are exactly those headers (CMake collects them; a header it missed, or an op registered by hand
    beside them, fails here)."""
    from dbench.ops.libraries import REPO_ROOT

    headers = {p.stem for p in (REPO_ROOT / "ops" / "native").glob("*.h")}
    if not headers:
        pytest.skip("no ops/native folder beside the installed package")
    assert _forward(native) == headers


def test_every_shipped_op_declares_its_triton_launchers() -> None:
    """The triton_op variant launches a shipped op through the launchers its own module declares, one
    per op name (forward, backward); making them imports no triton (a fresh process, since another
    test may have imported it here)."""
    for name, contract in OPS.items():
        assert contract.triton_launchers is not None, name
        launchers = contract.triton_launchers()
        assert set(launchers) == set(contract.op_names()), name
        assert all(callable(launch) for launch in launchers.values()), name
    code = ("import sys\nfrom dbench.ops.catalog import OPS\n"
            "for c in OPS.values():\n    c.triton_launchers()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'triton'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
