"""Every CUDA variant of every op, called on cuda:1 from a thread whose current device is cuda:0.

A launcher that forgets its device guard would allocate on, launch on, or
synchronize the *current* device instead of its inputs' device. With inputs
on cuda:1 and the thread on cuda:0, every variant must:

* return its output (and, with autograd, its gradients) on cuda:1, equal to
  the op's fp64 reference (contract.reference_fp64; gradients against the
  fp64 reference's autograd, as the pre-flight check does);
* leave cuda:0 untouched: its memory_allocated and memory_reserved do not
  move; nothing on the calls' path waits for cuda:0 (cuda:0's current stream
  is kept busy by a sleep kernel and must still be busy once the calls on
  cuda:1 are done and synchronized); nothing is queued on cuda:0's current
  stream (it would run after the sleep, so the outputs read before the sleep
  ends would be wrong: the checked calls use other inputs than the warm-up);
* leave the thread's current device at cuda:0.

A second test records the calls with torch.profiler and checks that every
GPU activity (kernels, copies, memsets) ran on cuda:1.

Skipped unless torch.cuda.device_count() >= 2.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

from dbench.ops.catalog import OPS
from dbench.ops.contract import InputSpec
from dbench.ops.variants import MODES, VARIANT_NAMES, Mode, Variant, get_variant

COUNT = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    COUNT < 2,
    reason=f"needs at least 2 CUDA devices (torch.cuda.device_count() is {COUNT}): "
           "calls every variant on cuda:1 while the thread's current device is cuda:0",
)]

DEVICE = torch.device("cuda", 1)
TOL = {"atol": 1e-5, "rtol": 1e-5}  # float32 against the fp64 reference, as the pre-flight check
SLEEP_CYCLES = 1_000_000_000  # ~0.5 s of cuda:0 clock at 2 GHz (longer at lower clocks)
CASES = [pytest.param(op, name, id=f"{op}-{name}") for op in OPS for name in VARIANT_NAMES]


@pytest.fixture
def on_cuda0() -> Any:
    """The calling thread's current device is cuda:0; both devices idle before and after."""
    previous = torch.cuda.current_device()
    torch.cuda.set_device(0)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    yield
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    torch.cuda.set_device(previous)


def _variant(op: str, name: str) -> Variant:
    variant = get_variant(name, op, str(DEVICE))
    if not variant.available:
        pytest.skip(f"{name} on {DEVICE}: {variant.unavailable}")
    return variant


def _modes(variant: Variant) -> list[str]:
    return [m for m in MODES if variant.na_reason(m) is None]


def _call(variant: Variant, mode: str, seed: int) -> dict[str, Any]:
    """One call in `mode` with inputs on cuda:1: args, output, and gradients (fwd_bwd)."""
    contract = variant.op
    spec = InputSpec(contract.boundary_shape, torch.float32, str(DEVICE),
                     requires_grad=mode != Mode.INFERENCE.value, seed=seed)
    args = contract.make_inputs(spec)
    assert variant.available
    out = variant.fn(*args)
    result: dict[str, Any] = {"args": args, "out": out, "grads": None, "grad_out": None}
    if mode == Mode.FWD_BWD.value:
        grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        result["grad_out"] = grad_out
        result["grads"] = torch.autograd.grad(out, contract.grad_inputs(args), grad_out.to(out.dtype).to(DEVICE))
    return result


def _check_against_reference(variant: Variant, mode: str, got: dict[str, Any], host: dict[str, Any]) -> None:
    contract = variant.op
    args = tuple(a.detach().cpu().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in got["args"])
    torch.testing.assert_close(host["out"], contract.reference_fp64(args), **TOL,
                               msg=lambda m: f"{variant.name}/{mode} output on {DEVICE}: {m}")
    if mode != Mode.FWD_BWD.value:
        return
    ref_args = tuple(a.detach().double().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args)
    want = torch.autograd.grad(contract.reference(*ref_args), contract.grad_inputs(ref_args), got["grad_out"])
    for g, w in zip(host["grads"], want):
        torch.testing.assert_close(g, w, **TOL, msg=lambda m: f"{variant.name}/{mode} gradient on {DEVICE}: {m}")


