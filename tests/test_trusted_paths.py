"""What another local user can change is never run, loaded or written through (bench/core/trust.py).

Each test plants the attack the way a user without root would (a folder or link of uid 65534, a
folder everyone can write) and checks both the refusal (one line, exit 2, naming the path) and
that the planted code did not run / the planted link was not written through.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dbench.bench.harness import cli
from dbench.bench.core import native_build
from dbench.bench.instructions import collect as collect_module, staging
from dbench.bench.instructions.collect import CollectError, Config, collect
from dbench.bench.instructions.staging import StageError, private_folder
from dbench.bench.harness.options import RunOptions, resolve
from dbench.bench.io.results import ResultWriteError
from dbench.bench.children.shard.process import Child, start_child
from dbench.bench.core.trust import UntrustedPathError

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="planting another user's folder or link needs root")
QUICK = ["--scenario", "boundary", "--device", "cpu", "--ops", "noop", "--variants", "raw", "--modes", "inference",
         "--no-cpp", "--no-pin", "--rounds", "2", "--block-ms", "0.2", "--warmup-ms", "1"]


def run(argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT,
        module: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *(["-m", module] if module else [str(ROOT / "run.py")]), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2 with one line on stderr that names the cause, no traceback: before any work."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert all(w in lines[0] for w in words), lines[0]


def nobodys_shared_folder(tmp_path: Path) -> Path:
    """A folder of another user that everyone can write (not sticky): anyone can put files there."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    os.chown(shared, NOBODY, NOBODY)
    return shared


def marker_module(path: Path, marker: Path) -> Path:
    path.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return path


# ---------------------------------------------------------------------------
# 1. The instruction-count stage: never through another user's link, run from the resolved path.


def _link_to(tmp_path: Path, owner: int | None) -> tuple[Path, Path]:
    """(a link in tmp_path, the folder of ours it names); the link owned by `owner` when given."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    if owner is not None:
        os.lchown(link, owner, owner)
    return link, real


@as_root
def test_a_stage_through_another_users_link_is_refused(tmp_path: Path) -> None:
    link, real = _link_to(tmp_path, NOBODY)  # its owner could re-point it after the checks
    with pytest.raises(StageError, match="link owned by another user"):
        private_folder(link / "stage")
    proc = run(["collect", "--calls", "1"], env={staging.STAGE_ENV: str(link / "stage")},
               module="dbench.bench.instructions")
    refused(proc, "refusing the instruction-count stage", str(link), "owner uid 65534")
    assert not (real / "stage").exists()  # nothing made, copied or run there


def test_a_stage_through_our_own_link_runs_the_child_from_the_resolved_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link, real = _link_to(tmp_path, None)
    assert private_folder(link / "stage") == real / "stage"
    seen: dict[str, object] = {}

    def fake_run(cmd: list[str], cwd: Path, env: dict[str, str], **_: object) -> SimpleNamespace:
        seen.update(cwd=Path(cwd), pythonpath=env["PYTHONPATH"])
        link.unlink()  # re-pointed while the child runs: what it runs from must not depend on the link
        link.symlink_to(tmp_path)
        return SimpleNamespace(returncode=1)

    monkeypatch.setattr(collect_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(collect_module.subprocess, "run", fake_run)
    with pytest.raises(CollectError, match="the callgrind run failed"):
        collect(Config(allocator="glibc"), stage=link / "stage")
    assert seen == {"cwd": real / "stage" / "src", "pythonpath": str(real / "stage" / "src")}


# ---------------------------------------------------------------------------
# 2. Output folders others can write, and what the run makes in them.


def test_an_out_folder_everyone_can_write_is_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o1777)  # sticky is not enough: others can plant the names the run is about to create
    proc = run([*QUICK, "--out", str(out)])
    refused(proc, "argument --out", str(out), "others can write", "mode drwxrwxrwt")
    assert not list(out.iterdir())


@as_root
def test_an_out_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    os.chown(out, NOBODY, NOBODY)
    proc = run([*QUICK, "--out", str(out)])
    refused(proc, "argument --out", str(out), "belongs to another user", "owner uid 65534")
    with pytest.raises(cli.UsageError, match="belongs to another user"):  # the default folder alike
        cli.check_out_dir(out / "dbench-results")
    assert not list(out.iterdir())


def test_a_default_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"  # a team's folder, as /tmp: the run starts there without --out
    (shared / "dbench-results").mkdir(parents=True)
    shared.chmod(0o1777)
    (shared / "dbench-results").chmod(0o777)  # made by someone else, or opened up
    if os.getuid() == 0:
        os.chown(shared / "dbench-results", NOBODY, NOBODY)
    refused(run(QUICK, cwd=shared), "argument --out", "dbench-results")
    assert not list((shared / "dbench-results").iterdir())


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    return victim


def _child_with_a_planted_link(tmp_path: Path, name: str) -> tuple[Path, Path, Child]:
    """A child process about to start in a work folder where `name` is a link to a victim file:
    (the victim, the work folder, the child)."""
    victim = _victim(tmp_path)
    work = tmp_path / "run.processes"
    work.mkdir()
    (work / name).symlink_to(victim)
    child = Child(0, "process 1 of 1", sys.executable, work / "process-0", work / "process-0.log",
                  options=RunOptions("boundary", "cpu"))
    return victim, work, child


def test_a_planted_log_link_is_never_written_through(tmp_path: Path) -> None:
    victim, work, child = _child_with_a_planted_link(tmp_path, "process-0.log")
    with pytest.raises(ResultWriteError, match="it is there already"):
        start_child(child)
    assert victim.read_text() == "keep me\n" and child.proc is None
    (work / "process-0").rmdir()
    (work / "process-0.log").unlink()
    (work / "process-0").symlink_to(tmp_path)  # the child's folder as a link: not used either
    with pytest.raises(ResultWriteError, match="it is there already"):
        start_child(child)
    assert child.proc is None and not (work / "process-0.log").exists()


def test_a_planted_options_file_is_never_read_or_written_through(tmp_path: Path) -> None:
    """A child's options file (what it will run) planted as a link before the parent writes it:
    refused, the link's target unchanged, no child started."""
    victim, work, child = _child_with_a_planted_link(tmp_path, "process-0.options")
    with pytest.raises(ResultWriteError, match="it is there already"):
        start_child(child)
    assert victim.read_text() == "keep me\n" and child.proc is None and not (work / "process-0.log").exists()


