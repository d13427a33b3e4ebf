"""A user's own op, declared with dbench.Op in a file outside the suite: every variant generated,
checked before it is timed (the seed's traps each give their reason), timed through run.py, and
told apart from any other op of the same name."""

from __future__ import annotations

import re

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from dbench.bench.core.identity import case_identity
from dbench.ops.catalog import OPS
from dbench.ops.contract import InputSpec
from dbench.ops.declare import DeclarationError, Op, contract_of, load, load_all
from dbench.ops.specs import MODES, VARIANT_NAMES
from dbench.ops.variants import get_variant, has_variant
from dbench.scenarios.base import preflight

RMSNORM = '''
import torch
from dbench import Op, Work


def wide(t):
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def forward(x, w, eps):
    rstd = torch.rsqrt(wide(x).pow(2).mean(-1, keepdim=True) + eps)
    return (wide(x) * rstd * wide(w)).to(x.dtype), rstd


def backward(gy, x, w, rstd, eps):
    xhat, gw = wide(x) * rstd, wide(gy) * wide(w)
    gx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
    return gx.to(x.dtype), (wide(gy) * xhat).reshape(-1, x.shape[-1]).sum(0).to(w.dtype)


def reference(x, w, eps):
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * rstd * w, rstd


{name} = Op(
    name="{name}", forward=forward, inputs=("x", "w"), scalars={{"eps": 1e-6}}, outputs=("y", "rstd"),
    nondifferentiable_outputs=("rstd",), shapes=lambda s: (s, s[-1:]), rowwise=True,
    dtypes=(torch.float32, torch.float64), backward=backward, saves=("x", "w", "rstd"), reference=reference,
    fake=lambda x, w, eps: (torch.empty_like(x), x.new_empty((*x.shape[:-1], 1), dtype=wide(x).dtype)),
    work=lambda a: Work(a[0].nbytes + a[1].nbytes, a[0].nbytes, 4 * a[0].numel()),
)
'''

TRAPS = '''
import torch
from dbench import Op


def rowsum(x):
    return x.sum(-1)


trap_fake = Op(name="trap_fake", forward=rowsum, reference=rowsum, fake=lambda x: torch.empty_like(x))
trap_mutates = Op(name="trap_mutates", forward=lambda x: x.relu_().clone(), reference=lambda x: x.relu())

_lib = torch.library.Library("dbench_test_trap_ns", "DEF")
_lib.define("twice(Tensor x) -> Tensor")
_lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
trap_no_autograd = Op(name="trap_no_autograd", forward=lambda x: x * 2, reference=lambda x: x * 2,
                      backward=lambda g, x: g * 2, saves=("x",), registered=torch.ops.dbench_test_trap_ns.twice)
'''


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def rmsnorm_file(tmp_path: Path) -> Path:
    return _write(tmp_path, "my_ops.py", RMSNORM.format(name="user_rmsnorm"))


def _runs(variant: str, op: str) -> list[str]:
    v = get_variant(variant, op)
    return [m for m in MODES if v.na_reason(m) is None]


def test_every_generated_variant_passes_its_checks(rmsnorm_file: Path, catalogue: None) -> None:
    (op,) = load_all([f"{rmsnorm_file}:user_rmsnorm"])
    contract = OPS[op]
    variants = [v for v in VARIANT_NAMES if has_variant(v, op)]
    assert variants == ["raw", "define_impl", "custom_op", "custom_op_autograd", "autograd_key_py", "function_raw",
                        "function_define_impl", "function_custom_op", "nested_define_impl", "nested_custom_op"]
    for name in variants:
        for mode in _runs(name, op):
            spec = InputSpec(contract.boundary_shape, requires_grad=mode != "inference")
            assert preflight(get_variant(name, op), contract, mode, spec) is None, (name, mode)


@pytest.mark.parametrize("op, mode, said", [
    ("trap_fake", "inference", "test_faketensor: When comparing the output"),
    ("trap_mutates", "inference", "test_schema: Argument x is not defined as mutable but was mutated"),
    ("trap_no_autograd", "fwd_requires_grad", "test_autograd_registration"),
])
def test_each_trap_names_the_registration_at_fault(tmp_path: Path, catalogue: None, op: str, mode: str,
                                                   said: str) -> None:
    load_all([str(_write(tmp_path, "traps.py", TRAPS))])
    variant = "registered" if op == "trap_no_autograd" else "custom_op"
    contract = OPS[op]
    reason = preflight(get_variant(variant, op), contract, mode,
                       InputSpec(contract.boundary_shape, requires_grad=mode != "inference"))
    assert reason is not None and reason.startswith("contract check failed: opcheck") and said in reason
    # The raw launcher is not a registration: it is timed as it is.
    assert preflight(get_variant("raw", op), contract, "inference", InputSpec(contract.boundary_shape)) is None


