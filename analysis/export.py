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

import json
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

if (Path(__file__).resolve().parent.parent / "dbench" / "__init__.py").is_file():  # run by path from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dbench.analysis.load import ResultFileError, read_results  # noqa: E402
from dbench.analysis.outputs import OutputPathError, check_output_file, write_output  # noqa: E402
from dbench.bench.cli import Parser  # noqa: E402
from dbench.bench.identity import case_label  # noqa: E402


def timed_rows(documents: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(document, row) of every timed row."""
    return [(doc, row) for doc in documents for row in doc["rows"]
            if str(row.get("status") or "ok").lower() == "ok" and isinstance(row.get("median"), (int, float))]


def benchmark_name(doc: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """One name per row of a run: scenario/op/variant/mode[axes] (driver) [device dtype shape]."""
    driver = row.get("driver") or "python"
    shape = "x".join(map(str, row.get("shape") or [])) or "-"
    return (f"{doc.get('scenario')}/{case_label(row)}" + ("" if driver == "python" else f" ({driver})")
            + f" [{row.get('device')} {row.get('dtype')} {shape}]")


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def bencher(documents: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for doc, row in timed_rows(documents):
        measure: dict[str, float] = {"value": float(row["median"])}
        low, high = _number(row.get("ci_low")), _number(row.get("ci_high"))
        if low is not None and high is not None:
            measure.update(lower_value=low, upper_value=high)
        out.setdefault(benchmark_name(doc, row), {})[str(row["metric"])] = measure
    return out


def github_action_benchmark(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for doc, row in timed_rows(documents):
        low, high = _number(row.get("ci_low")), _number(row.get("ci_high"))
        entry: dict[str, Any] = {"name": f"{benchmark_name(doc, row)} {row['metric']}",
                                 "unit": str(row.get("unit") or ""), "value": float(row["median"])}
        if low is not None and high is not None:
            entry["range"] = f"{low:.6g} to {high:.6g} (CI of the median)"
        entry["extra"] = f"n={row.get('n')} timer={row.get('timer')} torch={(doc.get('env') or {}).get('torch')}"
        out.append(entry)
    return out


FORMATS: dict[str, Callable[[Sequence[Mapping[str, Any]]], Any]] = {
    "bencher": bencher, "github-action-benchmark": github_action_benchmark}


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m dbench.analysis.export", description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, nargs="+", help="result files or folders")
    p.add_argument("--format", choices=tuple(FORMATS), required=True)
    p.add_argument("--out", type=Path, help="write here instead of stdout")
    args = p.parse_args(argv)
    try:
        if args.out:
            check_output_file(args.out, "--out")
        docs = [doc for _, doc in read_results(args.results, note=lambda text: print(text, file=sys.stderr))]
    except (ResultFileError, OutputPathError) as exc:
        print(f"export: error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(FORMATS[args.format](docs), indent=1) + "\n"
    if args.out:
        write_output(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
