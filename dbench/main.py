"""The `dbench` command: one entry point for running scenarios and reading their results.

    dbench run --scenario boundary --op my_ops.py:my_op     (run.py's options)
    dbench list [--op my_ops.py]                           (scenarios, ops, variants, modes)
    dbench gate NEW [BASELINE ...]                         (dbench.analysis.gate)
    dbench report | figures | compare | history | calibrate | nights | export | breakdown | windows  (dbench.analysis.*)
    dbench instructions check --op my_ops.py:my_op --expected counts.json   (dbench.bench.instructions)
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

# A command's exit status, guarded against a standard output that cannot be written: beside the
# harness, where every command (the analysis modules' too) reaches it without importing this entry point.
from dbench.bench.harness.guard import exit_with

# subcommand -> (module with main(argv), what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("dbench.run", "time a scenario (run.py's options; --help lists them)"),
    "list": ("dbench.run", "print the scenarios, ops, variants and modes (--op FILE.py adds yours)"),
    "gate": ("dbench.analysis.gate", "judge a run against a baseline: PASS, regression, NO DECISION"),
    "report": ("dbench.analysis.report", "markdown/text/CSV tables of result files"),
    "figures": ("dbench.analysis.figures", "the figures of result files (PNG)"),
    "compare": ("dbench.analysis.compare", "two runs side by side, row by row"),
    "history": ("dbench.analysis.history", "a series of runs: change points per row"),
    "calibrate": ("dbench.analysis.calibrate", "the gate's per-row thresholds from repeated runs"),
    "nights": ("dbench.analysis.nights", "synthetic nights from A/A runs: what the gate's settings decide"),
    "export": ("dbench.analysis.export", "result files for Bencher or github-action-benchmark"),
    "breakdown": ("dbench.analysis.breakdown",
                  "where each variant's cost over its floor goes, by layer (CPU tensors, under callgrind)"),
    "windows": ("dbench.analysis.windows",
                "torch's Python functions on each variant's path, timed (any device, CUDA too)"),
    "instructions": ("dbench.bench.instructions.__main__",
                     "instructions per call under callgrind (a CPU count CI can gate on): collect, check"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: dbench COMMAND [options]\n\ncommands:\n" + "\n".join(lines) + \
        "\n\n`dbench COMMAND --help` shows a command's options."


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:  # a usage error: one line on stderr, as every other
        given = f"unknown command {argv[0]!r}" if argv else "no command given"
        print(f"dbench: error: {given}; one of {', '.join(COMMANDS)} (dbench --help says what each does)",
              file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    if name not in ("run", "list"):  # its usage and errors name the command typed, not the module
        return int(importlib.import_module(COMMANDS[name][0]).main(rest, prog=f"dbench {name}") or 0)
    from dbench.bench.harness import common  # torch-free

    before, common.PROG = common.PROG, f"dbench {name}"  # run.py's messages name the command typed
    try:
        return int(importlib.import_module("dbench.run").main(["--list", *rest] if name == "list" else rest) or 0)
    finally:
        common.PROG = before  # an in-process caller's later run.py main says run.py again


def entry() -> None:
    """The console script (and python3 -m dbench)."""
    if sys.argv[1:2] == ["run"]:  # as run.py: a supervisor process ends the result of a run that crashed
        from dbench.bench.harness import common, pycache
        from dbench.bench.harness.supervisor import supervise

        pycache.build_cache()  # before torch: where Python may not write bytecode, the build folder keeps it
        common.PROG = "dbench run"  # the supervisor's own messages (a crashed worker) name the command too
        supervise()
    exit_with("dbench", main)
