"""The shell scripts: shellcheck, the sanitizer's kernel filter, and gpu_validate's step table and
exit status, run against stand-in programs on PATH (no GPU, no build)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((REPO_ROOT / "scripts").glob("*.sh"))

NEW_HELP = "  --kernel-name arg    key1=val1,key2=val2,...\n  --tool arg (=memcheck)\n"
OLD_HELP = "  --filter arg    key1=val1,key2=val2,...\n  --tool arg (=memcheck)\n"

# Records its arguments; prints HELP for --help and exits 1 there, as a release did; fails the
# racecheck of the row kernels, as a hazard would.
FAKE_SANITIZER = """#!/usr/bin/env bash
if [ "$1" = --help ]; then printf '%s' "$HELP"; exit 1; fi
printf '%s\\n' "$*" >> "$CALLS"
case "$*" in *"--tool racecheck"*"--only rows"*) exit 1 ;; esac
exit 0
"""


@pytest.mark.skipif(shutil.which("shellcheck") is None,
                    reason="shellcheck is not installed (scripts/setup.sh installs it as root)")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_passes(script: Path) -> None:
    out = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def _stand_ins(tmp_path: Path, help_text: str, **programs: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"compute-sanitizer": FAKE_SANITIZER, **programs}.items():
        path = bin_dir / name
        path.write_text(body)
        path.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HELP": help_text,
            "CALLS": str(tmp_path / "calls.txt")}


def _sanitize(tmp_path: Path, help_text: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO_ROOT / "scripts" / "sanitize.sh"), *args],
                          env=_stand_ins(tmp_path, help_text), capture_output=True, text=True, timeout=60)


def _calls(tmp_path: Path) -> list[str]:
    calls = tmp_path / "calls.txt"
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize(("help_text", "expected"), [(NEW_HELP, "--kernel-name kns=dbench"),
                                                     (OLD_HELP, "--filter kns=dbench")])
def test_racecheck_takes_the_kernel_filter_this_sanitizer_spells(tmp_path: Path, help_text: str,
                                                                  expected: str) -> None:
    out = _sanitize(tmp_path, help_text, "racecheck", "--only", "mm")
    assert out.returncode == 0, out.stderr
    assert _calls(tmp_path) == [f"--tool racecheck {expected} --error-exitcode 1 "
                                "python3 scripts/kernel_check.py --only mm"]


def test_memcheck_checks_every_kernel(tmp_path: Path) -> None:
    out = _sanitize(tmp_path, NEW_HELP, "memcheck")
    assert out.returncode == 0, out.stderr
    assert _calls(tmp_path) == ["--tool memcheck --error-exitcode 1 python3 scripts/kernel_check.py"]


@pytest.mark.parametrize(("args", "help_text", "message"), [
    (["initcheck"], NEW_HELP, "usage: sanitize.sh memcheck|racecheck"),
    ([], NEW_HELP, "usage: sanitize.sh memcheck|racecheck"),
    (["racecheck"], "  --tool arg\n", "neither --kernel-name nor --filter"),
])
def test_sanitize_refuses_before_running_anything(tmp_path: Path, args: list[str], help_text: str,
                                                  message: str) -> None:
    out = _sanitize(tmp_path, help_text, *args)
    assert out.returncode == 2 and message in out.stderr
    assert _calls(tmp_path) == []


def test_gpu_validate_lists_its_steps_and_fails_when_one_did(tmp_path: Path) -> None:
    # A copy of the scripts whose setup does nothing, and a python3 that succeeds at everything:
    # the kernels part then runs every step, and the racecheck of the rows fails.
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("gpu_validate.sh", "sanitize.sh"):
        shutil.copy(REPO_ROOT / "scripts" / name, repo / "scripts" / name)
    (repo / "scripts" / "setup.sh").write_text("echo setup\n")
    env = _stand_ins(tmp_path, NEW_HELP, python3="#!/bin/sh\nexit 0\n")
    out_dir = tmp_path / "out"
    out = subprocess.run(["bash", str(repo / "scripts" / "gpu_validate.sh"), str(out_dir), "kernels"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 step(s) failed or ran out of time" in out.stdout
    rows = [line.split("\t") for line in (out_dir / "steps.tsv").read_text().splitlines()]
    assert rows[0] == ["rc", "seconds", "step"]
    steps = {step: rc for rc, _, step in rows[1:]}
    failed = {step: rc for step, rc in steps.items() if rc != "0"}
    assert failed == {"bash scripts/sanitize.sh racecheck --only rows": "1"}
    assert len(steps) == 9  # setup, memcheck, 3 racecheck parts, bench, roofline, launch, mma_sync roofline
    racecheck = [c for c in _calls(tmp_path) if "racecheck" in c]
    assert len(racecheck) == 3 and all("--kernel-name kns=dbench" in c for c in racecheck)


def test_gpu_validate_passes_when_every_test_step_did(tmp_path: Path) -> None:
    """The tests part with a python3 and a ctest that succeed: exit 0 and one line a step in
    steps.tsv. The timing step's command holds a newline; written as is, its second line read as a
    failed step (an H100 run whose every step exited 0 ended '1 step(s) failed')."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "gpu_validate.sh", repo / "scripts" / "gpu_validate.sh")
    (repo / "scripts" / "setup.sh").write_text("echo setup\n")
    env = _stand_ins(tmp_path, NEW_HELP, python3="#!/bin/sh\nexit 0\n", ctest="#!/bin/sh\nexit 0\n")
    out_dir = tmp_path / "out"
    out = subprocess.run(["bash", str(repo / "scripts" / "gpu_validate.sh"), str(out_dir), "tests"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "failed or ran out of time" not in out.stdout
    rows = [line.split("\t") for line in (out_dir / "steps.tsv").read_text().splitlines()]
    assert [rc for rc, _, _ in rows[1:]] == ["0"] * 5, rows  # setup, errors, suite, timing, ctest
    assert "exit $((rc == 5 ? 0 : rc)) pytest tests" in rows[4][2], rows[4]


def _detached(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO_ROOT / "scripts" / "detached.sh"), *args], capture_output=True, text=True,
                          timeout=60)