def test_a_wrong_result_keeps_torchs_summary(tmp_path: Path, catalogue: None) -> None:
    """A launcher that disagrees with its reference in a few elements: the reason says how many and
    by how much (torch.testing's summary), not only "Tensor-likes are not close!"."""
    _write(tmp_path, "off.py", """
        import torch
        from dbench import Op


        def nearly(x):
            y = x * 2
            y.view(-1)[:3] += 1.0
            return y


        off = Op(name="off_by_some", forward=nearly, reference=lambda x: x * 2)
        """)
    (op,) = load_all([f"{tmp_path / 'off.py'}:off"])
    contract = OPS[op]
    reason = preflight(get_variant("raw", op), contract, "inference", InputSpec(contract.boundary_shape))
    assert reason is not None and "are not close!" in reason, reason
    assert "Mismatched elements: 3 / 128" in reason and "Greatest absolute difference: 1.0" in reason, reason
    assert "\n" not in reason


def test_an_op_without_backward_has_no_gradient_rows_aten_included(tmp_path: Path, catalogue: None) -> None:
    """Its native form may not be differentiable (a quantizer's uint8 output), and no function_raw row
    exists to pair it with: n/a in the gradient modes, never FAILED there."""
    _write(tmp_path, "fwd_only.py", """
        import torch
        from dbench import Op

        halve = Op(name="fwd_only_halve", forward=lambda x: x * 0.5, reference=lambda x: x * 0.5,
                   native=lambda x: torch.mul(x, 0.5))
        """)
    (op,) = load_all([f"{tmp_path / 'fwd_only.py'}:halve"])
    for variant in ("aten", "raw"):
        v = get_variant(variant, op)
        assert v.na_reason("inference") is None
        for mode in ("fwd_requires_grad", "fwd_bwd"):
            assert v.na_reason(mode) is not None, (variant, mode)
    assert get_variant("aten", op).na_reason("fwd_bwd") == \
        "op 'fwd_only_halve' declares no backward: its gradient modes are not timed"


CONTIGUOUS = """
import torch
from dbench import Op


def rowscale(x):
    assert x.stride(-1) == 1, "rowscale needs contiguous rows"
    return x * 3


strict = Op(name="strict_rowscale", forward=rowscale, reference=lambda x: x * 3)
relaxed = Op(name="relaxed_rowscale", forward=rowscale, reference=lambda x: x * 3, layouts=("compact",))

_lib = torch.library.Library("dbench_test_wrongfake", "DEF")
_lib.define("twice(Tensor x) -> Tensor")
_lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
torch.library.register_fake("dbench_test_wrongfake::twice", lambda x: x.new_empty(x.shape[:-1]))
theirs = Op(name="theirs_twice", forward=lambda x: x * 2, reference=lambda x: x * 2,
            registered=torch.ops.dbench_test_wrongfake.twice)
"""


def test_a_launcher_that_raises_is_named_not_a_registration(tmp_path: Path, catalogue: None) -> None:
    """The launcher's own assert on dense permuted inputs: the reason names the launcher, its
    exception and frame, and the declaration that fixes it (no schema hint); declared, it passes."""
    load_all([str(_write(tmp_path, "contig.py", CONTIGUOUS))])
    spec = InputSpec(OPS["strict_rowscale"].boundary_shape)
    reason = preflight(get_variant("custom_op", "strict_rowscale"), OPS["strict_rowscale"], "inference", spec)
    assert reason is not None and "the launcher raised on permuted inputs" in reason, reason
    assert "AssertionError: rowscale needs contiguous rows at contig.py:" in reason and "in rowscale" in reason
    assert 'declare layouts=("compact",)' in reason and "schema does not say" not in reason
    assert preflight(get_variant("custom_op", "relaxed_rowscale"), OPS["relaxed_rowscale"], "inference", spec) is None


def test_an_op_checked_on_compact_inputs_only_is_named_in_the_tables_notes(tmp_path: Path, catalogue: None) -> None:
    """layouts=("compact",): its rows say where its checks ran, and the table's notes one line for the
    op; an op checked on every layout says nothing."""
    import dbench
    from dbench.analysis.views import notes

    strict, relaxed = (dbench.Op(name=n, forward=lambda x: x * 3, reference=lambda x: x * 3, layouts=layouts)
                       for n, layouts in (("everywhere_rowscale", ("compact", "permuted")),
                                          ("compact_rowscale", ("compact",))))
    result = dbench.run_scenario("boundary", [strict, relaxed], device="cpu", out=tmp_path, quick=True, rounds=2,
                                 variants=["raw", "custom_op"], modes=("inference",), no_cpp=True)
    assert result.status == 0
    said = {r["op"]: r.get("checked_on") for r in result.document["rows"]}
    assert said == {"everywhere_rowscale": None, "compact_rowscale": "compact inputs only (declared layouts="
                    "('compact',)): not checked on permuted ones"}
    lines = [n for n in notes(result.document) if "contract checks on" in n]
    assert lines == ["compact_rowscale: contract checks on compact inputs only (declared layouts=('compact',)): "
                     "not checked on permuted ones"]


def test_a_reference_that_raises_is_named_with_its_inputs(catalogue: None) -> None:
    """At a shape the reference cannot take (--shape), the pre-flight reason says the reference
    raised, on which inputs, and where; not a bare error the reader must attribute."""
    from dbench.ops.declare import register

    def fixed_reference(x):  # written for the declared (4, 32) only
        return x.reshape(4, 32) * 2

    op = _op(name="fixed_ref", forward=lambda x: x * 2, reference=fixed_reference)
    (name,) = register([contract_of(op, "t.py:fixed_ref@0")])
    assert preflight(get_variant("raw", name), OPS[name], "inference", InputSpec((4, 32))) is None
    reason = preflight(get_variant("raw", name), OPS[name], "inference", InputSpec((8, 64)))
    assert reason is not None and reason.startswith(
        "pre-flight check failed: the op's reference raised on inputs of shapes [8, 64]: RuntimeError: "), reason
    assert reason.endswith("in fixed_reference"), reason


