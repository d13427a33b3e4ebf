"""The packages' imports: their layers and no cycles (import-linter's contracts in pyproject.toml,
checked over the installed package's layout by scripts/importlint.sh, as .ci/run does), one name per
module, and the public names."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "ops", "scenarios", "analysis")
needs_linter = pytest.mark.skipif(importlib.util.find_spec("importlinter") is None,
                                  reason="import-linter is not installed (scripts/setup.sh installs it)")


def _lint(layout: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with pyproject.toml's contracts over a folder laid out as the installed package."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, str(ROOT / "pyproject.toml"), "--no-cache"], cwd=layout,
                          env={**os.environ, "PYTHONPATH": str(layout)}, capture_output=True, text=True, timeout=120)


@needs_linter
def test_the_packages_keep_their_layers_and_have_no_import_cycle() -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "importlint.sh")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "BROKEN" not in done.stdout


def _copy_layout(tmp_path: Path) -> Path:
    """The installed package's layout with the packages' Python files copied (so one can be changed)."""
    package = tmp_path / "dbench"
    package.mkdir()
    for path in (ROOT / "dbench").glob("*.py"):
        shutil.copy(path, package)
    shutil.copy(ROOT / "run.py", package)
    for name in PACKAGES:
        shutil.copytree(ROOT / name, package / name, ignore=lambda _d, names: [
            n for n in names if not n.endswith(".py") and "." in n])
    return tmp_path


@needs_linter
@pytest.mark.parametrize(("module", "planted", "named"), [
    # an upward import inside a function (a lazy import hides it from the interpreter, not from the reader)
    ("bench/core/stats.py", "def _late():\n    from dbench.bench.harness import cli\n",
     "dbench.bench.core.stats -> dbench.bench.harness.cli"),
    ("ops/specs.py", "import dbench.scenarios.select\n", "dbench.ops.specs -> dbench.scenarios.select"),
    ("bench/core/rows.py", "import pandas\n", "dbench.bench.core.rows -> pandas"),
    # a cycle within one layer: harness.common <-> harness.cli
    ("bench/harness/common.py", "from dbench.bench.harness import cli\n",
     "No cycles are allowed in dbench.bench.harness"),
])
def test_a_planted_import_breaks_a_contract_and_is_named(tmp_path: Path, module: str, planted: str, named: str) -> None:
    layout = _copy_layout(tmp_path)
    target = layout / "dbench" / module
    target.write_text(target.read_text() + planted)
    done = _lint(layout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert named in done.stdout, done.stdout


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


def test_the_public_names_are_listed_once_and_resolve() -> None:
    import dbench

    assert set(dbench.__all__) == set(dbench._PUBLIC) | set(dbench._MODULES)
    assert all(getattr(dbench, name) is not None for name in dbench.__all__)
    assert dbench.inputs.offsets is not None  # a module: `from dbench import inputs`
