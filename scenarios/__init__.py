"""Scenarios: which ops x variants x modes x shapes to time, and which tables and figures they make.

Every scenario is declared here, once (scenarios/declaration.py): plain data, so that run.py checks a
command line before it imports torch. Its module, scenarios/<name>.py, holds what needs torch (how
its cases are built and planned) as SCENARIO; SCENARIOS (name -> Scenario) imports them on first use.
A new scenario is that file and one declaration below.
"""

from __future__ import annotations

import importlib
from typing import Any

from dbench.bench.core.passes import Pass
from dbench.ops.specs import MODES

from .arity import ARGS_OPS
from .declaration import Declaration

_KERNEL_PASSES = (Pass.CPU_ROUNDS, Pass.GPU, Pass.ROOFS)
# The kernel scenarios have hundreds of cases whose GPU time repeats within 0.5 %: fewer rounds.
_KERNEL_DEFAULTS = {"rounds": (8, 3), "gpu_rounds": (5, 2)}

DECLARATIONS: dict[str, Declaration] = {d.name: d for d in (
    Declaration(
        "boundary", "per-call CPU cost of each registration variant, in every mode",
        passes=(Pass.CPU_ROUNDS, Pass.GPU, Pass.CPP_DRIVER), modes=MODES,
        # On a CUDA device: the H200 host's CPU holds fast and slow speed states for seconds at a
        # time and drifts within a round, so a case's block and its floor's must lie close in time
        # for their ratio to repeat: short blocks, each round in the grouped order (bench/core/runner.py
        # round_order). The first 30 of 40 grouped rounds gave ratio CIs of 1.6 and 2.3 % (median),
        # 60 shuffled ones 2.3 % (results/h200/README.md, "The boundary command in a minute"). The C++
        # driver the same way: 30 rounds of 2.5 ms blocks in the grouped order (its --dbench_rounds),
        # 1.1-1.3 % where 12 shuffled repetitions of 30 ms gave 14 %. On the CPU VMs the noise inside
        # a run is white, and long blocks average it (the CPU default). The GPU pass's blocks last at
        # least 10 ms (bench/core/runner.py GPU_MIN_BLOCK_SECONDS), in 5 rounds: CUPTI's medians repeat
        # within 0.1 %.
        cuda_defaults={"rounds": (30, 6), "block_ms": (2.5, 2.0), "warmup_ms": (5.0, 5.0), "gpu_rounds": (5, 3),
                       "cpp_repetitions": (30, 3), "cpp_min_time": (0.0025, 0.01)},
        # --ab and --processes on CUDA: the single run's grouped schedule, its rounds shared among the
        # processes; 90 rounds and 90 C++ rounds give each of the 12 processes of 6 pairs 15 of each.
        # Two real nights of it on the H200 (results/h200/gate/grouped-nights): the C++ driver's ratio
        # rows' spread a pair fell from 11-18 % (12 shuffled repetitions of 0.03 s) to 1.8-2.2 %, the
        # Python ratio rows' from 3.6-4.6 % to 3.2-3.5 %; 6.2 min a night. The nightly workflow now
        # gives its own design (--duet --pairs 14 --rounds 336 --cpp-repetitions 336: results/h100/gate/
        # duet-nights), which these defaults do not change for a user's own --ab.
        repeated_cuda_defaults={"rounds": (90, 6), "cpp_repetitions": (90, 3)},
        table_note="Δ = median of per-round paired differences vs raw (inference, no_grad, inference_mode) or "
                   "function_raw (fwd_requires_grad, fwd_bwd), in the same mode.",
        figures=("cpu", "ratio", "launch"),
    ),
    Declaration(
        "args", "per-call CPU cost of each registration variant by the number and kind of its arguments",
        # No GPU pass: the one kernel is the same at every arity, only the CPU side grows. The C++ pass:
        # the same ops defined and called from C++ (typed and boxed; scenarios/args.py cpp_request).
        passes=(Pass.CPU_ROUNDS, Pass.CPP_DRIVER), modes=("inference", "fwd_requires_grad"), ops=ARGS_OPS,
        # --quick: the contract checks of ~30 ops take a minute or more; 15 rounds (not 6) add ~20 s
        # and give the slopes' bootstrap over rounds enough rounds to resample. The driver times four
        # calls of each of up to 55 ops: shorter repetitions than the boundary's (~45 s in all, --quick ~5 s).
        defaults={"rounds": (30, 15), "cpp_repetitions": (10, 5), "cpp_min_time": (0.02, 0.005)},
        # The variants a dbench.Op declaration generates, and `registered`: the same op as a C++ TORCH_LIBRARY
        # op with one boxed kernel, defined at run time (scenarios/args.py cpp_op), and `stable`: the same
        # op behind the stable ABI (scenarios/args.py stable_op).
        variants=("raw", "define_impl", "custom_op", "custom_op_autograd", "autograd_key_py", "function_raw",
                  "function_define_impl", "function_custom_op", "nested_define_impl", "nested_custom_op",
                  "registered", "stable"),
        table_note="µs/arg = least-squares slope of the medians against the arity (arguments, or tensors in the "
                   "list), [95 % CI] from a bootstrap over rounds; r² of that line: well below 1, the cost is not "
                   "linear in the arity (or does not grow at all). %/arg = that slope as a share of the call at the "
                   "smallest arity, from the same resamples: it holds where the host's speed moves µs between runs.",
        tables="args", figures=("args",),
    ),
    Declaration(
        "compile", "each boundary eager, inside torch.compile(fullgraph=True), and replayed from a CUDA graph",
        requires_cuda=True, modes=("eager", "compiled", "cudagraph"),
        table_note="Δ = median of per-round paired differences vs the same variant called eagerly.",
        figures=("compile",),
    ),
    Declaration(
        "regions", "a chain of N calls of each variant eager, compiled as one region, and replayed from one CUDA graph",
        passes=(Pass.CPU_ROUNDS, Pass.GPU), modes=("eager", "compiled", "cudagraph"),
        # Any op whose first output can be its next call's first input (scenarios/regions.py chain_rule).
        default_ops=("muladd",),
        # The run defaults (bench/harness/cli.py DEFAULTS); --quick also takes chains of N = 1, 4, 16 only (a full
        # run adds 64: scenarios/regions.py CHAIN_LENGTHS). Each variant is compiled once per N while
        # the cases are built, outside the rounds: its first-call seconds.
        table_note="µs per op = CPU µs per chain call / N. Break-even N: the smallest N from which the mode's "
                   "per-round paired ratio to eager stays below 1. Calls to pay back: first-call seconds / "
                   "(eager − mode µs per chain call), at the largest N.",
        tables="regions", figures=("regions",),
    ),
    Declaration(
        "breakdown", "where each variant's cost over its floor goes (CPU tensors: by layer under callgrind, in µs; "
        "CUDA: torch's Python functions timed in windows)",
        # It writes its own document (analysis/breakdown.py, analysis/windows.py), not a result: on CPU
        # tensors, instructions per layer from one run under callgrind, then µs from a native run of the
        # boundary scenario's same cases; on a GPU (valgrind cannot run the CUDA driver), the declared
        # torch Python functions timed in windows. The args scenario's ops too (on their own).
        passes=(Pass.CUSTOM,), also_ops=ARGS_OPS,
    ),
    Declaration(
        "timer_validation", "CUPTI vs CUDA events vs do_bench on kernels from ~2 µs to 5 ms",
        passes=(Pass.CUSTOM,), requires_cuda=True,
    ),
    Declaration(
        "roofline", "GPU time of each kernel by size against the measured memory and compute roofs",
        passes=_KERNEL_PASSES, modes=("forward", "backward"), variants=("raw", "aten", "compiled"),
        default_ops=("noop", "muladd", "l2norm", "mm"),
        defaults={"rounds": (10, 3), "gpu_rounds": (5, 2)},
        table_note="% of roof = max(FLOPs / P, bytes / B) / time, with B and P measured in this run (roofs).",
        tables="roofline", figures=("roofline",),
    ),
    Declaration(
        "launch", "CPU and GPU time per call of every variant by size: where each stops being launch-bound",
        modes=("inference",), default_ops=("muladd", "l2norm"), defaults={"rounds": (8, 3), "gpu_rounds": (4, 2)},
        table_note="Crossover: the smallest size from which GPU time per call >= 90 % of CPU time per call at "
                   "every larger size.",
        tables="launch", figures=("crossover",),
    ),
    Declaration(
        "offsets", "GPU time of each kernel with int32 and forced int64 offsets, and a run past INT32_MAX",
        # No index axis for mm: its kernel always addresses in int64.
        passes=_KERNEL_PASSES, modes=("forward", "backward"), variants=("raw",),
        ops=("noop", "muladd", "l2norm", "chain"),
        defaults=_KERNEL_DEFAULTS,
        table_note="int64 / int32: GPU time of the forced-int64 kernel over the int32 one, same inputs.",
        tables="offsets", figures=("offsets",),
    ),
    Declaration(
        "fusion", "GPU and CPU time of a chain of k elementwise steps, fused in one kernel or not",
        passes=_KERNEL_PASSES, modes=("forward",), variants=("unfused", "fused", "aten", "compiled", "triton"),
        ops=("chain",),
        defaults=_KERNEL_DEFAULTS,
        table_note="speed-up = unfused time / fused time at the same k and size; modelled: k (traffic ratio).",
        tables="fusion", figures=("fusion",),
    ),
)}
SCENARIO_NAMES: tuple[str, ...] = tuple(DECLARATIONS)

__all__ = ["DECLARATIONS", "SCENARIO_NAMES", "SCENARIOS", "Declaration", "Scenario", "Selection"]


def _registry() -> dict[str, Any]:
    registry = {name: importlib.import_module(f".{name}", __name__).SCENARIO for name in DECLARATIONS}
    wrong = [name for name, s in registry.items() if s.declaration is not DECLARATIONS[name]]
    assert not wrong, f"scenario module(s) {wrong} must build SCENARIO from their own declaration"
    return registry


def __getattr__(name: str) -> Any:
    if name == "SCENARIOS":
        value = _registry()
    elif name in ("Scenario", "Selection"):
        value = getattr(importlib.import_module(".base", __name__), name)
    else:
        raise AttributeError(f"module 'scenarios' has no attribute {name!r}")
    globals()[name] = value
    return value