def test_a_registered_ops_own_fault_is_its_librarys(tmp_path: Path, catalogue: None) -> None:
    load_all([str(_write(tmp_path, "contig.py", CONTIGUOUS))])
    contract = OPS["theirs_twice"]
    reason = preflight(get_variant("registered", "theirs_twice"), contract, "inference",
                       InputSpec(contract.boundary_shape))
    assert reason is not None and "test_faketensor" in reason, reason
    assert "the registered op's own registration is at fault, not this declaration" in reason
    assert "fix fake=" not in reason


def test_layouts_are_checked_when_declared() -> None:
    with pytest.raises(DeclarationError, match="layouts must include 'compact'"):
        contract_of(_op(layouts=("permuted",)), "t.py:user_op@0")


SEGMENT_SUM = """
import torch
from dbench import Op, inputs


def segment_sum(src, indptr):  # src [N, D], CSR offsets [S + 1] -> [S, D]
    counts = indptr[1:] - indptr[:-1]
    ids = torch.repeat_interleave(torch.arange(counts.numel(), device=src.device), counts)
    return src.new_zeros((counts.numel(), src.shape[1])).index_add(0, ids, src)


def segment_sum_backward(grad, src, indptr):
    return torch.repeat_interleave(grad, indptr[1:] - indptr[:-1], dim=0)


segsum = Op(name="user_segment_sum", forward=segment_sum, inputs=("src", "indptr"), shape=(16, 8),
            shapes=lambda s: (s, (s[0] // 4 + 1,)), input_makers={"indptr": inputs.offsets()},
            differentiable=("src",), backward=segment_sum_backward, saves=("src", "indptr"),
            reference=segment_sum, native=segment_sum, dtypes=(torch.float32, torch.float64),
            fake=lambda src, indptr: src.new_empty((indptr.shape[0] - 1, src.shape[1])))
"""


def test_typed_inputs_an_int64_csr_offsets_op_passes_every_check(tmp_path: Path, catalogue: None) -> None:
    """A segment sum over CSR offsets (an integer input): the inputs every check and row gets have
    int64 sorted offsets from 0 to the rows, no gradient on them, and every variant (aten included)
    passes its contract checks and agrees with the reference, with and without gradients."""
    (op,) = load_all([f"{_write(tmp_path, 'segsum.py', SEGMENT_SUM)}:segsum"])
    contract = OPS[op]
    src, indptr = contract.make_inputs(InputSpec((16, 8), requires_grad=True))
    assert indptr.dtype == torch.int64 and indptr.shape == (5,) and not indptr.requires_grad and src.requires_grad
    assert indptr[0] == 0 and indptr[-1] == 16 and bool((indptr[1:] >= indptr[:-1]).all())
    permuted = contract.make_inputs(InputSpec((16, 8), layout="permuted"))
    assert permuted[0].stride() == (1, 16) and permuted[1].dtype == torch.int64
    variants = [v for v in VARIANT_NAMES if has_variant(v, op)]
    assert "aten" in variants and "custom_op_autograd" in variants
    for name in variants:
        for mode in _runs(name, op):
            spec = InputSpec(contract.boundary_shape, requires_grad=mode != "inference")
            assert preflight(get_variant(name, op), contract, mode, spec) is None, (name, mode)


def test_input_makers_are_checked_when_declared() -> None:
    from dbench import inputs

    with pytest.raises(DeclarationError, match="input_makers names 'y', which is not one of the inputs"):
        contract_of(_op(input_makers={"y": inputs.absent()}), "t.py:user_op@0")
    with pytest.raises(ValueError, match="low < high"):
        inputs.integers(3, 3)


GATHER = """
import torch
from dbench import Op


def gather_rows(x, index):  # x [N, D], index [M] of rows of x -> [M, D]
    return x.index_select(0, index)


def gather_rows_backward(grad, x, index):
    return torch.zeros_like(x).index_add(0, index, grad)


def inputs_of(ctx):  # the index depends on x's row count: one function makes both
    x = torch.randn(ctx.shape, generator=ctx.generator, dtype=torch.float64).to(ctx.dtype)
    index = torch.randint(0, ctx.shape[0], (2 * ctx.shape[0],), generator=ctx.generator)
    return {"x": x.to(ctx.device), "index": index.to(ctx.device)}


gather = Op(name="user_gather_rows", forward=gather_rows, inputs=("x", "index"), shape=(16, 8),
            shapes=lambda s: (s, (2 * s[0],)), make_inputs=inputs_of, differentiable=("x",),
            backward=gather_rows_backward, saves=("x", "index"), reference=gather_rows, native=gather_rows,
            fake=lambda x, index: x.new_empty((index.shape[0], x.shape[1])), dtypes=(torch.float32, torch.float64))
"""


