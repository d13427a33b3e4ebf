"""The instruction-count channel (bench/instructions): dump parser, checker verdicts and exit codes,
the expected file's update, and a small real collection under callgrind when valgrind is installed."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from dbench.bench.instructions import EXPECTED_PATH, METRIC, SCHEMA, UNIT
from dbench.bench.instructions.__main__ import main
from dbench.bench.instructions.callgrind import CallgrindFormatError, libc_variants, parse_dump, read_dumps
from dbench.bench.instructions.check import compare, load, updated_expected
from dbench.bench.instructions.environment import child_environment, glibc_tunables
from dbench.bench.instructions.inject import iterations_for, padded, parse_injections

# The header and a few cost lines of a real dump (--dump-line=no --dump-instr=no), trimmed.
FIXTURE_DUMP = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 14071
cmd:  python3 -m dbench.bench.instructions.child --ops muladd
part: 3

desc: Timerange: Basic block 0 - 28232935
desc: Trigger: Client Request

positions: line
events: Ir
summary: 42163964


ob=(8) libpython3.11.so.1.0
fl=(14) Objects/longobject.c
fn=(1084) PyLong_AsLong
0 3
cfn=(78) __memset_sse2_unaligned
calls=6 0
0 51
fn=(1090) _PyObject_Malloc
cfn=(480) __memcmp_sse2
calls=1 0
0 9
cfn=(1084)
calls=2 0
0 4

totals: 42163964
"""


def test_parse_dump_reads_part_events_and_totals() -> None:
    dump = parse_dump(FIXTURE_DUMP)
    assert dump.part == 3 and dump.events == ("Ir",) and dump.instructions == 42163964


def test_parse_dump_refuses_other_files() -> None:
    with pytest.raises(CallgrindFormatError, match="x.txt: not a callgrind dump"):
        parse_dump("hello\n", "x.txt")
    with pytest.raises(CallgrindFormatError, match="no Ir event"):
        parse_dump("events: Dr Dw\nsummary: 1 2\n")


def test_libc_variants_are_read_from_function_names() -> None:
    assert libc_variants(FIXTURE_DUMP) == {"__memset_sse2_unaligned", "__memcmp_sse2"}


def test_read_dumps_orders_by_part_and_skips_other_files(tmp_path: Path) -> None:
    for part, total in ((2, 20), (1, 10), (10, 100)):
        (tmp_path / f"cg.out.{part}").write_text(FIXTURE_DUMP.replace("part: 3", f"part: {part}")
                                                 .replace("42163964", str(total)))
    (tmp_path / "cg.out").write_text("events: Ir\nsummary: 0\n")  # the dump at exit
    (tmp_path / "cg.out.log").write_text("not a dump")
    dumps, variants = read_dumps(tmp_path, "cg.out")
    assert [(d.part, d.instructions) for d in dumps] == [(1, 10), (2, 20), (10, 100)]
    assert "__memcmp_sse2" in variants


def test_child_environment_is_fixed_and_masks_the_cpu(tmp_path: Path) -> None:
    env = child_environment(tmp_path)
    assert env["PYTHONHASHSEED"] == "0" and env["ATEN_CPU_CAPABILITY"] == "default"
    assert env["GLIBC_TUNABLES"].startswith("glibc.malloc.mxfast=0:glibc.cpu.hwcaps=-AVX512F,")
    assert "-AVX2," in env["GLIBC_TUNABLES"] and "x86_rep_movsb_threshold=2048" in env["GLIBC_TUNABLES"]
    assert glibc_tunables(mask_cpu=False) == "glibc.malloc.mxfast=0"


def test_injection_pads_every_call() -> None:
    calls: list[int] = []
    wrapped = padded(lambda: calls.append(1) or 7, 10)
    assert wrapped() == 7 and calls == [1]
    assert parse_injections("a/b/inference=10;c/d/fwd_bwd=0") == {"a/b/inference": 10, "c/d/fwd_bwd": 0}
    assert iterations_for(10_000.0, 0.0) == 0
    with pytest.raises(ValueError, match="LABEL=ITERATIONS"):
        parse_injections("a/b/inference=x")


# ---------------------------------------------------------------------------
# The checker, on synthetic files.