@pytest.mark.parametrize(("op", "name"), CASES)
def test_variant_on_cuda1_runs_on_cuda1_only(op: str, name: str, on_cuda0: None) -> None:
    variant = _variant(op, name)
    modes = _modes(variant)
    assert modes, f"{name} has no mode on {DEVICE}"
    memory0 = (torch.cuda.memory_allocated(0), torch.cuda.memory_reserved(0))

    for mode in modes:  # warm-up, outside the sleep window: registration, JIT (Triton), autograd threads
        _call(variant, mode, seed=1)
        assert torch.cuda.current_device() == 0, f"{name}/{mode} changed the thread's current device"
    torch.cuda.synchronize(1)

    busy = torch.cuda.Stream(device=0)
    with torch.cuda.stream(busy):  # cuda:0's current stream: a launcher without a device guard would queue here
        torch.cuda._sleep(SLEEP_CYCLES)
        results = {mode: _call(variant, mode, seed=2) for mode in modes}
        assert torch.cuda.current_device() == 0, f"{name} changed the thread's current device"
        torch.cuda.synchronize(1)
        # Read everything back while cuda:0 still sleeps: copies on cuda:1's stream, which never waits for cuda:0.
        host = {m: {"out": r["out"].detach().double().cpu(),
                    "grads": None if r["grads"] is None else [g.double().cpu() for g in r["grads"]]}
                for m, r in results.items()}
        still_busy = not busy.query()
    torch.cuda.synchronize(0)

    assert still_busy, (f"{name}: cuda:0's sleep ended before the calls on {DEVICE} were done and read back: "
                        "something on their path waited for cuda:0 (or the host path took longer than the sleep)")
    for mode, r in results.items():
        assert r["out"].device == DEVICE, f"{name}/{mode}: output on {r['out'].device}"
        for g in r["grads"] or ():
            assert g.device == DEVICE, f"{name}/{mode}: gradient on {g.device}"
        _check_against_reference(variant, mode, r, host[mode])
    assert (torch.cuda.memory_allocated(0), torch.cuda.memory_reserved(0)) == memory0, (
        f"{name}: memory on cuda:0 changed (allocated, reserved) {memory0} -> "
        f"{(torch.cuda.memory_allocated(0), torch.cuda.memory_reserved(0))}")


def _gpu_events(fn: Any) -> list[Any]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
    return [e for e in prof.events() if e.device_type == DeviceType.CUDA and _is_gpu_work(e)]


GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}


def _is_gpu_work(event: Any) -> bool:
    """Kernels, copies and memsets; not the profiler's own overhead records."""
    kind = getattr(event, "activity_type", None)  # newer torch names the kind; older: filter overhead by name
    if kind:
        return str(kind).lower() in GPU_WORK
    return event.device_index >= 0 and "overhead" not in event.name.lower() and "buffer" not in event.name.lower()


@pytest.fixture(scope="module")
def profiler_index_of() -> dict[int, int]:
    """The device_index the profiler gives GPU activity on cuda:0 and on cuda:1 (a control run)."""
    seen: dict[int, int] = {}
    for dev in (0, 1):
        events = _gpu_events(lambda d=dev: torch.ones(64, device=f"cuda:{d}").mul_(2))
        indices = {e.device_index for e in events}
        if len(indices) != 1:
            pytest.skip(f"torch.profiler saw GPU activity on devices {sorted(indices)} for one multiply on "
                        f"cuda:{dev} (CUPTI unavailable or in use by another profiler?)")
        seen[dev] = indices.pop()
    if seen[0] == seen[1]:
        pytest.skip(f"torch.profiler reports cuda:0 and cuda:1 as the same device index {seen[0]}")
    return seen


@pytest.mark.parametrize(("op", "name"), CASES)
def test_profiler_sees_gpu_activity_on_cuda1_only(op: str, name: str, on_cuda0: None,
                                                  profiler_index_of: dict[int, int]) -> None:
    variant = _variant(op, name)
    modes = _modes(variant)
    for mode in modes:  # warm-up (JIT, first-call allocations) outside the profile
        _call(variant, mode, seed=1)
    torch.cuda.synchronize(1)
    events = _gpu_events(lambda: [_call(variant, mode, seed=2) for mode in modes])
    assert events, f"{name}: the profiler saw no GPU activity for its calls on {DEVICE}"
    wrong = sorted({(e.name, e.device_index) for e in events if e.device_index != profiler_index_of[1]})
    assert not wrong, f"{name}: GPU activity off {DEVICE} (profiler index {profiler_index_of[1]}): {wrong[:10]}"
