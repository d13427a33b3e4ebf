"""No result is ever lost or left corrupt: result files are reserved with a valid document, written
atomically, and a write that fails mid-run (a full disk, a folder removed) stops the run cleanly.

A full disk is simulated by making bench.io.atomic's file fsync fail with ENOSPC (deterministic, and
unlike a read-only folder it also fails as root); the temporary file it wrote must be gone after.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.io import atomic
from dbench.bench.io.results import ResultWriteError, load_result, reserve_result_path, write_result

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--scenario", "boundary", "--ops", "noop", "--variants", "raw", "--no-cpp", "--device", "cpu", "--quick",
         "--no-pin", "--block-ms", "0.2"]
NO_SPACE = os.strerror(errno.ENOSPC)


class FullDisk:
    """dbench.bench.io.atomic's `os`, whose file fsyncs fail with ENOSPC after the first `after` of them
    (`times` failures, then it works again; None: every one after)."""

    def __init__(self, after: int, times: int | None = None) -> None:
        self.after, self.times, self.calls, self.failed = after, times, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def fsync(self, fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            self.calls += 1
            if self.calls > self.after and (self.times is None or self.failed < self.times):
                self.failed += 1
                raise OSError(errno.ENOSPC, NO_SPACE)
        os.fsync(fd)


def full_disk(monkeypatch: pytest.MonkeyPatch, after: int, times: int | None = None) -> FullDisk:
    disk = FullDisk(after, times)
    monkeypatch.setattr(atomic, "os", disk)
    return disk


def leftovers(folder: Path) -> list[Path]:
    return sorted(folder.rglob(".*.tmp"))


def _doc(status: str, n: int) -> dict[str, Any]:
    return {"scenario": "boundary", "status": status, "config": {"rounds_done": n}, "env": {}, "rows": []}


# ---------------------------------------------------------------------------
# The writers.


def test_a_reserved_result_file_is_never_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = reserve_result_path(tmp_path / "new", "boundary", "cuda:0")
    doc = load_result(path)  # valid from the start: a run killed now leaves a `running` document
    assert doc["status"] == "running" and doc["rows"] == [] and doc["env"]["device"] == "cuda:0"
    # a file system without hard links: an exclusive create, then the document replaces it
    monkeypatch.setattr(os, "link", lambda *_: (_ for _ in ()).throw(OSError(errno.EPERM, "no links")))
    assert load_result(reserve_result_path(tmp_path, "boundary", "cpu"))["status"] == "running"
    assert leftovers(tmp_path) == []


def test_a_reservation_on_a_full_disk_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, NO_SPACE)))
    with pytest.raises(ResultWriteError, match=f"cannot write {tmp_path}: {NO_SPACE}"):
        reserve_result_path(tmp_path, "boundary", "cpu")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_previous_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.json"
    write_result(path, _doc("running", 1))
    full_disk(monkeypatch, after=0)
    with pytest.raises(ResultWriteError) as raised:
        write_result(path, _doc("running", 2))
    assert str(raised.value) == f"cannot write {path}: {NO_SPACE}" and raised.value.errno == errno.ENOSPC
    assert load_result(path)["config"]["rounds_done"] == 1 and leftovers(tmp_path) == []
    monkeypatch.undo()
    full_disk(monkeypatch, after=1)  # the JSON is written, its CSV view is not: the error names the CSV
    with pytest.raises(ResultWriteError, match=r"r\.csv"):
        write_result(path, _doc("complete", 3))
    assert load_result(path)["status"] == "complete" and leftovers(tmp_path) == []


# ---------------------------------------------------------------------------
# A run whose result write fails mid-run (run.py in this process, so the full disk can be simulated).


@pytest.fixture
def in_process(run_main: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """run.py's main (conftest's run_main), with a checkpoint after every round."""
    from dbench.bench.harness import common

    monkeypatch.setattr(common, "CHECKPOINT_SECONDS", 0.0)
    return run_main


# fsyncs of a run: 1 the reserved file, 2-3 its first document (JSON, CSV), then 2 after each round,
# 2 at the end.
@pytest.mark.parametrize(("after", "times", "code", "final"), [
    (5, 1, 1, ("failed", 2)),  # round 2's checkpoint fails; the last write keeps both rounds, status failed
    (5, None, 1, ("running", 1)),  # the disk stays full: the file stays round 1's checkpoint
    # Only the reservation was written: no round ran, but the run had started (its file reserved): 1, as the
    # docs say of a write that fails mid-run (it was once 2); the reservation stays valid (0 rounds done).
    (1, None, 1, ("running", 0)),
])
def test_a_full_disk_mid_run_stops_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_process: Any,
                                           capsys: pytest.CaptureFixture[str], after: int, times: int | None,
                                           code: int, final: tuple[str, int | None]) -> None:
    full_disk(monkeypatch, after, times)
    assert in_process.main([*SMALL, "--rounds", "4", "--out", str(tmp_path)]) == code
    err = capsys.readouterr().err
    (path,) = tmp_path.glob("*.json")
    errors = [line for line in err.splitlines() if line.startswith("run.py: error:")]  # (the rest: progress)
    assert errors[0].startswith(f"run.py: error: cannot write {path}: {NO_SPACE}; stopped after "), err
    assert len(errors) == 1 and "Traceback" not in err, err  # one line says it all, the final write's fate too
    assert ("the final write failed too" in err) == (times is None)
    assert ("what was measured is in" in err) == (times is not None)
    doc = load_result(path)
    assert (doc["status"], doc["config"].get("rounds_done")) == final
    if final[0] == "failed":
        assert doc["error"] == f"cannot write {path}: {NO_SPACE}"
        assert all(len(r["samples"]) == 2 for r in doc["rows"] if r["status"] == "ok") and doc["rows"]
    assert leftovers(tmp_path) == []


def test_a_full_disk_during_a_repeated_run_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    in_process: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The parent's checkpoint after process 1 fails: process 2 never starts; the last write keeps process 1."""
    full_disk(monkeypatch, after=3, times=1)  # the reservation, the first document (2), then process 1's
    assert in_process.main([*SMALL, "--rounds", "2", "--processes", "2", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    (path,) = tmp_path.glob("*.json")
    assert f"run.py: error: cannot write {path}: {NO_SPACE}" in err.splitlines() and "Traceback" not in err, err
    doc = load_result(path)
    assert doc["status"] == "failed" and doc["error"] == f"cannot write {path}: {NO_SPACE}"
    assert [p["status"] for p in doc["env"]["processes"]] == ["complete", "not run"]
    assert doc["rows"] and all(r["process_medians"][1] is None for r in doc["rows"])
    assert leftovers(tmp_path) == []


def test_a_full_disk_before_a_repeated_runs_first_process_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  in_process: Any,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The merged file reserved, its first document not written: no process runs; exit 1, not 2 (nothing was
    measured, but the run had started, as in one process)."""
    full_disk(monkeypatch, after=1)
    assert in_process.main([*SMALL, "--rounds", "2", "--processes", "2", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    (path,) = tmp_path.glob("*.json")
    assert f"run.py: error: cannot write {path}: {NO_SPACE}" in err.splitlines() and "Traceback" not in err, err
    assert not list(tmp_path.glob("*.processes/process-*/*.json")) and load_result(path)["rows"] == []


@pytest.mark.slow
def test_a_result_folder_removed_mid_run_ends_it_with_one_line(tmp_path: Path) -> None:
    """No simulation: the folder goes away under a running run.py (ENOENT on its next checkpoint)."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "run.py"), *SMALL, "--rounds", "300000", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = [json.loads(p.read_text())["config"].get("rounds_done", 0) for p in out.glob("*.json")]
            if done and max(done) >= 1:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the run did not checkpoint a round")
        out.rename(tmp_path / "gone")  # at once (a removal could race a checkpoint's temporary file)
        shutil.rmtree(tmp_path / "gone")
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and f"cannot write {out}" in err and os.strerror(errno.ENOENT) in err, err
    assert not out.exists(), "the folder is not made again"


def test_a_stdout_whose_reader_left_mid_run_ends_it_with_one_line_and_exit_1(tmp_path: Path) -> None:
    """run.py | head: the pipe closes once the result is reserved; the run's next line to stdout (at the
    latest its tables) fails: one line on stderr, exit 1 (the run had started), the result file final."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "run.py"), *SMALL, "--rounds", "4", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*.json")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    errors = [line for line in err.splitlines() if "error" in line.lower()]  # (the rest: progress)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert errors == ["run.py: error: cannot write to standard output: Broken pipe"], err
    (path,) = out.glob("*.json")
    assert load_result(path)["status"] in ("complete", "failed")  # final either way, never left running
