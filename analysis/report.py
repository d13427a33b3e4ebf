"""The tables of result files (their data: analysis/views.py), rendered by a sink.

    python -m dbench.analysis.report RESULTS... [--format md|txt|csv|json|bencher|...]

Every format is a module of analysis/sinks/ (`--help` lists them): md, per result, a heading with
the environment (GPU or CPU, torch, date), its tables and its notes (glyphs, n/a reasons,
speed-probe warning, what Δ is against); txt, the console tables at the width they need; csv, the
tables' data, one row per cell; json, the tables as shown; and the benchmark trackers' formats.

RESULTS are files or folders (their *.json). Of several files, those that are not result documents
(a calibration beside the runs) are skipped with a note on stderr. A result without rows (a run
stopped before its first case) is reported as such. Exit status: 0; 2 bad input (no result
document left, an unreadable or damaged one, named in one line).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

# Light imports only (pandas, rich and the table modules are imported where used): bad input is
# refused before they load.
from dbench.analysis.load import ResultFileError, read_results
from dbench.bench.harness.cli import Parser, path_value  # usage errors in one line, like run.py's


def _note(text: str) -> None:
    print(f"report: {text}", file=sys.stderr)


def report(paths: Sequence[Path], fmt: str = "md") -> str:
    """The report of result files and folders (files that are not results skipped, with a note)."""
    from dbench.analysis import sinks

    return sinks.render(fmt, [(d, p.name) for p, d in read_results(paths, note=_note)])


def markdown(document: Mapping[str, Any], name: str = "") -> str:
    """One result in markdown (the md sink)."""
    from dbench.analysis.sinks import md

    return md.document(document, name)


def text(document: Mapping[str, Any], name: str = "") -> str:
    """One result as plain text (the txt sink)."""
    from dbench.analysis.sinks import txt

    return txt.document(document, name)


def main(argv: Sequence[str] | None = None, prog: str = "python -m dbench.analysis.report") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=path_value, help="result files or folders")
    from dbench.analysis.sinks import sinks

    p.add_argument("--format", choices=tuple(sinks()), default="md",
                   help="; ".join(f"{name}: {module.DESCRIPTION}" for name, module in sinks().items()))
    args = p.parse_args(argv)
    try:
        sys.stdout.write(report(args.results, args.format))
    except ResultFileError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("report", main)
