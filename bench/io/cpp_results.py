"""The C++ driver (bench/cpp, Google Benchmark): run it and convert its JSON into suite rows.

The driver times the boundary ops called from C++ (no Python on the path):
the launcher directly, the TORCH_LIBRARY op through the dispatcher (typed and
boxed), the stable-ABI op, and the ``*_autograd`` op in the three modes. Each
Google Benchmark *repetition* gives one sample: its wall-clock time per call
(``real_time`` / iteration) in µs. Rows have the fields of
``bench.io.results.case_rows`` with ``driver="cpp"``, so they can sit in the same
result document as the Python rows; their variant names (``CPP_VARIANTS``)
differ from the Python variants so a table never mixes the two.

On CUDA a second, separate run of the driver, its GPU pass
(``--dbench_gpu_timer=cupti``), gives the GPU rows: the driver brackets every
timed loop with a block of the suite's CUPTI collector and reports the user
counters ``gpu_us`` (GPU-busy time per call, the Python GPU rows' definition)
and ``kernels_per_call``; each repetition's counter is one sample. CUPTI adds
CPU cost to every launch, so that run's wall-clock times are not CPU rows: a
GPU pass gives GPU rows only, and a plain run CPU rows only. A GPU pass whose
CUPTI could not be enabled (context ``dbench_gpu_timer: unavailable``) gives
no rows; ``gpu_timer_problem`` says why.

Typical use (run.py)::

    rows, context = run_cpp_driver(device, repetitions=9, min_time=0.1)
    document["rows"] += rows
    env["cpp_driver_context"] = context
    if device.startswith("cuda"):
        gpu, env["cpp_driver_gpu_context"] = run_cpp_gpu_pass(device, repetitions=5)
        document["rows"] += gpu
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from dbench.bench.io.atomic import write_atomic
from dbench.bench.io.document import COMPANION_SUFFIXES
from dbench.bench.core.rows import GPU_METRICS, stat_row

DRIVER_NAME = "dbench_cpp_driver"
# Google Benchmark's JSON of a run is kept beside its result file: <stem>.gbench.json (the CPU rows),
# <stem>.gbench-gpu.json (the GPU pass).
GBENCH_SUFFIX, GBENCH_GPU_SUFFIX = COMPANION_SUFFIXES


def gbench_path(result_json: Path, gpu: bool = False) -> Path:
    """Where a run's Google Benchmark JSON is kept: beside the result file, same stem."""
    return result_json.with_name(result_json.stem + (GBENCH_GPU_SUFFIX if gpu else GBENCH_SUFFIX))
TIMER = "google-benchmark real_time"
GPU_TIMER = "cupti"  # the GPU rows' timer, spelled as the Python CUPTI rows (bench.core.gputimer.CuptiTimer.name)
# The driver's context key dbench_gpu_timer: off (a plain run), cupti (a GPU pass that traced), unavailable.
GPU_PASS_OFF, GPU_PASS_TRACED, GPU_PASS_UNAVAILABLE = "off", "cupti", "unavailable"
BUILD_HINT = (
    "build it with `cmake --build build --target dbench_cpp_driver` (or `bash scripts/setup.sh`); "
    "it is only built when CMake finds Google Benchmark (Debian: libbenchmark-dev)"
)

# Driver benchmark kind -> (suite variant, what it is). Ordered as a table shows them.
CPP_VARIANTS: dict[str, tuple[str, str]] = {
    "direct": ("cpp_direct", "C++ call of the ATen launcher, no dispatcher (the C++ floor)"),
    "typed": ("cpp_typed", "C++ typed (unboxed) dispatcher call of the TORCH_LIBRARY op"),
    "boxed": ("cpp_boxed", "C++ callBoxed of the TORCH_LIBRARY op on a torch::jit::Stack"),
    "stable": ("cpp_stable_typed", "C++ typed dispatcher call of the STABLE_TORCH_LIBRARY (TORCH_BOX) op"),
    "autograd": ("cpp_autograd_typed", "C++ typed dispatcher call of the *_autograd op (C++ Autograd-key kernel)"),
}
CPP_VARIANT_NAMES: tuple[str, ...] = tuple(v for v, _ in CPP_VARIANTS.values())
# The modes the driver times (bench/cpp/boundary.cpp): a selection's other modes have no C++ rows.
CPP_MODES: tuple[str, ...] = ("inference", "no_grad", "inference_mode", "fwd_requires_grad", "fwd_bwd")
BASELINE_KIND = "direct"  # paired deltas: vs the launcher of the same op in the same mode (the forward-only modes)
DELTA_PAIRING = "repetition index (Google Benchmark random interleaving: pairs are not time-aligned)"
# The driver's rounds schedule (--dbench_rounds, context dbench_rounds): each name's runs in time order.
ROUND_PAIRING = "round (the driver's rounds: a case and its floor at most a group of blocks apart)"

