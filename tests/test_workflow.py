"""The GitHub Actions workflows: actionlint (with shellcheck on the run: scripts, when installed)
and the steps the nightly job must have."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (requirements.txt)")

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
NIGHTLY = REPO_ROOT / ".github" / "workflows" / "nightly.yml"


def _actionlint() -> str | None:
    found = shutil.which("actionlint")
    if found:
        return found
    beside = Path(sysconfig.get_path("scripts")) / "actionlint"  # pip's scripts folder, off PATH
    return str(beside) if beside.exists() else None


def test_there_are_workflows() -> None:
    assert NIGHTLY in WORKFLOWS


@pytest.mark.skipif(_actionlint() is None,
                    reason="actionlint is not installed (scripts/setup.sh installs it with pip)")
def test_actionlint_passes() -> None:
    actionlint = _actionlint()
    assert actionlint is not None
    out = subprocess.run([actionlint, "-no-color", *map(str, WORKFLOWS)], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def _nightly() -> dict[str, Any]:
    document = yaml.safe_load(NIGHTLY.read_text())
    assert isinstance(document, dict)
    return document


def _steps() -> list[dict[str, Any]]:
    return _nightly()["jobs"]["boundary"]["steps"]


def _step(fragment: str) -> dict[str, Any]:
    matches = [s for s in _steps() if fragment in s.get("run", "")]
    assert matches, f"no step runs {fragment!r}"
    return matches[0]


def test_nightly_triggers_and_runner() -> None:
    document = _nightly()
    triggers = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "schedule" in triggers and triggers["schedule"][0]["cron"]
    assert "workflow_dispatch" in triggers
    assert {"env_a", "env_b", "pairs", "baseline"} <= set(triggers["workflow_dispatch"]["inputs"])
    job = document["jobs"]["boundary"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert {"pairs", "require", "calibration"} <= set(triggers["workflow_dispatch"]["inputs"])


def test_nightly_steps_that_matter() -> None:
    steps = _steps()
    uses = [s.get("uses", "") for s in steps]
    assert uses[0].startswith("actions/checkout@")
    assert any("bash scripts/setup.sh" in s.get("run", "") for s in steps)
    ab = _step("--ab")["run"]
    assert "run.py --scenario boundary --ab" in ab and "--pairs" in ab and "--out" in ab
    fallback = _step("run.py --scenario boundary --processes 4")
    assert "--baseline" in fallback["run"] and fallback.get("if")
    gate = _step("dbench.analysis.gate")["run"]
    assert gate.count('>> "$GITHUB_STEP_SUMMARY"') >= 2 and "--format md" in gate
    instructions = _step("dbench.bench.instructions check")
    assert "cancelled()" in instructions.get("if", "")
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@v4")]
    assert len(upload) == 1 and "results/nightly" in upload[0]["with"]["path"]
    assert "cancelled()" in upload[0].get("if", "")  # the files are kept when the gate fails
    names = [s.get("name", "") for s in steps]
    assert names.index(next(n for n in names if "Gate" in n)) < uses.index(upload[0]["uses"])


def test_nightly_keeps_a_history_and_its_page() -> None:
    history = _step("dbench.analysis.history")
    assert "cancelled()" in history.get("if", "") and "--plot" in history["run"] and "index.html" in history["run"]
    names = [s.get("name", "") for s in _steps()]
    assert names.index(history["name"]) < names.index("Upload the result files")
    publish = _nightly()["jobs"]["publish"]
    assert publish["needs"] == "boundary" and "DBENCH_PAGES" in publish["if"]


def test_pull_request_workflow_gates_head_against_base_and_comments() -> None:
    document = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "pr.yml").read_text())
    triggers = document.get("on", document.get(True))
    assert "pull_request" in triggers
    job = document["jobs"]["boundary"]
    assert "head.repo.full_name == github.repository" in job["if"]  # no fork's code on the runner
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "git worktree add" in runs and "pull_request.base.sha" in str(job["steps"])
    assert "scripts/interleave.sh" in runs
    assert 'dbench.analysis.gate "$OUT/b" "$OUT/a"' in runs and "comment.md" in runs
    assert "gh pr comment" in runs and "--body-file" in runs
    assert document["permissions"]["pull-requests"] == "write"


def test_ci_runs_the_readme_command_then_the_instruction_check() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    command = "bash scripts/setup.sh && python3 -m pytest -q tests && ctest --test-dir build --output-on-failure"
    assert command in readme and command in ci
    assert ci.index(command) < ci.index("python3 -m dbench.bench.instructions check")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def _defaults() -> dict[str, str]:
    """The workflow's env defaults, as a night with no inputs and no repository variables has them."""
    import re

    env = _nightly()["env"]
    out = {}
    for name, value in env.items():
        last = re.findall(r"'([^']*)' \}\}$", str(value))
        out[name] = last[0] if last else str(value)
    return out