def test_a_detached_run_outlives_its_caller_and_gives_its_own_status(tmp_path: Path) -> None:
    """Started from a caller whose whole process group is then killed (a command hitting its time limit),
    the run goes on; `wait` says 75 while it runs, then its exit status and output; a second `start`
    in the same folder is refused, so a retried call never starts it twice."""
    import signal
    import time

    run = tmp_path / "run"
    caller = subprocess.Popen(["bash", "-c", f"bash {REPO_ROOT}/scripts/detached.sh start {run} -- "
                               "bash -c 'sleep 2; echo done here; exit 3'; sleep 60"], start_new_session=True)
    while not (run / "started").exists():
        time.sleep(0.05)
    os.killpg(caller.pid, signal.SIGKILL)
    caller.wait()
    early = _detached("wait", str(run), "0")
    assert early.returncode == 75 and "still running" in early.stdout
    again = _detached("start", str(run), "--", "true")
    assert again.returncode == 2 and "already holds a run" in again.stderr
    done = _detached("wait", str(run), "30")
    assert done.returncode == 3 and "exit status 3" in done.stdout
    assert (run / "out.log").read_text() == "done here\n" and (run / "rc").read_text().strip() == "3"


@pytest.mark.parametrize("args", [["wait", "never-started", "1"], ["wait", "x", "soon"], ["start", "x", "true"],
                                  ["run", "x"]])
def test_detached_refuses_bad_use(tmp_path: Path, args: list[str]) -> None:
    args = [str(tmp_path / a) if a in ("never-started", "x") else a for a in args]
    got = _detached(*args)
    assert got.returncode == 2 and ("usage" in got.stderr or "no run was started" in got.stderr)


@pytest.mark.skipif(not (REPO_ROOT / "build" / ".torch-stamp").is_file(), reason="needs a build made by setup.sh")
def test_setup_with_nothing_to_do_never_imports_torch(tmp_path: Path) -> None:
    """The README's commands start with setup.sh: once everything is there, it checks what is
    installed without importing torch (over a second each time), and keeps the build's stamp."""
    import sys

    calls = tmp_path / "calls"
    shim = tmp_path / "python"  # the interpreter setup.sh is told to use: logs what it is asked, then runs it
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{calls}"\n'
                    f'if [ "$1" = - ]; then tee -a "{calls}" | exec "{sys.executable}" "$@"; fi\n'
                    f'exec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    stamp = (REPO_ROOT / "build" / ".torch-stamp").read_text()
    proc = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO_ROOT, env={**os.environ, "PYTHON": str(shim)},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    asked = calls.read_text()
    import re

    assert not re.search(r"(^|[;\s])(import|from) torch\b", asked), asked  # find_spec("torch") only
    assert (REPO_ROOT / "build" / ".torch-stamp").read_text() == stamp  # no reconfigure: the same stamp
    assert "ready: torch " in proc.stdout and "installing" not in proc.stdout