def test_the_processes_runner_refuses_a_planted_work_folder(tmp_path: Path) -> None:
    from rich.console import Console

    from dbench.bench.io.document import load_result
    from dbench.bench.children.processes import run_repeated
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    victim = _victim(tmp_path)
    out = tmp_path / "out"
    argv = [*QUICK, "--processes", "2", "--out", str(out)]
    args = cli.parse(argv, tuple(DECLARATIONS), OP_NAMES, VARIANT_NAMES, declarations=DECLARATIONS)
    options = resolve(args, DECLARATIONS["boundary"], "cpu")
    json_path = out / "boundary-cpu-x2-planted.json"
    (out / "boundary-cpu-x2-planted.processes").mkdir()  # as another user would, in a folder they can write
    (out / "boundary-cpu-x2-planted.processes" / "process-0.log").symlink_to(victim)
    console = Console(file=io.StringIO())
    code = run_repeated(argv=argv, scenario=SimpleNamespace(name="boundary", table_note=""), options=options,
                        json_path=json_path, console=console, show=lambda *_: None)
    assert victim.read_text() == "keep me\n" and code == 1  # a write failed once the result was reserved
    doc = load_result(json_path)
    assert doc["status"] == "failed" and "it is there already" in doc["error"]
    assert not (out / "boundary-cpu-x2-planted.processes" / "process-0").exists()  # no child started


# ---------------------------------------------------------------------------
# 4. Code the user names: a build folder, a C++ driver, an --op file.


def _compile_marker_library(path: Path, marker: Path) -> None:
    """A shared library that writes `marker` when it is loaded (a constructor)."""
    source = path.with_suffix(".c")
    source.write_text('#include <stdio.h>\n__attribute__((constructor)) static void planted(void) '
                      f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True)


