"""An --ab side runs nothing another local user could have put there, and no program before it is
known, from its file alone, to be a Python interpreter (bench/harness/sides.py, bench/core/trust.py).

Every attack is planted, and where a planted program or module would leave a marker, the test
first makes sure it would (so an absent marker proves it never ran)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dbench.bench.harness import sides
from dbench.bench.harness.sides import SideError, interpreter_problem, parse_side

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="making a folder owned by another user needs root")
REAL_PYTHON = os.path.realpath(sys.executable)


def _shared(folder: Path) -> Path:
    """`folder`, made as another user's world-writable folder (a shared /tmp/x someone pre-made)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o777)
    return folder


def _script(path: Path, marker: Path) -> Path:
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)
    return path


def _never_runs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record any process the check would start (and start none)."""
    started: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(sides.subprocess, "run", refuse)
    monkeypatch.setattr(sides.subprocess, "Popen", refuse)
    return started


# ---------------------------------------------------------------------------
# The interpreter: an ELF program with a Python interpreter's entry point, known before it runs.


def test_a_script_named_python3_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "script-ran"
    program = _script(tmp_path / "python3", marker)
    with pytest.raises(SideError, match=r"not a Python interpreter: it is a script .*a wrapper script"):
        parse_side(str(program))
    assert not marker.exists()
    subprocess.run([str(program)], check=True)  # it would have left the marker
    assert marker.exists()


def test_a_shell_copied_as_python3_99_is_refused_unrun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "python3.99"
    shutil.copy2("/bin/sh", copy)
    started = _never_runs(monkeypatch)
    with pytest.raises(SideError, match="not a Python interpreter: it is a program without a Python interpreter's "
                                        "entry point"):
        parse_side(f"python:{copy}")
    link = tmp_path / "bin" / "python"  # a link named python to it: judged by the file it resolves to
    link.parent.mkdir()
    link.symlink_to(copy)
    with pytest.raises(SideError, match=f"{re.escape(str(copy))}: it is a program without"):
        parse_side(str(link))
    assert not started


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build a program that leaves a marker")
def test_a_compiled_program_named_python_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "program-ran"
    source = tmp_path / "marker.c"
    source.write_text('#include <stdio.h>\nint main(void) { FILE *f = fopen("%s", "w"); '
                      'return f ? fclose(f) : 1; }\n' % marker)
    program = tmp_path / "python3.99"
    subprocess.run(["cc", "-o", str(program), str(source)], check=True, capture_output=True)
    with pytest.raises(SideError, match="without a Python interpreter's entry point"):
        parse_side(str(program))
    assert not marker.exists()
    subprocess.run([str(program)], check=True)  # it would have left the marker
    assert marker.exists()


def test_real_interpreters_are_recognised_from_their_files(tmp_path: Path) -> None:
    venv = tmp_path / "venv"  # a virtual environment: bin/python a link to the base interpreter
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    copy = tmp_path / "copies" / "bin" / Path(REAL_PYTHON).name  # `venv --copies` or a conda-like copy
    copy.parent.mkdir(parents=True)
    shutil.copy2(REAL_PYTHON, copy)
    for program in (sys.executable, REAL_PYTHON, str(venv / "bin" / "python"), str(copy)):
        assert interpreter_problem(program) is None, program
    for program in ("/bin/sh", "/bin/true", str(ROOT / "run.py"), "/dev/null"):
        assert interpreter_problem(program) is not None, program


def test_the_running_interpreter_is_accepted_after_its_probe() -> None:
    side = parse_side(sys.executable, default_python=str(ROOT / "no-such-default"))  # checked and probed
    assert side.python == str(Path(sys.executable).absolute())


@as_root
def test_a_python_in_another_users_world_writable_folder_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _shared(tmp_path / "shared")
    link = shared / "python3"  # ours, to a real Python: but its owner can swap the name after the check
    link.symlink_to(REAL_PYTHON)
    copy = shared / "python3.11"
    shutil.copy2(REAL_PYTHON, copy)
    started = _never_runs(monkeypatch)
    with pytest.raises(SideError, match=f"refusing the interpreter's folder {re.escape(str(shared))}: .* belongs to "
                                        f"another user .*owner uid {NOBODY}"):
        parse_side(str(link))
    with pytest.raises(SideError, match=f"refusing the interpreter {re.escape(str(copy))}: .* belongs to another user"):
        parse_side(str(copy))
    assert not started


# ---------------------------------------------------------------------------
# build:PATH and env: values that name code the child loads or runs.


def _build(folder: Path) -> Path:
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "libdbench_ops.so").write_bytes(b"")
    (folder / "bench" / "cpp").mkdir(parents=True)
    (folder / "bench" / "cpp" / "dbench_cpp_driver").write_bytes(b"")
    return folder


@as_root
@pytest.mark.parametrize("planted", ["", "lib", "bench/cpp", "lib/libdbench_ops.so", "bench/cpp/dbench_cpp_driver"])
@pytest.mark.parametrize("form", ["build:{}", "env:DBENCH_BUILD_DIR={}"])
def test_a_build_folder_another_user_can_change_is_refused(tmp_path: Path, planted: str, form: str) -> None:
    build = _build(tmp_path / "build")
    assert parse_side(form.format(build)).build == str(build.resolve())  # ours: accepted
    target = build / planted
    os.chown(target, NOBODY, NOBODY)
    target.chmod(0o777 if target.is_dir() else 0o666)
    refused = f"refusing the build folder.* {re.escape(str(target))}: .*(belongs to another user|others can write)"
    with pytest.raises(SideError, match=refused):
        parse_side(form.format(build))


def _planted_sitecustomize(folder: Path, marker: Path) -> Path:
    (folder / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return folder


@as_root
def test_a_pythonpath_entry_another_user_can_write_is_refused_before_the_probe(tmp_path: Path) -> None:
    """The probe runs with the side's environment: a planted sitecustomize.py would run in it."""
    marker = tmp_path / "sitecustomize-ran"
    shared = _planted_sitecustomize(_shared(tmp_path / "shared"), marker)
    mine = tmp_path / "mine"
    mine.mkdir()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    for value in (str(shared), f"{mine}:{shared}", f"{mine}::{shared}/sub"):  # every entry, there or not
        with pytest.raises(SideError, match=f"refusing the PYTHONPATH entry {re.escape(str(shared))}"):
            parse_side(f"{python}+env:PYTHONPATH={value}")
    assert not marker.exists()
    subprocess.run([str(python), "-c", "pass"], env={**os.environ, "PYTHONPATH": str(shared)}, check=True)
    assert marker.exists()  # it would have run


