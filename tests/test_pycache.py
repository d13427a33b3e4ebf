"""The build folder's bytecode cache for a run's own process (bench/harness/pycache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dbench.bench.harness import pycache
from dbench.bench.io.results import load_result

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as on an image that sets PYTHONDONTWRITEBYTECODE (restored after the test)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)


def test_the_cache_is_made_private_in_the_build_folder_and_handed_to_children(tmp_path: Path, no_writes: None) -> None:
    (tmp_path / "build").mkdir()
    environ = {"DBENCH_BUILD_DIR": str(tmp_path / "build"), "PYTHONDONTWRITEBYTECODE": "1"}
    folder = pycache.build_cache(environ)
    assert folder == (tmp_path / "build" / "pycache").resolve()
    assert (folder.stat().st_mode & 0o777) == 0o700
    assert sys.pycache_prefix == str(folder) and sys.dont_write_bytecode is False
    assert environ["PYTHONPYCACHEPREFIX"] == str(folder) and environ["PYTHONDONTWRITEBYTECODE"] == ""


def test_nothing_changes_where_writes_are_allowed_or_the_user_named_a_cache(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "build").mkdir()
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    environ = {"DBENCH_BUILD_DIR": str(tmp_path / "build")}
    assert pycache.build_cache(environ) is None and environ == {"DBENCH_BUILD_DIR": str(tmp_path / "build")}
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    theirs = {"DBENCH_BUILD_DIR": str(tmp_path / "build"), "PYTHONPYCACHEPREFIX": str(tmp_path / "theirs")}
    assert pycache.build_cache(dict(theirs)) is None
    assert sys.pycache_prefix is None and sys.dont_write_bytecode is True
    assert not (tmp_path / "build" / "pycache").exists()


def test_a_missing_or_shared_build_folder_is_not_used(tmp_path: Path, no_writes: None) -> None:
    assert pycache.build_cache({"DBENCH_BUILD_DIR": str(tmp_path / "missing")}) is None
    assert not (tmp_path / "missing").exists()  # a run does not make the build folder
    build = tmp_path / "build"
    (build / "pycache").mkdir(parents=True)
    (build / "pycache").chmod(0o777)  # another user could plant bytecode in it
    assert pycache.build_cache({"DBENCH_BUILD_DIR": str(build)}) is None
    assert sys.pycache_prefix is None and sys.dont_write_bytecode is True


def test_a_planted_cache_folder_is_not_used(tmp_path: Path, no_writes: None) -> None:
    """What another local user could leave at build/pycache before a root run: a link to a folder
    everyone can write, or a folder of their own (owner uid 65534, as root can make it)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    build = tmp_path / "build"
    build.mkdir()
    (build / "pycache").symlink_to(shared)
    assert pycache.build_cache({"DBENCH_BUILD_DIR": str(build)}) is None
    (build / "pycache").unlink()
    (build / "pycache").mkdir(mode=0o700)
    if os.geteuid() != 0:
        pytest.skip("making a folder owned by another user needs root")
    os.chown(build / "pycache", 65534, 65534)
    assert pycache.build_cache({"DBENCH_BUILD_DIR": str(build)}) is None
    assert sys.pycache_prefix is None and sys.dont_write_bytecode is True


_IMPORT = textwrap.dedent("""
    import importlib.util, json, os, subprocess, sys
    from dbench.bench.harness import pycache
    folder = pycache.build_cache()
    before = importlib.util.find_spec("probe_module").cached
    had = os.path.exists(before)
    import probe_module
    child = subprocess.run([sys.executable, "-c", "import sys; print(sys.pycache_prefix, sys.dont_write_bytecode)"],
                           capture_output=True, text=True, check=True).stdout.split()
    print(json.dumps({"folder": str(folder), "cached": before, "had": had, "child": child}))
""")


def test_a_second_process_loads_what_the_first_compiled_and_nothing_is_written_beside_the_source(
        tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "probe_module.py").write_text("VALUE = 1\n")
    (tmp_path / "build").mkdir()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DBENCH_BUILD_DIR": str(tmp_path / "build"),
           "PYTHONPATH": os.pathsep.join([str(source), str(ROOT)])}
    env.pop("PYTHONPYCACHEPREFIX", None)
    import json

    runs = [json.loads(subprocess.run([sys.executable, "-c", _IMPORT], env=env, capture_output=True, text=True,
                                      check=True, cwd=tmp_path).stdout) for _ in range(2)]
    folder = str((tmp_path / "build" / "pycache").resolve())
    assert [r["folder"] for r in runs] == [folder, folder]
    assert runs[0]["cached"].startswith(folder) and Path(runs[0]["cached"]).is_file()
    assert [r["had"] for r in runs] == [False, True]  # the second process found the first one's bytecode
    assert runs[0]["child"] == [folder, "False"]  # a child of the run writes there too
    assert not (source / "__pycache__").exists()


@pytest.mark.slow
def test_run_py_keeps_its_bytecode_in_the_build_folder_where_python_may_not_write_it(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--ops", "noop",
                           "--variants", "raw", "--modes", "inference", "--no-cpp", "--device", "cpu", "--quick",
                           "--rounds", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=180,
                          cwd=ROOT, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = tmp_path.glob("*.json")
    uncached = load_result(path)["env"]["bytecode_uncached"]
    # (a result names the build folder, not this machine's path)
    assert uncached["prefix"] == "<build>/pycache" and uncached["writes_disabled"] is False
    # only what run.py imports before it sets the cache (the standard library, its own start) may lack one
    assert uncached["modules"] < 50 < uncached["of"]
    import importlib.util

    import torch

    from dbench.bench.core.native_build import build_dir

    torch_init = importlib.util.cache_from_source(torch.__file__)  # beside the source, as this process sees it
    assert (build_dir() / "pycache" / Path(torch.__file__).parent.relative_to("/") / Path(torch_init).name).is_file()