@pytest.mark.skipif(not (REPO_ROOT / "build" / ".torch-stamp").is_file(), reason="needs a build made by setup.sh")
def test_setup_does_not_retry_what_this_host_could_not_install(tmp_path: Path) -> None:
    """A host without a package index: the first set-up tries pip, fails, goes on without the
    optional package and remembers it; the next one says so and does not try again."""
    import sys

    calls, record = tmp_path / "calls", REPO_ROOT / "build" / ".setup-unavailable"
    stamp = (REPO_ROOT / "build" / ".torch-stamp").read_text().strip()
    shim = tmp_path / "python"  # says `ruptures` is missing, and has no package index
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{calls}"\n'
                    f'if [ "$1" = - ]; then cat > /dev/null; printf "%s\\nruptures\\n" "{stamp}"; exit 0; fi\n'
                    'if [ "$1" = -m ] && [ "$2" = pip ]; then echo "no index" >&2; exit 1; fi\n'
                    f'exec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    kept = record.read_bytes() if record.exists() else None
    record.unlink(missing_ok=True)
    try:
        runs = [subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO_ROOT, env={**os.environ, "PYTHON": str(shim)},
                               capture_output=True, text=True, timeout=600) for _ in range(2)]
        assert [r.returncode for r in runs] == [0, 0], runs[0].stdout + runs[0].stderr
        assert "installing Python packages: ruptures" in runs[0].stdout
        assert "optional packages not installed (ruptures)" in runs[0].stdout
        assert "pip: ruptures" in record.read_text().splitlines()
        assert "installing Python packages" not in runs[1].stdout
        assert "optional packages still missing (ruptures): not installable here last time" in runs[1].stdout
        asked = calls.read_text().splitlines()
        assert sum(line.startswith("-m pip install --quiet -r") for line in asked) == 1  # the first run only
    finally:
        record.unlink(missing_ok=True)
        if kept is not None:
            record.write_bytes(kept)


@pytest.mark.skipif(not (REPO_ROOT / "build" / ".torch-stamp").is_file(), reason="needs a build made by setup.sh")
@pytest.mark.parametrize("name", [".setup-unavailable", ".torch-stamp"])
def test_setup_never_writes_its_notes_through_a_planted_link(tmp_path: Path, name: str) -> None:
    """setup.sh runs as root in CI: a link planted at one of the build folder's notes must not turn its
    write into a write elsewhere. It stops, names the file, and the link's target is untouched."""
    import sys

    note = REPO_ROOT / "build" / name
    notes = [REPO_ROOT / "build" / n for n in (".setup-unavailable", ".torch-stamp")]
    kept = {n: n.read_bytes() if n.exists() else None for n in notes}  # both put back as they were
    stamp = (REPO_ROOT / "build" / ".torch-stamp").read_text().strip()
    victim = tmp_path / "victim"
    victim.write_text(stamp + "\n" if name == ".torch-stamp" else "kept\n")  # the stamp read through it matches
    before = victim.read_text()
    shim = tmp_path / "python"  # ruptures missing and no package index: setup.sh notes it in .setup-unavailable
    shim.write_text('#!/bin/sh\n'
                    f'if [ "$1" = - ]; then cat > /dev/null; printf "%s\\nruptures\\n" "{stamp}"; exit 0; fi\n'
                    'if [ "$1" = -m ] && [ "$2" = pip ]; then exit 1; fi\n'
                    f'exec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    note.unlink(missing_ok=True)
    note.symlink_to(victim)
    try:
        proc = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO_ROOT, env={**os.environ, "PYTHON": str(shim)},
                              capture_output=True, text=True, timeout=600)
    finally:
        for n, content in kept.items():
            n.unlink(missing_ok=True)
            if content is not None:
                n.write_bytes(content)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"error: build/{name} is a link or another user's file: not written" in proc.stdout
    assert victim.read_text() == before
