"""The README's two commands in the order a newcomer runs them: the main job first, then the tests.

The main job must leave the checkout as it found it (its results go to ./dbench-results/, which git
ignores), so no test can see a file it wrote. A fresh clone of the committed tree runs the main job
with this checkout's native build, then the tests that read committed results run in that clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAIN_JOB = [sys.executable, "run.py", "--scenario", "boundary", "--device", "cpu"]
# The tests that read the committed results folders (the notebook globs one; the figures read named files).
READERS = ["tests/test_notebook.py", "tests/test_figures.py", "tests/test_report.py"]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.skipif(not (ROOT / "build" / "lib").is_dir(), reason="needs the native build (scripts/setup.sh)")
def test_main_job_then_tests_in_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
    # The working tree's tracked changes too, so the test checks this tree rather than its last commit.
    diff = _git("diff", "HEAD", "--binary", cwd=ROOT)
    if diff:
        subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=diff, text=True, cwd=clone, check=True)
    for path in _git("ls-files", "--others", "--exclude-standard", cwd=ROOT).splitlines():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, clone / path)
    before = _git("status", "--porcelain", cwd=clone)
    env = {**os.environ, "DBENCH_BUILD_DIR": str(ROOT / "build")}
    job = subprocess.run([*MAIN_JOB, "--quick"], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    written = sorted((clone / "dbench-results").rglob("*.json"))
    assert written, "the main job wrote no result under ./dbench-results/"
    assert _git("status", "--porcelain", cwd=clone) == before, "the main job changed files git tracks or sees"
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *READERS],
                           cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert tests.returncode == 0, tests.stdout[-3000:]
