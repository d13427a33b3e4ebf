"""The args scenario: its ops are dbench.Op declarations with the schemas they claim (a `Tensor(a!)`
declared and honoured), a --quick CPU run gives rows for every kind and arity, the slope fit
recovers a known slope, a registration that fails is a FAILED row, and bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from dbench.analysis.arity import args_fits, args_grids, fit_slope
from dbench.analysis.load import load_results
from dbench.ops.catalog import OPS
from dbench.ops.contract import InputSpec
from dbench.ops.variants import get_variant, has_variant
from dbench.scenarios import DECLARATIONS
from dbench.scenarios.arity import ARG_KINDS, QUICK_ARITIES, arities, kind_and_arity, op_name
from dbench.scenarios.args import _na_reason, build, selected
from dbench.scenarios.base import Selection, preflight

from conftest import requires_cuda

VARIANTS: tuple[str, ...] = DECLARATIONS["args"].variants or ()


def _registered(*names: str) -> None:
    selected(Selection(ops=names, variants=VARIANTS, device="cpu", explicit_ops=True))


def _schema(variant: str, name: str) -> Any:
    fn = get_variant(variant, name).fn
    return getattr(fn, "_opoverload", fn)._schema


@pytest.mark.parametrize(("kind", "types"), [
    ("tensor", ["Tensor"] * 8), ("optional", ["Tensor"] + ["Optional[Tensor]"] * 7),
    ("list", ["Tensor", "List[Tensor]"]),
    ("mutable", ["Tensor"] * 8), ("float", ["Tensor"] + ["float"] * 7), ("int", ["Tensor"] + ["int"] * 7),
    ("bool", ["Tensor"] + ["bool"] * 7), ("str", ["Tensor"] + ["str"] * 7),
])
def test_each_op_has_the_schema_it_claims(kind: str, types: list[str], catalogue: None) -> None:
    name = op_name(kind, 8)
    _registered(name)
    for variant in ("define_impl", "custom_op"):
        schema = _schema(variant, name)
        assert [str(a.type) for a in schema.arguments] == types, (variant, str(schema))
        written = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert written == (["x7"] if kind == "mutable" else [])
    assert len(OPS[name].make_inputs(InputSpec((16,)))[1]) == 7 if kind == "list" else True


def test_the_mutable_argument_is_declared_and_its_checks_pass(catalogue: None) -> None:
    name = op_name("mutable", 4)
    _registered(name)
    contract = OPS[name]
    # register_autograd refuses a non-functional op: no such variant, not a crash
    assert not has_variant("custom_op_autograd", name) and has_variant("autograd_key_py", name)
    for variant in ("custom_op", "define_impl", "nested_custom_op"):
        assert preflight(get_variant(variant, name), contract, "inference", InputSpec((16,))) is None, variant
    args = contract.make_inputs(InputSpec((16,)))
    before = args[-1]._version
    get_variant("custom_op", name).fn(*args)
    assert args[-1]._version == before + 1  # custom_op bumps what the schema says it writes


def test_a_registration_that_raises_is_a_failed_row(catalogue: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import dbench.ops

    real = dbench.ops.get_variant

    def refusing(variant: str, op: str, device: str = "cpu") -> Any:
        if variant == "custom_op":
            raise RuntimeError("schema refused\nsecond line")
        return real(variant, op, device)

    monkeypatch.setattr(dbench.ops, "get_variant", refusing)
    cases = build(Selection(ops=(op_name("int", 2),), variants=("raw", "custom_op"), device="cpu",
                            explicit_ops=True, modes=("inference",)))
    by_variant = {c.key["variant"]: c for c in cases}
    assert by_variant["custom_op"].error == "registering custom_op failed: schema refused"
    assert by_variant["raw"].runnable


@pytest.mark.slow
def test_a_quick_cpu_run_has_rows_for_every_kind_and_arity(tmp_path: Path, catalogue: None, run_main: Any) -> None:
    code = run_main.main(["--scenario", "args", "--quick", "--device", "cpu", "--no-pin", "--rounds", "3",
                          "--block-ms", "0.2", "--variants", "raw,function_raw", "--out", str(tmp_path), "--plot"])
    assert code == 0
    (path,) = [p for p in tmp_path.glob("args-*.json") if ".gbench" not in p.name]  # not the driver's own JSON
    rows = json.loads(path.read_text())["rows"]
    timed = {(r["arg_kind"], r["arity"], r["variant"], r["mode"]) for r in rows if r["status"] == "ok"}
    for kind in ARG_KINDS:
        assert arities(kind, quick=True) == tuple(n for n in QUICK_ARITIES if n >= (2 if kind == "mutable" else 1))
        for n in arities(kind, quick=True):
            assert {(kind, n, "raw", "inference"), (kind, n, "function_raw", "fwd_requires_grad"),
                    (kind, n, "function_raw", "inference")} <= timed
    assert all(r["axes"] == ["arg_kind", "arity"] and r["op"] == op_name(r["arg_kind"], r["arity"]) for r in rows)
    assert all(r["op_source"].startswith(f"dbench.scenarios.args:{r['op']}@") for r in rows)
    assert [p.name for p in tmp_path.glob("*.png")] == [f"{path.stem}-args.png"]
    from dbench.bench.io.cpp_results import driver_path

    if driver_path().is_file():  # the C++ pass: every quick op called from C++, fitted like the others
        cpp = {(r["arg_kind"], r["arity"], r["variant"]) for r in rows if r["driver"] == "cpp" and r["status"] == "ok"}
        assert cpp == {(k, n, v) for k in ARG_KINDS for n in arities(k, quick=True)
                       for v in ("cpp_direct", "cpp_typed", "cpp_boxed", "cpp_stable_typed")}
        fits = args_fits(load_results([path]))
        assert set(fits.loc[fits["variant"] == "cpp_typed", "arg_kind"]) == set(ARG_KINDS)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
def test_the_driver_calls_every_kind_and_arity_from_cpp_typed_and_boxed(device: str, catalogue: None) -> None:
    """Every op of the scenario, defined in the C++ driver from the schema the Python side declares:
    its typed and boxed calls, the stable op's typed call and the floor pass the driver's check (the
    call returns a copy of the first tensor) and give rows keyed like the Python rows (axes, source)."""
    from dbench.bench.io.cpp_results import driver_path, run_cpp_driver
    from dbench.scenarios.args import cpp_request
    from dbench.scenarios.arity import ARGS_OPS

    if not driver_path().is_file():
        pytest.skip("dbench_cpp_driver is not built (no Google Benchmark): tests/test_cpp_driver.py says why")
    request = cpp_request(Selection(ops=ARGS_OPS, variants=VARIANTS, device=device, explicit_ops=True))
    assert request.ops == ARGS_OPS and request.modes == ("inference",) and request.scenario == "args"
    rows, context = run_cpp_driver(device, repetitions=1, min_time=0.0005, timeout=600,
                                   extra_args=[*request.driver_args, "--dbench_no_pin"], op_keys=request.op_keys)
    assert context["dbench_scenario"] == "args" and context["dbench_shape"] == "16"
    assert context["dbench_device"].startswith(device)
    assert [r["reason"] for r in rows if r["status"] != "ok"] == []
    got = {(r["op"], r["variant"], r["mode"]) for r in rows}
    assert got == {(op, v, "inference") for op in ARGS_OPS
                   for v in ("cpp_direct", "cpp_typed", "cpp_boxed", "cpp_stable_typed")}
    for r in rows:
        assert (r["arg_kind"], r["arity"]) == kind_and_arity(r["op"]) and r["axes"] == ["arg_kind", "arity"]
        assert r["op_source"] == OPS[r["op"]].origin and r["shape"] == [16] and r["scenario"] == "args"


def test_the_driver_passes_the_scalar_values_the_python_side_passes() -> None:
    """The C++ driver's scalar arguments (bench/cpp/args.cpp kFloatArg...) are scenarios/args.py
    SCALARS: a str of another length, say, would be another boundary cost."""
    import re

    from dbench.scenarios.args import SCALARS

    text = (Path(__file__).resolve().parent.parent / "bench" / "cpp" / "args.cpp").read_text()
    found = dict(re.findall(r"k(Float|Int|Bool|Str)Arg = (.+?);", text))
    as_cpp = {"float": repr(SCALARS["float"]), "int": str(SCALARS["int"]), "bool": str(SCALARS["bool"]).lower(),
              "str": f'"{SCALARS["str"]}"'}
    assert {k.lower(): v for k, v in found.items()} == as_cpp


def _synthetic(slope: float, intercept: float, rounds: int, seed: int = 1) -> pd.DataFrame:
    """Rows of one variant and kind whose every round lies on a line, scaled by that round's speed."""
    rng = np.random.default_rng(seed)
    speed = 1 + 0.05 * rng.standard_normal(rounds)
    rows = []
    for n in (1, 2, 4, 8, 16, 32, 64):
        noise = 1 + 0.01 * rng.standard_normal(rounds)
        rows.append({"scenario": "args", "metric": "cpu_us", "op": op_name("tensor", n), "variant": "custom_op",
                     "mode": "inference", "arg_kind": "tensor", "arity": n, "status": "ok",
                     "samples": list((intercept + slope * n) * speed * noise)})
    frame = pd.DataFrame(rows)
    return frame.assign(median=[float(np.median(s)) for s in frame["samples"]])


