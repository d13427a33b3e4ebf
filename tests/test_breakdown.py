"""The breakdown by layer: callgrind's self and call costs read from a dump, the layer map, the sum
rule (a case's layers add up to its total), the rows over the floor, the command's outputs and bad
input, and one small real collection under callgrind when valgrind is installed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from dbench.analysis import breakdown as cli
from dbench.bench.instructions.callgrind import CallgrindFormatError
from dbench.bench.instructions.layers import LAYERS, attribute, is_helper, layer_of
from dbench.bench.instructions.profile import Profile, parse_profile

# Two functions of libtorch_python calling each other and a libc helper; names compressed, one
# function one recursion level deeper (fn'2), one call into another object (cob=), one into the
# caller's own object (no cob=). Self costs: 10 + 3, 5 + 2, 20, 4: 44 in all.
DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
part: 3
positions: line
events: Ir Dr
summary: 44 11

ob=(1) /usr/lib/libtorch_python.so
fl=(1) a.cpp
fn=(1) pybind11::cpp_function::dispatcher(_object*)
10 10 1
+1 3
cob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
cfi=(2) strlen.S
cfn=(2) __strlen_sse2
calls=2 0
* 20 5
cfn=(3) torch::autograd::THPVariable_get_grad'2
calls=1 0
* 7
fn=(3)
5 5
+2 2

ob=(2)
fl=(2)
fn=(2)
0 20 5
fn=(4) _PyEval_EvalFrameDefault
0 4
"""


def test_self_costs_skip_the_inclusive_cost_of_calls() -> None:
    python = "ob=(3) /usr/lib/libpython3.11.so.1.0\nfn=(4) _PyEval_EvalFrameDefault"
    profile = parse_profile(DUMP.replace("fn=(4) _PyEval_EvalFrameDefault", python))
    assert profile.part == 3 and profile.total == 44
    assert profile.self_ir == {
        ("libtorch_python.so", "pybind11::cpp_function::dispatcher(_object*)"): 13,
        ("libtorch_python.so", "torch::autograd::THPVariable_get_grad"): 7,  # fn'2 is the same function
        ("libc.so.6", "__strlen_sse2"): 20,
        ("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"): 4,
    }
    dispatcher = ("libtorch_python.so", "pybind11::cpp_function::dispatcher(_object*)")
    assert profile.calls == {(dispatcher, ("libc.so.6", "__strlen_sse2")): 20,
                             (dispatcher, ("libtorch_python.so", "torch::autograd::THPVariable_get_grad")): 7}


