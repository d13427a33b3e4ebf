"""GPU timers (bench/core/gputimer.py) and the _dbench_cupti module.

On a CPU-only machine: timer selection and fallback (with stand-ins for CUPTI
and CUDA events), the per-block bookkeeping of both timers, result rows, and
that the real module imports and reports itself unavailable. On a GPU: both
timers on known kernels (kernel counts per call, CUPTI vs events agreement).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import pytest
import torch

from dbench.bench.core import gputimer
from dbench.bench.core.gputimer import CuptiTimer, CuptiUnavailable, EventTimer, GpuSamples, GpuTimer, make_gpu_timer
from conftest import REPO_ROOT
from dbench.ops.libraries import build_dir

CUDA_SKIP_REASON = "needs a CUDA device (torch.cuda.is_available() is False)"
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason=CUDA_SKIP_REASON)


# ---------------------------------------------------------------------------
# Stand-ins.


class FakeCupti:
    """The _dbench_cupti API, with scripted block stats."""

    NVTX = False

    def __init__(self, available: tuple[bool, str] = (True, "fake"), enable_error: str | None = None) -> None:
        self._available = available
        self._enable_error = enable_error
        self.enabled = False
        self.finalized = False
        self.open: int | None = None
        self.closed: list[int] = []
        self.script: list[dict[str, Any]] = []  # stats of the next closed blocks, in order

    def available(self) -> tuple[bool, str]:
        return self._available

    def enable(self, external_correlation: bool = False) -> None:
        if self._enable_error:
            raise RuntimeError(self._enable_error)
        self.enabled = True

    def begin_block(self, block_id: int) -> None:
        assert self.enabled and self.open is None
        self.open = block_id

    def end_block(self, block_id: int) -> None:
        assert self.open == block_id
        self.open = None
        self.closed.append(block_id)

    def flush(self) -> dict[int, dict[str, Any]]:
        out = {bid: self.script.pop(0) for bid in self.closed}
        self.closed = []
        return out

    def dropped(self) -> int:
        return 0

    def counters(self) -> dict[str, int]:
        return {"unattributed_kernels": 0}

    def info(self) -> dict[str, Any]:
        return {"library": "fake"}

    def finalize(self, detach: bool = True) -> None:
        self.finalized = True
        self.enabled = False


def block_stats(kernels: int, busy_ns: int, kernel_ns: int | None = None, names: dict[str, int] | None = None,
                span_ns: int | None = None) -> dict[str, Any]:
    return {
        "kernels": kernels, "kernel_ns": busy_ns if kernel_ns is None else kernel_ns, "kernel_busy_ns": busy_ns,
        "busy_ns": busy_ns, "span_ns": busy_ns if span_ns is None else span_ns, "window_ns": 2 * busy_ns,
        "memcpy": 0, "memcpy_ns": 0, "memcpy_bytes": 0, "memset": 1, "memset_ns": 10, "memset_bytes": 4,
        "kernels_correlated": 0,
        "names": names or {},
    }


@pytest.fixture
def cuda_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend CUDA is there (selection logic only: nothing may touch the device)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)


def use_cupti_module(monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
    def load() -> Any:
        if isinstance(module, Exception):
            raise module
        return module

    monkeypatch.setattr(gputimer, "cupti_module", load)


# ---------------------------------------------------------------------------
# Selection and fallback (CPU).


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), None])
def test_no_gpu_timer_on_the_cpu(device: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_gpu_timer(device) is None
        assert make_gpu_timer(device, prefer="events") is None


def test_unknown_preference_is_an_error() -> None:
    with pytest.raises(ValueError, match="prefer"):
        make_gpu_timer("cuda", prefer="nsys")


def test_cuda_device_without_cuda_warns_and_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="is_available"):
        assert make_gpu_timer("cuda") is None


@pytest.mark.parametrize(
    "module, reason",
    [
        (CuptiUnavailable("_dbench_cupti not built"), "_dbench_cupti not built"),
        (FakeCupti(available=(False, "no CUDA driver: cannot load libcuda.so.1")), "no CUDA driver"),
        (
            FakeCupti(enable_error="cuptiActivityEnable(CONCURRENT_KERNEL): "
                                   "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)"),
            "MULTIPLE_SUBSCRIBERS",
        ),
    ],
    ids=["module-missing", "no-driver", "other-cupti-client"],
)
def test_cupti_unavailable_falls_back_to_events_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, cuda_claimed: None, module: Any, reason: str
) -> None:
    use_cupti_module(monkeypatch, module)
    with pytest.warns(UserWarning, match=f"CUPTI unavailable.*{reason}"):
        timer = make_gpu_timer("cuda:0")
    assert isinstance(timer, EventTimer)
    assert timer.name == "events"
    assert timer.device == torch.device("cuda:0")
    assert isinstance(timer, GpuTimer)


def test_events_when_preferred_without_warning(monkeypatch: pytest.MonkeyPatch, cuda_claimed: None) -> None:
    use_cupti_module(monkeypatch, FakeCupti())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        timer = make_gpu_timer("cuda", prefer="events")
    assert isinstance(timer, EventTimer)


def test_cupti_when_available(monkeypatch: pytest.MonkeyPatch, cuda_claimed: None) -> None:
    fake = FakeCupti()
    use_cupti_module(monkeypatch, fake)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        timer = make_gpu_timer("cuda")
    assert isinstance(timer, CuptiTimer) and isinstance(timer, GpuTimer)
    assert timer.name == "cupti" and fake.enabled
    timer.close()
    assert fake.finalized


def test_event_timer_needs_a_cuda_device() -> None:
    with pytest.raises(ValueError, match="CUDA device"):
        EventTimer("cpu")


# ---------------------------------------------------------------------------
# Bookkeeping (CPU, stand-ins).


def test_cupti_timer_samples_per_label_and_call(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    timer = CuptiTimer(module=fake)
    try:
        fake.script = [
            block_stats(kernels=10, busy_ns=50_000, kernel_ns=60_000, names={"k1": 10}, span_ns=70_000),
            block_stats(kernels=30, busy_ns=90_000, names={"k2": 20, "k1": 10}),
            block_stats(kernels=20, busy_ns=40_000, names={"k1": 20}),
        ]
        for label, n in [("a", 10), ("b", 10), ("a", 20)]:
            timer.begin_block(label)
            timer.calls_done(label)
            timer.end_block(label, n)
        res = timer.results()
        assert set(res) == {"a", "b"}
        assert res["a"].gpu_us == pytest.approx([5.0, 2.0])  # busy_ns / n / 1e3
        assert res["a"].kernels == pytest.approx([1.0, 1.0])
        assert res["a"].kernel_us == pytest.approx([6.0, 2.0])
        assert res["a"].span_us == pytest.approx([7.0, 2.0])  # span_ns / n / 1e3: gaps included
        assert res["a"].memset == pytest.approx([0.1, 0.05])
        assert res["a"].names == {"k1": 30}
        assert res["b"].gpu_us == pytest.approx([9.0]) and res["b"].kernels == pytest.approx([3.0])
        assert timer.results() is res and len(res["a"].gpu_us) == 2  # collecting again adds nothing
        assert timer.meta()["gpu_timer"] == "cupti" and timer.dropped() == 0
    finally:
        timer.close()
    assert fake.finalized


def test_samples_truncate_drops_an_unfinished_round() -> None:
    s = GpuSamples(gpu_us=[1.0, 2.0, 3.0], kernels=[1.0, 1.0, 1.0], kernel_us=[1.0] * 3, memcpy=[0.0] * 3,
                   memset=[0.0] * 3)
    s.truncate(2)
    assert s.gpu_us == [1.0, 2.0] and s.kernels == [1.0, 1.0] and len(s.memset) == 2


def test_cupti_timer_rejects_misuse() -> None:
    timer = CuptiTimer(module=FakeCupti())
    try:
        timer.begin_block("a")
        with pytest.raises(RuntimeError, match="still open"):
            timer.begin_block("b")
        with pytest.raises(RuntimeError, match="no such open block"):
            timer.end_block("b", 1)
        with pytest.raises(ValueError, match="positive"):
            timer.end_block("a", 0)
    finally:
        timer.close()


class FakeEvent:
    log: list[str] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        FakeEvent.log.append("record")
        self.t = len(FakeEvent.log)  # ms, for elapsed_time

    def synchronize(self) -> None:
        FakeEvent.log.append("synchronize")

    def elapsed_time(self, end: "FakeEvent") -> float:
        assert self.t is not None and end.t is not None
        return 2.0 * (end.t - self.t)


def test_event_timer_span_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeEvent.log = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    timer = EventTimer("cuda")
    timer.begin_block("a")  # record 1
    timer.calls_done("a")  # record 2: the end, before the post-block sync
    timer.end_block("a", 4)  # only synchronizes
    assert FakeEvent.log == ["record", "record", "synchronize"]
    timer.begin_block("a")  # record 4
    timer.end_block("a", 8)  # no calls_done: records the end here (5)
    assert timer.results()["a"].gpu_us == pytest.approx([2.0 * 1 * 1e3 / 4, 2.0 * 1 * 1e3 / 8])
    assert timer.results()["a"].kernels == []  # events cannot count kernels
    assert timer.dropped() == 0 and timer.meta() == {"gpu_timer": "events"}


def test_gpu_rows_pair_against_the_baseline() -> None:
    from dbench.bench.io.results import REQUIRED_ROW_FIELDS
    from dbench.bench.core.runner import Case

    key = {"scenario": "s", "op": "op", "mode": "inference", "device": "cuda"}
    cases = [
        Case(key={**key, "variant": "raw"}, call=lambda: None, block=10),
        Case(key={**key, "variant": "cpp"}, call=lambda: None, baseline="op/raw/inference", block=10),
        Case(key={**key, "variant": "na"}, call=None, na_reason="n/a"),
    ]
    fake = FakeCupti()
    timer = CuptiTimer(module=fake)
    try:
        raw_ns = [1000, 1100, 1000, 1200, 1000, 1100]
        for ns in raw_ns:  # one round: raw then cpp (cpp 100 ns per call slower)
            fake.script += [block_stats(10, ns * 10, names={"k": 10}),
                            block_stats(10, (ns + 100) * 10, names={"k": 10})]
            for case in cases[:2]:
                timer.begin_block(case.label)
                timer.end_block(case.label, case.block)
        rows = gputimer.gpu_rows(cases, timer)
    finally:
        timer.close()
    assert [(r["variant"], r["metric"]) for r in rows] == [
        ("raw", "gpu_us"), ("raw", "kernels_per_call"), ("cpp", "gpu_us"), ("cpp", "kernels_per_call"),
    ]
    cpp_gpu = rows[2]
    assert cpp_gpu["timer"] == "cupti" and cpp_gpu["unit"] == "us" and cpp_gpu["n"] == 6
    assert cpp_gpu["samples"] == pytest.approx([(ns + 100) / 1e3 for ns in raw_ns])
    assert cpp_gpu["delta_median"] == pytest.approx(0.1)
    assert rows[3]["median"] == 1.0 and rows[3]["delta_median"] == 0.0
    assert cpp_gpu["kernel_names"] == {"k": 60}
    assert all(f in row for row in rows for f in REQUIRED_ROW_FIELDS)


# ---------------------------------------------------------------------------
# NVTX.


def test_nvtx_range_pops_on_error(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(gputimer, "_nvtx", lambda: (lambda name: log.append(f"push {name}"), lambda: log.append("pop")))
    with pytest.raises(KeyError):
        with gputimer.nvtx_range("case/x"):
            raise KeyError("boom")
    assert log == ["push case/x", "pop"]


def test_nvtx_range_is_a_noop_without_cuda() -> None:
    with gputimer.nvtx_range("outer"):
        with gputimer.nvtx_range("inner"):
            pass


# ---------------------------------------------------------------------------
# The real module.


def real_module() -> Any:
    try:
        return gputimer.cupti_module()
    except CuptiUnavailable as e:
        pytest.skip(f"_dbench_cupti not built: {e}")


def test_module_imports_and_reports_availability() -> None:
    m = real_module()
    ok, reason = m.available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason
    info = m.info()
    assert info["header_version"] >= 130000
    assert m.demangle("_Z3fooPf") == "foo(float*)"
    m.nvtx_push("test_gputimer")
    m.nvtx_pop()
    if not torch.cuda.is_available():
        assert not ok, "no GPU here, yet CUPTI claims to be usable"
        assert gputimer.cupti_available() == (False, reason)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path: this machine has a GPU")
def test_module_without_a_gpu_refuses_to_enable() -> None:
    m = real_module()
    with pytest.raises(RuntimeError):
        m.enable()
    ok, reason = m.available()
    assert not ok and reason
    assert not m.enabled()
    with pytest.raises(RuntimeError, match="not enabled"):
        m.begin_block(1)
    assert m.flush() == {}
    assert m.dropped() == 0
    m.finalize()  # nothing enabled: a no-op


FAKE_DIR = build_dir() / "bench" / "cupti" / "fake"

FAKE_SCRIPT = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[1])
fake_dir = sys.argv[2]
try:  # the real driver library when there is one, else the fake
    ctypes.CDLL("libcuda.so.1")
except OSError:
    ctypes.CDLL(fake_dir + "/libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
fake = ctypes.CDLL(fake_dir + "/libdbench_fake_cupti.so")
u64 = ctypes.c_uint64
name = ctypes.c_char_p(b"_Z3mulPfS_")  # kept alive: records point at it

from dbench.bench.core import gputimer
ok, reason = gputimer.cupti_available()
assert ok, reason
timer = gputimer.CuptiTimer()
fake.fake_cupti_set_time(u64(1000))
timer.begin_block("op/a/inference")
fake.fake_cupti_add_kernel(u64(1100), u64(1300), name, 1)
fake.fake_cupti_add_kernel(u64(1200), u64(1500), name, 2)
fake.fake_cupti_add_memcpy(u64(1600), u64(1700), u64(8))
fake.fake_cupti_set_time(u64(2000))
timer.calls_done("op/a/inference")
timer.end_block("op/a/inference", 2)
fake.fake_cupti_add_kernel(u64(2500), u64(2600), name, 3)  # outside: unattributed
res = timer.results()["op/a/inference"]
assert res.kernels == [1.0], res
assert res.gpu_us == [0.25], res  # union [1100, 1500) + [1600, 1700) = 500 ns / 2 calls
assert res.kernel_us == [0.25] and res.memcpy == [0.5], res
assert res.names == {"mul(float*, float*)": 2}, res.names
meta = timer.meta()
assert meta["gpu_timer_counters"]["unattributed_kernels"] == 1, meta
assert meta["gpu_timer_cupti"]["library"].endswith("libdbench_fake_cupti.so"), meta
timer.close()
assert fake.fake_cupti_finalized() == 1
print("fake-cupti-ok")
"""