@as_root
@pytest.mark.parametrize("name", ["PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "LD_PRELOAD",
                                  "LD_LIBRARY_PATH", "PATH", "DBENCH_CPP_DRIVER", "DBENCH_CUPTI_LIBRARY"])
def test_code_variables_naming_another_users_folder_are_refused(tmp_path: Path, name: str) -> None:
    shared = _shared(tmp_path / "shared")
    (tmp_path / "mine").mkdir()
    for path in (shared, shared / "lib.so", shared / "not-there-yet"):
        refused = f"refusing the {name} entry {re.escape(str(path))}: .* belongs to another user"
        with pytest.raises(SideError, match=refused):
            parse_side(f"env:{name}={path}")
    assert parse_side(f"env:{name}={tmp_path / 'mine'}").env == {name: str(tmp_path / "mine")}


def test_empty_and_relative_entries_are_the_childs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The children run in the checkout (bench/children/shard/process.py): '' and relative entries are from there."""
    child_folder = tmp_path / "child-folder"
    (child_folder / "sub").mkdir(parents=True)
    monkeypatch.setattr(sides, "CHILD_FOLDER", child_folder)
    assert parse_side("env:PYTHONPATH=:sub,LD_LIBRARY_PATH=sub:").env["PYTHONPATH"] == ":sub"
    child_folder.chmod(0o777)  # now anyone can write where the children run
    for spec in ("env:PYTHONPATH=:/usr/lib", "env:PYTHONPATH=sub", "env:LD_LIBRARY_PATH=/usr/lib:",
                 "env:PATH=/usr/bin::/bin"):
        with pytest.raises(SideError, match=f"entry {re.escape(str(child_folder))}.*others can write"):
            parse_side(spec)
    # Left alone: an empty value (the same as unset), a library found by name, other variables.
    assert parse_side("env:PYTHONPATH=,LD_PRELOAD=libjemalloc.so.2,DBENCH_INJECT_NS=5").env["LD_PRELOAD"]


def test_a_path_not_there_is_judged_by_the_folder_it_would_be_made_in(tmp_path: Path) -> None:
    assert parse_side(f"env:PYTHONUSERBASE={tmp_path / 'none' / 'here'}").env  # only we can make it
    with pytest.raises(SideError, match="refusing the TRITON_CACHE_DIR entry .*others can write /tmp"):
        parse_side(f"env:TRITON_CACHE_DIR=/tmp/dbench-{os.getpid()}-absent/cache")  # anyone can make it


@as_root
def test_the_command_line_refuses_a_planted_pythonpath_in_one_line(tmp_path: Path) -> None:
    marker = tmp_path / "sitecustomize-ran"
    shared = _planted_sitecustomize(_shared(tmp_path / "shared"), marker)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "--scenario", "boundary", "--device", "cpu",
                           "--ab", "env:", f"env:PYTHONPATH={shared}", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and f"refusing the PYTHONPATH entry {shared}" in proc.stderr
    assert not marker.exists() and not list(out.glob("*.json"))