def _row(variant: str, mode: str, count: float | None, **extra: Any) -> dict[str, Any]:
    return {"scenario": "boundary", "op": "muladd", "variant": variant, "mode": mode, "device": "cpu",
            "shape": [4, 32], "dtype": "float32", "axes": [], "driver": "python", "metric": METRIC, "unit": UNIT,
            "status": None if count is not None else "n/a", "instructions": count, **extra}


def _document(rows: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "config": {"ops": ["muladd"], "variants": ["raw", "cpp"], "calls": 1000, "warmup": 10,
                                         "mask_cpu": True, "device": "cpu", "dtype": "float32"},
            "env": {"torch": "2.13.0", "python": "3.11.7", "valgrind": "valgrind-3.19.0", "glibc": "glibc-2.36"},
            "rows": rows, **top}


EXPECTED_ROWS = [_row("raw", "inference", 10_000.0), _row("cpp", "inference", 20_000.0, margin=0.05),
                 _row("raw", "fwd_bwd", None)]


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


def _files(tmp_path: Path, actual_rows: list[dict[str, Any]], **env: Any) -> list[str]:
    expected = _write(tmp_path / "expected.json", _document(EXPECTED_ROWS, default_margin=0.01))
    actual_doc = _document(actual_rows)
    actual_doc["env"].update(env)
    actual = _write(tmp_path / "actual.json", actual_doc)
    return ["check", "--expected", str(expected), "--actual", str(actual)]


def test_within_margins_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # raw +0.99 % (margin 1 %), cpp -4.9 % (its own margin 5 %), the n/a row n/a on both sides.
    rows = [_row("raw", "inference", 10_099.0), _row("cpp", "inference", 19_020.0), _row("raw", "fwd_bwd", None)]
    assert main(_files(tmp_path, rows)) == 0
    assert "2 rows: 2 within their margin, 0 not" in capsys.readouterr().out


@pytest.mark.parametrize("count, status, code, strict_code", [(10_101.0, "REGRESSION", 1, 1),
                                                              (9_899.0, "IMPROVEMENT", 0, 1)])
def test_beyond_margin_rise_fails_fall_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str], count: float,
                                                   status: str, code: int, strict_code: int) -> None:
    rows = [_row("raw", "inference", count), _row("cpp", "inference", 20_000.0), _row("raw", "fwd_bwd", None)]
    assert main(_files(tmp_path, rows)) == code
    out = capsys.readouterr().out
    assert f"{status}" in out and "muladd/raw/inference" in out and "muladd/cpp/inference" not in out
    assert "--update-expected --write" in out and "2 rows: 1 within their margin, 1 not" in out
    assert main([*_files(tmp_path, rows), "--strict"]) == strict_code


def test_missing_new_and_failed_rows_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [_row("cpp", "inference", None, status="failed"), _row("stable", "inference", 30_000.0)]
    assert main(_files(tmp_path, rows)) == 1
    out = capsys.readouterr().out
    assert "MISSING     muladd/raw/inference" in out and "FAILED      muladd/cpp/inference" in out
    assert "NEW         muladd/stable/inference" in out


def test_other_torch_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [_row("raw", "inference", 10_000.0), _row("cpp", "inference", 20_000.0)]
    assert main(_files(tmp_path, rows, torch="2.14.0")) == 0
    assert "note: torch: expected '2.13.0', this run '2.14.0'" in capsys.readouterr().err


def test_rows_match_on_identity_not_order(tmp_path: Path) -> None:
    rows = [_row("cpp", "inference", 20_000.0), _row("raw", "inference", 10_000.0)]
    expected = _document(EXPECTED_ROWS)
    assert all(v.ok for v in compare(expected, _document(rows)))
    shifted = copy.deepcopy(rows)
    shifted[1]["shape"] = [8, 32]  # another case: identity includes the shape
    assert {v.status for v in compare(expected, _document(shifted))} == {"ok", "missing", "new"}


