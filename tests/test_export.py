"""analysis.export: result files as Bencher Metric Format and github-action-benchmark's list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbench.analysis import export, gate
from test_gate import make_doc, make_row, write

H200 = Path(__file__).resolve().parent.parent / "results" / "h200" / "boundary-cuda0-20261203T055804Z-fd1ea8.json.gz"


def test_bencher_has_one_benchmark_per_row_and_one_measure_per_metric() -> None:
    doc = gate.load_run(H200)[0][1]
    out = export.bencher([doc])
    timed = export.timed_rows([doc])
    assert sum(len(measures) for measures in out.values()) == len(timed)  # no two rows share a name
    row = next(r for _, r in timed if r["op"] == "muladd" and r["variant"] == "cpp" and r["metric"] == "gpu_us")
    measure = out["boundary/muladd/cpp/inference [cuda:0 float32 4x32]"]["gpu_us"]
    assert measure == {"value": row["median"], "lower_value": row["ci_low"], "upper_value": row["ci_high"]}
    assert any(name.endswith("(cpp) [cuda:0 float32 4x32]") for name in out)  # the C++ driver's rows


def test_untimed_rows_are_left_out_and_the_list_format_has_units() -> None:
    doc = make_doc([make_row("muladd", "raw", absolute=[5.0, 5.2, 5.1]), make_row("muladd", "cpp", status="failed")])
    listed = export.github_action_benchmark([doc])
    assert [e["name"] for e in listed] == ["boundary/muladd/raw/inference [cuda:0 float32 4x32] cpu_us"]
    assert listed[0]["unit"] == "us" and listed[0]["value"] == 5.1


def test_the_command_writes_either_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "r.json", make_doc([make_row("noop", "raw", absolute=[1.0, 1.1, 1.2])]))
    out = tmp_path / "bmf.json"
    assert export.main([str(path), "--format", "bencher", "--out", str(out)]) == 0
    assert list(json.loads(out.read_text())) == ["boundary/noop/raw/inference [cuda:0 float32 4x32]"]
    assert export.main([str(path), "--format", "github-action-benchmark"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["value"] == 1.1


@pytest.mark.parametrize("args", [["--format", "bencher", "MISSING"], ["--format", "csv", "FILE"],
                                  ["FILE", "--format", "bencher", "--out", "/nonexistent-dir/x.json"]])
def test_bad_input_exits_2(tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "r.json", make_doc([make_row("noop", "raw", absolute=[1.0])]))
    argv = [str(tmp_path / "missing.json") if a == "MISSING" else str(path) if a == "FILE" else a for a in args]
    try:
        status = export.main(argv)
    except SystemExit as exc:  # usage errors leave through argparse, as in every command
        status = exc.code
    assert status == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_out_on_a_full_disk_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--out checked, then the write fails (once: a traceback): one line, the file not left partial."""
    import errno
    import os

    from dbench.analysis import outputs

    def full(path: object, data: object) -> None:  # bench.io.atomic.write_atomic on a full disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    path = write(tmp_path / "r.json", make_doc([make_row("noop", "raw", absolute=[1.0, 1.1, 1.2])]))
    monkeypatch.setattr(outputs, "write_atomic", full)
    out = tmp_path / "bmf.json"
    assert export.main([str(path), "--format", "bencher", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"python -m dbench.analysis.export: error: cannot write {out}: No space left on device\n"
    assert not out.exists()


def test_a_user_ops_rows_are_named_by_its_source() -> None:
    """Two different user ops of one name (two files, or an edited file) are two benchmarks, never one
    series; a shipped op's name (no op_source) is as before."""
    docs = []
    for source in ("a.py:my_op@111111111111", "b.py:my_op@222222222222"):
        row = make_row("my_op", "raw", absolute=[2.0, 2.1, 2.2])
        docs.append(make_doc([{**row, "op_source": source}, make_row("noop", "raw", absolute=[1.0, 1.1])]))
    names = list(export.bencher(docs))
    assert names == ["boundary/my_op/raw/inference from a.py:my_op@111111111111 [cuda:0 float32 4x32]",
                     "boundary/noop/raw/inference [cuda:0 float32 4x32]",
                     "boundary/my_op/raw/inference from b.py:my_op@222222222222 [cuda:0 float32 4x32]"]
    listed = [e["name"] for e in export.github_action_benchmark(docs)]
    assert len(set(listed)) == 3 and listed[0].endswith("from a.py:my_op@111111111111 [cuda:0 float32 4x32] cpu_us")