@as_root
@pytest.mark.skipif(not Path("/usr/bin/cc").exists(), reason="needs a C compiler to plant a library")
def test_a_build_folder_in_another_users_shared_folder_is_refused_and_not_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = nobodys_shared_folder(tmp_path)
    lib = shared / "build" / "lib"
    lib.mkdir(parents=True)
    marker = tmp_path / "planted-library-loaded"
    for name in ("libdbench_ops.so", "libdbench_stable.so", f"_dbench_raw{_extension_suffix()}"):
        _compile_marker_library(lib / name, marker)
    proc = run([*QUICK, "--variants", "raw,cpp", "--out", str(tmp_path / "out")],
               env={native_build.BUILD_ENV: str(shared / "build")})
    refused(proc, "refusing the build folder (DBENCH_BUILD_DIR)", str(shared), "owner uid 65534")
    monkeypatch.setenv(native_build.BUILD_ENV, str(shared / "build"))
    with pytest.raises(UntrustedPathError, match="another user"):  # a library caller
        native_build.built_extension("_dbench_raw")
    assert not marker.exists() and not (tmp_path / "out").exists()


@as_root
@pytest.mark.skipif(not Path("/usr/bin/cc").exists(), reason="needs a C compiler to plant a library")
def test_another_users_library_in_our_own_build_folder_is_refused_and_not_loaded(tmp_path: Path) -> None:
    # The folder is ours, but a library in it is not: its owner could replace it at any time.
    lib = tmp_path / "build" / "lib"
    lib.mkdir(parents=True)
    marker = tmp_path / "planted-library-loaded"
    _compile_marker_library(lib / "libdbench_ops.so", marker)
    os.chown(lib / "libdbench_ops.so", NOBODY, NOBODY)
    proc = run([*QUICK, "--variants", "raw,cpp", "--out", str(tmp_path / "out")],
               env={native_build.BUILD_ENV: str(tmp_path / "build")})
    refused(proc, "refusing the build folder (DBENCH_BUILD_DIR)'s lib/", "libdbench_ops.so", "owner uid 65534")
    assert not marker.exists() and not (tmp_path / "out").exists()


def _extension_suffix() -> str:
    import sysconfig

    return str(sysconfig.get_config_var("EXT_SUFFIX"))


@as_root
def test_a_cpp_driver_in_another_users_shared_folder_is_refused(tmp_path: Path) -> None:
    shared = nobodys_shared_folder(tmp_path)
    marker = tmp_path / "planted-driver-ran"
    driver = shared / "dbench_cpp_driver"
    driver.write_text(f"#!/bin/sh\ntouch {marker}\n")
    driver.chmod(0o755)
    proc = run([*QUICK, "--out", str(tmp_path / "out")], env={native_build.DRIVER_ENV: str(driver)})
    refused(proc, "refusing the C++ driver (DBENCH_CPP_DRIVER)", str(shared))
    assert not marker.exists()


@as_root
def test_an_op_file_in_another_users_shared_folder_is_refused_and_not_imported(tmp_path: Path) -> None:
    from dbench.ops.declare import load

    shared = nobodys_shared_folder(tmp_path)
    marker = tmp_path / "planted-op-imported"
    ops = marker_module(shared / "my_ops.py", marker)
    refused(run(["--list", "--op", str(ops)]), "argument --op", "refusing the --op file", str(ops), "owner uid 65534")
    refused(run([*QUICK, "--op", f"{ops}:MyOp", "--out", str(tmp_path / "out")]), "refusing the --op file")
    with pytest.raises(UntrustedPathError, match="another user"):  # a library caller
        load(str(ops))
    assert not marker.exists()


def test_the_default_build_and_our_own_files_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native_build.BUILD_ENV, raising=False)
    assert native_build.build_dir() == (ROOT / "build").resolve()
    monkeypatch.setenv(native_build.BUILD_ENV, str(tmp_path / "not-built-yet"))
    assert native_build.build_dir() == tmp_path / "not-built-yet"  # missing, where only we can make it
    ops = tmp_path / "my_ops.py"
    ops.write_text("")
    link = tmp_path / "ops-link.py"
    link.symlink_to(ops)
    assert cli.op_file(str(link)) == str(ops)  # resolved: the children import the file that was checked


def test_checking_an_output_folder_makes_nothing_and_refuses_as_making_it_would(tmp_path: Path) -> None:
    from dbench.bench.core.trust import UntrustedPathError, check_output_folder, make_output_folder

    check_output_folder(tmp_path / "a" / "b")  # would be made: fine, and still absent
    assert not (tmp_path / "a").exists()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for folder in (shared, shared / "new"):
        with pytest.raises(UntrustedPathError) as checked:
            check_output_folder(folder)
        with pytest.raises(UntrustedPathError) as made:
            make_output_folder(folder)
        assert str(checked.value) == str(made.value)
    assert not (shared / "new").exists()
