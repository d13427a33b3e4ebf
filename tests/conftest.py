"""Shared fixtures and parametrization helpers for the op tests.

Every functional test is parametrized over ``(device, op, variant)`` triples
built with ``ops.variants.get_variant``. Variants that cannot exist on a device
(``Variant.unavailable``, e.g. ``triton_op`` on the CPU, or every variant on
CUDA when the native build has no CUDA kernels) are left out of the functional
tests; ``test_contracts.py::test_unavailable_variants_have_a_reason`` checks that each of them
says why.

``devices()`` is ``["cpu"]`` plus ``"cuda"`` when ``torch.cuda.is_available()``,
so on a GPU machine every functional test also runs on CUDA.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from dbench.ops.catalog import OPS  # noqa: E402
from dbench.ops.contract import Args, InputSpec, OpContract  # noqa: E402
from dbench.ops.variants import VARIANT_NAMES, Variant, flavour, get_variant, has_variant  # noqa: E402

# Every result document the tests write, in this process and in the runs they start, is validated
# against the committed JSON Schema before it is written (bench/io/schema.py). Where jsonschema is not
# installed (requirements.txt has it) the documents are not validated, and tests/test_schema.py says so.
try:
    import jsonschema  # noqa: F401

    os.environ["DBENCH_VALIDATE_RESULTS"] = "1"
except ModuleNotFoundError:
    pass

SEED = 0
CUDA_SKIP_REASON = "needs a CUDA device (torch.cuda.is_available() is False)"
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason=CUDA_SKIP_REASON)


def _needs_cuda(item: pytest.Item) -> bool:
    """Skipped with requires_cuda's reason, parametrized on the cuda device, or using the CUPTI timer."""
    if any(m.kwargs.get("reason") == CUDA_SKIP_REASON for m in item.iter_markers("skipif")):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(isinstance(v, str) and v == "cuda" for v in callspec.params.values()):
        return True
    return "cupti_timer" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `gpu` marker (pyproject.toml) on the tests that need CUDA as this file's helpers say so;
    a test that skips for CUDA in another way carries @pytest.mark.gpu itself."""
    for item in items:
        if _needs_cuda(item):
            item.add_marker(pytest.mark.gpu)


def devices() -> list[str]:
    """The devices every functional test runs on: cpu, plus cuda when available."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


DEVICES: list[str] = devices()


# ---------------------------------------------------------------------------
# (device, op, variant) parametrization.


def _all_variants() -> list[tuple[str, Variant]]:
    # get_variant registers what it builds; registrations are process-global
    # and cached, so doing it at collection time is cheap and idempotent.
    return [(d, get_variant(v, op, d)) for d in DEVICES for op in OPS for v in VARIANT_NAMES if has_variant(v, op)]


ALL_VARIANTS: list[tuple[str, Variant]] = _all_variants()


def case_id(device: str, v: Variant) -> str:
    return f"{device}-{v.op.name}-{v.name}"


def variant_cases(
    predicate: Callable[[Variant], bool] = lambda v: True,
    *,
    ops: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    native: bool = False,
) -> list[Any]:
    """pytest.params of (device, Variant) for every *available* variant matching.

    native=True adds PyTorch's own op (the `aten` comparison variant): for the tests of what every
    variant must compute (reference, gradients, compile), not of our kernels' contract (errors,
    output layout, opcheck of our registrations)."""
    ops = set(OPS if ops is None else ops)
    devs = set(DEVICES if devices is None else devices)
    return [
        pytest.param(d, v, id=case_id(d, v))
        for d, v in ALL_VARIANTS
        if v.available and d in devs and v.op.name in ops and predicate(v) and (native or not v.spec.native)
    ]


def unavailable_cases() -> list[Any]:
    return [pytest.param(d, v, id=case_id(d, v)) for d, v in ALL_VARIANTS if not v.available]


def is_registered(v: Variant) -> bool:
    return v.spec.registered


def is_differentiable(v: Variant) -> bool:
    return v.spec.differentiable


def is_function_wrapper(v: Variant) -> bool:
    return v.spec.wrap == "function"


