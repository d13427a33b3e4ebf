"""RunOptions (bench/harness/options.py): made once from the command line, sent to children as JSON."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dbench.bench.harness.options import RunOptions, child_options_file, defaults_for, read_child_options
from dbench.bench.harness.cli import UsageError


def test_options_survive_json_whole(tmp_path: Path) -> None:
    """Every field a child reads comes back with its type: tuples, paths, None, numbers."""
    options = RunOptions("boundary", "cuda:1", ops=("muladd", "noop"), op_files=(str(tmp_path / "my_ops.py:f"),),
                         user_ops=("f",), variants=("raw",), modes=("inference",), shapes=((4, 32), (8, 64)),
                         axis_values=(("size", ("4096", "65536")),),
                         cache=("warm", "cold"),
                         rounds=7, time_budget=2.5, block_ms=2.5, order="shuffled", seed=2**32 - 1, no_cpp=True,
                         pin_cores=0, pin_offset=3, out=tmp_path / "o", default_out=tmp_path / "d",
                         baseline=tmp_path / "b.json", baseline_files=(tmp_path / "b.json",), shard_child=True)
    again = RunOptions.from_json(options.to_json())
    assert again == options
    assert isinstance(again.out, Path) and isinstance(again.baseline_files[0], Path)
    assert again.shapes == ((4, 32), (8, 64)) and again.axis_values == (("size", ("4096", "65536")),)


def test_the_sides_of_an_ab_run_stay_with_the_parent() -> None:
    parent = RunOptions("boundary", "cpu", ab=("env:", "env:X=1"), pairs=2, ab_sides=(object(), object()))
    assert "ab_sides" not in parent.to_json()
    assert RunOptions.from_json(parent.to_json()).ab_sides == ()


@pytest.mark.parametrize(("text", "said"), [
    ("[]", "not a run's options"),
    ('{"schema": "dbench-options/0", "options": {}}', "not a run's options"),
    ('{"schema": "dbench-options/1", "options": {"scenario": "boundary", "device": "cpu", "colour": 1}}',
     "unknown options ['colour'], missing []"),
    ('{"schema": "dbench-options/1", "options": {"scenario": "boundary"}}', "unknown options [], missing ['device']"),
])
def test_an_options_file_that_does_not_fit_is_refused(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "o.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=said.replace("[", r"\[").replace("]", r"\]")):
        read_child_options(path)


def test_a_child_command_line_is_the_options_file_alone() -> None:
    assert child_options_file(["--scenario", "boundary"]) is None  # a user's: cli.parse reads it
    assert child_options_file(["--options-file", "x.json"]) == Path("x.json")
    with pytest.raises(UsageError, match="whole command line"):
        child_options_file(["--options-file", "x.json", "--quick"])


def test_layers_later_win_and_quick_takes_its_column() -> None:
    from dbench.scenarios import DECLARATIONS

    boundary = DECLARATIONS["boundary"]
    on_cpu = defaults_for(boundary, "cpu", quick=False, repeated=True)  # the repeated layer is CUDA's only
    assert on_cpu["block_ms"] == 10.0 and on_cpu["order"] == "grouped"
    nightly = defaults_for(boundary, "cuda:0", quick=False, repeated=True)
    assert (nightly["rounds"], nightly["order"], nightly["block_ms"]) == (90, "grouped", 2.5)
    assert defaults_for(boundary, "cuda:0", quick=True, repeated=False)["rounds"] == boundary.cuda_defaults["rounds"][1]
    assert all(f.name in {g.name for g in dataclasses.fields(RunOptions)} for f in dataclasses.fields(RunOptions))
