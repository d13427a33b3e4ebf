"""Nothing a local user plants in a shared folder is run or written through by the suite.

The instruction-count stage lives in /tmp and its code is executed (bench/instructions/staging.py);
an A/B side names a program that runs the benchmark (bench/harness/sides.py). Both are refused unless they
are what they claim to be, before anything is run.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dbench.bench.instructions import staging
from dbench.bench.instructions.staging import StageError, default_stage, private_folder, sibling_stage, staged
from dbench.bench.harness.sides import SideError, parse_side

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="making a folder owned by another user needs root")


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "checkout"
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "a.py").write_text("A = 1\n")
    return repo


def _plant(stage: Path) -> Path:
    """A hostile stage: a module the child would import first, and a marker it would write."""
    (stage / "src" / "torch").mkdir(parents=True)
    marker = stage.parent / "planted-code-ran"
    (stage / "src" / "torch" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return marker


def test_default_stage_is_per_user_and_keeps_the_recorded_path_length() -> None:
    stage = default_stage()
    assert stage.parent == Path("/tmp") and f"{os.getuid():08x}" in stage.name
    assert len(str(stage)) == len("/tmp/dbench-instructions")  # the expected counts were recorded at that length
    assert len(str(sibling_stage(3))) == len(str(staging.STAGE))


def test_a_fresh_stage_is_private(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "stage")
    mode = os.lstat(folder).st_mode
    assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o700 and os.lstat(folder).st_uid == os.getuid()
    assert private_folder(folder) == folder  # ours already: accepted again


@as_root
def test_a_stage_planted_by_another_user_is_refused_and_nothing_in_it_runs(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    stage.mkdir(mode=0o777)
    marker = _plant(stage)
    for path in (stage, *stage.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    with pytest.raises(StageError, match="belongs to another user"), staged(_checkout(tmp_path), tmp_path / "b", stage):
        pytest.fail("a planted stage was used")
    assert not marker.exists() and (stage / "src" / "torch" / "__init__.py").exists()  # untouched


def test_a_link_in_place_of_the_stage_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "stage").symlink_to(target)
    with pytest.raises(StageError, match="not a plain folder"):
        private_folder(tmp_path / "stage")


def test_a_stage_others_can_enter_is_refused(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    stage.mkdir()
    stage.chmod(0o755)
    with pytest.raises(StageError, match="others have access"):
        private_folder(stage)


def test_a_stage_under_a_folder_others_can_rename_in_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all and not sticky: anyone could swap our folder
    with pytest.raises(StageError, match="not sticky"):
        private_folder(shared / "stage")
    shared.chmod(0o1777)  # as /tmp is
    assert private_folder(shared / "stage").is_dir()


def test_a_link_as_the_lock_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    stage = private_folder(tmp_path / "stage")
    (stage / "lock").symlink_to(victim)
    with pytest.raises(StageError, match="cannot take the lock"), staged(_checkout(tmp_path), tmp_path / "b", stage):
        pytest.fail("the lock link was followed")
    assert victim.read_text() == "keep me\n"


def test_the_collect_command_refuses_a_planted_stage_with_exit_2(tmp_path: Path) -> None:
    stage = tmp_path / "dbench-00000000-ins"
    stage.mkdir(mode=0o755)
    marker = _plant(stage)
    env = {**os.environ, staging.STAGE_ENV: str(stage)}
    proc = subprocess.run([sys.executable, "-m", "dbench.bench.instructions", "collect", "--calls", "1"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "refusing the instruction-count stage" in proc.stderr and not marker.exists()


# ---------------------------------------------------------------------------
# A/B sides: only a Python interpreter that imports torch.


@pytest.mark.parametrize("program", ["/bin/sh", "/bin/echo", "/bin/true", "python:/bin/true"])
def test_programs_that_are_not_python_are_refused_without_running(program: str) -> None:
    with pytest.raises(SideError, match="not a Python interpreter"):
        parse_side(program)


def test_a_program_named_otherwise_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = tmp_path / "tool"
    tool.write_text(f"#!/bin/sh\ntouch {marker}\n")
    tool.chmod(0o755)
    with pytest.raises(SideError, match="not a Python interpreter"):
        parse_side(str(tool))
    link = tmp_path / "python3"  # a link named python to a shell: judged by what it resolves to
    link.symlink_to("/bin/sh")
    with pytest.raises(SideError, match="not a Python interpreter"):
        parse_side(str(link))
    assert not marker.exists()


def test_a_python_named_program_must_import_torch(tmp_path: Path) -> None:
    echo = tmp_path / "python"  # a script, whatever it does, is refused unrun (tests/test_side_trust.py)
    echo.write_text('#!/bin/sh\necho "$@"\n')
    echo.chmod(0o755)
    with pytest.raises(SideError, match="not a Python interpreter: it is a script"):
        parse_side(str(echo))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    with pytest.raises(SideError, match="ModuleNotFoundError"):  # a Python without torch: probed, refused
        parse_side(str(tmp_path / "venv" / "bin" / "python3"))


def test_bad_side_settings_fail_before_any_process(tmp_path: Path) -> None:
    for spec, message in (("env:DBENCH_BUILD_DIR=/no/such/build", "does not exist"),
                          (f"env:DBENCH_BUILD_DIR={tmp_path}", "not a build folder")):
        with pytest.raises(SideError, match=message):
            parse_side(spec)
    for side, message in (("env:DBENCH_MM_KERNEL=bogus", "DBENCH_MM_KERNEL='bogus'"),
                          ("env:DBENCH_INJECT_NS=3e2", "whole number of nanoseconds")):
        proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--ab", "env:", side,
                               "--device", "cpu", "--out", str(tmp_path / "out")],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert not list((tmp_path / "out").glob("*.json"))
