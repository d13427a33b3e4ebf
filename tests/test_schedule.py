"""When a repeated run's children start (bench/children/schedule.py): one group after another, or
(--overlap-pairs) each pair once the pair before has finished its CPU passes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dbench.bench.children.schedule import batches, may_start, run_groups
from dbench.bench.children.shard.process import Child
from dbench.bench.harness.options import RunOptions

# A stand-in for run.py: says when it started, makes its CPU-passes marker after `cpu` seconds (if it
# has one), lives `total` seconds, says when it ended, and leaves a complete result in its folder.
FAKE_CHILD = """
import json, os, sys, time
out, marker, cpu, total, fail = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
start = time.time()
time.sleep(cpu)
if marker != "-":
    os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
time.sleep(max(0.0, total - cpu))
if fail:
    sys.exit(3)
with open(os.path.join(out, "result.json"), "w") as f:
    json.dump({"status": "complete", "config": {"rounds_done": 1, "rounds": 1},
               "times": [start, time.time()]}, f)
"""


def _child(tmp_path: Path, index: int, *, marker: bool, cpu: float, total: float, fail: bool = False) -> Child:
    cpu_done = tmp_path / f"process-{index}.cpu-done" if marker else None
    options = RunOptions(scenario="boundary", device="cpu", cpu_done=cpu_done)
    child = Child(index, f"process {index + 1}", sys.executable, tmp_path / f"process-{index}",
                  tmp_path / f"process-{index}.log", options=options)
    script = tmp_path / "fake_child.py"
    script.write_text(FAKE_CHILD)
    child.command = [sys.executable, str(script), str(child.out_dir), str(cpu_done or "-"), str(cpu), str(total),
                     "1" if fail else "0"]
    return child


def _times(child: Child) -> tuple[float, float]:
    doc: dict[str, Any] = json.loads((child.out_dir / "result.json").read_text())
    start, end = doc["times"]
    return start, end


class _Fake:
    def __init__(self, done: bool = False, over: bool = False) -> None:
        self.done, self.over = done, over


def test_may_start_waits_for_every_group_before_or_only_for_the_cpu_passes_of_the_last_one() -> None:
    done = lambda c: c.done  # noqa: E731
    over = lambda c: c.over  # noqa: E731
    groups = [[_Fake(), _Fake()], [_Fake(), _Fake()], [_Fake(), _Fake()]]
    assert may_start(0, groups, overlap=False, done=done, over=over)
    assert not may_start(1, groups, overlap=True, done=done, over=over)
    for c in groups[0]:
        c.done = True  # pair 0 is taking its GPU turns
    assert may_start(1, groups, overlap=True, done=done, over=over)
    assert not may_start(1, groups, overlap=False, done=done, over=over)
    for c in groups[1]:
        c.done = True
    assert not may_start(2, groups, overlap=True, done=done, over=over)  # pair 0 still runs: at most two pairs
    groups[0][0].over = True
    assert not may_start(2, groups, overlap=True, done=done, over=over)
    groups[0][1].over = True
    assert may_start(2, groups, overlap=True, done=done, over=over)
    assert not may_start(2, groups, overlap=False, done=done, over=over)  # pair 1 has not ended
    groups[1][0].done = False  # one side of pair 1 still in its CPU passes
    assert not may_start(2, groups, overlap=True, done=done, over=over)


def test_overlapping_pairs_start_at_the_end_of_the_previous_pairs_cpu_passes(tmp_path: Path) -> None:
    """Real processes: pair 1 starts once both of pair 0 have made their markers (before pair 0
    ends), pair 2 only once pair 0 has ended; every child ends complete."""
    children = [_child(tmp_path, i, marker=True, cpu=0.5, total=2.5) for i in range(6)]
    checkpoints: list[int] = []
    interrupted = run_groups(batches(children, duet=True), 1, Console(quiet=True), tmp_path, None,
                             on_done=lambda: checkpoints.append(1), overlap=True)
    assert not interrupted and [c.status for c in children] == ["complete"] * 6
    t = [_times(c) for c in children]
    assert max(t[0][1], t[1][1]) > min(t[2][0], t[3][0])  # pair 1 started while pair 0 ran
    assert min(t[2][0], t[3][0]) >= max(t[0][0], t[1][0]) + 0.5  # ... but after its CPU passes
    assert min(t[4][0], t[5][0]) >= max(t[0][1], t[1][1])  # pair 2 after pair 0 had ended
    assert checkpoints  # the merged file was rewritten as children ended


def test_without_overlap_each_group_starts_after_the_last_one_ended(tmp_path: Path) -> None:
    children = [_child(tmp_path, i, marker=True, cpu=0.2, total=0.8) for i in range(4)]
    run_groups(batches(children, duet=True), 1, Console(quiet=True), tmp_path, None, on_done=lambda: None)
    t = [_times(c) for c in children]
    assert min(t[2][0], t[3][0]) >= max(t[0][1], t[1][1])
    assert [c.status for c in children] == ["complete"] * 4


def test_a_failed_child_starts_no_further_pair_and_the_running_one_ends_on_its_own(tmp_path: Path) -> None:
    children = [_child(tmp_path, 0, marker=True, cpu=0.2, total=2.0),
                _child(tmp_path, 1, marker=True, cpu=0.2, total=0.4, fail=True)]
    children += [_child(tmp_path, i, marker=True, cpu=0.2, total=0.6) for i in (2, 3, 4, 5)]
    run_groups(batches(children, duet=True), 1, Console(quiet=True), tmp_path, None, on_done=lambda: None,
               overlap=True)
    assert children[1].status == "failed" and children[0].status == "complete"
    assert children[4].proc is None and children[5].proc is None  # never started
    assert all(c.status in ("complete", None) for c in children[2:4])


@pytest.mark.parametrize(("argv", "message"), [
    (["--overlap-pairs"], "argument --overlap-pairs: only with --duet"),
    (["--ab", "env:", "env:", "--overlap-pairs"], "argument --overlap-pairs: only with --duet"),
])
def test_overlap_pairs_without_a_duet_is_refused(argv: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.bench.harness import cli
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES

    with pytest.raises(SystemExit) as stopped:
        cli.parse(["--scenario", "boundary", *argv], SCENARIO_NAMES, OP_NAMES, VARIANT_NAMES, Path("results"),
                  DECLARATIONS)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and message in err and err.count("\n") == 1


def test_overlapping_pairs_ask_four_sides_worth_of_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from dbench.bench.harness import cli

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(6)), raising=False)
    words = ["--pin-cores", "2", "--duet", "--overlap-pairs", "--ab", "env:", "env:"]
    with pytest.raises(cli.UsageError, match=r"--pin-cores: 2 for each side of two overlapping pairs needs 8 "
                                             r"cores, but this process may run on 6; give at most 1"):
        cli.check_pinning(cli.build_parser(["boundary"]).parse_args(words))
    cli.check_pinning(cli.build_parser(["boundary"]).parse_args(["--pin-cores", "1", *words[2:]]))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)  # this machine's kind
    with pytest.raises(cli.UsageError) as refused:
        cli.check_pinning(cli.build_parser(["boundary"]).parse_args(["--pin-cores", "1", *words[2:]]))
    assert str(refused.value) == ("argument --pin-cores: 1 for each side of two overlapping pairs needs 4 cores, but "
                                  "this process may run on 2; --overlap-pairs needs 4 cores or more: run without it")
