"""The pull-request and bisect helpers: scripts/interleave.sh (two checkouts' runs in turn) and
scripts/bisect.sh (its refusals; a whole bisect builds every commit it visits, too slow here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dbench.analysis import gate

REPO = Path(__file__).resolve().parent.parent
# With the C++ section: its Google Benchmark JSON lands beside each result and must not count as one.
SMALL = ["--ops", "noop", "--variants", "raw,cpp", "--quick", "--rounds", "2", "--device", "cpu"]


def script(name: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "scripts" / name), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / "build" / "CMakeCache.txt").is_file(), reason="needs the build (scripts/setup.sh)")
def test_interleave_runs_each_side_in_turn_and_the_gate_reads_both(tmp_path: Path) -> None:
    done = script("interleave.sh", ".", ".", "2", str(tmp_path), *SMALL)
    assert done.returncode == 0, done.stdout + done.stderr
    order = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("[interleave]")]
    assert order == ["a", "b", "b", "a"]  # ABBA
    sides = {s: sorted(p for p in (tmp_path / s).glob("*.json") if ".gbench" not in p.name) for s in ("a", "b")}
    from dbench.bench.io.cpp_results import driver_path

    if driver_path().is_file():  # built where Google Benchmark is installed
        assert len(list((tmp_path / "a").glob("*.gbench.json"))) == 2
    assert all(len(files) == 2 for files in sides.values())
    times = {s: [json.loads(f.read_text())["env"]["time"] for f in files] for s, files in sides.items()}
    assert times["a"][0] < times["b"][0] <= times["b"][1] < times["a"][1]
    result = gate.gate([d for _, d in gate.load_run(tmp_path / "b")], [d for _, d in gate.load_run(tmp_path / "a")])
    assert result.design == "independent" and {r.n_new for r in result.rows if r.n_new} == {2}


@pytest.mark.parametrize(("args", "message"), [
    ([".", "."], "usage"),
    (["/nonexistent", ".", "2", "OUT"], "not a checkout"),
    ([".", ".", "1", "OUT"], "N must be"),
])
def test_interleave_refuses_bad_usage(tmp_path: Path, args: list[str], message: str) -> None:
    done = script("interleave.sh", *[str(tmp_path / "out") if a == "OUT" else a for a in args])
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize(("args", "message"), [
    (["HEAD"], "usage"),
    (["HEAD", "HEAD"], "the same commit"),
    (["no-such-commit", "HEAD"], "is not a commit"),
    (["HEAD", "HEAD~1"], "is not an ancestor"),
    (["HEAD~1", "HEAD", "1"], "N must be"),
])
def test_bisect_refuses_bad_usage_before_any_work(args: list[str], message: str) -> None:
    if subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=REPO, capture_output=True).returncode:
        pytest.skip("a clone with one commit")
    before = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    done = script("bisect.sh", *args)
    assert done.returncode == 2 and message in done.stderr
    assert subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout == before


FAKE_RUN = '''
"""A stand-in for run.py: one process's result, its GPU rows at the speed this commit's speed.txt says."""
import json, random, sys, time
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
doc = json.loads(Path("template.json").read_text())
speed = float(Path("speed.txt").read_text())
rng = random.Random(time.time_ns())
for row in doc["rows"]:
    row["median"] = 1.0 * speed * rng.lognormvariate(0.0, 0.002)
name = f"boundary-fake-{time.time_ns()}.json"
(out / name).write_text(json.dumps(doc))
'''


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_bisect_names_the_commit_that_made_the_rows_slower(tmp_path: Path) -> None:
    """A repository of five commits whose fourth makes every GPU row 30 % slower: bisect, with this
    suite's gate, scripts and packages and a stand-in run.py, names that commit."""
    from test_gate import make_doc, make_row

    repo = tmp_path / "repo"
    for package in ("dbench", "bench", "ops", "scenarios", "analysis"):
        shutil.copytree(REPO / package, repo / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (repo / "scripts").mkdir()
    for name in ("bisect.sh", "interleave.sh"):
        shutil.copy(REPO / "scripts" / name, repo / "scripts" / name)
    (repo / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\ntrue\n")
    (repo / "run.py").write_text(FAKE_RUN)
    rows = [make_row("muladd", f"v{i}", metric="gpu_us", absolute=[1.0]) for i in range(6)]
    for row in rows:
        row.pop("process_medians", None)
    (repo / "template.json").write_text(json.dumps(make_doc(rows)))

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    shas = []
    for i, speed in enumerate(("1.0", "1.0", "1.0", "1.3", "1.3")):
        (repo / "speed.txt").write_text(speed)
        (repo / "note.txt").write_text(str(i))
        git("add", "-A")
        git("commit", "-qm", f"commit {i}")
        shas.append(git("rev-parse", "HEAD"))
    done = subprocess.run(["bash", "scripts/bisect.sh", shas[0], shas[-1], "3"], cwd=repo, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{shas[3]} is the first bad commit" in done.stdout
    assert git("worktree", "list").count("\n") == 0  # its worktrees are gone; this checkout is as it was
    assert git("rev-parse", "HEAD") == shas[-1]