def test_cupti_timer_end_to_end_on_a_fake_libcupti() -> None:
    """The real module and CuptiTimer over bench/cupti/fake_cupti.cpp, in a fresh process
    (the collector is process-wide, and libcupti is chosen once per process)."""
    import subprocess
    import sys

    real_module()
    if not (FAKE_DIR / "libdbench_fake_cupti.so").exists():
        pytest.skip(f"fake libcupti not built ({FAKE_DIR}): "
                    "cmake --build build --target dbench_fake_cupti dbench_fake_cuda")
    env = {**os.environ, "DBENCH_CUPTI_LIBRARY": str(FAKE_DIR / "libdbench_fake_cupti.so")}
    proc = subprocess.run(
        [sys.executable, "-c", FAKE_SCRIPT, str(REPO_ROOT), str(FAKE_DIR)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0 and "fake-cupti-ok" in proc.stdout, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# GPU.


@pytest.fixture(scope="module")
def cupti_timer() -> Any:
    """One CuptiTimer for the GPU tests (CUPTI is process-wide); finalized at the end."""
    if not torch.cuda.is_available():
        pytest.skip(CUDA_SKIP_REASON)
    try:
        timer = CuptiTimer()
    except CuptiUnavailable as e:
        pytest.skip(f"CUPTI unavailable on this GPU machine: {e}")
    yield timer
    timer.close()


def timed_block(timers: list[Any], label: str, n: int, call: Any) -> None:
    """The runner's protocol: drain, begin, n calls, calls_done, drain, end."""
    torch.cuda.synchronize()
    for t in timers:
        t.begin_block(label)
    for _ in range(n):
        call()
    for t in timers:
        t.calls_done(label)
    torch.cuda.synchronize()
    for t in timers:
        t.end_block(label, n)


@requires_cuda
def test_cupti_counts_one_kernel_per_mul(cupti_timer: CuptiTimer) -> None:
    a = torch.randn(1 << 24, device="cuda")
    b = torch.randn(1 << 24, device="cuda")
    out = torch.empty_like(a)
    torch.mul(a, b, out=out)  # warm
    torch.cuda.synchronize()
    torch.mul(a, b)  # outside every block: unattributed, not counted below
    for _ in range(3):
        timed_block([cupti_timer], "mul", 10, lambda: torch.mul(a, b, out=out))
    s = cupti_timer.results()["mul"]
    assert s.kernels == [1.0, 1.0, 1.0]
    assert s.memcpy == [0.0] * 3 and s.memset == [0.0] * 3
    assert all(x > 0 for x in s.gpu_us)
    assert sum(s.names.values()) == 30
    assert any("Mul" in name or "mul" in name for name in s.names), s.names
    assert cupti_timer.dropped() == 0


@requires_cuda
def test_one_libcupti_in_the_process(cupti_timer: CuptiTimer) -> None:
    # torch loads libcupti for its profiler; the collector must reuse that copy
    # (it dlopens the soname first), not map a second one next to it.
    loaded = cupti_timer.meta()["gpu_timer_cupti"]["loaded_cupti"]
    assert len(set(os.path.realpath(p) for p in loaded)) == 1, loaded


@requires_cuda
def test_cupti_attributes_backward_kernels_run_on_the_autograd_thread(cupti_timer: CuptiTimer) -> None:
    x = torch.randn(1 << 20, device="cuda", requires_grad=True)
    g = torch.ones_like(x)

    def fwd() -> None:
        x.detach().mul(2.0)

    def fwd_bwd() -> None:
        y = x.mul(2.0)
        torch.autograd.grad(y, x, g)

    fwd_bwd()
    for _ in range(2):
        timed_block([cupti_timer], "fwd", 10, fwd)
        timed_block([cupti_timer], "fwd_bwd", 10, fwd_bwd)
    res = cupti_timer.results()
    k_fwd, k_fb = res["fwd"].kernels, res["fwd_bwd"].kernels
    assert k_fwd == [1.0, 1.0]
    assert k_fb[0] == k_fb[1] and k_fb[0] == int(k_fb[0])  # the same whole number every block
    assert k_fb[0] >= 2.0, f"backward kernels missing: {res['fwd_bwd'].names}"


def sleep_cycles_for(ms: float) -> int:
    """torch.cuda._sleep cycles lasting about `ms` (measured with events)."""
    cycles = 1_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return max(1, int(cycles * ms / start.elapsed_time(end)))


@requires_cuda
def test_cupti_and_events_agree_on_a_long_kernel(cupti_timer: CuptiTimer) -> None:
    cycles = sleep_cycles_for(2.0)
    events = EventTimer("cuda")
    for _ in range(3):
        timed_block([cupti_timer, events], "sleep", 5, lambda: torch.cuda._sleep(cycles))
    cupti_us = cupti_timer.results()["sleep"].gpu_us
    event_us = events.results()["sleep"].gpu_us
    assert cupti_timer.results()["sleep"].kernels == [1.0] * 3
    for c, e in zip(cupti_us, event_us):
        assert c >= 1000.0, f"the kernel should last >= 1 ms, CUPTI says {c} us"
        assert math.isclose(c, e, rel_tol=0.10), f"CUPTI {c:.1f} us vs events {e:.1f} us per call"


@requires_cuda
def test_real_event_timer_on_a_mul() -> None:
    a = torch.randn(1 << 24, device="cuda")
    timer = make_gpu_timer("cuda", prefer="events")
    assert isinstance(timer, EventTimer)
    for _ in range(3):
        timed_block([timer], "mul", 10, lambda: a.mul(2.0))
    us = timer.results()["mul"].gpu_us
    assert len(us) == 3 and all(0 < x < 10_000 for x in us)
