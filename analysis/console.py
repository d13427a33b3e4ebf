"""What a run prints once its result is written: the tables, the warnings, the figures beside the file,
the closing lines; and the gate's verdict when the run was given a baseline. The harness
(dbench.bench.harness) hands over the final document; nothing here times or writes results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from dbench.bench.io.escape import rich
from dbench.bench.harness import common
from dbench.bench.harness.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, shown


def report(scenario: Any, doc: dict[str, Any], env: dict[str, Any], console: Any) -> None:
    """The scenario's console tables. Of an interrupted run only what was measured, and at most a line
    when the tables cannot be made from it (a roofline stopped before its roofs): the result file,
    already written, is what counts."""
    if not any(r.get("samples") for r in doc["rows"]) and doc["status"] == "interrupted":
        console.print("no table: nothing was timed before the interrupt")
        return
    from .views import print_document

    try:
        print_document({**doc, "env": env}, console)
    except Exception as exc:  # only an interrupted run's partial rows get here
        if doc["status"] != "interrupted":
            raise
        console.print(f"[yellow]no table for the rows timed before the interrupt[/yellow] "
                      f"({rich(f'{type(exc).__name__}: {exc}')})", highlight=False)


def show_merged(doc: dict[str, Any], console: Any, note: str) -> None:
    """The tables of a run of several processes: the paired ratios of an A/B run, else the standard tables."""
    if "ab" in doc:
        from .table import print_ab_table

        print_ab_table(doc, console)
    else:
        from .views import print_document

        print_document(doc, console, note)


def plot(doc: dict[str, Any], json_path: Path, console: Any) -> int:
    """--plot: the scenario's figures beside its result file (one its data cannot make is noted and
    left out). EXIT_FAILED when one cannot be written (a full disk: one line on stderr), else EXIT_OK."""
    from .figures import scenario_figures
    from .outputs import OutputPathError

    if not doc["rows"]:
        return EXIT_OK
    try:
        figures = scenario_figures(doc, json_path.parent, json_path.stem,
                                   on_skip=lambda note: console.print(f"figure {rich(note)}", highlight=False))
    except OutputPathError as exc:
        print(f"{common.PROG}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for figure in figures:
        console.print(f"figure: {rich(shown(figure))}")
    return EXIT_OK


def finished(scenario: Any, doc: dict[str, Any], json_path: Path, csv_path: Path, console: Any,
             figures: bool, code: int = EXIT_OK) -> int:
    """An in-process run's end: its tables, the speed probe's warning, its figures and closing lines.
    The run's exit status: its `code`, or EXIT_FAILED when a figure could not be written."""
    from dbench.bench.core.probe import instability_note

    report(scenario, doc, doc["env"], console)
    unstable = instability_note(doc["speed_probe"])
    if unstable:
        console.print(f"[yellow]warning:[/yellow] {rich(unstable)}")
    plotted = plot(doc, json_path, console) if figures else EXIT_OK
    config = doc["config"]
    console.print(f"{rich(doc['status'])}: {config['rounds_done']} rounds in {config.get('seconds', 0):.1f} s "
                  f"({rich(config.get('stop_reason'))})")
    console.print(f"wrote {rich(shown(json_path))} and {rich(csv_path.name)}")
    failed = [r for r in doc["rows"] if r["status"] == "failed"]
    if failed:
        console.print(f"[red]{len(failed)} row(s) FAILED (listed above and under 'failures' in the result)[/red]")
    return max(code, plotted)


def gate(json_path: Path, baseline_files: Sequence[Path], console: Any) -> int:
    """--baseline: this run's result against the baseline files, by analysis.gate; its exit status.

    The gate is imported here, lazily, so a checkout without it runs everything else and says why it
    cannot gate (exit 2: nothing was compared)."""
    from dbench.bench.io.results import ResultFileError, load_result

    try:
        from dbench.analysis import gate as gate_module
    except ModuleNotFoundError as exc:
        if exc.name != "dbench.analysis.gate":
            raise
        console.print("[red]--baseline: dbench.analysis.gate is not in this checkout, so the run was not gated[/red] "
                      f"(its result: {rich(shown(json_path))})")
        return EXIT_USAGE
    try:
        verdict = gate_module.gate([load_result(json_path)], [load_result(p) for p in baseline_files],
                                   new_sources=[str(shown(json_path))],
                                   baseline_sources=[str(shown(p)) for p in baseline_files])
    except (ResultFileError, ValueError) as exc:  # the gate's input errors are ValueErrors: not comparable
        console.print(f"[red]gate: {rich(exc)}[/red]", soft_wrap=True)
        return EXIT_USAGE
    console.print(gate_module.render(verdict, "txt"), markup=False, highlight=False, soft_wrap=True)
    return verdict.exit_code