def test_the_fit_recovers_a_known_slope_with_a_ci_that_holds_it() -> None:
    fits = args_fits(_synthetic(slope=1.5, intercept=20.0, rounds=30))
    (fit,) = fits.itertuples()
    assert fit.slope == pytest.approx(1.5, rel=0.03) and fit.ci_low < 1.5 < fit.ci_high
    assert fit.ci_high - fit.ci_low < 0.2 and fit.r2 > 0.99 and fit.arities == [1, 2, 4, 8, 16, 32, 64]
    assert args_fits(_synthetic(1.5, 20.0, 30)).equals(fits)  # the same table every time it is made
    exact = fit_slope([1, 2, 3], np.array([[1.0] * 4, [3.0] * 4, [5.0] * 4]))
    assert exact.slope == pytest.approx(2.0) and exact.ci_low == pytest.approx(2.0) == exact.ci_high


def test_the_tables_give_every_arity_and_the_slope() -> None:
    grids = dict(args_grids(_synthetic(slope=1.5, intercept=20.0, rounds=6)))
    summary = grids["args inference: CPU µs per extra argument, by kind [95 % CI]"]
    assert summary.loc["custom_op", "tensor"].startswith("1.5")
    detail = grids["args tensor/inference: CPU µs per call by number of arguments"]
    assert list(detail.columns) == ["1", "2", "4", "8", "16", "32", "64", "µs/arg [95 % CI]", "%/arg [95 % CI]", "r²"]
    share = float(detail.loc["custom_op", "%/arg [95 % CI]"].split()[0])
    assert share == pytest.approx(100 * 1.5 / 21.5, rel=0.03)  # 1.5 µs of the 21.5 at one argument


