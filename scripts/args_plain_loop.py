"""A plain timeit loop over the args scenario's `tensor` ops: a check of the scenario's fitted cost
per extra argument that shares none of the suite's timing code.

The ops are the ones the scenario times (torch.ops handles of each variant, built from the same
declarations); the timing is Python's timeit: blocks of `number` calls, every (variant, arity) pair
once per round in a shuffled order, the median over rounds, and a least-squares line through the
medians. With --result, the scenario's own slopes from that result file are shown beside the loop's.

    python3 scripts/args_plain_loop.py --device cuda --result results/.../args-....json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import timeit
from pathlib import Path

import numpy as np

VARIANTS = ("define_impl", "custom_op", "registered", "stable")
ARITIES = (1, 2, 4, 8, 16, 32, 64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block-ms", type=float, default=5.0, help="length of one timed block")
    parser.add_argument("--result", type=Path, help="an args result file whose slopes to show beside")
    parser.add_argument("--json", type=Path, help="write the loop's medians and slopes here")
    args = parser.parse_args()

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's dbench, or the installed one
    from dbench.ops.declare import register
    from dbench.ops.variants import flavour
    from dbench.scenarios.args import contract
    from dbench.scenarios.arity import op_name

    names = [op_name("tensor", n) for n in ARITIES]
    register([contract(n) for n in names])
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    calls = {}
    for variant in VARIANTS:
        for n, name in zip(ARITIES, names):
            fn = flavour(variant, name).fwd
            inputs = [torch.randn(16, device=args.device) for _ in range(n)]
            fn(*inputs)
            calls[variant, n] = (lambda f=fn, xs=inputs: f(*xs))

    def per_call_us(call, number: int) -> float:
        sync()
        seconds = timeit.timeit(call, number=number)
        sync()
        return seconds / number * 1e6

    number = {}
    for key, call in calls.items():  # calls per block: about block_ms long
        number[key] = max(1, int(args.block_ms * 1e3 / per_call_us(call, 200)))
    samples: dict[tuple[str, int], list[float]] = {k: [] for k in calls}
    order = list(calls)
    rng = random.Random(0)
    for r in range(args.rounds):
        rng.shuffle(order)
        for key in order:
            samples[key].append(per_call_us(calls[key], number[key]))
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, end="\r")
    print(file=sys.stderr)

    theirs = _scenario_slopes(args.result) if args.result else {}
    out = {"device": args.device, "torch": torch.__version__, "rounds": args.rounds, "variants": {}}
    print("| variant | " + " | ".join(f"n={n}" for n in ARITIES)
          + " | loop µs/arg | scenario µs/arg | scenario/loop | loop %/arg | scenario %/arg |")
    print("|---" * (len(ARITIES) + 6) + "|")
    for variant in VARIANTS:
        medians = [float(np.median(samples[variant, n])) for n in ARITIES]
        slope = float(np.polyfit(ARITIES, medians, 1)[0])
        share = slope / medians[0]  # as a share of the one-argument call: what a host's speed state leaves alone
        other, other_share = theirs.get(variant, (None, None))
        out["variants"][variant] = {"medians_us": dict(zip(map(str, ARITIES), medians)), "slope_us": slope,
                                    "share": share, "scenario_slope_us": other, "scenario_share": other_share}
        cells = (("—", "—", "—") if other is None
                 else (f"{other:.4f}", f"{other / slope:.3f}", f"{100 * other_share:.2f}"))
        print(f"| {variant} | " + " | ".join(f"{m:.2f}" for m in medians)
              + f" | {slope:.4f} | {cells[0]} | {cells[1]} | {100 * share:.2f} | {cells[2]} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _scenario_slopes(path: Path) -> dict[str, tuple[float, float]]:
    """The scenario's fitted µs per extra tensor argument and its share of the one-argument call,
    inference mode, per variant."""
    from dbench.analysis.arity import args_fits
    from dbench.analysis.load import load_results

    fits = args_fits(load_results([path]))
    fits = fits[(fits["mode"] == "inference") & (fits["arg_kind"] == "tensor")]
    return {str(v): (float(s), float(f)) for v, s, f in zip(fits["variant"], fits["slope"], fits["share"])}


if __name__ == "__main__":
    sys.exit(main())