def dispatcher_target(v: Variant) -> Any:
    """What torch.library.opcheck can check for this variant.

    opcheck needs an OpOverload or a CustomOpDef. A function_* variant is an
    autograd.Function around its flavour's registered forward op, so that op
    is checked instead (and the Function's gradient is tested separately).
    """
    if is_function_wrapper(v):
        return flavour(v.spec.flavour, v.op.name).fwd
    return v.fn


# ---------------------------------------------------------------------------
# Inputs and tolerances.

# torch.testing's float32 defaults; float64 tight enough to catch any real
# algorithmic error while allowing a few ulps of reassociation. float16/bfloat16:
# torch.testing's rtol (about two ulps; our kernels round once, half an ulp) with the
# atol PyTorch's own OpInfo tests most often give them (1e-3 / 1e-2): entries near zero
# carry the absolute error of rounded operands (a * b + c cancelling, the chain's
# subtractions, PyTorch's composites rounding each op), not a relative one.
TOLERANCES: dict[torch.dtype, dict[str, float]] = {
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2},
    torch.float32: {"atol": 1e-5, "rtol": 1.3e-6},
    torch.float64: {"atol": 1e-12, "rtol": 1e-12},
}
HALF_DTYPES = (torch.float16, torch.bfloat16)


def dtype_params(dtypes: tuple[torch.dtype, ...] = (*HALF_DTYPES, torch.float32, torch.float64)) -> list:
    """pytest.params of dtypes, with their names as ids."""
    return [pytest.param(d, id=str(d).removeprefix("torch.")) for d in dtypes]

SHAPES: dict[str, tuple[int, ...]] = {"boundary": (4, 32), "empty": (0, 8)}


def make_inputs(
    contract: OpContract,
    device: str,
    *,
    shape: tuple[int, ...] | None = None,
    dtype: torch.dtype = torch.float32,
    layout: str = "compact",
    requires_grad: bool = False,
    seed: int = SEED,
) -> Args:
    spec = InputSpec(
        shape=contract.boundary_shape if shape is None else shape,
        dtype=dtype,
        device=device,
        requires_grad=requires_grad,
        layout=layout,
        seed=seed,
    )
    return contract.make_inputs(spec)


def tensors_of(contract: OpContract, args: Args) -> list[torch.Tensor]:
    return list(args[: len(contract.tensor_args)])


def scalars_of(contract: OpContract, args: Args) -> tuple[Any, ...]:
    return tuple(args[len(contract.tensor_args) :])


def op_pattern(op: str, qualified: bool = True) -> str:
    """Regex for an op name in an error message (``dbench*::op`` when qualified).

    ``dbench::<op>_autograd`` (variant cpp_autograd) counts as naming the op.
    """
    name = rf"{re.escape(op)}(?:_autograd)?\b"
    return rf"dbench\w*::{name}" if qualified else rf"\b{name}"


# ---------------------------------------------------------------------------
# Fixtures.


@pytest.fixture(autouse=True)
def _deterministic_seed() -> None:
    """Every test starts from the same global RNG state (inputs also use their own seeded generator)."""
    torch.manual_seed(SEED)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(SEED)


_CORES = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


@pytest.fixture(autouse=True)
def _cores_restored() -> Iterator[None]:
    """A test that runs run.py's main in this process may pin it (--pin-cores): the next test gets
    the cores back, or a later one that starts shards sees too few."""
    yield
    if _CORES is not None and os.sched_getaffinity(0) != _CORES:
        os.sched_setaffinity(0, _CORES)


@pytest.fixture
def dynamo_reset():
    """A clean dynamo state before and after a compile test."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def run_main() -> Iterator[Any]:
    """run.py's main in this process; the signal handlers and torch's thread count it sets are put back."""
    import signal

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import run

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = torch.get_num_threads()
    try:
        yield run
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        torch.set_num_threads(threads)


@pytest.fixture
def catalogue() -> Iterator[None]:
    """The op catalogue as it was: the ops a test registers (declared, loaded or generated) do not leak
    into other tests' op lists."""
    from dbench.ops.specs import USER_OP_NAMES

    before, names = dict(OPS), list(USER_OP_NAMES)
    yield
    OPS.clear()
    OPS.update(before)
    USER_OP_NAMES[:] = names