@dataclass(frozen=True)
class CppRequest:
    """What a scenario asks of the C++ driver: its ops, the driver's own flags for them, the modes
    the driver times for it, and fields each op's rows carry beyond the driver's key (a scenario's
    axes, an op's source digest)."""

    ops: tuple[str, ...]
    scenario: str = "boundary"
    driver_args: tuple[str, ...] = ()
    modes: tuple[str, ...] = CPP_MODES
    op_keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class CppDriverMissing(RuntimeError):
    """The driver was not built here (no Google Benchmark): the section is skipped, and says so."""


class CppDriverFailed(RuntimeError):
    """The driver crashed, exited non-zero, timed out or wrote no readable JSON: a failure of the run."""

    def __init__(self, message: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.output_tail = output_tail


_US_PER = {"ns": (1.0, 1e3), "us": (1.0, 1.0), "ms": (1e3, 1.0), "s": (1e6, 1.0)}  # (multiply, divide)


def _tail(stdout: str | bytes | None, stderr: str | bytes | None, lines: int = 15) -> str:
    text = "\n".join(x.decode(errors="replace") if isinstance(x, bytes) else x for x in (stdout, stderr) if x)
    return "\n".join(text.strip().splitlines()[-lines:])


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def failed_rows(ops: Iterable[str], device: str, reason: str, metric: str = "cpu_us",
                scenario: str = "boundary") -> list[dict[str, Any]]:
    """One FAILED row per op for a driver run that produced nothing (the table lists it with its reason):
    metric cpu_us for the plain run, gpu_us for the GPU pass."""
    key = {"scenario": scenario, "variant": "cpp_driver", "mode": "inference", "device": device, "driver": "cpp"}
    timer = GPU_TIMER if metric == "gpu_us" else TIMER
    return [stat_row({**key, "op": op}, metric=metric, unit="us", timer=timer, samples=[], status="failed",
                     reason=reason) for op in ops]


def gpu_pass_state(context: Mapping[str, Any]) -> str:
    """off (a plain run: CPU rows), cupti (a GPU pass CUPTI traced) or unavailable, from the driver's context."""
    return str(context.get("dbench_gpu_timer") or GPU_PASS_OFF)


def gpu_timer_problem(context: Mapping[str, Any]) -> str | None:
    """Why a GPU pass has no GPU rows (CUPTI could not be enabled: no driver, no libcupti, another
    CUPTI client such as Nsight Systems), as the driver said it; None for a traced pass or a plain run."""
    if gpu_pass_state(context) != GPU_PASS_UNAVAILABLE:
        return None
    return str(context.get("dbench_gpu_timer_error") or "the driver gave no reason")


def driver_path() -> Path:
    """The driver executable: $DBENCH_CPP_DRIVER, else <build>/bench/cpp/dbench_cpp_driver. It is
    run, so either must be where no other local user can change it (bench/core/trust.py): else
    UntrustedPathError (a ValueError); a driver not there is returned (CppDriverMissing follows)."""
    from dbench.bench.core.native_build import DRIVER_ENV, build_dir
    from dbench.bench.core.trust import trusted_code_path

    override = os.environ.get(DRIVER_ENV)
    if override:
        return trusted_code_path(override, f"the C++ driver ({DRIVER_ENV})", missing_ok=True)
    return build_dir() / "bench" / "cpp" / DRIVER_NAME


def to_us(value: float, unit: str) -> float:
    """A Google Benchmark time in ``unit`` (ns, us, ms, s) in microseconds."""
    mul, div = _US_PER[unit]
    return float(value) * mul / div


def parse_name(run_name: str) -> tuple[str, str, str]:
    """'muladd/typed/inference/real_time' -> ('muladd', 'typed', 'inference')."""
    from dbench.ops.variants import MODES

    parts = run_name.split("/")
    if len(parts) < 3 or parts[1] not in CPP_VARIANTS or parts[2] not in MODES:
        raise ValueError(f"not a dbench_cpp_driver benchmark name: {run_name!r}")
    return parts[0], parts[1], parts[2]


def _shape(context: Mapping[str, Any]) -> list[int]:
    text = str(context.get("dbench_shape", "4x32"))
    return [int(d) for d in text.split("x")]


def _cases(document: Mapping[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(op, kind, mode) -> its repetitions: wall-clock samples (µs), GPU counters, error, median iterations.

    Aggregates (mean/median/stddev) are ignored: statistics are recomputed with
    bench.core.stats from the repetitions, like the Python rows.
    """
    runs: dict[str, list[Mapping[str, Any]]] = {}
    for bench in document.get("benchmarks", []):
        if bench.get("run_type", "iteration") != "iteration":
            continue
        runs.setdefault(bench.get("run_name", bench["name"]), []).append(bench)
    cases: dict[tuple[str, str, str], dict[str, Any]] = {}
    for run_name, reps in runs.items():
        # Repetitions by index; the rounds schedule's runs (one each) stay in the file's order, their time order.
        reps = sorted(reps, key=lambda b: b.get("repetition_index", 0))
        errors = [b.get("error_message") or b.get("skip_message") or "error" for b in reps
                  if b.get("error_occurred") or b.get("skipped")]
        iterations = sorted(int(b.get("iterations", 0)) for b in reps)
        cases[parse_name(run_name)] = {
            "benchmark": run_name,
            "samples": [] if errors else [to_us(b["real_time"], b.get("time_unit", "ns")) for b in reps],
            "counters": {metric: [b.get(metric) for b in reps] for metric, _ in GPU_METRICS},
            "error": errors[0] if errors else None,
            "block_calls": iterations[len(iterations) // 2] if iterations and not errors else None,
        }
    return cases


def _ordered(cases: Mapping[tuple[str, str, str], Any]) -> list[tuple[str, str, str]]:
    """Case keys as a table shows them: ops in catalogue order, then the driver's kinds, then modes."""
    from dbench.ops.catalog import OPS
    from dbench.ops.variants import MODES

    order = {k: i for i, k in enumerate(CPP_VARIANTS)}
    op_order = list(OPS) + sorted({k[0] for k in cases} - set(OPS), key=_natural)
    return sorted(cases, key=lambda k: (op_order.index(k[0]), order[k[1]], MODES.index(k[2])))


def _natural(name: str) -> tuple[Any, ...]:
    """'args_tensor_16' after 'args_tensor_2': the digits of a name compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _row_key(op: str, kind: str, mode: str, device: str, context: Mapping[str, Any],
             op_keys: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The case key of a driver row: its CPU and GPU rows share it (bench.core.identity.case_identity); the
    scenario is the one the driver says it ran, and `op_keys` adds the fields a scenario gives each op."""
    return {"scenario": str(context.get("dbench_scenario", "boundary")), "op": op, "variant": CPP_VARIANTS[kind][0],
            "mode": mode, "device": device, "shape": _shape(context),
            "dtype": str(context.get("dbench_dtype", "float32")), **op_keys.get(op, {}), "driver": "cpp"}


def _counter_samples(case: Mapping[str, Any], metric: str) -> tuple[list[float], str | None]:
    """A case's per-repetition values of a GPU counter, or why it has none. In a traced run every
    repetition that was not skipped carries the counter; a missing one is a failure, never a gap."""
    if case["error"]:
        return [], case["error"]
    values = case["counters"][metric]
    missing = [i for i, v in enumerate(values) if v is None]
    if missing or not values:
        return [], f"no {metric} counter in repetition(s) {missing} of a CUPTI-traced driver run"
    return [float(v) for v in values], None


def _cpu_row(key: dict[str, Any], case: Mapping[str, Any], base: Mapping[str, Any] | None,
             baseline: str | None, pairing: str) -> dict[str, Any]:
    samples: list[float] = case["samples"]
    base_samples = base["samples"] if base is not None and samples and len(base["samples"]) == len(samples) else None
    paired = base_samples is not None
    return stat_row(
        key, metric="cpu_us", unit="us", timer=TIMER, samples=samples,
        base_samples=base_samples, baseline=baseline,
        status="failed" if case["error"] else None, reason=case["error"],
        block_calls=case["block_calls"], delta_pairing=pairing if paired else None,
        benchmark=case["benchmark"],
    )


def _gpu_rows(key: dict[str, Any], case: Mapping[str, Any], base: Mapping[str, Any] | None,
              baseline: str | None) -> list[dict[str, Any]]:
    """gpu_us and kernels_per_call rows of one case of a traced GPU pass, as bench.core.gputimer.gpu_rows
    spells them (timer cupti); deltas against the floor paired by repetition index like the CPU rows."""
    rows = []
    for metric, unit in GPU_METRICS:
        samples, error = _counter_samples(case, metric)
        base_samples = _counter_samples(base, metric)[0] if base is not None else []
        paired = bool(samples) and len(base_samples) == len(samples)
        rows.append(stat_row(
            key, metric=metric, unit=unit, timer=GPU_TIMER, samples=samples,
            base_samples=base_samples if paired else None, baseline=baseline,
            status="failed" if error else None, reason=error,
            block_calls=case["block_calls"], delta_pairing=DELTA_PAIRING if paired else None,
            benchmark=case["benchmark"],
        ))
    return rows


def convert(document: Mapping[str, Any], device: str | None = None,
            op_keys: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Google Benchmark JSON (with per-repetition runs) -> (suite rows, context).

    A plain run gives cpu_us rows (real_time per call). A GPU pass CUPTI traced gives gpu_us and
    kernels_per_call rows from its counters, and no cpu_us rows: CUPTI slowed its launches. A GPU
    pass without CUPTI gives no rows at all (``gpu_timer_problem`` says why). ``device`` defaults
    to the device the driver reported (``dbench_device`` in the context).
    """
    context = dict(document.get("context", {}))
    if device is None:
        device = str(context.get("dbench_device", "cpu"))
    state = gpu_pass_state(context)
    if state not in (GPU_PASS_OFF, GPU_PASS_TRACED, GPU_PASS_UNAVAILABLE):
        raise ValueError(f"unknown dbench_gpu_timer {state!r} in the driver's context")
    cases = _cases(document)
    pairing = ROUND_PAIRING if context.get("dbench_rounds") else DELTA_PAIRING
    rows: list[dict[str, Any]] = []
    for op, kind, mode in _ordered(cases):
        case = cases[(op, kind, mode)]
        base = cases.get((op, BASELINE_KIND, mode)) if kind != BASELINE_KIND else None
        baseline = f"{op}/{CPP_VARIANTS[BASELINE_KIND][0]}/{mode}" if base is not None else None
        key = _row_key(op, kind, mode, device, context, op_keys or {})
        if state == GPU_PASS_OFF:
            rows.append(_cpu_row(key, case, base, baseline, pairing))
        elif state == GPU_PASS_TRACED:
            rows.extend(_gpu_rows(key, case, base, baseline))
    return rows, context


def run_cpp_driver(
    device: str,
    repetitions: int = 9,
    min_time: float = 0.1,
    extra_args: Iterable[str] = (),
    *,
    timeout: float | None = None,
    gpu_timer: str = GPU_PASS_OFF,
    keep: Path | None = None,
    op_keys: Mapping[str, Mapping[str, Any]] | None = None,
    rounds: bool = False,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the driver on ``device`` (cpu, cuda, cuda:N) and return (rows, context).

    ``repetitions`` samples per benchmark (randomly interleaved across benchmarks),
    each at least ``min_time`` seconds long; with ``rounds`` (a CPU run), ``repetitions`` rounds of
    one ``min_time`` block per benchmark in the grouped order (the driver's --dbench_rounds,
    shuffled by ``seed``), so that each case's samples pair in time with its floor's. ``extra_args``
    go to the driver last (e.g. ``--benchmark_filter=muladd/``, ``--dbench_no_pin``). ``context`` is
    Google Benchmark's context block (host, CPUs, caches, load average, library
    build type) plus the driver's ``dbench_*`` keys and the command line.
    ``gpu_timer="cupti"`` makes the run a GPU pass (``run_cpp_gpu_pass``). ``keep``: a path to
    keep Google Benchmark's own JSON at (written whole or not at all), for the tools that read that
    format (google-benchmark's compare.py, Bencher, github-action-benchmark). ``op_keys``: fields
    each op's rows carry beyond the driver's key (``CppRequest.op_keys``).
    """
    if gpu_timer not in (GPU_PASS_OFF, GPU_PASS_TRACED):
        raise ValueError(f"gpu_timer must be {GPU_PASS_OFF!r} or {GPU_PASS_TRACED!r}, got {gpu_timer!r}")
    path = driver_path()
    if not path.is_file():
        raise CppDriverMissing(f"C++ driver not found at {path}: {BUILD_HINT}")
    if rounds and gpu_timer != GPU_PASS_OFF:
        raise ValueError("the rounds schedule is the CPU run's; a GPU pass takes repetitions")
    schedule = ([f"--dbench_rounds={repetitions}", f"--dbench_block_time={min_time}", f"--dbench_seed={seed}"]
                if rounds else [f"--dbench_min_time={min_time}", f"--benchmark_repetitions={repetitions}",
                                "--benchmark_enable_random_interleaving=true"])
    args = [
        f"--dbench_device={device}",
        *schedule,
        *([f"--dbench_gpu_timer={gpu_timer}"] if gpu_timer != GPU_PASS_OFF else []),
        *extra_args,
    ]
    text, tail = _driver_json(path, args, timeout)
    document = json.loads(text)
    try:
        rows, context = convert(document, op_keys=op_keys)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CppDriverFailed(f"C++ driver {path.name} wrote JSON this suite cannot read ({exc})", tail) from None
    context["dbench_command"] = [path.name, *args]
    if keep is not None:
        from dbench.bench.io.env import redact_paths  # torch comes with it: imported only where a copy is kept

        try:  # a copy for other tools, its paths redacted as the result's are; its loss is said in the result
            write_atomic(keep, json.dumps(redact_paths(document), indent=2) + "\n")
            context["gbench_json"] = keep.name
        except OSError as exc:
            context["gbench_json_error"] = f"could not keep Google Benchmark's JSON at {keep.name}: {exc}"
    return rows, context


def _driver_json(path: Path, args: list[str], timeout: float | None) -> tuple[str, str]:
    """The driver's Google Benchmark JSON (checked to parse) and the tail of its output."""
    with tempfile.TemporaryDirectory(prefix="dbench_cpp_") as tmp:
        out = Path(tmp) / "benchmark.json"
        cmd = [str(path), *args, f"--benchmark_out={out}", "--benchmark_out_format=json"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise CppDriverFailed(f"C++ driver {path.name} timed out after {timeout} s",
                                  _tail(exc.stdout, exc.stderr)) from exc
        tail = _tail(proc.stdout, proc.stderr)
        if proc.returncode != 0:
            how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
                   else f"exited with status {proc.returncode}")
            raise CppDriverFailed(f"C++ driver {path.name} {how}: {_last_line(tail)}", tail)
        try:
            text = out.read_text()
            json.loads(text)
        except (OSError, ValueError) as exc:
            raise CppDriverFailed(f"C++ driver {path.name} wrote no readable JSON ({exc})", tail) from None
    return text, tail


def run_cpp_gpu_pass(
    device: str,
    repetitions: int = 5,
    min_time: float | None = None,
    extra_args: Iterable[str] = (),
    *,
    timeout: float | None = None,
    keep: Path | None = None,
    op_keys: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The driver's GPU pass on a CUDA ``device``: (gpu_us and kernels_per_call rows, context).

    A separate run from the CPU one (CUPTI's per-launch cost stays out of the CPU rows), with
    blocks of at least ``min_time`` (default: the Python GPU pass's, bench.core.runner.GPU_MIN_BLOCK_SECONDS).
    No rows, and ``gpu_timer_problem(context)`` saying why, when CUPTI could not be enabled.
    """
    if min_time is None:
        from dbench.bench.core.runner import GPU_MIN_BLOCK_SECONDS

        min_time = GPU_MIN_BLOCK_SECONDS
    return run_cpp_driver(device, repetitions, min_time, extra_args, timeout=timeout, gpu_timer=GPU_PASS_TRACED,
                          keep=keep, op_keys=op_keys)