@pytest.mark.parametrize("change, message", [
    (("summary: 44 11", "summary: 45 11"), "add up to 44 Ir, the dump's total is 45"),
    (("events: Ir Dr", "events: Dr"), "no Ir event"),
    (("cfn=(3) torch::autograd::THPVariable_get_grad'2\n", ""), "calls= without a cfn="),
    (("fn=(3)\n", "fn=(9)\n"), "compressed name (9) used before it was defined"),
    (("summary: 44 11\n", ""), "not a callgrind dump"),
])
def test_a_dump_the_reader_does_not_understand_is_refused(change: tuple[str, str], message: str) -> None:
    with pytest.raises(CallgrindFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_profile(DUMP.replace(*change), "bad.out")


@pytest.mark.parametrize("function, layer", [
    (("libtorch_cpu.so", "at::native::empty_cpu(c10::ArrayRef<long>)"), "tensors"),  # not the op's kernel
    (("libtorch_cpu.so", "at::native::add_out(at::Tensor const&)"), "op"),
    (("libtorch_python.so", "torch::autograd::THPVariable_get_grad(_object*)"), "autograd"),  # before binding
    (("libtorch_cpu.so", "void torch::autograd::validate_outputs_impl<torch::autograd::Edge>(int)"), "autograd"),
    (("libtorch_cpu.so", "std::vector<torch::autograd::Edge>::~vector()"), "autograd"),
    (("libtorch_python.so", "pybind11::detail::get_type_info(std::type_info const&, bool)"), "binding"),
    (("libtorch_cpu.so", "c10::Dispatcher::callBoxed(c10::OperatorHandle const&) const"), "dispatcher"),
    (("libtorch_cpu.so", "at::_ops::mul_Tensor::call(at::Tensor const&)"), "dispatcher"),
    (("libtorch_cpu.so", "torch_call_dispatcher"), "shim"),
    # A rule reads where a function lives, not the types it takes:
    (("libdbench_stable.so", "dbench::stable_ops::(anonymous namespace)::StableApi::check_inputs(char const*, "
                             "torch::stable::Tensor const&)"), "op"),
    (("libtorch_cpu.so", "at::(anonymous namespace)::LocalCallbackManager::rebuild_scope(std::pair<int>)"),
     "dispatcher"),
    (("libtorch_cpu.so", "at::ThreadLocalState::setThreadLocalState(at::ThreadLocalState const&)"), "state"),
    (("libc10.so", "c10::TensorImpl::TensorImpl(c10::Storage&&)"), "tensors"),
    (("libjemalloc.so.2", "0x0000000000031430"), "allocator"),
    (("libc10.so", "c10::alloc_cpu(unsigned long)"), "allocator"),
    (("_dbench_raw.cpython-311-x86_64-linux-gnu.so", "dbench::kernels::muladd_cpu(int)"), "op"),
    (("_dbench_raw.cpython-311-x86_64-linux-gnu.so", "pybind11::cpp_function::dispatcher(_object*)"), "binding"),
    (("_dbench_raw.cpython-311-x86_64-linux-gnu.so", "c10::TensorImpl::device() const"), "tensors"),
    (("libdbench_ops.so", "std::mutex::lock()"), "op"),
    (("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"), "python"),
    (("_contextvars.cpython-311-x86_64-linux-gnu.so", "PyContext_Enter"), "python"),
    (("libtorch_cpu.so", "c10::demangle[abi:cxx11](char const*)"), "other"),
    # ATen's kernel loops, behind a function_ref whose template names a function type
    (("libtorch_cpu.so", "void c10::function_ref<void (char**, long const*, long, long)>::callback_fn<"
                         "at::native::DEFAULT::VectorizedLoop2d<int> >(long, char**)"), "op"),
    (("my_rmsnorm_ext.so", "rmsnorm_cpu(at::Tensor const&)"), "op"),  # a user's extension library
    (("libtorch_cpu.so", "at::Tensor::contiguous() const"), "tensors"),
    (("???", "0x0000000004c237a8"), "other"),
])
def test_the_layer_map(function: tuple[str, str], layer: str) -> None:
    assert layer_of(function) == layer


def test_runtime_helpers_but_not_malloc_go_to_their_caller() -> None:
    assert is_helper(("libc.so.6", "__strlen_sse2")) and is_helper(("libstdc++.so.6.0.30", "std::_Hash_bytes"))
    assert not is_helper(("libc.so.6", "malloc")) and layer_of(("libc.so.6", "malloc")) == "allocator"
    assert not is_helper(("libtorch_cpu.so", "std::mutex::lock()"))


Function = tuple[str, str]


def _profile(self_ir: dict[Function, int], calls: dict[tuple[Function, Function], int]) -> Profile:
    return Profile(part=2, total=sum(self_ir.values()), self_ir=self_ir, calls=calls)


def test_layers_add_up_to_the_total_and_a_helper_is_charged_to_its_caller() -> None:
    binding = ("libtorch_python.so", "pybind11::cpp_function::dispatcher(_object*)")
    python = ("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")
    strlen, memset = ("libc.so.6", "__strlen_sse2"), ("libc.so.6", "__memset_sse2")
    profile = _profile({binding: 100, python: 300, strlen: 40, memset: 9},
                       {(binding, strlen): 30, (python, strlen): 10, (strlen, memset): 9})
    result = attribute(profile)
    assert result.layers["binding"] == 130 and result.layers["python"] == 310
    # memset ran for strlen only (a helper's helper): no caller outside the runtime to charge it to.
    assert result.layers["unattributed"] == 9
    assert sum(result.layers.values()) == profile.total
    assert list(result.layers) == list(LAYERS)
    assert result.functions[binding] == ("binding", 130)


def test_what_a_helper_calls_outside_the_runtime_counts_once_in_its_own_layer() -> None:
    demangle = ("libtorch_cpu.so", "c10::demangle(char const*)")
    cxa, inner = ("libstdc++.so.6.0.30", "__cxa_demangle"), ("libstdc++.so.6.0.30", "0x00000000000ab2b0")
    realloc = ("libjemalloc.so.2", "realloc")
    # c10::demangle -> __cxa_demangle (30 itself) -> an inner helper (15 itself) -> realloc (5)
    profile = _profile({demangle: 10, cxa: 30, inner: 15, realloc: 5},
                       {(demangle, cxa): 50, (cxa, inner): 20, (inner, realloc): 5})
    result = attribute(profile)
    assert result.layers["other"] == pytest.approx(55) and result.layers["allocator"] == pytest.approx(5)
    assert result.layers["unattributed"] == pytest.approx(0)


def _counts() -> dict:
    key = {"scenario": "boundary", "op": "noop", "device": "cpu", "shape": [4, 32], "dtype": "float32", "axes": [],
           "driver": "python"}
    rows = [{**key, "variant": v, "mode": m, "status": None, "instructions": 1.0}
            for v, m in (("raw", "inference"), ("custom_op", "inference"), ("custom_op", "fwd_requires_grad"))]
    rows.append({**key, "variant": "raw", "mode": "fwd_bwd", "status": "n/a", "reason": "no autograd"})
    return {"config": {"calls": 10}, "env": {"torch": "2.13.0", "python": "3.11.7", "time": "2026-12-05T00:00:00"},
            "rows": rows}


def test_rows_are_the_layers_over_the_floor_and_name_what_grew() -> None:
    from dbench.bench.instructions.breakdown import breakdown_rows

    python = ("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")
    binding = ("libtorch_python.so", "pybind11::detail::get_type_info(std::type_info const&, bool)")
    floor = attribute(_profile({python: 1000, binding: 200}, {}))
    case = attribute(_profile({python: 5000, binding: 900}, {}))
    rows = breakdown_rows(_counts(), [floor, case, case], calls=10, top=3)
    custom = [r for r in rows if r["variant"] == "custom_op" and r["mode"] == "inference"]
    assert [r["layer"] for r in custom] == list(LAYERS)
    by_layer = {r["layer"]: r for r in custom}
    assert by_layer["python"]["delta_instructions"] == 400.0 and by_layer["binding"]["delta_instructions"] == 70.0
    assert custom[0]["delta_total"] == 470.0 and custom[0]["instructions_total"] == 590.0
    assert sum(r["delta_instructions"] for r in custom) == custom[0]["delta_total"]
    assert by_layer["binding"]["top"] == [{"function": binding[1], "object": binding[0], "delta_instructions": 70.0}]
    assert by_layer["dispatcher"]["top"] == []
    # Its floor with a graph (function_raw) was not counted: the row says so instead of a delta.
    graph = [r for r in rows if r["mode"] == "fwd_requires_grad"]
    assert "delta_total" not in graph[0] and "function_raw" in graph[0]["floor_missing"]
    assert rows[-1] == {**{k: v for k, v in _counts()["rows"][-1].items() if k not in ("instructions",)},
                        "status": "n/a", "reason": "no autograd"}


def test_rows_refuse_profiles_that_do_not_match_the_cases() -> None:
    from dbench.bench.instructions.breakdown import breakdown_rows
    from dbench.bench.instructions.collect import CollectError

    with pytest.raises(CollectError, match="3 timed cases but 1 profiles"):
        breakdown_rows(_counts(), [attribute(_profile({("a", "b"): 1}, {}))], calls=10)


def _document() -> dict:
    from dbench.bench.instructions.breakdown import SCHEMA, breakdown_rows

    python = ("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")
    rows = breakdown_rows(_counts(), [attribute(_profile({python: 1000}, {})),
                                      attribute(_profile({python: 9000}, {})),
                                      attribute(_profile({python: 9000}, {}))], calls=10)
    counts = _counts()
    return {"schema": SCHEMA, "config": counts["config"], "env": counts["env"], "layers": dict(LAYERS), "rows": rows}


def test_the_command_renders_a_document_it_is_given(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_document()))
    assert cli.main(["--from", str(source), "--out", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "breakdown-cpu.md").read_text()
    assert "| noop | custom_op | inference | raw | 900 | +800 | python +800 |" in table
    assert (tmp_path / "out" / "breakdown-cpu-noop.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "out" / "breakdown-cpu.breakdown.json").read_text()) == _document()
    gzipped = tmp_path / "in.json.gz"  # the committed documents are gzipped
    gzipped.write_bytes(gzip.compress(source.read_bytes()))
    assert cli.main(["--from", str(gzipped), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "breakdown-cpu.md").read_text() == table


def test_kept_dumps_replace_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    from dbench.bench.instructions.breakdown import copy_into

    victim = tmp_path / "root-owned.txt"
    victim.write_text("keep me")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "callgrind.out.noop.raw.inference").symlink_to(victim)  # planted after the up-front check
    source = tmp_path / "dump"
    source.write_text("a dump")
    copy_into(shared, {"callgrind.out.noop.raw.inference": source})
    assert victim.read_text() == "keep me"
    assert not (shared / "callgrind.out.noop.raw.inference").is_symlink()
    assert (shared / "callgrind.out.noop.raw.inference").read_text() == "a dump"


def test_a_folder_for_flames_that_holds_a_planted_dump_name_is_refused_before_any_collection(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flames = tmp_path / "flames"
    flames.mkdir()
    (flames / "callgrind.out.noop.raw.inference").symlink_to(tmp_path / "missing")  # even a dangling link
    assert cli.main(["--out", str(tmp_path / "o"), "--ops", "noop", "--flames", str(flames)]) == 2
    err = capsys.readouterr().err
    assert "already holds callgrind dumps" in err and "[breakdown]" not in err


def test_a_flames_folder_others_can_write_is_refused_and_no_out_folder_is_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert cli.main(["--out", str(tmp_path / "o"), "--ops", "noop", "--flames", str(shared)]) == 2
    err = capsys.readouterr().err
    assert "--flames: refusing the output folder" in err and "Use --flames with a folder of yours" in err
    assert not (tmp_path / "o").exists() and not list(shared.iterdir())


def test_a_cases_flame_file_is_named_by_its_case() -> None:
    from dbench.bench.instructions.breakdown import flame_name

    assert flame_name({"op": "noop", "variant": "custom_op", "mode": "fwd_bwd"}) == \
        "callgrind.out.noop.custom_op.fwd_bwd"
    assert flame_name({"op": "a/b", "variant": "raw", "mode": "inference", "axes": ["size"], "size": 64}) == \
        "callgrind.out.a_b.raw.inference.size=64"


def test_every_layer_has_its_own_colour() -> None:
    assert set(cli.LAYER_COLORS) == set(LAYERS) and len(set(cli.LAYER_COLORS.values())) == len(LAYERS)


@pytest.mark.parametrize("content, message", [
    ("{", "cannot be read as JSON"),
    (json.dumps({"schema": "dbench-instructions/1", "rows": []}), "not a breakdown document"),
])
def test_a_bad_document_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                               message: str) -> None:
    source = tmp_path / "in.json"
    source.write_text(content)
    assert cli.main(["--from", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m dbench.analysis.breakdown: error: ") and message in err and "\n" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_unwritable_out_or_an_unknown_op_fails_before_any_collection(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["--out", str(blocker / "sub"), "--ops", "noop"]) == 2
    assert "--out" in capsys.readouterr().err
    assert cli.main(["--out", str(tmp_path / "o"), "--ops", "no_such_op"]) == 2
    assert "no_such_op" in capsys.readouterr().err
    assert cli.main(["--out", str(tmp_path / "o"), "--ops", "args_tensor_1,noop"]) == 2
    assert "counted on their own, not with noop" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # a refused run makes no folder


def test_a_folder_holding_an_earlier_runs_dumps_is_refused_before_any_collection(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dbench.bench.instructions.breakdown import collect_breakdown
    from dbench.bench.instructions.collect import CollectError, Config

    old = tmp_path / "dumps"
    old.mkdir()
    (old / "callgrind.out.7").write_text("an earlier run's dump")
    assert cli.main(["--out", str(tmp_path / "o"), "--ops", "noop", "--keep-dumps", str(old)]) == 2
    err = capsys.readouterr().err
    assert "already holds callgrind dumps" in err and str(old) in err and "[breakdown]" not in err
    with pytest.raises(CollectError, match="already holds callgrind dumps"):
        collect_breakdown(Config(ops=("noop",)), keep_dumps=old)


def _jemalloc_missing() -> bool:
    from dbench.bench.instructions.environment import jemalloc

    return jemalloc() is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None
                    or _jemalloc_missing(),
                    reason="valgrind or jemalloc is not installed (scripts/setup.sh installs both)")
def test_a_real_breakdown_adds_up_and_puts_custom_op_in_python_and_binding(tmp_path: Path) -> None:
    from dbench.bench.instructions.breakdown import collect_breakdown
    from dbench.bench.instructions.collect import Config

    document = collect_breakdown(Config(ops=("noop",), variants=("raw", "custom_op", "cpp"), calls=200),
                                 keep_dumps=tmp_path / "dumps", flames=tmp_path / "flames")
    timed = [r for r in document["rows"] if r["status"] is None]
    by_case: dict[tuple[str, str], dict[str, dict]] = {}
    for row in timed:
        by_case.setdefault((row["variant"], row["mode"]), {})[row["layer"]] = row
    for layers in by_case.values():  # the sum rule: a case's layers add up to its count, to rounding
        total = next(iter(layers.values()))["instructions_total"]
        assert sum(r["instructions"] for r in layers.values()) == pytest.approx(total, abs=0.1 * len(layers))
        assert layers["unattributed"]["instructions"] == pytest.approx(0, abs=0.05 * total)
    custom = by_case[("custom_op", "inference")]
    # custom_op's Python wrapper and its schema-driven argument handling: most of its cost over raw.
    assert custom["python"]["delta_instructions"] + custom["binding"]["delta_instructions"] > \
        0.7 * custom["python"]["delta_total"] > 0
    cpp = by_case[("cpp", "inference")]
    assert cpp["dispatcher"]["delta_instructions"] > 0
    assert cpp["python"]["delta_total"] < custom["python"]["delta_total"]
    assert any(name.startswith("callgrind.out.") for name in (p.name for p in (tmp_path / "dumps").iterdir()))
    # One dump a case, named by it, and it is that case's: its total is the case's count over its calls.
    flames = {p.name: p for p in (tmp_path / "flames").iterdir()}
    assert len(flames) == len(by_case) and "callgrind.out.noop.custom_op.inference" in flames
    custom_dump = parse_profile(flames["callgrind.out.noop.custom_op.inference"].read_text(), "custom")
    assert custom_dump.total / 200 == pytest.approx(custom["python"]["instructions_total"], rel=0.01)


def _native(custom_delta: float | None = 0.9, baseline: str = "noop/raw/inference", op: str = "noop") -> list[dict]:
    """A native boundary run's rows for _document()'s cases: raw 0.1 µs per call, custom_op over it."""
    key = {"scenario": "boundary", "op": op, "device": "cpu", "shape": [4, 32], "dtype": "float32", "axes": [],
           "driver": "python", "metric": "cpu_us", "status": "ok"}
    rows = [{**key, "variant": "raw", "mode": "inference", "median": 0.1, "ci_low": 0.09, "ci_high": 0.12,
             "baseline": None, "delta_median": None},
            {**key, "metric": "gpu_us", "variant": "raw", "mode": "inference", "median": 50.0}]  # not joined
    if custom_delta is not None:
        rows.append({**key, "variant": "custom_op", "mode": "inference", "median": 0.1 + custom_delta,
                     "baseline": baseline.replace("noop/", f"{op}/"), "delta_median": custom_delta,
                     "delta_ci_low": custom_delta - 0.05, "delta_ci_high": custom_delta + 0.05})
    return rows


def _two_ops() -> dict:
    """_document() with a second op, `muladd`, of the same counts."""
    document = _document()
    return {**document, "rows": document["rows"] + [{**r, "op": "muladd"} for r in document["rows"]]}


def _case(document: dict, variant: str, mode: str, layer: str = "python", op: str = "noop") -> dict:
    return next(r for r in document["rows"]
                if (r["op"], r["variant"], r["mode"], r.get("layer")) == (op, variant, mode, layer))


def test_time_converts_each_op_at_the_speed_of_the_other_ops_boundaries() -> None:
    from dbench.bench.instructions.in_time import AGREEMENT, with_time

    # custom_op adds 800 instructions a call: 0.9 µs measured on noop, 1.0 µs on muladd.
    timed = with_time(_two_ops(), _native(0.9) + _native(1.0, op="muladd"), {"scenario": "boundary", "rounds": 30})
    floor = _case(timed, "raw", "inference")
    assert floor["floor_instructions_per_us"] == 1000.0 and floor["measured_us"] == 0.1  # 100 Ir in 0.1 µs
    noop, muladd = _case(timed, "custom_op", "inference"), _case(timed, "custom_op", "inference", op="muladd")
    # noop at muladd's speed (800 per µs) and muladd at noop's (889 per µs): neither at its own.
    assert noop["instructions_per_us"] == 800.0
    assert noop["speed_from"] == ("the median over 1 cases of other ops (muladd) in every mode "
                                  "(fewer than 3 in inference)")
    assert noop["delta_us"] == pytest.approx(1.0) and noop["delta_us_total"] == pytest.approx(1.0)
    assert (noop["delta_us_ci_low"], noop["delta_us_ci_high"]) == pytest.approx((1.0, 1.0))  # one case: no spread
    assert noop["measured_delta_us"] == 0.9 and noop["explained"] == pytest.approx(1.111) and noop["agrees"]
    assert muladd["delta_us"] == pytest.approx(0.9) and muladd["explained"] == pytest.approx(0.9)
    assert _case(timed, "custom_op", "inference", "binding")["delta_us"] == 0.0
    assert timed["time"] == {"scenario": "boundary", "rounds": 30, "agreement": AGREEMENT}
    # Its floor with a graph was not counted, and an n/a case stays as it was.
    assert _case(timed, "custom_op", "fwd_requires_grad")["time_missing"] == "its floor was not counted"
    assert next(r for r in timed["rows"] if r["mode"] == "fwd_bwd") == \
        next(r for r in _two_ops()["rows"] if r["mode"] == "fwd_bwd")
    # A case whose extra code ran at half the other op's speed is flagged, not hidden (and so is the
    # other, whose speed it set).
    slow = with_time(_two_ops(), _native(1.8) + _native(0.9, op="muladd"), {})
    assert _case(slow, "custom_op", "inference")["explained"] == pytest.approx(0.5)
    assert _case(slow, "custom_op", "inference")["agrees"] is False


def test_a_run_of_one_op_takes_the_speed_from_its_own_cases_and_says_so() -> None:
    from dbench.bench.instructions.in_time import with_time

    custom = _case(with_time(_document(), _native(), {}), "custom_op", "inference")
    assert custom["speed_from"] == ("the median over 1 cases of this op's own cases in every mode "
                                    "(the run has no other op)")
    assert custom["explained"] == pytest.approx(1.0) and custom["delta_us"] == pytest.approx(0.9)


def test_each_mode_is_converted_at_the_speed_of_the_other_ops_cases_in_that_mode() -> None:
    from dbench.bench.core.identity import case_label
    from dbench.bench.instructions.breakdown import floor_of
    from dbench.bench.instructions.in_time import _speeds

    # Three ops, four variants: a call without a graph runs 6 000 instructions a µs of extra code, a
    # backward pass 3 000 (as on the CI VM: 6 200-6 900 and 2 500-3 100), noop's a little faster.
    variants = ("custom_op", "custom_op_autograd", "autograd_key_py", "function_custom_op")
    cases = []
    for op, bias in (("noop", 1.1), ("muladd", 1.0), ("l2norm", 1.0)):
        for mode, per_us in (("inference", 6000.0), ("fwd_bwd", 3000.0)):
            for i, variant in enumerate(variants):
                row = {"scenario": "boundary", "op": op, "variant": variant, "mode": mode, "device": "cpu",
                       "shape": [4, 32], "dtype": "float32", "axes": [], "delta_total": 1000.0 * (i + 1)}
                delta = row["delta_total"] / (per_us * bias)
                cases.append((row, {"status": "ok", "baseline": case_label(floor_of(row)), "delta_median": delta}))
    speeds = _speeds(cases)
    assert speeds["noop", "inference"][0] == pytest.approx(6000.0)  # the others' speed, not its own 6 600
    assert speeds["noop", "fwd_bwd"][0] == pytest.approx(3000.0)
    assert speeds["muladd", "fwd_bwd"][3] == "the median over 8 cases of other ops (l2norm, noop) in fwd_bwd"
    assert speeds["muladd", "inference"][1:3] == pytest.approx((6000.0, 6600.0))  # the median's CI's ends
    # Too few cases of the other ops in a mode: every mode's cases set its speed, and it says so.
    few = [c for c in cases if c[0]["mode"] == "inference" or c[0]["variant"] == "custom_op"]
    assert speeds != _speeds(few)
    assert _speeds(few)["noop", "fwd_bwd"][3] == ("the median over 10 cases of other ops (l2norm, muladd) in "
                                                  "every mode (fewer than 3 in fwd_bwd)")


def test_the_median_interval_takes_the_binomial_order_statistics() -> None:
    from dbench.bench.instructions.in_time import median_ci

    assert median_ci(list(range(1, 101))) == (40, 61)  # the textbook 95 % interval for n = 100
    assert median_ci(list(range(1, 11))) == (2, 9)
    assert median_ci([3.0]) == (3.0, 3.0)


@pytest.mark.parametrize("native, reason", [
    (_native(None), "the native run has no such case"),
    (_native(baseline="noop/function_raw/inference"), "paired it with noop/function_raw/inference, not its floor"),
])
def test_a_case_without_a_native_time_says_why(native: list[dict], reason: str) -> None:
    from dbench.bench.instructions.in_time import with_time

    custom = _case(with_time(_document(), native, {}), "custom_op", "inference")
    assert reason in custom["time_missing"] and "explained" not in custom


def test_the_table_and_figure_show_time_and_flag_what_does_not_add_up(tmp_path: Path) -> None:
    from dbench.bench.instructions.in_time import with_time

    good = with_time(_two_ops(), _native(0.9) + _native(1.0, op="muladd"),
                     {"scenario": "boundary", "rounds": 30, "time": "t"})
    table = cli.table(good)
    assert "**2 of 2 cases within ±20 %** (median 1.01)" in table
    assert "| python +800 | +1.00 | +0.90 [+0.85, +0.95] | 1.11 |" in table
    slow = with_time(_two_ops(), _native(1.8) + _native(0.9, op="muladd"), {})
    assert "0.50 ⚠ |" in cli.table(slow) and "2.00 ⚠ |" in cli.table(slow)
    untimed = with_time(_document(), _native(None), {})
    assert "| n/a | n/a (the native run has no such case) | |" in cli.table(untimed)
    # The figure is in µs where every case of the op was timed, in instructions otherwise.
    assert cli.figure(good, "noop").axes[0].get_xlabel().startswith("µs per call")
    assert cli.figure(untimed, "noop").axes[0].get_xlabel().startswith("thousand instructions")
    assert cli.main(["--from", _write(tmp_path / "t.json", good), "--out", str(tmp_path / "o")]) == 0
    assert "layers' µs" in (tmp_path / "o" / "breakdown-cpu.md").read_text()


def _write(path: Path, document: dict) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def test_a_real_native_run_times_the_counted_cases() -> None:
    """The timing half on real code (the counts are _document()'s): the native run's cases join the
    counted ones, and each layer's µs add up to the case's."""
    document = {**_document(), "config": {"ops": ["noop"], "variants": ["raw", "custom_op"], "dtype": "float32"}}
    timed = cli.timed(document)
    custom = [r for r in timed["rows"] if (r["variant"], r["mode"]) == ("custom_op", "inference")]
    assert all(r.get("time_missing") is None and r["measured_delta_us"] > 0 for r in custom)
    assert sum(r["delta_us"] for r in custom) == pytest.approx(custom[0]["delta_us_total"], abs=1e-3)
    assert timed["time"]["scenario"] == "boundary" and timed["time"]["rounds"] > 0


def _arity_document() -> dict:
    """An args breakdown at arities 1, 16 and 64: custom_op_autograd's binding code grows as the
    arity squared (one function), define_impl's Python code by a constant per argument."""
    from dbench.bench.instructions.breakdown import SCHEMA, breakdown_rows

    python = ("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")
    internals = ("libtorch_python.so", "pybind11::detail::get_internals()")
    rows, profiles = [], []
    for arity in (1, 16, 64):
        key = {"scenario": "args", "op": f"args_tensor_{arity}", "device": "cpu", "shape": [16], "dtype": "float32",
               "axes": ["arg_kind", "arity"], "arg_kind": "tensor", "arity": arity, "driver": "python"}
        for variant, mode, ir in (("raw", "inference", {python: 1000}),
                                  ("define_impl", "inference", {python: 1000 + 100 * arity}),
                                  ("function_raw", "fwd_requires_grad", {python: 3000}),
                                  ("custom_op_autograd", "fwd_requires_grad",
                                   {python: 3500, internals: 10 * arity * arity})):
            # Counted in their own windows (inclusive): the outer function holds the inner one.
            windows = {"function_raw": {"Function.apply": {"instructions": 2000.0, "calls": 1.0}},
                      "custom_op_autograd": {
                          "CustomOpDef.__call__": {"instructions": 2500.0 + 12 * arity * arity, "calls": 1.0},
                          "Function.apply": {"instructions": 2400.0 + 11 * arity * arity, "calls": 1.0},
                          "fill_defaults": {"instructions": 10.0 * arity * arity, "calls": 1.0}}}.get(variant)
            rows.append({**key, "variant": variant, "mode": mode, "status": None, "instructions": 1.0,
                         **({"python_functions": windows} if windows is not None else {})})
            profiles.append(attribute(_profile(ir, {})))
    counts = {"config": {"calls": 10}, "env": {}, "rows": rows}
    return {"schema": SCHEMA, "config": counts["config"], "env": counts["env"], "layers": dict(LAYERS),
            "rows": breakdown_rows(counts, profiles, calls=1)}


def test_an_args_breakdown_names_what_grows_with_the_arity_and_how_fast() -> None:
    document = _arity_document()
    assert {r["arity"] for r in document["rows"]} == {1, 16, 64}  # each row keeps its axes' values
    lines = {(r["variant"], r["mode"]): r for r in cli.by_arity(document)}
    grad = lines[("custom_op_autograd", "fwd_requires_grad")]
    assert grad["arities"] == [1, 16, 64] and grad["function"] == "pybind11::detail::get_internals()"
    assert grad["function_delta"] == [10.0, 2560.0, 40960.0] and grad["function_exponent"] == 2.0
    # Of the declared Python functions holding half the growth or more, the innermost: fill_defaults,
    # over the floor's (function_raw calls Function.apply too: its delta is what the case adds).
    assert grad["python_function"] == "fill_defaults" and grad["python_function_delta"] == [10.0, 2560.0, 40960.0]
    python_row = next(r for r in document["rows"] if r["variant"] == "custom_op_autograd" and r["arity"] == 64
                      and r["layer"] == "python")
    assert [(f["function"], f["delta_instructions"]) for f in python_row["python_functions"]] == \
        [("CustomOpDef.__call__", 51652.0), ("Function.apply", 45456.0), ("fill_defaults", 40960.0)]
    assert "python_functions" not in next(r for r in document["rows"] if r["layer"] == "binding")
    plain = lines[("define_impl", "inference")]
    assert plain["delta_total"] == [100.0, 1600.0, 6400.0] and plain["exponent"] == 1.0
    assert "python_function" not in plain  # it calls none of them
    table = cli.table(document)
    assert "## By arity" in table
    assert ("| tensor | custom_op_autograd | fwd_requires_grad | 1: +510, 16: +3,060, 64: +41,460 | 1.88 | "
            "`pybind11::detail::get_internals()` | 1: +10, 16: +2,560, 64: +40,960 | 2.0 | `fill_defaults` | "
            "1: +10, 16: +2,560, 64: +40,960 | 2.0 |") in table
    assert "## torch's Python functions on the path, inclusive" in table
    assert "- args_tensor_64/custom_op_autograd/fwd_requires_grad: `CustomOpDef.__call__` +51,652 (1)" in table
    assert "## By arity" not in cli.table(_document())  # a boundary breakdown has no arity


def test_the_args_scenarios_ops_are_counted_on_their_own_with_its_variants() -> None:
    from dbench.bench.instructions.collect import Config, check_names
    from dbench.scenarios.arity import counted_scenario

    assert counted_scenario(("args_tensor_1", "args_float_64")) == "args"
    assert counted_scenario(("noop",)) == counted_scenario(None) == "boundary"
    with pytest.raises(ValueError, match="counted on their own, not with noop"):
        counted_scenario(("args_tensor_1", "noop"))
    config = Config(ops=("args_tensor_1", "args_tensor_16"))
    assert "cpp" not in config.resolved_variants() and "registered" in config.resolved_variants()
    assert config.as_dict()["scenario"] == "args" and "scenario" not in Config(ops=("noop",)).as_dict()
    with pytest.raises(ValueError, match="unknown variants cpp .*variants of the args scenario"):
        check_names(Config(ops=("args_tensor_1",), variants=("raw", "cpp")))
    with pytest.raises(ValueError, match="unknown ops args_tensor_3"):
        check_names(Config(ops=("args_tensor_3",)))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None
                    or _jemalloc_missing(),
                    reason="valgrind or jemalloc is not installed (scripts/setup.sh installs both)")
def test_a_real_args_breakdown_shows_custom_op_autograds_quadratic_line() -> None:
    """The args scenario's finding (custom_op_autograd's per-argument cost grows with the arity once
    a graph is recorded: torch's fill_defaults rereads the schema's arguments for each argument) as
    its own line: one pybind11 function that grows as the arity squared from 16 to 64 tensors, and
    fill_defaults itself, counted in its own window, holding that growth."""
    from dbench.bench.instructions.breakdown import collect_breakdown
    from dbench.bench.instructions.collect import Config

    document = collect_breakdown(Config(ops=("args_tensor_16", "args_tensor_64"),
                                        variants=("raw", "function_raw", "custom_op_autograd"), calls=20, warmup=3))
    lines = {(r["variant"], r["mode"]): r for r in cli.by_arity(document)}
    grad = lines[("custom_op_autograd", "fwd_requires_grad")]
    assert grad["arities"] == [16, 64] and grad["function"].startswith("pybind11::")
    assert grad["function_exponent"] is not None and 1.7 < grad["function_exponent"] < 2.3, grad
    assert grad["exponent"] > 1.5, grad  # the whole overhead turns quadratic, not only that line
    # The torch Python function that holds that growth, counted in its own window: fill_defaults.
    assert grad["python_function"] == "fill_defaults", grad
    assert grad["python_function_exponent"] is not None and grad["python_function_exponent"] > 1.7, grad
    inference = lines[("custom_op_autograd", "inference")]
    assert inference["exponent"] < 1.3, inference  # without a graph: about a constant per argument
    assert inference.get("python_function") != "fill_defaults", inference  # not called without a graph


def test_time_joins_cases_with_axes_by_their_labelled_baseline() -> None:
    """The args scenario's native run names each case's baseline with its axes
    (`args_tensor_16/raw/inference[arg_kind=tensor,arity=16]`): the join takes that label."""
    from dbench.bench.instructions.in_time import with_time

    document = _arity_document()
    native = []
    for arity in (1, 16, 64):
        key = {"scenario": "args", "op": f"args_tensor_{arity}", "device": "cpu", "shape": [16], "dtype": "float32",
               "axes": ["arg_kind", "arity"], "arg_kind": "tensor", "arity": arity, "driver": "python",
               "metric": "cpu_us", "status": "ok"}
        delta = 0.1 * arity
        native += [{**key, "variant": "raw", "mode": "inference", "median": 1.0, "baseline": None},
                   {**key, "variant": "define_impl", "mode": "inference", "median": 1.0 + delta, "delta_median": delta,
                    "baseline": f"args_tensor_{arity}/raw/inference[arg_kind=tensor,arity={arity}]"}]
    timed = with_time(document, native, {"scenario": "args"})
    rows = [r for r in timed["rows"] if r["variant"] == "define_impl" and r["layer"] == "python"]
    assert [r["measured_delta_us"] for r in rows] == pytest.approx([0.1, 1.6, 6.4])
    assert all(r["explained"] == pytest.approx(1.0) for r in rows)  # 1 000 Ir per µs at every arity


def test_the_figures_x_range_holds_every_bar_with_room_for_its_label() -> None:
    """The largest bar once ended at the axis's right edge, its label outside the axes."""
    document = _arity_document()
    for op in ("args_tensor_16", "args_tensor_64"):
        ax = cli.figure(document, op).axes[0]  # in thousands of instructions: no native run
        ends = [sum(v for v in c["layers"].values() if v > 0) / 1000 for c in cli.cases(document) if c["op"] == op]
        low, high = ax.get_xlim()
        assert low < 0 < max(ends) < high and high - max(ends) >= 0.05 * (high - low), (op, ax.get_xlim(), ends)
