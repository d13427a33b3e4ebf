"""The `dbench` command: one entry point for running scenarios and reading their results.

    dbench run --scenario boundary --op my_ops.py:my_op     (run.py's options)
    dbench list [--op my_ops.py]                           (scenarios, ops, variants, modes)
    dbench gate NEW [BASELINE ...]                         (dbench.analysis.gate)
    dbench report | figures | compare | history | calibrate | nights | export  (dbench.analysis.*)
"""

from __future__ import annotations

import importlib
import signal
import sys
from typing import Sequence

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
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: dbench COMMAND [options]\n\ncommands:\n" + "\n".join(lines) + \
        "\n\n`dbench COMMAND --help` shows a command's options."


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"dbench: error: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    if name == "list":
        rest = ["--list", *rest]
    return int(module.main(rest) or 0)


def entry() -> None:
    """The console script: exit with the command's status; a Ctrl-C after the result is written
    does not turn that status into a kill (as run.py)."""
    status = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(status)