@pytest.mark.parametrize("content, message", [
    (None, "cannot read the expected file"),
    ("{", "not valid JSON"),
    (json.dumps({"rows": []}), "not an instruction-count file"),
    (json.dumps(_document([{"metric": "cpu_us"}])), "row 0 is not an instruction-count row"),
    (json.dumps(_document([_row("raw", "inference", -3.0)])), "bad count -3.0"),
    (json.dumps(_document([_row("raw", "inference", 3.0, margin=2)])), "bad margin 2"),
    (json.dumps(_document([_row("raw", "inference", float("nan"))])), "bad count nan"),
    (json.dumps(_document([_row("raw", "inference", float("inf"))])), "bad count inf"),
    (json.dumps(_document([_row("raw", "inference", "7000")])), "bad count '7000'"),
    (json.dumps(_document([_row("raw", "inference", 3.0, margin=float("nan"))])), "bad margin nan"),
    (json.dumps(_document([{"metric": METRIC, "instructions": 5.0}])), "row 0 lacks the fields that name a case"),
    (json.dumps(_document(EXPECTED_ROWS, env=["torch"])), "its env is not an object"),
    (json.dumps(_document(EXPECTED_ROWS, default_margin=-1)), "bad default_margin -1"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[" * 40 + "]" * 40, "nested too deeply"),
])
def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None,
                           message: str) -> None:
    expected = tmp_path / "expected.json"
    if content is not None:
        expected.write_text(content)
    actual = _write(tmp_path / "actual.json", _document(EXPECTED_ROWS))
    assert main(["check", "--expected", str(expected), "--actual", str(actual)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python3 -m dbench.bench.instructions: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("path, message", [("/dev/zero", "not a regular file"), ("/", "a folder")])
def test_special_files_are_refused_unread(path: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--expected", path, "--actual", path]) == 2
    assert message in capsys.readouterr().err


def test_a_check_that_compared_nothing_is_no_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only_na = [_row("raw", "fwd_bwd", None)]
    expected = _write(tmp_path / "expected.json", _document(only_na))
    actual = _write(tmp_path / "actual.json", _document(only_na))
    assert main(["check", "--expected", str(expected), "--actual", str(actual)]) == 3
    assert "no row was compared" in capsys.readouterr().out


@pytest.mark.parametrize("out, message", [("{tmp}/" + "x" * 300 + ".json", "longer than 255 bytes"),
                                          ("{tmp}", "is a folder"),
                                          ("/proc/counts.json", "cannot write /proc/counts.json")])
def test_outputs_are_checked_before_collecting(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch, out: str, message: str) -> None:
    import dbench.bench.instructions.__main__ as cli

    monkeypatch.setattr(cli, "collect", lambda *a, **k: pytest.fail("collected before the output was checked"))
    assert main(["collect", "--out", out.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_written_files_are_whole_or_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.bench.io import atomic

    target = _write(tmp_path / "expected.json", _document(EXPECTED_ROWS))
    before = target.read_text()
    actual = _write(tmp_path / "actual.json", _document(EXPECTED_ROWS))

    def full_disk(fd: int) -> None:  # a full disk often shows only when the data is flushed
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:  # the disk fills while the new expected file is written
        m.setattr(atomic.os, "fsync", full_disk)
        code = main(["check", "--expected", str(target), "--actual", str(actual), "--update-expected", "--write"])
    assert code == 2 and "No space left on device" in capsys.readouterr().err
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["actual.json", "expected.json"]


def test_bad_command_line_exits_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--calls", "0"])
    assert exc.value.code == 2
    assert main(["collect", "--ops", "nosuchop", "--out", str(tmp_path / "x.json")]) == 2
    assert main(["check", "--write", "--actual", str(_write(tmp_path / "a.json", _document([])))]) == 2


def test_update_expected_prints_and_writes_keeping_margins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [_row("raw", "inference", 12_000.0, total=12_000_000, calls=1000), _row("cpp", "inference", 21_000.0)]
    args = _files(tmp_path, rows) + ["--update-expected"]
    before = (tmp_path / "expected.json").read_text()
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (tmp_path / "expected.json").read_text() == before  # printed, not written
    assert printed["schema"] == SCHEMA and printed["default_margin"] == 0.01
    by_variant = {r["variant"]: r for r in printed["rows"]}
    assert by_variant["raw"]["instructions"] == 12_000.0 and "margin" not in by_variant["raw"]
    assert "total" not in by_variant["raw"]
    assert by_variant["cpp"]["margin"] == 0.05  # the widened margin is kept
    assert main(args + ["--write"]) == 0
    assert load(tmp_path / "expected.json", "expected") == printed
    assert main(["check", "--expected", str(tmp_path / "expected.json"),
                 "--actual", str(tmp_path / "actual.json")]) == 0
    assert updated_expected(_document(rows), None)["default_margin"] == 0.01


def test_margins_from_a_power_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A row that moved by 0.9 % in an A/A trial gets 1.5 x 0.9 % -> 1.5 %; one that moved 0.3 % keeps
    the default; injected trials do not count; the variant's other rows take the widest."""
    from dbench.bench.instructions.power import margins_from

    study = {"trials": [
        {"kind": "aa", "rows": [{"row": "muladd/raw/inference", "change": -0.009},
                                {"row": "muladd/cpp/inference", "change": 0.003}]},
        {"kind": "injected", "rows": [{"row": "muladd/cpp/inference", "change": 0.05}]}]}
    assert margins_from(study) == {"muladd/raw/inference": 0.015}
    actual = _write(tmp_path / "actual.json", _document([_row("raw", "inference", 10_000.0),
                                                         _row("raw", "no_grad", 10_500.0),
                                                         _row("cpp", "inference", 20_000.0)]))
    (tmp_path / "study.json").write_text(json.dumps(study))
    out = tmp_path / "expected.json"
    assert main(["check", "--expected", str(out), "--actual", str(actual), "--update-expected", "--write",
                 "--margins-from", str(tmp_path / "study.json")]) == 0
    margins = {(r["variant"], r["mode"]): r.get("margin") for r in load(out, "expected")["rows"]}
    assert margins == {("raw", "inference"): 0.015, ("raw", "no_grad"): 0.015, ("cpp", "inference"): None}
    assert main(["check", "--expected", str(out), "--actual", str(actual),
                 "--margins-from", str(tmp_path / "study.json")]) == 2
    assert "--margins-from go with --update-expected" in capsys.readouterr().err


def test_a_collection_of_other_code_joins_a_study_as_an_aa_trial(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`power --add-aa COUNTS --out STUDY`: no collection; the counts, judged against the expected
    file, are one more A/A trial, and the summary (and margins_from) count it."""
    from dbench.bench.instructions.power import margins_from

    expected = _write(tmp_path / "expected.json", _document(EXPECTED_ROWS, default_margin=0.01))
    moved = _write(tmp_path / "moved.json", _document([_row("raw", "inference", 10_220.0),
                                                       _row("cpp", "inference", 20_000.0)]))
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"schema": "dbench-instructions-power/1", "flat_margin": 0.01, "trials": []}))
    assert main(["power", "--expected", str(expected), "--out", str(study), "--add-aa", str(moved)]) == 0
    document = json.loads(study.read_text())
    assert [t["kind"] for t in document["trials"]] == ["aa"]
    assert document["summary"]["own_margins"]["false_alarms"] == 1  # +2.2 % beyond raw's ±1 %
    assert margins_from(document) == {"muladd/raw/inference": 0.035}
    assert "false alarms 1/2 A/A row-trials" in capsys.readouterr().out


@pytest.mark.parametrize("second, code", [(10_050.0, 0), (10_300.0, 1)])
def test_confirm_collects_again_and_fails_only_a_rise_seen_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str], second: float,
                                                                  code: int) -> None:
    """`check --confirm`: a row beyond its margin is collected once more; a run-to-run flip (back
    within the margin) passes, a rise seen twice fails."""
    from dbench.bench.instructions import __main__ as cli_main

    expected = _write(tmp_path / "expected.json", _document(EXPECTED_ROWS, default_margin=0.01))
    counts = iter([_document([_row("raw", "inference", 10_300.0), _row("cpp", "inference", 20_000.0)]),
                   _document([_row("raw", "inference", second), _row("cpp", "inference", 20_000.0)])])
    monkeypatch.setattr(cli_main, "_collect", lambda config, keep_dumps=None: next(counts))
    assert main(["check", "--expected", str(expected), "--confirm"]) == code
    captured = capsys.readouterr()
    assert "collecting once more to confirm (muladd/raw/inference)" in captured.err
    assert ("not confirmed: muladd/raw/inference +3.00% then +0.50%" in captured.err) == (code == 0)


def test_update_expected_gives_a_variants_rows_its_widest_margin() -> None:
    previous = _document([_row("cpp", "inference", 20_000.0, margin=0.025), _row("cpp", "no_grad", 19_000.0),
                          _row("raw", "inference", 10_000.0)])
    actual = _document([_row("cpp", "inference", 20_100.0), _row("cpp", "no_grad", 19_100.0),
                        _row("cpp", "inference_mode", 18_000.0), _row("raw", "inference", 10_050.0)])
    margins = {(r["variant"], r["mode"]): r.get("margin") for r in updated_expected(actual, previous)["rows"]}
    assert margins == {("cpp", "inference"): 0.025, ("cpp", "no_grad"): 0.025, ("cpp", "inference_mode"): 0.025,
                       ("raw", "inference"): None}


def test_committed_expected_file_is_valid() -> None:
    document = load(EXPECTED_PATH, "expected")
    timed = [r for r in document["rows"] if r["instructions"] is not None]
    # every variant and mode of the boundary scenario's default ops (noop, muladd, l2norm) on the CPU
    assert {r["op"] for r in timed} == {"noop", "muladd", "l2norm"} and len(timed) >= 150
    assert document["config"]["calls"] >= 3_000
    assert all(0 < r.get("margin", document["default_margin"]) <= 0.05 for r in timed)
    # an op's variant's rows share its widest margin (updated_expected applies the rule on every re-record)
    per_variant: dict[tuple[str, str], set[float]] = {}
    for r in timed:
        per_variant.setdefault((r["op"], r["variant"]), set()).add(r.get("margin", document["default_margin"]))
    assert all(len(m) == 1 for m in per_variant.values()), per_variant


def test_committed_user_op_expected_file_names_its_op() -> None:
    """CI's second check: the example op outside the suite's packages, with its own expected file."""
    from dbench.bench.instructions import REPO_ROOT

    document = load(EXPECTED_PATH.with_name("expected-user-op.json"), "expected")
    assert document["config"]["user_ops"] == {"my_rmsnorm": "my_ops.py:rmsnorm"}
    assert (REPO_ROOT / "examples" / "cpu_load_inline" / "my_ops.py").is_file()
    timed = [r for r in document["rows"] if r["instructions"] is not None]
    assert {r["variant"] for r in timed} >= {"raw", "custom_op", "registered", "aten"} and len(timed) >= 40
    assert "--expected results/cpu-instructions/expected-user-op.json" in (REPO_ROOT / ".ci" / "run").read_text()


# ---------------------------------------------------------------------------
# A real collection (CI installs valgrind; scripts/setup.sh does it as root).

def _jemalloc_missing() -> bool:
    from dbench.bench.instructions.environment import jemalloc

    return jemalloc() is None


needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_control") is None or _jemalloc_missing(),
    reason="valgrind or jemalloc is not installed (scripts/setup.sh installs both as root)")


@pytest.mark.slow
@needs_valgrind
def test_real_collection_is_repeatable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "counts.json"
    assert main(["collect", "--ops", "muladd", "--variants", "raw,cpp", "--calls", "2001", "--layouts", "3",
                 "--warmup", "20", "--out", str(out)]) == 0
    document = load(out, "counts")
    assert document["config"]["layouts"] == 3
    timed = {(r["variant"], r["mode"]): r for r in document["rows"] if r["instructions"] is not None}
    forward_only = ("inference", "no_grad", "inference_mode")  # raw and cpp have no autograd
    assert set(timed) == {(v, m) for v in ("raw", "cpp") for m in forward_only}
    for mode in forward_only:
        assert 1_000 < timed["raw", mode]["instructions"] < timed["cpp", mode]["instructions"]  # the dispatcher costs
    for row in timed.values():  # 667 calls in each of 3 builds; the row is their median
        assert row["calls"] == 2001 and len(row["layout_counts"]) == 3
        assert row["instructions"] == pytest.approx(sorted(row["layout_counts"])[1], abs=0.051)
        assert abs(row["total"] / 2001 - sum(row["layout_counts"]) / 3) <= 0.05
    assert document["env"]["cpu_capability_seen"] == "DEFAULT"
    assert not any("avx" in v for v in document["env"]["libc_variants"]), document["env"]["libc_variants"]
    assert len([r for r in document["rows"] if r["status"] == "n/a"]) == 4  # raw and cpp have no autograd
    # A second collection, with the first as the expected file, is within ±1 % (in fact equal or nearly).
    expected = tmp_path / "expected.json"
    assert main(["check", "--expected", str(expected), "--actual", str(out), "--update-expected", "--write"]) == 0
    assert main(["check", "--expected", str(expected)]) == 0
    assert "6 rows: 6 within their margin, 0 not" in capsys.readouterr().out


USER_OP = """
import torch
from dbench import Op


def scaled(x):
    return (x * 2.0 + 1.0){extra}


user_scaled = Op(name="user_scaled", forward=scaled, reference=scaled, shape=(4, 32))
"""


def test_a_user_ops_counts_are_named_by_file_and_edits_are_noted(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A user's op is counted under its file and declaration; its source digest sits in env, so an
    edited op is compared with its old count (the point of the check) and the edit is named."""
    rows = [_row("raw", "inference", 10_000.0, op="user_scaled", op_source="my_ops.py:user_scaled")]
    expected = _document(rows, default_margin=0.01)
    expected["env"]["user_op_digests"] = {"my_ops.py:user_scaled": "aaaaaaaaaaaa"}
    actual = copy.deepcopy(expected)
    actual["rows"][0]["instructions"] = 10_050.0
    actual["env"]["user_op_digests"] = {"my_ops.py:user_scaled": "bbbbbbbbbbbb"}
    args = ["check", "--expected", str(_write(tmp_path / "e.json", expected)),
            "--actual", str(_write(tmp_path / "a.json", actual))]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "my_ops.py:user_scaled: its file changed (source digest aaaaaaaaaaaa -> bbbbbbbbbbbb)" in captured.err
    assert "1 rows: 1 within their margin, 0 not" in captured.out


def test_an_expected_file_of_a_user_op_needs_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before valgrind starts: the expected file names the op's file, and the message says
    which --op to give; a file that declares another op of that name is refused the same way."""
    rows = [_row("raw", "inference", 10_000.0, op="user_scaled", op_source="my_ops.py:user_scaled")]
    document = _document(rows)
    document["config"].update(ops=["user_scaled"], user_ops={"user_scaled": "my_ops.py:user_scaled"})
    expected = _write(tmp_path / "e.json", document)
    assert main(["check", "--expected", str(expected)]) == 2
    err = capsys.readouterr().err
    assert "the expected file counts the user op 'user_scaled' of my_ops.py:user_scaled: give its file, " \
           "--op PATH/TO/my_ops.py:user_scaled" in err


def test_a_bad_op_file_is_refused_before_collecting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no kernel here')\n")
    assert main(["collect", "--op", f"{broken}:user_scaled", "--calls", "10"]) == 2
    assert "importing it failed: RuntimeError: no kernel here" in capsys.readouterr().err


@pytest.mark.slow
@needs_valgrind
def test_real_collection_of_a_users_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """collect / check --update-expected / check with --op, as a user's CI would; a costlier forward
    (two more torch calls per call) is caught on the raw rows, and the edit is named."""
    from dbench.ops import OPS

    before = dict(OPS)
    folder = tmp_path / "theirs"
    folder.mkdir()
    op_file = folder / "my_ops.py"
    op_file.write_text(USER_OP.format(extra=""))
    spec = f"{op_file}:user_scaled"
    expected = tmp_path / "expected.json"
    common = ["--op", spec, "--expected", str(expected)]
    counts = tmp_path / "counts.json"
    try:
        assert main(["collect", "--op", spec, "--variants", "raw,define_impl,custom_op", "--calls", "400",
                     "--warmup", "20", "--out", str(counts)]) == 0
        assert main(["check", "--expected", str(expected), "--actual", str(counts),
                     "--update-expected", "--write"]) == 0
        document = load(expected, "expected")
        assert document["config"]["ops"] == ["user_scaled"]
        assert document["config"]["user_ops"] == {"user_scaled": "my_ops.py:user_scaled"}
        timed = [r for r in document["rows"] if r["instructions"] is not None]
        assert {r["variant"] for r in timed} == {"raw", "define_impl", "custom_op"}
        assert {r["op_source"] for r in document["rows"]} == {"my_ops.py:user_scaled"}  # no digest in the rows
        assert list(document["env"]["user_op_digests"]) == ["my_ops.py:user_scaled"]
        OPS.clear()
        OPS.update(before)
        op_file.write_text(USER_OP.format(extra=".sin().cos()"))
        assert main(["check", *common]) == 1
        captured = capsys.readouterr()
        assert "my_ops.py:user_scaled: its file changed" in captured.err
        assert "REGRESSION  user_scaled/raw/inference" in captured.out
    finally:
        OPS.clear()
        OPS.update(before)


def test_spread_of_aa_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.json", _document([_row("raw", "inference", 10_000.0), _row("cpp", "inference", 20_000.0)]))
    b = _write(tmp_path / "b.json", _document([_row("raw", "inference", 10_010.0), _row("cpp", "inference", 20_000.0)]))
    assert main(["spread", str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("muladd/raw/inference") and "0.1000%" in out[0]
    assert out[-1] == "2 rows: spread median 0.1000%, max 0.1000%"
    assert main(["spread", str(a)]) == 2


@pytest.mark.parametrize("installed", [False, True], ids=["checkout", "installed"])
def test_staging_copies_the_code_to_a_fixed_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  installed: bool) -> None:
    """A checkout (dbench/ beside bench/, ops/, scenarios/) is staged as it is; an installed package
    (pip: everything inside dbench/, the build in dbench/build) is staged as src/dbench."""
    from dbench.bench.instructions import staging

    repo = tmp_path / "site" / "dbench" if installed else tmp_path / "checkout"
    files = ["bench/a.py", "bench/sub/b.py", "ops/c.py", "scenarios/d.py"]
    files += [] if installed else ["dbench/__init__.py"]
    for rel in (*files, "ops/kernels/k.cpp", "build/lib/x.so", "bench/__pycache__/a.cpython-311.pyc",
                *(["__init__.py", "api.py"] if installed else [])):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel)
    monkeypatch.setattr(staging, "STAGE", tmp_path / "stage")
    with staging.staged(repo, repo / "build") as (src, out):
        assert src == tmp_path / "stage" / "src" and out.is_dir() and not any(out.iterdir())
        copied = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
        if installed:
            expected = sorted(f"dbench/{rel}" for rel in (*files, "__init__.py", "api.py", "build/lib/x.so"))
        else:
            expected = sorted((*files, "build/lib/x.so"))
        assert copied == expected
    assert not out.exists()


# ---------------------------------------------------------------------------
# The power study (bench/instructions/power.py), with a synthetic collector.


def _fake_collector(expected: dict[str, Any], shift: dict[int, float]) -> Any:
    """A collector that moves every row by shift[heap_pad] and adds each injected pad's planned cost."""
    from dbench.bench.instructions.power import planned_fraction

    calls = []

    def collect(config: Any, worker: int) -> dict[str, Any]:
        calls.append(config)
        pads = dict(config.inject)
        rows = []
        for r in expected["rows"]:
            count = r["instructions"]
            if count is not None:
                label = f"{r['op']}/{r['variant']}/{r['mode']}"
                extra = planned_fraction(count, pads[label]) if label in pads else 0.0
                count = count * (1 + shift.get(config.heap_pad, 0.0) + extra)
            rows.append({**r, "instructions": count})
        return _document(rows, env={"source_digest": "abc", "wall_s": 1.0})

    collect.calls = calls  # type: ignore[attr-defined]
    return collect


def test_power_study_counts_false_alarms_and_detections(tmp_path: Path) -> None:
    from dbench.bench.instructions import power

    expected = _document([_row("raw", "inference", 10_000.0), _row("cpp", "inference", 400_000.0, margin=0.03),
                          _row("raw", "fwd_bwd", None)], default_margin=0.01)
    # Layout 300 moves rows by +1.5 %: beyond raw's ±1 % (a false alarm), inside cpp's ±3 %.
    collect = _fake_collector(expected, {300: 0.015, 2500: 0.0})
    seen: list[dict[str, Any]] = []
    doc = power.run(expected, power.plan((300, 2500), (0.02, 0.05)), on_result=seen.append, collect_fn=collect)
    assert power.run(expected, power.plan((300, 2500), (0.02, 0.05)), collect_fn=collect, jobs=2) == \
        {**doc, "time": ANY}, "two at a time: the same document, trials in planned order"
    assert [s["status"] for s in seen] == ["running", "running", "running", "complete"]
    assert [c.heap_pad for c in collect.calls[:4]] == [300, 2500, power.INJECTED_PAD, power.INJECTED_PAD]
    assert collect.calls[0].inject == () and len(collect.calls[2].inject) == 2
    own, flat = doc["summary"]["own_margins"], doc["summary"]["flat_margin"]
    assert (own["false_alarms"], own["aa_trials"]) == (1, 4) and (flat["false_alarms"], flat["aa_trials"]) == (2, 4)
    # raw (10 000 a call): the pad's fixed 2 000 is +20 %, so raw is no trial of +2 % or +5 %.
    assert own["detection"]["2%"] == {"detected": 0, "trials": 1, "rate": 0.0, "overshot_rows": 1,
                                      "overshot_detected": 1}
    assert flat["detection"]["2%"]["detected"] == 1  # +2 % clears ±1 % but not cpp's own ±3 %
    assert own["detection"]["5%"]["detected"] == 1 and own["detection"]["5%"]["trials"] == 1
    injected_raw = next(r for r in doc["trials"][3]["rows"] if r["row"] == "muladd/raw/inference")
    assert injected_raw["on_target"] is False and injected_raw["injected"] == pytest.approx(0.2)


def test_power_refuses_bad_plans_before_collecting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.bench.instructions import power

    with pytest.raises(ValueError, match="distinct"):
        power.plan((300, 300), (0.05,))
    with pytest.raises(ValueError, match="fractions"):
        power.plan((300,), (1.5,))
    expected = _write(tmp_path / "expected.json", _document(EXPECTED_ROWS))
    assert main(["power", "--expected", str(expected), "--out", str(tmp_path / "p.json"), "--effects", "0"]) == 2
    assert "effects must be fractions" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_sibling_stages_keep_the_path_length() -> None:
    from dbench.bench.instructions import staging

    for i in (1, 9):
        sibling = staging.sibling_stage(i)
        assert sibling.parent == staging.STAGE.parent and sibling != staging.STAGE
        assert len(str(sibling)) == len(str(staging.STAGE))
    with pytest.raises(ValueError):
        staging.sibling_stage(10)


def test_layouts_are_checked_and_old_files_read_as_one_build(tmp_path: Path) -> None:
    from dbench.bench.instructions.collect import Config, check_names

    with pytest.raises(ValueError, match="layouts"):
        check_names(Config(calls=4, layouts=5))
    with pytest.raises(ValueError, match="layouts"):
        check_names(Config(layouts=0))
    assert Config(calls=10_000, layouts=3).calls_per_layout == 3333
    old = _document([])["config"]  # written before builds per case existed
    assert "layouts" not in old and Config.from_dict(old).layouts == 1
    with pytest.raises(SystemExit):  # argparse: must be >= 1
        main(["collect", "--layouts", "0", "--out", str(tmp_path / "x.json")])


def test_the_measured_process_preloads_jemalloc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbench.bench.instructions import collect as collect_mod
    from dbench.bench.instructions.environment import child_environment, jemalloc

    assert "LD_PRELOAD" not in child_environment(tmp_path)
    assert child_environment(tmp_path, allocator="/lib/x.so")["LD_PRELOAD"] == "/lib/x.so"
    lib = tmp_path / "libjemalloc.so.2"
    lib.write_bytes(b"")
    monkeypatch.setenv("DBENCH_JEMALLOC", str(lib))
    assert jemalloc() == str(lib)
    monkeypatch.setenv("DBENCH_JEMALLOC", str(tmp_path / "absent.so"))
    assert jemalloc() is None
    # Without jemalloc the collection refuses (it never falls back to glibc's malloc, whose counts differ).
    monkeypatch.setattr(collect_mod.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(collect_mod.CollectError, match="libjemalloc2"):
        collect_mod.collect(collect_mod.Config(variants=("raw",), calls=10))
    with pytest.raises(ValueError, match="allocator"):
        collect_mod.check_names(collect_mod.Config(allocator="tcmalloc"))
    assert collect_mod.Config.from_dict(_document([])["config"]).allocator == "glibc"  # files from before it
