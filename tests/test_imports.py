"""The packages' import graph has no cycle, counting the imports inside functions too (a lazy
import hides a cycle from the interpreter, not from the reader who has to untangle it)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "ops", "scenarios", "analysis")


def _modules(root: Path) -> dict[str, Path]:
    """Module name -> file: every package is imported as dbench.<package> (dbench/__init__.py)."""
    modules = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(["dbench", *parts])] = path
    return modules


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The suite's modules an import statement runs (the innermost known module of each name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        prefix = node.module or ""
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module] |= _targets(module, path, node, modules)
    return graph


def test_the_suites_packages_import_each_other_without_a_cycle() -> None:
    graph = import_graph(ROOT)
    assert {"dbench.ops.variants", "dbench.ops.triton_ops", "dbench.bench.runner",
            "dbench.analysis.gate"} <= graph.keys()
    assert "dbench.ops.triton_ops" in graph["dbench.ops.variants"]  # a function-level import, counted
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_a_lazy_import_cycle_is_found(tmp_path: Path) -> None:
    for package, body in (("ops", {"a.py": "from . import b\n", "b.py": "def f():\n    from .a import x\n"}),
                          ("bench", {}), ("scenarios", {}), ("analysis", {})):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        for name, text in body.items():
            (tmp_path / package / name).write_text(text)
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(import_graph(tmp_path)).prepare()


def test_nothing_imports_the_packages_under_their_bare_names() -> None:
    """One name per module: `ops.x` beside `dbench.ops.x` would load it twice (two registries, two
    sets of registered ops), and an installed package has no top-level `ops` at all."""
    bare = []
    for path in [*ROOT.glob("*.py"), *ROOT.glob("dbench/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("examples/*/*.py"),
                 *(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert not bare


# bench is the layer below: it measures and orchestrates, and knows neither the scenarios that
# declare what to measure nor the analysis that renders and judges it. The one exception builds
# the boundary scenario's cases inside the instruction-count child (it measures that scenario).
LAYER_EXCEPTIONS = {("dbench.bench.instructions.child", "dbench.scenarios")}


def test_bench_imports_neither_scenarios_nor_analysis() -> None:
    graph = import_graph(ROOT)
    found = {(module, target) for module, targets in graph.items() if module.startswith("dbench.bench")
             for target in targets if target.startswith(("dbench.scenarios", "dbench.analysis"))}
    allowed = {(m, t) for m, t in found for em, et in LAYER_EXCEPTIONS if m == em and t.startswith(et)}
    assert found - allowed == set(), sorted(found - allowed)
    assert allowed, "an exception that no longer happens: drop it from LAYER_EXCEPTIONS"


# The timing core: what a case is, how it is timed and summarised, and how a row is named. It knows
# no command line, no op, no orchestration and no terminal (the harness hands the runner a Reporter
# that draws, bench/progress.py), so another front end can time cases with it as it is.
CORE = ("case", "runner", "gputimer", "stats", "rows", "identity", "defaults", "native_build", "probe", "trust")
NOT_IN_CORE = ("rich", "tabulate", "pandas", "matplotlib")


def test_the_timing_core_imports_only_itself() -> None:
    graph = import_graph(ROOT)
    core = {f"dbench.bench.{name}" for name in CORE}
    assert core <= graph.keys() and not graph["dbench.bench"]  # `from . import stats` runs the bare package
    outside = {(m, t) for m in core for t in graph[m] if t not in core | {"dbench.bench"}}
    assert not outside, sorted(outside)
    third_party = []
    for name in CORE:
        path = ROOT / "bench" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            third_party += [f"{name}: {n}" for n in names if n.split(".")[0] in NOT_IN_CORE]
    assert not third_party, third_party


def test_the_public_names_are_listed_once_and_resolve() -> None:
    import dbench

    assert set(dbench.__all__) == set(dbench._PUBLIC) | set(dbench._MODULES)
    assert all(getattr(dbench, name) is not None for name in dbench.__all__)
    assert dbench.inputs.offsets is not None  # a module: `from dbench import inputs`