def test_the_share_per_argument_holds_when_the_host_changes_speed_between_runs() -> None:
    """The same op timed on a host 1.7x slower (every sample scaled): the slope in µs moves 1.7x, the
    slope as a share of the one-argument call stays, CI and all."""
    fast = _synthetic(slope=1.5, intercept=20.0, rounds=30)
    slow = fast.assign(samples=[[1.7 * v for v in s] for s in fast["samples"]])
    (a,), (b,) = args_fits(fast).itertuples(), args_fits(slow).itertuples()
    assert b.slope == pytest.approx(1.7 * a.slope) and b.ci_high == pytest.approx(1.7 * a.ci_high)
    assert a.share == pytest.approx(1.5 / 21.5, rel=0.03) and a.share_low < 1.5 / 21.5 < a.share_high
    assert (b.share, b.share_low, b.share_high) == pytest.approx((a.share, a.share_low, a.share_high))


@pytest.mark.parametrize(("argv", "says"), [
    (["--modes", "fwd_bwd"], "argument --modes: unknown mode 'fwd_bwd'; valid modes: inference, fwd_requires_grad"),
    (["--variants", "cpp"], "argument --variants: unknown variant 'cpp'"),
    (["--ops", "args_tensor_3"], "argument --ops: unknown op 'args_tensor_3'"),
])
def test_bad_input_exits_2_with_one_line(argv: list[str], says: str, run_main: Any, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run_main.main(["--scenario", "args", "--device", "cpu", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert info.value.code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.json"))


def test_the_ops_are_plain_declarations_of_one_kernel(catalogue: None) -> None:
    _registered(op_name("tensor", 2), op_name("list", 2))
    for name in (op_name("tensor", 2), op_name("list", 2)):
        contract = OPS[name]
        assert contract.launchers is not None and contract.runtime_checks and contract.differentiable == ("x0",)
        args = contract.make_inputs(InputSpec((16,), requires_grad=True))
        out = get_variant("function_custom_op", name).fn(*args)
        (grad,) = torch.autograd.grad(out, args[0], torch.ones_like(out))
        assert torch.equal(out, args[0]) and torch.equal(grad, torch.ones_like(grad))


def _runtime_op(variant_name: str, namespace: str, kind: str) -> tuple[Any, Any, list[Any]]:
    """The kind's 4-argument op as `variant_name`, checked to be namespace::<name> with the Python
    variants' schema and to return a new tensor equal to its first argument."""
    name = op_name(kind, 4)
    _registered(name)
    contract = OPS[name]
    variant = get_variant(variant_name, name)
    assert variant.fn.name() == f"{namespace}::{name}"
    assert str(variant.fn._schema) == f"{namespace}::{name}{contract.signature(name)}"
    args = contract.make_inputs(InputSpec((16,)))
    out = variant.fn(*args)
    assert torch.equal(out, args[0]) and out.data_ptr() != args[0].data_ptr()
    return contract, variant, args


@pytest.mark.parametrize("kind", ARG_KINDS)
def test_the_registered_row_is_a_cpp_op_of_the_same_schema_that_passes_the_checks(kind: str, catalogue: None) -> None:
    """`registered` is torch.ops.dbench_args.<name>: a C++ op with one boxed kernel defined at run time,
    the schema the Python variants have, the first argument copied, the contract checks passed in
    every mode it has (a kind that writes to an input has no autograd row, and says why)."""
    contract, variant, args = _runtime_op("registered", "dbench_args", kind)
    for mode in ("inference", "fwd_requires_grad"):
        reason = _na_reason(contract, "registered", mode)
        if kind == "mutable" and mode == "fwd_requires_grad":
            assert reason is not None and "register_autograd" in reason
            continue
        assert reason is None
        spec = InputSpec((16,), requires_grad=mode != "inference")
        assert preflight(variant, contract, mode, spec) is None, (kind, mode)


@pytest.mark.parametrize("kind", ARG_KINDS)
def test_the_stable_row_is_a_stable_abi_op_of_the_same_schema_that_passes_the_checks(kind: str,
                                                                                      catalogue: None) -> None:
    """`stable` is torch.ops.dbench_stable.<name>: a stable-ABI op with one boxed kernel per argument kind,
    defined at run time, the schema the Python variants have, the first argument copied into a new
    tensor, the checks passed in inference (it has no autograd formula, as in the boundary table)."""
    contract, variant, args = _runtime_op("stable", "dbench_stable", kind)
    assert preflight(variant, contract, "inference", InputSpec((16,))) is None
    assert not variant.spec.differentiable


def test_a_stable_op_takes_every_argument_off_the_stack(catalogue: None) -> None:
    """The stable ABI hands a boxed kernel its arguments to free. 200k calls with 15 str arguments each
    (a kind whose stock conversion loses ~48 bytes per argument, pytorch/pytorch#191340: 140 MB here)
    and as many with a Tensor[] of 15 leave the peak resident memory where it was."""
    import resource

    for kind in ("str", "list", "optional"):
        name = op_name(kind, 16)
        _registered(name)
        fn = get_variant("stable", name).fn
        args = OPS[name].make_inputs(InputSpec((16,)))
        for _ in range(20_000):
            fn(*args)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for _ in range(200_000):
            fn(*args)
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert grown_kib < 16 * 1024, (kind, grown_kib)


def test_a_stable_op_is_defined_once_and_says_so(catalogue: None) -> None:
    from dbench.ops.libraries import define_stable_copy_first_op

    name = op_name("tensor", 2)
    _registered(name)
    with pytest.raises(RuntimeError, match=f"dbench_stable::{name} is already defined"):
        define_stable_copy_first_op("dbench_stable", name, "(Tensor x0, Tensor x1) -> Tensor", "Tensor")
    with pytest.raises(RuntimeError, match="no copy-first kernel for arguments of type 'Scalar'"):
        define_stable_copy_first_op("dbench_stable", "args_never_defined", "(Tensor x0, Scalar s) -> Tensor", "Scalar")


@pytest.mark.slow
def test_the_plain_loop_times_the_same_ops_and_shows_the_scenarios_slopes_beside(tmp_path: Path) -> None:
    """scripts/args_plain_loop.py, run as a user would from another folder: a median per variant and
    arity, a slope and its share of the one-argument call, and beside them the slopes a result file holds."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    (result,) = (root / "results" / "cpu-intel-r-xeon-r-processor").glob("args-cpu-*.json.gz")  # kept gzipped
    out = tmp_path / "loop.json"
    done = subprocess.run([sys.executable, str(root / "scripts" / "args_plain_loop.py"), "--rounds", "2",
                           "--block-ms", "0.2", "--result", str(result), "--json", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0].startswith("| variant | n=1 |")
    loop = json.loads(out.read_text())["variants"]
    fits = args_fits(load_results([result]))
    fits = fits[(fits["mode"] == "inference") & (fits["arg_kind"] == "tensor")].set_index("variant")
    assert set(loop) == {"define_impl", "custom_op", "registered", "stable"}
    for variant, got in loop.items():
        medians = [got["medians_us"][str(n)] for n in (1, 2, 4, 8, 16, 32, 64)]
        assert all(m > 0 for m in medians) and got["share"] == pytest.approx(got["slope_us"] / medians[0])
        if variant in fits.index:  # that result predates the stable row
            assert got["scenario_slope_us"] == pytest.approx(fits.loc[variant, "slope"])
            assert got["scenario_share"] == pytest.approx(fits.loc[variant, "share"])
        else:
            assert got["scenario_slope_us"] is None
