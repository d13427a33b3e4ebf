"""The installable library: `pip wheel .` builds the native targets through CMake, and the wheel,
installed into a folder of its own, imports and runs from outside the checkout under the one name
`dbench` (nothing under the generic names the checkout's folders have)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(importlib.util.find_spec("scikit_build_core") is None or shutil.which("cmake") is None,
                                reason="building the wheel needs scikit-build-core and cmake (scripts/setup.sh)")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout against the running torch, unpacked as pip would."""
    folder = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                           "-w", str(folder), str(ROOT)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = folder.glob("dbench-*.whl")
    site = folder / "site"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        top = {n.split("/")[0] for n in names}
        assert {t for t in top if not t.endswith(".dist-info")} == {"dbench"}, top
        assert any(n.startswith("dbench/build/lib/_dbench_raw") for n in names)
        assert "dbench/run.py" in names and "dbench/ops/declare.py" in names
        z.extractall(site)
    return site


def _python(site: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DBENCH_BUILD_DIR")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_installed_package_runs_a_users_op_from_another_folder(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "my_ops.py").write_text(
        "from dbench import Op\n"
        "twice = Op(name='twice', forward=lambda x: x * 2, reference=lambda x: x * 2,\n"
        "           backward=lambda g, x: g * 2, saves=('x',))\n")
    done = _python(installed, tmp_path, "-m", "dbench", "run", "--scenario", "boundary", "--op", "my_ops.py:twice",
                   "--device", "cpu", "--quick", "--rounds", "3", "--variants", "raw,custom_op,function_raw")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "twice" in done.stdout
    # Where everything came from: the installed copy, not this checkout.
    where = _python(installed, tmp_path, "-c",
                    "import dbench, dbench.ops.libraries as n, importlib.util as u; "
                    "print(dbench.__file__); print(n.build_dir()); print(u.find_spec('ops'), u.find_spec('bench'))")
    assert where.returncode == 0, where.stderr
    file, build, generic = where.stdout.splitlines()
    assert file.startswith(str(installed)) and build.startswith(str(installed))
    assert generic == "None None"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
                    reason="valgrind is not installed (scripts/setup.sh installs it as root)")
def test_installed_package_counts_a_users_op(installed: Path, tmp_path: Path) -> None:
    """`dbench instructions` from a pip install: the installed package is staged (not a checkout's
    folders), and a user's op file from their own folder is counted."""
    from dbench.bench.instructions.environment import jemalloc

    if jemalloc() is None:
        pytest.skip("jemalloc is not installed (scripts/setup.sh installs it as root)")
    (tmp_path / "my_ops.py").write_text(
        "from dbench import Op\n"
        "twice = Op(name='twice', forward=lambda x: x * 2, reference=lambda x: x * 2)\n")
    done = _python(installed, tmp_path, "-m", "dbench", "instructions", "collect", "--op", "my_ops.py:twice",
                   "--variants", "raw,custom_op", "--calls", "200", "--warmup", "10", "--out", "counts.json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import json

    counts = json.loads((tmp_path / "counts.json").read_text())
    timed = {r["variant"]: r["instructions"] for r in counts["rows"] if r["instructions"] is not None}
    assert set(timed) == {"raw", "custom_op"} and 0 < timed["raw"] < timed["custom_op"]
    assert counts["config"]["user_ops"] == {"twice": "my_ops.py:twice"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
                    reason="valgrind is not installed (scripts/setup.sh installs it as root)")
def test_installed_package_breaks_a_users_op_down_in_its_own_folder(installed: Path, tmp_path: Path) -> None:
    """`dbench run --scenario breakdown` from a pip install, in the user's folder: the breakdown
    document, table and figure land in its dbench-results/, each case in µs beside its measured
    overhead, and the results reader passes the document by."""
    import json

    from dbench.bench.instructions.environment import jemalloc

    if jemalloc() is None:
        pytest.skip("jemalloc is not installed (scripts/setup.sh installs it as root)")
    (tmp_path / "my_ops.py").write_text(
        "from dbench import Op\n"
        "twice = Op(name='twice', forward=lambda x: x * 2, reference=lambda x: x * 2)\n")
    done = _python(installed, tmp_path, "-m", "dbench", "run", "--scenario", "breakdown", "--op", "my_ops.py:twice",
                   "--variants", "raw,custom_op", "--quick")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (document,) = (tmp_path / "dbench-results").glob("*/breakdown-cpu-*.breakdown.json")
    rows = json.loads(document.read_text())["rows"]
    custom = [r for r in rows if (r["variant"], r["mode"]) == ("custom_op", "inference")]
    assert custom and all(r["measured_delta_us"] > 0 and r.get("delta_us") is not None for r in custom)
    # One case a mode (the three modes without a graph): too few for a mode's own speed, so every mode's.
    assert custom[0]["speed_from"].endswith("this op's own cases in every mode (the run has no other op)")
    assert list(document.parent.glob("breakdown-cpu-*-twice.png"))
    reads = _python(installed, tmp_path, "-c", "import dbench; dbench.load_results(['dbench-results'])")
    assert "holds no result files" in reads.stderr  # the breakdown is not a result


@pytest.mark.slow
def test_installed_package_reads_results(installed: Path, tmp_path: Path) -> None:
    done = _python(installed, tmp_path, "-c",
                   "import sys, dbench; f = dbench.load_results([sys.argv[1]]); print(len(f), sorted(set(f.op)))",
                   str(ROOT / "tests" / "golden" / "boundary-small-a.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "102 ['l2norm', 'muladd']" in done.stdout


def test_every_subcommand_names_a_module_with_a_main() -> None:
    import importlib

    from dbench.main import COMMANDS

    for name, (module, _) in COMMANDS.items():
        assert callable(getattr(importlib.import_module(module), "main", None)), name
