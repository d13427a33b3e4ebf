"""The code stays readable as it grows: run.py is the command (parse, pick a way to run, show, gate) and
stays short; no function in the packages is longer than a screen, except the ones listed with why."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60
MAX_RUN_PY_LINES = 150
# "module:function" -> why it stays longer (each entry must still be over the limit).
LONG_FUNCTIONS: dict[str, str] = {
    "bench/instructions/child:main": "the process measured under callgrind: everything it allocates before the "
                                     "cases is part of the recorded counts, so it changes only with a re-record",
}


def _functions() -> dict[str, int]:
    lengths = {}
    files = [ROOT / "run.py", *(p for package in ("bench", "scenarios", "analysis", "ops", "dbench")
                                for p in (ROOT / package).rglob("*.py") if "notebooks" not in p.parts)]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{path.relative_to(ROOT).with_suffix('').as_posix()}:{node.name}"
                lengths[name] = max(lengths.get(name, 0), node.end_lineno - node.lineno + 1)  # type: ignore[operator]
    return lengths


def test_no_function_is_longer_than_a_screen() -> None:
    lengths = _functions()
    long = {name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS}
    assert not long, f"split these (or list them in LONG_FUNCTIONS with why): {long}"
    stale = [name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= MAX_FUNCTION_LINES]
    assert not stale, f"no longer long: drop them from LONG_FUNCTIONS: {stale}"


def test_run_py_is_only_the_command() -> None:
    lines = (ROOT / "run.py").read_text().count("\n")
    assert lines <= MAX_RUN_PY_LINES, f"run.py has {lines} lines: the work belongs in dbench.bench.harness"


def _op_name_comparisons(path: Path, names: frozenset[str]) -> list[str]:
    """Comparisons (==, !=, in) with a shipped op's name: logic that treats one op apart."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        values = [e for s in sides for e in (s.elts if isinstance(s, (ast.Tuple, ast.List, ast.Set)) else [s])]
        if any(isinstance(v, ast.Constant) and v.value in names for v in values):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_logic_branches_on_a_shipped_ops_name() -> None:
    """What makes an op different is a property of its contract (rowwise, size_axis, gpu_dtype,
    no_compiled_reason, kernel_of, heaviest_scalars...), so that a user's op with the same property is
    treated alike. Tables keyed by op name (markers, kernel names) are data, not comparisons."""
    from dbench.ops.specs import OP_NAMES

    files = [ROOT / "run.py", *(p for package in ("bench", "scenarios", "analysis")
                                for p in (ROOT / package).rglob("*.py") if "notebooks" not in p.parts)]
    assert [hit for f in files for hit in _op_name_comparisons(f, frozenset(OP_NAMES))] == []


def _sys_path_edits(path: Path) -> list[str]:
    """Calls on sys.path (insert, append, extend, remove) and assignments to it, as file:line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if (isinstance(target, ast.Attribute) and target.attr == "path" and isinstance(target.value, ast.Name)
                and target.value.id == "sys"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_package_edits_sys_path() -> None:
    """Imports a static reader can follow: the packages never change where Python looks for modules
    (run.py, the command run from a checkout, puts the checkout first so that `dbench` is found)."""
    files = [p for package in ("bench", "scenarios", "analysis", "ops", "dbench")
             for p in (ROOT / package).rglob("*.py") if "notebooks" not in p.parts]
    assert [hit for f in files for hit in _sys_path_edits(f)] == []
    assert len(_sys_path_edits(ROOT / "run.py")) == 1