def test_make_inputs_makes_dependent_inputs_for_every_check_and_row(tmp_path: Path, catalogue: None) -> None:
    """One function makes both inputs (the index ranges over x's rows at every shape): every check
    and row gets them, the layout is applied to the 2-D one, only the floating input gets a gradient,
    and every variant passes its contract checks and agrees with the reference."""
    (op,) = load_all([f"{_write(tmp_path, 'gather.py', GATHER)}:gather"])
    contract = OPS[op]
    x, index = contract.make_inputs(InputSpec((16, 8), requires_grad=True))
    assert index.dtype == torch.int64 and index.shape == (32,) and not index.requires_grad and x.requires_grad
    assert int(index.max()) < 16
    big_x, big_index = contract.make_inputs(InputSpec((4096, 8)))
    assert int(big_index.max()) >= 16 and big_index.shape == (8192,)  # follows the op's shape
    permuted = contract.make_inputs(InputSpec((16, 8), layout="permuted"))
    assert permuted[0].stride() == (1, 16) and torch.equal(permuted[0], x.detach())
    for name in [v for v in VARIANT_NAMES if has_variant(v, op)]:
        for mode in _runs(name, op):
            spec = InputSpec(contract.boundary_shape, requires_grad=mode != "inference")
            assert preflight(get_variant(name, op), contract, mode, spec) is None, (name, mode)


def test_a_derived_fake_keeps_made_inputs_dtypes_and_names_data_dependent_references(tmp_path: Path,
                                                                                     catalogue: None) -> None:
    """No fake=: an int64 index beside float32 data is not "different dtypes" (only drawn inputs share
    one), so a gather passes with its derived fake; a reference whose sizes come from the inputs'
    values (repeat_interleave) cannot give a fake, and the reason says so and how to fix it."""
    # (New names: the variants of an op name are built once a process.)
    no_fake = GATHER.replace("fake=lambda x, index: x.new_empty((index.shape[0], x.shape[1])), ", "").replace(
        '"user_gather_rows"', '"user_gather_rows_nofake"')
    segsum = SEGMENT_SUM.replace("fake=lambda src, indptr: src.new_empty((indptr.shape[0] - 1, src.shape[1]))",
                                 "").replace('"user_segment_sum"', '"user_segment_sum_nofake"')
    assert "fake=" not in no_fake and "fake=" not in segsum and "_nofake" in no_fake + segsum
    (gather,) = load_all([f"{_write(tmp_path, 'gather_nofake.py', no_fake)}:gather"])
    (summed,) = load_all([f"{_write(tmp_path, 'segsum_nofake.py', segsum)}:segsum"])
    for op in (gather, summed):
        assert OPS[op].fake_fn is None
    spec = InputSpec(OPS[gather].boundary_shape)
    assert preflight(get_variant("custom_op", gather), OPS[gather], "inference", spec) is None
    summed_spec = InputSpec(OPS[summed].boundary_shape)
    reason = preflight(get_variant("custom_op", summed), OPS[summed], "inference", summed_spec)
    assert reason is not None and "test_aot_dispatch_dynamic" in reason, reason
    assert ("the one derived from the reference does not trace with symbolic sizes: it computes sizes from the "
            "inputs' values") in reason and "declare fake=" in reason


UNTRACEABLE = """
import torch
from dbench import Op

# A library's op in the old catch-all form: a CompositeImplicitAutograd kernel that reads its input's
# data outside the dispatcher, no fake, no Meta kernel.
_lib = torch.library.Library("dbench_test_catchall", "DEF")
_lib.define("scaled(Tensor x) -> Tensor")
_lib.impl("scaled", lambda x: x * float(x.detach().abs().sum().item() > -1), "CompositeImplicitAutograd")
theirs = Op(name="catchall_scaled", forward=lambda x: x.clone(), reference=lambda x: x.clone(),
            registered=torch.ops.dbench_test_catchall.scaled)
"""


def test_a_catch_all_library_op_is_named_as_untraceable(tmp_path: Path, catalogue: None) -> None:
    """The registered op's own fault, and which: its only kernel is CompositeImplicitAutograd, so
    tracing runs its body on fake tensors; the launcher's own variants pass."""
    (op,) = load_all([f"{_write(tmp_path, 'catchall.py', UNTRACEABLE)}:theirs"])
    contract = OPS[op]
    spec = InputSpec(contract.boundary_shape)
    reason = preflight(get_variant("registered", op), contract, "inference", spec)
    assert reason is not None and "the registered op's own registration is at fault" in reason, reason
    assert ("dbench_test_catchall::scaled has only a CompositeImplicitAutograd kernel (no backend kernel, no fake, "
            "no Meta kernel)") in reason and "fix fake=" not in reason
    assert preflight(get_variant("custom_op", op), contract, "inference", spec) is None


@pytest.mark.parametrize("made, said", [
    (lambda ctx: {"x": torch.ones(ctx.shape)}, r"make_inputs returned the inputs \['x'\]; the declaration's are "
                                               r"\['x', 'y'\]: return each of them, by name"),
    (lambda ctx: (torch.ones(ctx.shape),), r"make_inputs returned 1 values; return the 2 tensor inputs \['x', 'y'\]"),
    (lambda ctx: torch.ones(ctx.shape), r"make_inputs returned a Tensor; return the 2 tensor inputs"),
    (lambda ctx: (torch.ones(ctx.shape), 3.0), r"input 'y' is a float \(make_inputs made it\), not a tensor or None"),
])
def test_make_inputs_that_do_not_fit_the_declaration_are_named(made: Any, said: str) -> None:
    contract = contract_of(_op(forward=lambda x, y: x + y, inputs=("x", "y"), make_inputs=made), "t.py:user_op@0")
    with pytest.raises(TypeError, match=said):
        contract.make_inputs(InputSpec((4, 8)))


