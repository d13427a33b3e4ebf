"""Result files in the formats of other benchmark trackers.

    python -m dbench.analysis.export RESULTS... --format bencher|github-action-benchmark [--out FILE]

bencher: Bencher Metric Format (`bencher run --adapter json`): one benchmark per row, named by its
identity, with one measure per metric (`cpu_us`, `gpu_us`, ...): the median as `value` and the
row's CI as `lower_value` / `upper_value`. github-action-benchmark: its `customSmallerIsBetter`
list (name, unit, value, range, extra). Only timed rows (status ok, with a median) are exported; the
name carries the scenario, op/variant/mode, driver, device, dtype and shape, so two rows of a run
never share one. The C++ driver's own Google Benchmark JSON, for google-benchmark's compare.py,
is kept beside each result as <stem>.gbench.json.

RESULTS are files or folders (their *.json). Exit status: 0; 2 bad input (no result document, an
unreadable or damaged one, an unwritable --out), in one line.
"""

from __future__ import annotations

import sys

from dbench.analysis.load import ResultFileError, read_results
from dbench.analysis.outputs import OutputPathError, check_output_file, write_output
from dbench.analysis.sinks import render
from dbench.bench.harness.cli import Parser, path_value
from dbench.analysis.sinks._trackers import benchmark_name, timed_rows  # noqa: F401  (re-exported)
from dbench.analysis.sinks.bencher import metrics as bencher  # noqa: F401  (re-exported)
from dbench.analysis.sinks.github_action_benchmark import entries as github_action_benchmark  # noqa: F401

# The trackers' formats of analysis/sinks/ (dbench report renders every format, to stdout).
FORMATS = ("bencher", "github-action-benchmark")


def main(argv: list[str] | None = None, prog: str = "python -m dbench.analysis.export") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("results", type=path_value, nargs="+", help="result files or folders")
    p.add_argument("--format", choices=FORMATS, required=True)
    p.add_argument("--out", type=path_value, help="write here instead of stdout")
    args = p.parse_args(argv)
    try:
        if args.out:
            check_output_file(args.out, "--out")
        docs = [doc for _, doc in read_results(args.results, note=lambda text: print(text, file=sys.stderr))]
    except (ResultFileError, OutputPathError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    text = render(args.format, [(doc, "") for doc in docs])
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        write_output(args.out, text)
    except OutputPathError as exc:  # checked above, then failed: a full disk, the folder gone
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("export", main)
