"""A scenario is declared once (scenarios/__init__.py DECLARATIONS): its module builds SCENARIO from that
declaration, what the declaration names exists, and the harness chooses its passes from it alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dbench.bench.core.passes import Pass
from dbench.scenarios import DECLARATIONS, SCENARIO_NAMES, SCENARIOS
from dbench.scenarios.arity import ARGS_OPS
from dbench.scenarios.declaration import Declaration

ROOT = Path(__file__).resolve().parent.parent


def test_every_declared_scenario_has_its_module_and_the_module_uses_the_declaration() -> None:
    assert tuple(SCENARIOS) == SCENARIO_NAMES == tuple(DECLARATIONS)
    for name, scenario in SCENARIOS.items():
        assert scenario.declaration is DECLARATIONS[name]
        assert (ROOT / "scenarios" / f"{name}.py").is_file()


def test_what_a_declaration_names_exists() -> None:
    from dbench.analysis.figures import KINDS, OP_FIGURES, ROOF_FIGURES, WHOLE_FIGURES
    from dbench.analysis.kernels import TABLES
    from dbench.bench.core.defaults import DEFAULTS
    from dbench.ops.specs import OP_NAMES, VARIANT_NAMES
    from dbench.scenarios.arity import ARGS_OPS

    for d in DECLARATIONS.values():
        assert set(d.figures) <= set(OP_FIGURES) | set(WHOLE_FIGURES), d.name
        assert set(d.figures) <= set(KINDS)
        assert d.tables is None or d.tables in TABLES, d.name
        # the shipped ops, or the ones the args scenario declares for itself
        assert set(d.ops or ()) | set(d.default_ops or ()) <= set(OP_NAMES) | set(ARGS_OPS), d.name
        if d.variants is None:  # the variant factory's names
            assert SCENARIOS[d.name].variants is None and set(VARIANT_NAMES)
        assert set(d.defaults) | set(d.cuda_defaults) | set(d.repeated_cuda_defaults) <= set(DEFAULTS), d.name
        assert all(len(v) == 2 for v in (*d.defaults.values(), *d.cuda_defaults.values(),
                                         *d.repeated_cuda_defaults.values())), d.name
        # the roof figures are drawn against the run's roofs: only a scenario measuring them has one
        assert set(ROOF_FIGURES) <= set(WHOLE_FIGURES)
        assert not set(d.figures) & set(ROOF_FIGURES) or d.makes(Pass.ROOFS), d.name


def test_the_declarations_are_read_without_torch() -> None:
    code = ("import sys; from dbench.scenarios import DECLARATIONS; import dbench.bench.harness.cli; "
            "assert 'torch' not in sys.modules, 'torch imported'; print(len(DECLARATIONS))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(len(DECLARATIONS))


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"passes": (Pass.CUSTOM, Pass.GPU)}, "makes no other pass"),
    ({"passes": (Pass.GPU,)}, "declare it"),
    ({"passes": ("cpu_rounds", "gpu_pass")}, "'gpu_pass' is not a valid Pass"),
    ({"ops": ("chain",), "default_ops": ("noop",)}, "outside its ops"),
    ({"cpu_only": True, "requires_cuda": True}, "exclude each other"),
])
def test_a_wrong_declaration_fails_when_it_is_made(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Declaration("x", "a scenario", **kwargs)  # type: ignore[arg-type]


def test_a_declarations_defaults_cannot_be_changed_after_the_fact() -> None:
    with pytest.raises(TypeError):
        DECLARATIONS["roofline"].defaults["rounds"] = (1, 1)  # type: ignore[index]


def test_a_scenario_module_without_the_custom_pass_takes_no_custom_run() -> None:
    from dbench.scenarios.base import Scenario

    with pytest.raises(ValueError, match="custom pass"):
        Scenario(DECLARATIONS["boundary"], build=lambda sel: [], custom_run=lambda device: ([], {}),
                 custom_report=lambda rows, console: 0)
    with pytest.raises(ValueError, match="custom pass"):
        Scenario(DECLARATIONS["timer_validation"], build=lambda sel: [])
    with pytest.raises(ValueError, match="own_document, go with the custom pass"):  # not both ways of running itself
        Scenario(DECLARATIONS["timer_validation"], build=lambda sel: [], custom_run=lambda device: ([], {}),
                 custom_report=lambda rows, console: 0, own_document=True)
    with pytest.raises(ValueError, match="own_document, go with the custom pass"):
        Scenario(DECLARATIONS["boundary"], build=lambda sel: [], own_document=True)


def _name_comparisons(path: Path) -> list[str]:
    """`<x>.name == "..."` / `<x>.scenario == "..."` comparisons with a scenario's name: how a pass
    used to be chosen."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute):
            names = [c.value for c in node.comparators if isinstance(c, ast.Constant)]
            if node.left.attr in ("name", "scenario") and set(names) & set(SCENARIO_NAMES):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_pass_is_chosen_by_a_scenarios_name() -> None:
    files = [ROOT / "run.py", *(ROOT / "bench").rglob("*.py")]
    assert [hit for f in files for hit in _name_comparisons(f)] == []


def test_the_cpp_pass_is_the_declarations_not_the_names() -> None:
    """Only the scenarios that declare the C++ driver's pass get it (the boundary and args tables today),
    and each of them says what the driver times (Scenario.cpp_request); a declaration without the
    pass cannot carry a request."""
    import dataclasses

    from dbench.scenarios.base import Scenario

    cpp = [n for n, d in DECLARATIONS.items() if d.makes(Pass.CPP_DRIVER)]
    assert cpp == ["boundary", "args"]
    assert all(SCENARIOS[n].cpp_request is not None for n in cpp)
    with pytest.raises(ValueError, match="cpp_request goes with the C\\+\\+ pass"):
        Scenario(DECLARATIONS["launch"], build=SCENARIOS["launch"].build, cpp_request=SCENARIOS["args"].cpp_request)
    with pytest.raises(ValueError, match="cpp_request goes with the C\\+\\+ pass"):
        dataclasses.replace(SCENARIOS["boundary"], cpp_request=None)
    assert [n for n, d in DECLARATIONS.items() if d.makes(Pass.CUSTOM)] == ["breakdown", "timer_validation"]
    assert {n for n, d in DECLARATIONS.items() if d.makes(Pass.ROOFS)} == {"roofline", "offsets", "fusion"}


def test_a_build_names_each_case_it_checks_as_it_goes() -> None:
    """The run shows which case is being built and checked (a build can take minutes): each case is
    named once, in build order, before its checks."""
    from dbench.scenarios.base import Selection

    named: list[str] = []
    sel = Selection(ops=("noop",), variants=("raw", "custom_op"), device="cpu", explicit_ops=True,
                    modes=("inference", "fwd_requires_grad"), on_case=named.append)
    cases = SCENARIOS["boundary"].build(sel)
    assert named == [c.label for c in cases] and len(named) == 4


def test_also_ops_adds_to_every_op_and_goes_with_no_list_of_ops() -> None:
    assert set(ARGS_OPS) <= set(DECLARATIONS["breakdown"].also_ops) and DECLARATIONS["breakdown"].ops is None
    with pytest.raises(ValueError, match="also_ops adds to every op"):
        Declaration("x", "y", ops=("noop",), also_ops=("args_tensor_1",))