def test_make_inputs_and_input_makers_are_one_or_the_other() -> None:
    from dbench import inputs

    with pytest.raises(DeclarationError, match="declare input_makers or make_inputs, not both"):
        contract_of(_op(make_inputs=lambda ctx: (torch.ones(ctx.shape),), input_makers={"x": inputs.absent()}),
                    "t.py:user_op@0")
    with pytest.raises(DeclarationError, match="make_inputs must be callable"):
        contract_of(_op(make_inputs=3), "t.py:user_op@0")


def test_boxes_are_ordered_inside_their_extent_and_carry_an_image_index() -> None:
    from dbench import inputs
    from dbench.ops.inputs import MakeContext

    def ctx(shape: tuple[int, ...]) -> MakeContext:
        return MakeContext(shape, (2, 3, 32, 24), torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))

    b = inputs.boxes(lambda s: s[-1], min_side=2.0)(ctx((500, 4)))
    assert b.dtype == torch.float32 and b.shape == (500, 4)
    assert bool(((b[:, 2] - b[:, 0]) >= 2.0 - 1e-4).all() and ((b[:, 3] - b[:, 1]) >= 2.0 - 1e-4).all())
    assert float(b.min()) >= 0 and float(b.max()) <= 24
    rois = inputs.boxes(32, batch=lambda s: s[0])(ctx((500, 5)))
    assert set(rois[:, 0].tolist()) == {0.0, 1.0} and float(rois[:, 1:].max()) <= 32
    with pytest.raises(ValueError, match=r"boxes\(\) makes an \(N, 5\) tensor; the input's shape is \(500, 4\)"):
        inputs.boxes(32, batch=2)(ctx((500, 4)))
    with pytest.raises(ValueError, match="extent > min_side > 0"):
        inputs.boxes(1.0, min_side=2.0)


ADAPTED = """
import torch
from dbench import Op

_lib = torch.library.Library("dbench_test_adapt", "DEF")
_lib.define("scale(Tensor x, Tensor? w, float alpha, *, bool flip=False) -> Tensor")
_lib.impl("scale", lambda x, w, alpha, flip=False: x * alpha if w is None else x * w * alpha,
          "CompositeExplicitAutograd")
torch.library.register_fake("dbench_test_adapt::scale", lambda x, w, alpha, flip=False: torch.empty_like(x))


def scale(x, alpha):
    return x * alpha


OPTS = dict(forward=scale, scalars={"alpha": 2.0}, reference=scale, registered=torch.ops.dbench_test_adapt.scale)
adapted = Op(name="adapted_scale", registered_args=lambda x, alpha: ((x, None, alpha), {"flip": False}), **OPTS)
"""


def test_a_librarys_op_with_other_arguments_gets_its_row_through_an_adapter(tmp_path: Path,
                                                                             catalogue: None) -> None:
    (op,) = load_all([f"{_write(tmp_path, 'adapted.py', ADAPTED)}:adapted"])
    contract = OPS[op]
    assert has_variant("registered", op)
    spec = InputSpec(contract.boundary_shape)
    assert preflight(get_variant("registered", op), contract, "inference", spec) is None
    assert torch.equal(get_variant("registered", op).fn(torch.ones(2, 2), 2.0), torch.full((2, 2), 2.0))


@pytest.mark.parametrize("adapter, said", [
    ("", "the registered op dbench_test_adapt::scale(Tensor x, Tensor? w, float alpha, *, bool flip=False) -> "
         "Tensor does not take the call (x, alpha) (give registered_args="),
    ("registered_args=lambda x, alpha: (alpha, None, x),",
     "takes float alpha where the call puts the tensor input 'x'"),
    ("registered_args=lambda x, alpha: ((x, None, alpha), {'mirror': True}),", "has no argument(s) ['mirror']"),
])
def test_a_registered_op_that_does_not_fit_is_refused_when_loaded(tmp_path: Path, catalogue: None, adapter: str,
                                                                  said: str) -> None:
    namespace = f"dbench_test_adapt_{len(adapter)}"  # a library namespace is defined once per process
    text = ADAPTED.replace("adapted = Op(name=\"adapted_scale\", registered_args=lambda x, alpha: "
                           "((x, None, alpha), {\"flip\": False}), **OPTS)",
                           f"bad = Op(name='bad_scale', {adapter} **OPTS)").replace("dbench_test_adapt", namespace)
    with pytest.raises(DeclarationError, match=re.escape(said.replace("dbench_test_adapt", namespace))):
        load_all([f"{_write(tmp_path, 'bad.py', text)}:bad"])