@pytest.mark.parametrize(("design", "expected"), [
    ("duet", ["--pairs", "14", "--duet", "--rounds", "336", "--cpp-repetitions", "336"]),
    ("grouped", ["--pairs", "14", "--rounds", "336", "--cpp-repetitions", "336"]),
])
def test_the_nightly_ab_step_runs_the_design_it_is_given(tmp_path: Path, design: str, expected: list[str]) -> None:
    """The A/B step's own script, run with a stand-in python3: the duet design by default (14 pairs of 24
    rounds, the C++ driver's too), the grouped one when asked, and an unknown design refused."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path / "argv"}"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, **_defaults(), "PATH": f"{bin_dir}:{os.environ['PATH']}", "SIDE_A": "build:/x",
           "GITHUB_OUTPUT": str(tmp_path / "output"), "DESIGN": design}
    assert _defaults()["DESIGN"] == "duet"
    proc = subprocess.run(["bash", "-c", _step("--ab")["run"]], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    argv = (tmp_path / "argv").read_text().split("\n")[:-1]
    assert argv[:6] == ["run.py", "--scenario", "boundary", "--ab", "build:/x", "env:"]
    assert argv[6:-2] == expected and argv[-2:] == ["--out", "results/nightly/ab"]
    assert (tmp_path / "output").read_text() == "rc=0\n"
    refused = subprocess.run(["bash", "-c", _step("--ab")["run"]], env={**env, "DESIGN": "fast"}, cwd=tmp_path,
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "design must be duet or grouped, not 'fast'" in refused.stdout


def test_the_gpu_nights_script_runs_the_nightly_design() -> None:
    """scripts/gpu_nights.sh is how real nights of the nightly's design are made: the same counts."""
    (line,) = re.findall(r'^\s*design="([^"]*)"', (REPO_ROOT / "scripts" / "gpu_nights.sh").read_text(), re.M)
    d = _defaults()
    assert line.split() == ["--duet", "--pairs", d["PAIRS"], "--rounds", d["ROUNDS"],
                            "--cpp-repetitions", d["CPP_REPETITIONS"]] and d["DESIGN"] == "duet"


def _nights_stub(tmp_path: Path) -> dict[str, str]:
    """An environment whose `python3` fakes run.py (a result written into --out) and the gate (a
    verdict printed), and runs anything else (the folder check) with this interpreter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "python3"
    stub.write_text('#!/usr/bin/env bash\nprev=""\nfor a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done\n'
                    'if [ "$1" = run.py ]; then echo "{\\"night\\": \\"$*\\"}" > "$out/r.json"; exit 0; fi\n'
                    'if [ "$2" = dbench.analysis.gate ]; then echo "### Regression gate — PASS"; exit 0; fi\n'
                    f'exec {sys.executable} "$@"\n')
    stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _nights(out: Path, nights: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO_ROOT / "scripts" / "gpu_nights.sh"), str(out), nights], env=env,
                          capture_output=True, text=True)


def test_two_calls_of_the_gpu_nights_script_into_one_folder_keep_both_nights(tmp_path: Path) -> None:
    """Each night is named by its start, and a name already taken (a file, or a link planted there)
    gets a suffix: a second call into the same folder (or two nights of one kind in one call) never
    overwrites a night nor writes through a link."""
    env = _nights_stub(tmp_path)
    out = tmp_path / "nights"
    out.mkdir(mode=0o755)
    now = int(time.time())  # a dangling link at the name of every second the calls may start in
    for second in range(now - 1, now + 30):
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
        (out / f"aa-{stamp}.log").symlink_to(tmp_path / f"planted-{stamp}")
    for nights in ("aa,aa", "aa"):
        done = _nights(out, nights, env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("gate exit 0") == nights.count("aa"), done.stdout
    results = sorted(p.name for p in out.glob("*.json") if not p.name.endswith(".gate.json"))
    assert len(results) == 3 and len(list(out.glob("*.gate.md"))) == 3, results
    assert len([p for p in out.glob("*.log") if not p.is_symlink()]) == 3, sorted(out.iterdir())
    assert all(re.fullmatch(r"aa-\d{8}T\d{6}Z-\d\.json", name) for name in results), results
    assert not list(tmp_path.glob("planted-*"))


def test_the_gpu_nights_script_refuses_a_shared_folder_and_a_bad_night_before_any_work(tmp_path: Path) -> None:
    env = _nights_stub(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # sticky and world-writable, as /tmp: another user could plant the files
    refused = _nights(shared, "aa", env)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    (line,) = refused.stderr.splitlines()
    assert line.startswith("gpu_nights.sh: error: OUTDIR: refusing the output folder") and "Use OUTDIR" in line, line
    assert not list(shared.iterdir())
    bad = _nights(tmp_path / "out", "aa,nope", env)
    assert bad.returncode == 2 and bad.stdout == "" and "got 'nope'" in bad.stderr, bad.stdout + bad.stderr
    assert not (tmp_path / "out").exists()
