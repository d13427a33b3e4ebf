"""torch's Python functions on each variant's path, timed (the breakdown's method on any device, CUDA too).

    python -m dbench.analysis.windows --out DIR [--device cuda|cpu] [--ops A,B | --op FILE.py[:NAME]]
                                      [--variants V,...] [--calls N] [--rounds N]
                                      [--compare BREAKDOWN.json]      (CPU: set beside callgrind's windows)
                                      [--flames DIR]                  (a flame graph per case)
    python -m dbench.analysis.windows --from WINDOWS.json --out DIR [--compare BREAKDOWN.json]

For each case of the boundary scenario and its floor, round by round in one process: the overhead
over the floor, and each declared torch Python function the case calls in a wall-clock window of
its own (bench/instructions/timed_windows.py), each with a 95 % CI over the rounds. Writes
DIR/<stem>.windows.json, DIR/<stem>.md and DIR/<stem>-<op>.png (per case: the measured overhead
and the functions' inclusive windows over the floor's). With --compare (a CPU breakdown document
of the same cases, `dbench breakdown`), each window is also set beside callgrind's count of the
same window at the case's instructions per µs. With --flames, each case's flame graph from
torch.profiler's Python stacks (collapsed stacks: speedscope, flamegraph.pl) lands in DIR as it is
made. Exit status: 0; 2 bad input, one line on stderr.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from dbench.analysis.outputs import (OutputPathError, check_output_dir, check_output_dirs, read_rows_document,
                                     write_output)
from dbench.bench.harness.cli import Parser, name_list, op_file, path_value
from dbench.bench.instructions.timed_windows import DEFAULT_CALLS, DEFAULT_ROUNDS, SCHEMA

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SUFFIX = ".windows.json"  # not a result document: bench/io/document.py NOT_RESULT_SUFFIXES holds it too
SHOWN = 4  # functions a case's table line names
AGREEMENT = 0.2  # a timed window and callgrind's agree within this fraction


class WindowsInputError(ValueError):
    """A file that is not what it should be, or a run that cannot start (one line naming it)."""


def read_document(path: Path, schema: str, what: str) -> dict[str, Any]:
    """A windows or breakdown document (gzipped where its name ends in .gz)."""
    try:
        return read_rows_document(path, schema, what)
    except ValueError as exc:
        raise WindowsInputError(str(exc)) from None


def timed_cases(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in document["rows"] if r.get("status") is None]


def agreement(windows: dict[str, Any], breakdown: dict[str, Any]) -> list[dict[str, Any]]:
    """Each timed window beside callgrind's count of the same window (same op, variant, mode,
    function), only for cases both documents hold. The count is converted to µs at the case's own
    speed in the timed run (its instructions per call over its µs per call there), so the two agree
    when the window holds the same share of the case's time as of its instructions, whatever the
    host's speed that hour (a shared VM's moves by 2x from hour to hour). `agrees`: within AGREEMENT."""
    totals: dict[tuple[str, str, str], float] = {}
    counted: dict[tuple[str, str, str, str], float] = {}
    for row in breakdown["rows"]:
        if row.get("status") is not None or row.get("layer") != "python":
            continue
        key = (row["op"], row["variant"], row["mode"])
        totals[key] = row["instructions_total"]
        for f in row.get("python_functions") or []:
            counted[key + (f["function"],)] = f["instructions"]
    out = []
    for row in timed_cases(windows):
        key = (row["op"], row["variant"], row["mode"])
        for f in row["python_functions"]:
            instructions = counted.get(key + (f["function"],))
            if instructions is None or not totals.get(key) or f["us"] <= 0:
                continue
            from_counts = instructions * row["total_us"] / totals[key]
            ratio = f["us"] / from_counts if from_counts > 0 else None
            out.append({"op": key[0], "variant": key[1], "mode": key[2], "function": f["function"],
                        "timed_us": f["us"], "callgrind_us": round(from_counts, 4),
                        "share_timed": round(f["us"] / row["total_us"], 4),
                        "share_counted": round(instructions / totals[key], 4),
                        "ratio": None if ratio is None else round(ratio, 3),
                        "agrees": ratio is not None and abs(ratio - 1) <= AGREEMENT})
    return out


def _line(row: dict[str, Any]) -> str:
    delta, floor = row.get("delta_us"), row.get("floor_us")
    measured = "n/a (a floor)" if row.get("floor") is None else (
        f"{delta:+.2f} [{row['delta_us_ci_low']:+.2f}, {row['delta_us_ci_high']:+.2f}]" if delta is not None else "n/a")
    shown = "; ".join(f"`{f['function']}` {f['us']:.2f}" + ("" if f["calls"] == 1 else f" ({f['calls']:g})")
                      for f in row["python_functions"][:SHOWN]) or "none"
    return (f"| {row['op']} | {row['variant']} | {row['mode']} | {row.get('floor') or '—'} | "
            f"{row['total_us']:.2f} | {'—' if floor is None else f'{floor:.2f}'} | {measured} | {shown} |")


def table(document: dict[str, Any], compared: list[dict[str, Any]] | None = None) -> str:
    """Markdown: per case its µs, its overhead over the floor and the functions' windows over the floor's."""
    env, config = document.get("env", {}), document["config"]
    device = env.get("gpu_name") or env.get("cpu_model") or config["device"]
    lines = [f"# torch's Python functions on each variant's path, timed ({config['device']} tensors)", "",
             f"torch {env.get('torch')}, Python {env.get('python')}, {device}; {config['rounds']} rounds of "
             f"{config['calls']} calls per case, its floor and each window, in one process ({env.get('time')}).", "",
             "µs per call (medians over the rounds): the case, its floor in the same rounds, and the overhead, "
             "paired round by round (95 % CI); then each declared torch Python function the case calls, timed "
             "inclusively in a window of its own: its frames and all the C++ beneath them, so the op's own work "
             "(the floor's) too where it runs inside, and an outer function holds an inner one's; calls per call "
             "in brackets where not 1. What no declared function holds (the dispatcher's and autograd's C++ "
             "around them, the variant's own Python) is not named by this method (methodology: \"Where the cost "
             "goes\").", "",
             "| op | variant | mode | floor | µs/call | floor µs/call | over the floor [95 % CI] "
             "| torch's Python functions, inclusive µs |",
             "|---|---|---|---|---:|---:|---:|---|"]
    if document.get("status") == "interrupted":
        lines += [f"**Interrupted**: {document['error']}.", ""]
    lines += [_line(row) for row in timed_cases(document)]
    untimed = [r for r in document["rows"] if r.get("status") is not None]
    if untimed:
        lines += ["", f"Not timed: {len(untimed)} cases (n/a or failed; their reasons are in the JSON)."]
    flamed = [r for r in timed_cases(document) if r.get("flame")]
    if flamed:
        lines += _flame_lines(flamed)
    if compared:
        lines += _agreement_lines(compared)
    return "\n".join(lines) + "\n"


def _flame_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The flame graphs' µs beside the timed µs: how much the profiler slowed the calls it traced."""
    lines = ["", "## The flame graphs against the timed calls", "",
             "Each case's flame graph (`--flames`) holds calls made under torch.profiler with Python stacks, "
             "so its µs carry the profiler's cost per traced event: set beside the same case timed without it, "
             "the graph shows where a call's time goes, the windows above how much there is. The calls "
             "made under the profiler before those a graph keeps are left out of it (the first carry the "
             "profiler's start); their durations are in the last column.", "",
             "| op | variant | mode | timed µs/call | under the profiler: median µs/call (slowest) | "
             "graph µs/call | graph ÷ timed | the calls left out: first µs (slowest) |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        flame = row["flame"]
        median = (f"{flame['median_call_us']:.2f} ({flame['slowest_call_us']:.2f})" if "median_call_us" in flame
                  else "n/a")
        left_out = flame.get("left_out_calls_us") or []
        first = f"{left_out[0]:.2f} ({max(left_out):.2f})" if left_out else "n/a"
        lines.append(f"| {row['op']} | {row['variant']} | {row['mode']} | {row['total_us']:.2f} | {median} | "
                     f"{flame['graph_us_per_call']:.2f} | {flame['graph_us_per_call'] / row['total_us']:.1f}× | "
                     f"{first} |")
    return lines


def _agreement_lines(compared: list[dict[str, Any]]) -> list[str]:
    ratios = [c["ratio"] for c in compared if c["ratio"] is not None]
    if not ratios:
        return ["", "## Against callgrind (CPU tensors)", "", "No window was counted by both."]
    by_mode: dict[str, list[bool]] = {}
    for c in compared:
        by_mode.setdefault(c["mode"], []).append(c["agrees"])
    modes = ", ".join(f"{mode} {sum(a)} of {len(a)}" for mode, a in by_mode.items())
    lines = ["", "## Against callgrind (CPU tensors)", "",
             "Each window timed here beside callgrind's count of the same window (`dbench breakdown`), converted "
             "at the case's own speed in this run (its instructions per call over its µs per call here): the "
             "window's share of the case's time against its share of the case's instructions, which assumes "
             f"one speed for all of a case's code. **{sum(1 for c in compared if c['agrees'])} of {len(compared)} "
             f"within ±{round(100 * AGREEMENT)} %** (median ratio {statistics.median(ratios):.2f}; by mode: "
             f"{modes}).", "",
             "| op | variant | mode | function | timed µs | callgrind µs | timed ÷ callgrind |",
             "|---|---|---|---|---:|---:|---:|"]
    for c in sorted(compared, key=lambda c: abs((c["ratio"] or 0) - 1), reverse=True):
        mark = "" if c["agrees"] else " ⚠"
        lines.append(f"| {c['op']} | {c['variant']} | {c['mode']} | `{c['function']}` | {c['timed_us']:.2f} | "
                     f"{c['callgrind_us']:.2f} | {'n/a' if c['ratio'] is None else c['ratio']}{mark} |")
    return lines


def figure(document: dict[str, Any], op: str) -> Figure:
    """Per case of `op` (floors left out): its µs per call (grey, with its CI) and its floor's (a
    tick), and each declared function's inclusive window, as bars grouped by case."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shown = [r for r in timed_cases(document) if r["op"] == op and r.get("delta_us") is not None]
    names = list(dict.fromkeys(f["function"] for r in shown for f in r["python_functions"]))
    colors = dict(zip(names, ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
                              "#8C8C8C", "#CCB974", "#64B5CD")))
    fig = Figure(figsize=(10, 1.8 + 0.5 * len(shown)), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    height = 0.8 / (len(names) + 1) if names else 0.8
    for y, row in enumerate(shown):
        top = y - 0.4 + height / 2
        ax.barh(top, row["total_us"], height=height, color="#BBBBBB", capsize=2, error_kw={"elinewidth": 1},
                xerr=[[row["total_us"] - row["total_us_ci_low"]], [row["total_us_ci_high"] - row["total_us"]]])
        if row.get("floor_us") is not None:
            ax.plot([row["floor_us"]] * 2, [top - height / 2, top + height / 2], color="black", lw=2)
        for j, name in enumerate(names):
            f = next((f for f in row["python_functions"] if f["function"] == name), None)
            if f is not None:
                ax.barh(y - 0.4 + height * (j + 1.5), f["us"], height=height, color=colors.get(name, "#000000"),
                        xerr=[[f["us"] - f["us_ci_low"]], [f["us_ci_high"] - f["us"]]], capsize=1.5,
                        error_kw={"elinewidth": 0.8})
    ax.set_yticks(range(len(shown)), [f"{r['variant']} / {r['mode']}" for r in shown], fontsize=8)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("µs per call (medians over rounds; bars: 95 % CI); the floor is raw, or function_raw with a graph")
    env, config = document.get("env", {}), document["config"]
    ax.set_title(f"{op}: each case's µs per call (grey), its floor's (black tick), and torch's Python functions "
                 f"on its path,\neach timed inclusively in a window of its own\n{config['device']} tensors · "
                 f"{env.get('gpu_name') or env.get('cpu_model') or ''} · torch {env.get('torch')} · "
                 f"{str(env.get('time', ''))[:10]}", fontsize=10)
    handles = [Patch(color="#BBBBBB", label="the case"), Line2D([], [], color="black", lw=2, label="its floor")]
    handles += [Patch(color=colors.get(n, "#000000"), label=n) for n in names]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=min(len(handles), 4))
    return fig


def write_outputs(document: dict[str, Any], out: Path, stem: str,
                  compared: list[dict[str, Any]] | None = None) -> list[Path]:
    """<stem>.windows.json (with the comparison, where there is one), <stem>.md and <stem>-<op>.png."""
    import io

    if compared is not None:
        document = {**document, "callgrind_agreement": compared}
    rows = ",\n".join(json.dumps(row) for row in document["rows"])
    head = json.dumps({k: v for k, v in document.items() if k != "rows"}, indent=1)[:-2]
    written = [write_output(out / f"{stem}{SUFFIX}", f'{head},\n "rows": [\n{rows}\n ]\n}}\n'),
               write_output(out / f"{stem}.md", table(document, compared))]
    for op in dict.fromkeys(r["op"] for r in timed_cases(document) if r.get("delta_us") is not None):
        buffer = io.BytesIO()
        figure(document, op).savefig(buffer, format="png")
        written.append(write_output(out / f"{stem}-{op}.png", buffer.getvalue()))
    return written


def checked_request(ops: Sequence[str] | None, op_files: Sequence[str], variants: Sequence[str] | None, device: str,
                    calls: int, rounds: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ops (a user's --op files loaded) and variants to time, every one known and the device
    usable; WindowsInputError (one line) otherwise, before any work or folder."""
    from dataclasses import replace

    from dbench.bench.instructions.collect import Config, check_names, load_op_files

    config = Config(ops=tuple(ops) if ops else None, op_files=tuple(op_files),
                    variants=tuple(variants) if variants else None)
    try:
        names = load_op_files(config)
        config = replace(config, ops=tuple(names)) if names and config.ops is None else config
        check_names(config)
        if device != "cpu":
            import torch

            if not device.startswith("cuda") or not torch.cuda.is_available():
                raise ValueError("--device cuda: torch sees no CUDA device here (use --device cpu)")
        if calls < 1 or rounds < 3:
            raise ValueError(f"--calls must be >= 1 and --rounds >= 3 (got {calls}, {rounds})")
    except ValueError as exc:
        raise WindowsInputError(str(exc)) from None
    return config.resolved_ops(), config.resolved_variants()


def make_document(ops_: tuple[str, ...], variants_: tuple[str, ...], device: str, calls: int,
                  rounds: int, flames: Path | None = None) -> dict[str, Any]:
    """Time a checked request (checked_request), saying how far it got on stderr."""
    from dbench.bench.instructions.timed_windows import collect_windows

    print(f"[windows] {len(ops_)} ops on {device}, {rounds} rounds of {calls} calls per case",
          file=sys.stderr, flush=True)
    return collect_windows(ops_, variants_, device, calls, rounds,
                           say=lambda line: print(f"[windows] {line}", file=sys.stderr, flush=True), flames=flames)


def run_windows(options: Any, console: Any) -> Any:
    """`run.py --scenario breakdown` on a GPU: the run's ops and variants timed in windows on its
    device, written in the run's folder (UsageError, one line, before any work)."""
    import time

    from dbench.bench.harness.cli import UsageError
    from dbench.bench.harness.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, Outcome, shown
    from dbench.bench.harness.device import out_folder
    from dbench.bench.io import env as envmod
    from dbench.bench.instructions.timed_windows import QUICK_ROUNDS

    rounds = QUICK_ROUNDS if options.quick else DEFAULT_ROUNDS
    try:
        request = checked_request(options.ops, options.op_files, options.variants, options.device, DEFAULT_CALLS,
                                  rounds)
        folder = check_output_dir(out_folder(options, envmod.capture(options.device)), "--out")
        document = make_document(*request, options.device, DEFAULT_CALLS, rounds)
    except (OutputPathError, WindowsInputError) as exc:
        raise UsageError(str(exc)) from None
    device = document["config"]["device"].split(":")[0]
    stem = f"{options.scenario}-{device}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    paths = write_outputs(document, folder, stem)
    failed = [r for r in document["rows"] if r.get("status") == "failed"]
    console.print(f"{len(timed_cases(document))} cases timed in windows; {len(failed)} failed" + "".join(
        f"\nwrote {shown(p)}" for p in paths), soft_wrap=True, markup=False)
    if document.get("status") == "interrupted":
        console.print(document["error"], soft_wrap=True, markup=False)
        return Outcome(EXIT_INTERRUPTED, paths[0], document)
    return Outcome(EXIT_FAILED if failed else EXIT_OK, paths[0], document)


def main(argv: Sequence[str] | None = None, prog: str = "python -m dbench.analysis.windows") -> int:
    from dbench.bench.harness.common import EXIT_INTERRUPTED
    from dbench.bench.instructions.breakdown import SCHEMA as BREAKDOWN_SCHEMA

    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("--out", type=path_value, required=True, help="the folder for the JSON, table and figures")
    p.add_argument("--from", dest="source", type=path_value, help="render this windows document; no timing")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="the tensors' device (default cuda)")
    p.add_argument("--ops", type=name_list, help="ops (default: the boundary scenario's)")
    p.add_argument("--op", type=op_file, action="append", default=[], metavar="FILE.py[:NAME]",
                   help="a user's op (without --ops, only the user's ops)")
    p.add_argument("--variants", type=name_list, help="default: every variant (each mode's floor is needed)")
    p.add_argument("--calls", type=int, default=DEFAULT_CALLS,
                   help=f"calls per block and window (default {DEFAULT_CALLS})")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=f"rounds per case (default {DEFAULT_ROUNDS})")
    p.add_argument("--compare", type=path_value, metavar="BREAKDOWN.json",
                   help="a CPU breakdown document of the same cases: each window beside callgrind's")
    p.add_argument("--flames", type=path_value, metavar="DIR",
                   help="also write each case's flame graph there (torch.profiler's Python stacks, collapsed: "
                        "speedscope or flamegraph.pl)")
    args = p.parse_args(argv)
    try:
        if args.flames is not None and args.source is not None:
            raise WindowsInputError("--flames needs a timed run: --from renders a document, it profiles nothing")
        source = read_document(args.source, SCHEMA, "a windows document") if args.source is not None else None
        against = (read_document(args.compare, BREAKDOWN_SCHEMA, "a breakdown document (dbench breakdown)")
                   if args.compare is not None else None)
        request = (checked_request(args.ops, args.op, args.variants, args.device, args.calls, args.rounds)
                   if source is None else None)
        out, flames = check_output_dirs((args.out, "--out"), (args.flames, "--flames"))
        assert out is not None
        document = (make_document(*request, args.device, args.calls, args.rounds, flames) if request is not None
                    else source)
        assert document is not None
        compared = agreement(document, against) if against is not None else None
        stem = f"windows-{document['config']['device'].split(':')[0]}"
        for path in write_outputs(document, out, stem, compared):
            print(f"[windows] wrote {path}", file=sys.stderr)
    except (OutputPathError, WindowsInputError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return EXIT_INTERRUPTED if document.get("status") == "interrupted" else 0


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("windows", main)