def test_boundary_run_from_outside_the_repo(rmsnorm_file: Path, tmp_path: Path, catalogue: None,
                                            run_main: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    code = run_main.main(["--scenario", "boundary", "--op", "my_ops.py:user_rmsnorm", "--device", "cpu", "--quick",
                          "--no-cpp", "--rounds", "3", "--shape", "2,16", "--out", str(out)])
    assert code == 0
    (result,) = out.glob("boundary-*.json")
    rows = json.loads(result.read_text())["rows"]
    assert {r["op"] for r in rows} == {"user_rmsnorm"}
    assert {tuple(r["shape"]) for r in rows} == {(2, 16)}
    assert {r["op_source"].rpartition("@")[0] for r in rows} == {"my_ops.py:user_rmsnorm"}
    timed = {(r["variant"], r["mode"]) for r in rows if r["status"] == "ok"}
    assert ("function_raw", "fwd_bwd") in timed and ("custom_op_autograd", "fwd_bwd") in timed
    assert not [r for r in rows if r["status"] == "failed"]


def test_two_ops_of_one_name_never_pair(tmp_path: Path, catalogue: None) -> None:
    first = _write(tmp_path, "a.py", RMSNORM.format(name="user_rmsnorm"))
    (second_dir := tmp_path / "b").mkdir()
    second = _write(second_dir, "a.py", RMSNORM.format(name="user_rmsnorm").replace("1e-6", "1e-5"))
    (c1,), (c2,) = load(f"{first}:user_rmsnorm"), load(f"{second}:user_rmsnorm")
    assert c1.origin != c2.origin
    key = {"scenario": "boundary", "op": "user_rmsnorm", "variant": "raw", "mode": "inference", "shape": [4, 32],
           "dtype": "float32", "device": "cpu", "axes": []}
    assert case_identity({**key, "op_source": c1.origin}) != case_identity({**key, "op_source": c2.origin})
    # The same file is the same op (a rerun pairs with its baseline).
    assert load(f"{first}:user_rmsnorm")[0].origin == c1.origin


def _op(**kw: Any) -> Op:
    return Op(**{"name": "user_op", "forward": lambda x: x.clone(), **kw})


@pytest.mark.parametrize("kw, said", [
    ({"name": "not a name"}, "the name must be an identifier"),
    ({"scalars": {"k": [1, 2]}}, "scalar 'k' is a list"),
    ({"saves": ("x",)}, "`saves` without a backward"),
    ({"backward": lambda g, x: g, "saves": ("y",)}, "saved 'y' is neither an input nor an output"),
    ({"backward": lambda g: g}, "differentiable input(s) ['x'] not saved"),
    ({"outputs": ("x",)}, "input, scalar and output names must differ"),
    ({"dtypes": (torch.int32,)}, "is not a floating dtype"),
    ({"schema": "(Tensor x -> Tensor"}, "does not parse"),
    ({"schema": "(Tensor x, Tensor y) -> Tensor"},
     "has 2 argument(s) and 1 return(s); the declaration calls it with 1"),
    ({"registered": len}, "registered= must be a registered op"),
])
def test_declaration_errors_say_what_to_change(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(DeclarationError) as info:
        contract_of(_op(**kw), "t.py:user_op@0")
    assert said in str(info.value)


def test_op_name_picks_by_variable_or_by_declared_name(tmp_path: Path, catalogue: None) -> None:
    """`--op FILE:NAME` finds the variable NAME or the Op declared name=NAME (both identify the op's
    rows by its variable); no match lists the file's ops; a NAME that is two declarations is refused."""
    ops = _write(tmp_path, "named.py", """
        from dbench import Op
        rms = Op(name="my_rmsnorm", forward=lambda x: x.clone())
        alias = rms
        helper = 3
    """)
    by_variable, by_name = load(f"{ops}:rms"), load(f"{ops}:my_rmsnorm")
    assert [(c.name, c.origin.split("@")[0]) for c in by_variable + by_name] == [("my_rmsnorm", "named.py:rms")] * 2
    with pytest.raises(DeclarationError, match="named.py defines no 'absent' .*: rms = Op 'my_rmsnorm', "
                                               "alias = Op 'my_rmsnorm'$"):
        load(f"{ops}:absent")
    with pytest.raises(DeclarationError, match="helper is a int, not a dbench Op"):
        load(f"{ops}:helper")
    both = _write(tmp_path, "both.py", """
        from dbench import Op
        norm = Op(name="other", forward=lambda x: x.clone())
        rms = Op(name="norm", forward=lambda x: x.clone())
    """)
    with pytest.raises(DeclarationError, match="'norm' names two declarations in both.py, variable norm "
                                               r"\(Op 'other'\) and variable rms \(Op 'norm'\)"):
        load(f"{both}:norm")
    assert [c.name for c in load(f"{both}:other") + load(f"{both}:rms")] == ["other", "norm"]


@pytest.mark.parametrize("argv, said", [
    (["--op", "missing.py"], "is not a file"),
    (["--op", "notes.txt"], "expected FILE.py or FILE.py:NAME"),
    (["--op", "my_ops.py:not-a-name"], "is not a Python name"),
    (["--op", "my_ops.py:absent"], "defines no 'absent' (as a variable or an Op's name=); "
                                    "the dbench Ops it defines: user_rmsnorm = Op 'user_rmsnorm'"),
    (["--op", "clash.py"], "op name 'noop' is taken by the suite's own ops"),
    (["--op", "my_ops.py", "--ops", "nope"], "unknown op 'nope'"),
    (["--op", "my_ops.py", "--scenario", "fusion"], "the fusion scenario takes only its own ops"),
])
def test_bad_op_options_exit_2_before_any_work(argv: list[str], said: str, rmsnorm_file: Path, tmp_path: Path,
                                               catalogue: None, run_main: Any, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("")
    _write(tmp_path, "clash.py", "from dbench import Op\nnoop = Op(name='noop', forward=lambda x: x.clone())\n")
    if "--scenario" not in argv:
        argv = ["--scenario", "boundary", *argv]
    try:
        code = run_main.main([*argv, "--device", "cpu", "--out", str(tmp_path / "r")])
    except SystemExit as exc:  # argparse's own errors (a value's type) exit from the parser
        code = exc.code
    assert code == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


def test_list_names_the_loaded_ops(rmsnorm_file: Path, catalogue: None, run_main: Any,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main.main(["--list", "--op", str(rmsnorm_file)]) == 0
    out = capsys.readouterr().out
    assert "user_rmsnorm" in out and "my_ops.py:user_rmsnorm@" in out
    for name in ("boundary", "roofline", "custom_op_autograd", "registered", "fwd_bwd"):
        assert name in out


MATMUL = """
import torch
from dbench import Op, Work


def work(args):
    a, b = args
    (m, k), n = a.shape, b.shape[1]
    return Work((m * k + k * n) * a.element_size(), m * n * a.element_size(), 2 * m * n * k)


{name} = Op(name="{name}", forward=torch.mm, inputs=("a", "b"), shapes=lambda s: [(s[0], s[1]), (s[1], s[2])],
            shape=(16, 8, 4), reference=torch.mm, native=torch.mm, work=work, size_axis="side")
"""


def test_a_users_matrix_product_is_sized_by_its_side_in_the_roofline(tmp_path: Path, catalogue: None, run_main: Any,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """size_axis="side": the roofline gives it n x n times n x n problems and tables them as n³, as the
    suite's own mm, by the property and not by the op's name."""
    from dbench.scenarios import roofline

    _write(tmp_path, "my_ops.py", MATMUL.format(name="user_matmul"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    code = run_main.main(["--scenario", "roofline", "--op", "my_ops.py:user_matmul", "--device", "cpu", "--quick",
                          "--rounds", "3", "--modes", "forward", "--out", str(out)])
    assert code == 0
    (result,) = out.glob("roofline-*.json")
    rows = [r for r in json.loads(result.read_text())["rows"] if r["metric"] == "cpu_us" and r["status"] == "ok"]
    assert sorted({r["size"] for r in rows}) == list(roofline.SIDES_CPU[::2])
    assert all(r["shape"] == [r["size"]] * 3 and r["size_axis"] == "side" and r["flops"] == 2 * r["size"] ** 3
               for r in rows)
    assert "n (n×n×n)" in capsys.readouterr().out
    with pytest.raises(DeclarationError, match="size_axis must be 'bytes' or 'side'"):
        contract_of(Op(name="bad_axis", forward=torch.mm, inputs=("a", "b"), size_axis="elements"), origin="")


@pytest.mark.slow
def test_roofline_of_an_op_with_a_native_form(tmp_path: Path, catalogue: None, run_main: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The native form is timed beside the op's own kernels in both directions: its backward through
    autograd, checked against the fp64 reference like the backward kernel."""
    _write(tmp_path, "my_ops.py", RMSNORM.format(name="user_rmsnorm").replace(
        "reference=reference,", "reference=reference, native=reference,"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    code = run_main.main(["--scenario", "roofline", "--op", "my_ops.py:user_rmsnorm", "--device", "cpu", "--quick",
                          "--rounds", "3", "--out", str(out)])
    assert code == 0
    (result,) = out.glob("roofline-*.json")
    rows = json.loads(result.read_text())["rows"]
    timed = {(r["variant"], r["mode"]) for r in rows if r["status"] == "ok"}
    assert timed == {("raw", "forward"), ("aten", "forward"), ("raw", "backward"), ("aten", "backward")}
    assert not [r for r in rows if r["status"] == "failed"]


QUANTIZERS = '''
import torch
from dbench import Op


def quantize(x):
    return (x * 16).round().clamp(-128, 127).to(torch.int8)


def two_off(x):
    q = quantize(x)
    q.select(0, 0)[:2] += 1  # any layout
    return q


def within_two(name, got, want):
    n = int((got != want).sum())
    return None if n <= 2 else f"{n} of {got.numel()} values differ"


def exactly(name, got, want):
    return None if torch.equal(got, want) else f"{int((got != want).sum())} of {got.numel()} values differ"


def scaled(x):
    return x * 2 * (1 + 3e-5)


q_exact = Op(name="q_exact", forward=quantize, reference=quantize)
q_off = Op(name="q_off", forward=two_off, reference=quantize)
q_lenient = Op(name="q_lenient", forward=two_off, reference=quantize, compare=within_two)
q_strict = Op(name="q_strict", forward=two_off, reference=quantize, compare=exactly)
s_default = Op(name="s_default", forward=scaled, reference=lambda x: x * 2)
s_loose = Op(name="s_loose", forward=scaled, reference=lambda x: x * 2, tolerance=(1e-4, 1e-4))
s_float32 = Op(name="s_float32", forward=scaled, reference=lambda x: x * 2, tolerance={torch.float32: (1e-4, 1e-4)})
s_float64 = Op(name="s_float64", forward=scaled, reference=lambda x: x * 2, tolerance={torch.float64: (1e-4, 1e-4)})
'''


@pytest.mark.parametrize("op, said", [
    ("q_exact", None),  # an int8 output against a reference in its own dtype: exact
    ("q_off", "Mismatched elements: 2 / 128"),  # torch's summary kept
    ("q_lenient", None),
    ("q_strict", "pre-flight check failed: the op's compare said: 2 of 128 values differ"),
    ("s_default", "Mismatched elements"),  # 3e-5 relative against float32's 1e-5
    ("s_loose", None),
    ("s_float32", None),
    ("s_float64", "Mismatched elements"),  # declared for another dtype: the suite's float32 tolerance
])
def test_the_op_decides_how_close_is_close_enough(tmp_path: Path, catalogue: None, op: str, said: str | None) -> None:
    load_all([str(_write(tmp_path, "quant.py", QUANTIZERS))])
    contract = OPS[op]
    for variant in ("raw", "custom_op"):
        reason = preflight(get_variant(variant, op), contract, "inference", InputSpec(contract.boundary_shape))
        assert (reason is None) if said is None else (reason is not None and said in reason), (variant, reason)


@pytest.mark.parametrize("fields, said", [
    ({"tolerance": (-1.0, 0.0)}, "tolerance must be (atol, rtol), two finite numbers ≥ 0, not (-1.0, 0.0)"),
    ({"tolerance": (1e-3,)}, "tolerance must be (atol, rtol)"),
    ({"tolerance": {torch.int8: (0, 0)}}, "tolerance is keyed by floating dtypes, not torch.int8"),
    ({"tolerance": {torch.float16: (float("nan"), 0.1)}}, "tolerance for torch.float16 must be (atol, rtol)"),
    ({"compare": 3}, "compare must be callable"),
])
def test_a_bad_tolerance_or_comparator_is_refused_at_load(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(DeclarationError, match=re.escape(said)):
        contract_of(_op(**fields), "t.py:user_op@0")


DERIVED = '''
import torch
from dbench import Op

# The reference computes in float64, as the docs ask; the kernel returns float32. No fake=.
wide_ref = Op(name="wide_ref", forward=lambda x: x * 2, reference=lambda x: x.double() * 2,
              backward=lambda g, x: g * 2, saves=("x",))
# The kernel returns a column-major output (as an empty_like of a permuted input would).
column_major = Op(name="column_major", forward=lambda x: (x * 2).t().contiguous().t(), reference=lambda x: x * 2)
'''


@pytest.mark.parametrize("op", ["wide_ref", "column_major"])
def test_a_derived_fake_takes_dtypes_and_strides_from_the_launcher(tmp_path: Path, catalogue: None, op: str) -> None:
    """No fake=: the derived fake is shaped as the reference's outputs, with the dtype and strides of
    one real call of the launcher, so the fp64-reference pattern passes every registered variant."""
    from dbench.ops.contract import launcher_outputs

    load_all([str(_write(tmp_path, "derived.py", DERIVED))])
    contract = OPS[op]
    for variant in ("define_impl", "custom_op", "nested_custom_op", "function_custom_op"):
        if not has_variant(variant, op):
            continue
        for mode in _runs(variant, op):
            spec = InputSpec(contract.boundary_shape, requires_grad=mode != "inference")
            assert preflight(get_variant(variant, op), contract, mode, spec) is None, (variant, mode)
    x = torch.randn(contract.boundary_shape)
    (out,) = launcher_outputs(contract.launcher(op), (x,)) or [None]
    assert out is not None and out.dtype == torch.float32
    assert launcher_outputs(lambda x: 1 / 0, (x,)) is None  # a launcher that raises: the reference's metadata stands


RETURNS_ITS_INPUT = """
import torch
from dbench import Op

def scale_add(x, y, alpha):
    return x * alpha + y

def scale_add_bwd(g, alpha):
    return g * alpha, g  # the second gradient is the incoming one itself: an output that is an input

op = Op(name="scale_add_aliasing", forward=scale_add, inputs=("x", "y"), scalars={"alpha": 0.5},
        backward=scale_add_bwd, backward_fake=lambda g, alpha: (torch.empty_like(g), torch.empty_like(g)),
        reference=lambda x, y, alpha: x * alpha + y, shape=(8, 64))
"""


def test_a_backward_that_returns_its_input_is_named_not_blamed_on_the_fake(tmp_path: Path) -> None:
    """torch says which kernel returns one of its inputs; the reason keeps that and says to return a
    copy, in the opcheck check and in the compiled one, instead of guessing at the forward's fake."""
    (name,) = load_all([f"{_write(tmp_path, 'aliasing.py', RETURNS_ITS_INPUT)}:op"])
    spec = InputSpec(OPS[name].boundary_shape)
    assert preflight(get_variant("custom_op_autograd", name), OPS[name], "inference", spec) is None
    for variant in ("custom_op_autograd", "function_custom_op"):
        reason = preflight(get_variant(variant, name), OPS[name], "fwd_bwd", spec)
        assert reason is not None and "scale_add_aliasing_backward" in reason, reason
        assert "must not also be" in reason and "return a copy, e.g. g.clone()" in reason, reason  # torch's, cut at 240
        assert "fake" not in reason, reason
