"""Where each variant's cost over its floor goes, by layer (CPU tensors, callgrind instruction counts).

    python -m dbench.analysis.breakdown --out DIR [--ops A,B | --op FILE.py[:NAME]] [--variants V,...]
                                        [--calls N] [--top N] [--keep-dumps DIR] [--flames DIR] [--no-time]
    python -m dbench.analysis.breakdown --from BREAKDOWN.json --out DIR     (render one already made)

One callgrind run of the boundary scenario's CPU cases (bench/instructions/breakdown.py): for each
variant and mode, the instructions per call in each layer (the Python interpreter, the bindings,
the dispatcher, autograd, thread-local state, tensors, the allocator, the op's own C++, other),
and how many more than the mode's floor (`raw`, or `function_raw` once a graph is recorded), with
the functions that grew most in each layer. Writes DIR/breakdown-cpu.breakdown.json, DIR/breakdown-cpu.md
(the table) and DIR/breakdown-cpu-<op>.png (one stacked bar per case). Needs valgrind and jemalloc
(as `dbench instructions`). Exit status: 0; 2 bad input or counts that could not be collected,
one line on stderr.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from dbench.analysis.outputs import (OutputPathError, check_output_dir, check_output_dirs, read_rows_document,
                                     write_output)
from dbench.bench.harness.cli import Parser, name_list, op_file, path_value
from dbench.bench.instructions.breakdown import DEFAULT_CALLS, DEFAULT_TOP, SCHEMA
from dbench.bench.instructions.layers import LAYERS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STEM = "breakdown-cpu"
SUFFIX = ".breakdown.json"  # the document's; bench/io/document.py NOT_RESULT_SUFFIXES holds it too
# One colour per layer (greys for what no rule names); tests/test_breakdown.py checks each layer has one.
LAYER_COLORS = {"python": "#4C72B0", "binding": "#DD8452", "dispatcher": "#55A868", "shim": "#64B5CD",
                "autograd": "#C44E52", "state": "#8172B3", "tensors": "#937860", "allocator": "#DA8BC3",
                "op": "#CCB974", "other": "#8C8C8C", "unattributed": "#C8C8C8"}
SHOWN_LAYERS = 3  # the table names a case's largest layers over its floor
# A case's time (bench/instructions/in_time.py), the same on each of its layer rows.
TIME_FIELDS = ("instructions_per_us", "speed_from", "delta_us_total", "measured_delta_us", "measured_delta_ci_low",
               "measured_delta_ci_high", "explained", "agrees", "time_missing")


class BreakdownInputError(ValueError):
    """A --from file that is not a breakdown document (one line naming it)."""


def read_breakdown(path: Path) -> dict[str, Any]:
    """A breakdown document (gzipped where its name ends in .gz, as the committed ones are)."""
    try:
        return read_rows_document(path, SCHEMA, "a breakdown document: write one with "
                                  "python -m dbench.analysis.breakdown --out DIR")
    except ValueError as exc:
        raise BreakdownInputError(str(exc)) from None


def cases(document: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per timed case with a floor: its label, Δ total and Δ per layer, top functions."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in document["rows"]:
        if row.get("status") is not None or row.get("delta_total") is None:
            continue
        key = (row["op"], row["variant"], row["mode"])
        case = out.setdefault(key, {"op": row["op"], "variant": row["variant"], "mode": row["mode"],
                                    "floor": row["floor"], "delta_total": row["delta_total"],
                                    "instructions_total": row["instructions_total"], "layers": {}, "top": {},
                                    "us": {} if row.get("delta_us") is not None else None,
                                    "arg_kind": row.get("arg_kind"), "arity": row.get("arity"),
                                    **{k: row.get(k) for k in TIME_FIELDS}})
        case["layers"][row["layer"]] = row["delta_instructions"]
        if "python_functions" in row:
            case["python_functions"] = row["python_functions"]
        case["top"][row["layer"]] = row.get("top", [])
        if case["us"] is not None:
            case["us"][row["layer"]] = row["delta_us"]
    return list(out.values())


def table(document: dict[str, Any]) -> str:
    """Markdown: per case, Ir per call over its floor and its largest layers, then the layers' meaning."""
    env = document.get("env", {})
    cpu = env.get("host_cpu")
    model = cpu.get("model") if isinstance(cpu, dict) else cpu
    timed = "time" in document
    lines = ["# Where the cost over the floor goes (instructions per call, CPU tensors)", "",
             f"torch {env.get('torch')}, Python {env.get('python')}, {model}, "
             f"{document['config'].get('calls')} calls per case under callgrind ({env.get('time')}).", "",
             *time_summary(document),
             "| op | variant | mode | floor | Ir/call | over the floor | largest layers over the floor |"
             + (" layers' µs | measured µs [95 % CI] | explained |" if timed else ""),
             "|---|---|---|---|---:|---:|---|" + ("---:|---:|---:|" if timed else "")]
    for case in cases(document):
        largest = sorted(case["layers"].items(), key=lambda kv: -kv[1])[:SHOWN_LAYERS]
        shown = ", ".join(f"{layer} {delta:+,.0f}" for layer, delta in largest if delta > 0) or "none"
        lines.append(f"| {case['op']} | {case['variant']} | {case['mode']} | {case['floor']} | "
                     f"{case['instructions_total']:,.0f} | {case['delta_total']:+,.0f} | {shown} |"
                     + (_time_cells(case) if timed else ""))
    untimed = [r for r in document["rows"] if r.get("status") is not None]
    if untimed:
        lines += ["", f"Not counted: {len(untimed)} cases (n/a or failed; their reasons are in the JSON)."]
    lines += _python_function_lines(document)
    lines += _arity_lines(document)
    lines += ["", "## Layers", ""] + [f"- **{name}**: {what}" for name, what in document.get("layers", LAYERS).items()]
    lines += ["", "## The functions that grew most, per case and layer", ""]
    for case in cases(document):
        tops = [(layer, t) for layer, ts in case["top"].items() for t in ts[:2] if case["layers"].get(layer, 0) > 0]
        if not tops:
            continue
        lines.append(f"- {case['op']}/{case['variant']}/{case['mode']}: " + "; ".join(
            f"{layer}: `{t['function'][:90]}` {t['delta_instructions']:+,.0f}" for layer, t in
            sorted(tops, key=lambda lt: -lt[1]["delta_instructions"])[:4]))
    return "\n".join(lines) + "\n"


def _growth(values: Sequence[float | None], arities: Sequence[int]) -> float | None:
    """The exponent k of value ∝ arity^k between the two largest arities (None: a value missing or <= 0)."""
    import math

    (low, high), (a_low, a_high) = values[-2:], arities[-2:]
    if low is None or high is None or low <= 0 or high <= 0:
        return None
    return round(math.log(high / low) / math.log(a_high / a_low), 2)


def _python_delta(case: dict[str, Any], name: str) -> float | None:
    """A declared torch Python function's instructions over the floor in `case` (None: not called)."""
    return next((f.get("delta_instructions") for f in case.get("python_functions") or [] if f["function"] == name),
                None)


def _python_function_of_growth(shown: list[dict[str, Any]]) -> str | None:
    """Of the declared torch Python functions, the one that holds the case's growth from its
    second-largest to its largest arity: the innermost (the least grown, as the counts are inclusive
    and an outer function holds an inner one's) of those holding half of it or more, else the most
    grown; None where none grew."""
    before, last = shown[-2], shown[-1]
    grown = {f["function"]: (_python_delta(last, f["function"]) or 0.0) - (_python_delta(before, f["function"]) or 0.0)
             for f in last.get("python_functions") or []}
    grown = {name: g for name, g in grown.items() if g > 0}
    if not grown:
        return None
    holding = [name for name, g in grown.items() if g >= 0.5 * (last["delta_total"] - before["delta_total"])]
    return min(holding, key=lambda n: grown[n]) if holding else max(grown, key=lambda n: grown[n])


def by_arity(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Per argument kind, variant and mode of a breakdown of the args scenario's ops (two arities or
    more): its instructions over the floor at each arity, and the function that grew most at the
    largest arity, with its growth at each arity where the top lists name it. `exponent`: k of
    Δ ∝ arity^k between the two largest arities (1: a cost per argument; 2: quadratic)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for case in cases(document):
        if case.get("arity") is not None:
            groups.setdefault((case["arg_kind"], case["variant"], case["mode"]), []).append(case)
    out = []
    for (kind, variant, mode), shown in groups.items():
        shown.sort(key=lambda c: c["arity"])
        grown = {t["function"]: t["delta_instructions"] for tops in shown[-1]["top"].values() for t in tops}
        if len(shown) < 2 or not grown:
            continue
        function = max(grown, key=lambda f: grown[f])
        arities = [c["arity"] for c in shown]
        deltas = [c["delta_total"] for c in shown]
        own = [next((t["delta_instructions"] for tops in c["top"].values() for t in tops if t["function"] == function),
                    None) for c in shown]
        line = {"arg_kind": kind, "variant": variant, "mode": mode, "arities": arities, "delta_total": deltas,
                "exponent": _growth(deltas, arities), "function": function, "function_delta": own,
                "function_exponent": _growth(own, arities)}
        name = _python_function_of_growth(shown)
        if name is not None:
            growth = [_python_delta(c, name) for c in shown]
            line.update(python_function=name, python_function_delta=growth,
                        python_function_exponent=_growth(growth, arities))
        out.append(line)
    return out


def _python_function_lines(document: dict[str, Any]) -> list[str]:
    """Per case, the declared torch Python functions it calls that grew most over its floor."""
    shown = [c for c in cases(document) if any((f.get("delta_instructions") or 0) > 0
                                               for f in c.get("python_functions") or [])]
    if not shown:
        return []
    lines = ["", "## torch's Python functions on the path, inclusive", "",
             "Each declared function counted in a window of its own (its Python frames and all the C++ beneath them, "
             "the op's own work included where it runs inside), per call, over the floor's; calls per call in "
             "brackets (methodology: \"Where the cost goes\").", ""]
    for case in shown:
        grown = [f for f in case["python_functions"] if (f.get("delta_instructions") or 0) > 0][:4]
        lines.append(f"- {case['op']}/{case['variant']}/{case['mode']}: " + "; ".join(
            f"`{f['function']}` {f['delta_instructions']:+,.0f} ({f['calls']:g})" for f in grown))
    return lines


def _per_arity(arities: list[int], values: list[float | None]) -> str:
    """`1: +510, 16: +3,060`; — where a value is missing."""
    return ", ".join(f"{a}: " + ("—" if v is None else f"{v:+,.0f}") for a, v in zip(arities, values))


def _arity_lines(document: dict[str, Any]) -> list[str]:
    rows = by_arity(document)
    if not rows:
        return []
    lines = ["", "## By arity: what grows with the arguments", "",
             "Instructions per call over the floor at each arity; k: Δ ∝ arity^k between the two largest arities "
             "(1: a cost per argument, 2: quadratic); the function that grew most at the largest arity (over the "
             "floor), and its growth at each arity where a case's top functions name it (— where they do not); the "
             "innermost declared torch Python function that holds half the growth between the two largest arities or "
             "more (inclusive: its frames and the C++ beneath them).", "",
             "| kind | variant | mode | Δ Ir/call by arity | k | grew most at the largest arity | its Δ by arity | k "
             "| torch Python function that holds the growth (inclusive) | its Δ by arity | k |",
             "|---|---|---|---|---:|---|---|---:|---|---|---:|"]
    for r in sorted(rows, key=lambda r: -r["delta_total"][-1]):
        by, own = _per_arity(r["arities"], r["delta_total"]), _per_arity(r["arities"], r["function_delta"])
        k, fk, pk = r["exponent"], r["function_exponent"], r.get("python_function_exponent")
        python = _per_arity(r["arities"], r.get("python_function_delta") or [])
        lines.append(f"| {r['arg_kind']} | {r['variant']} | {r['mode']} | {by} | {'n/a' if k is None else k} | "
                     f"`{r['function'][:80]}` | {own} | {'n/a' if fk is None else fk} | "
                     + (f"`{r['python_function']}` | {python} | {'n/a' if pk is None else pk} |"
                        if "python_function" in r else "none | | |"))
    return lines


def _time_cells(case: dict[str, Any]) -> str:
    if case.get("measured_delta_us") is None or case.get("delta_us_total") is None:
        return f" n/a | n/a ({case.get('time_missing') or 'not timed'}) | |"
    low, high = case.get("measured_delta_ci_low"), case.get("measured_delta_ci_high")
    ci = f" [{low:+.2f}, {high:+.2f}]" if low is not None and high is not None else ""
    explained = case.get("explained")
    mark = "" if explained is None or case.get("agrees") else " ⚠"
    return (f" {case['delta_us_total']:+.2f} | {case['measured_delta_us']:+.2f}{ci} | "
            f"{'n/a' if explained is None else f'{explained:.2f}'}{mark} |")


def time_summary(document: dict[str, Any]) -> list[str]:
    """What the µs columns are, and how many cases' layers add up to their measured overhead."""
    time = document.get("time")
    if not time:
        return []
    explained = [c["explained"] for c in cases(document) if c.get("explained") is not None]
    agree = sum(1 for c in cases(document) if c.get("agrees"))
    band = round(100 * time.get("agreement", 0))
    median = f"{statistics.median(explained):.2f}" if explained else "n/a"
    per_mode: dict[str, dict[str, float]] = {}  # mode -> op -> the speed its cases were converted at
    for c in cases(document):
        if c.get("instructions_per_us"):
            per_mode.setdefault(c["mode"], {})[c["op"]] = c["instructions_per_us"]
    said = "; ".join(f"{mode} " + "–".join(f"{v:,.0f}" for v in sorted({min(ops.values()), max(ops.values())}))
                     for mode, ops in per_mode.items())
    sources = [c.get("speed_from") or "" for c in cases(document)]
    fallback = sorted({f for f in sources if "every mode" in f})
    whose = ("the run's other ops' cases of the same mode" if len({c["op"] for c in cases(document)}) > 1 else
             "the op's own cases of the same mode (the run has one op: each mode's median case agrees by construction)")
    return [f"µs: each layer's instructions over the floor at the speed of the boundary's code, in "
            f"instructions per µs: a case's extra instructions over its extra µs in a native run of the same "
            f"cases ({time.get('scenario')} scenario, {time.get('rounds')} rounds, {time.get('time')}), the "
            f"median over {whose}: {said}"
            + (f" (where a mode had too few: {'; '.join(fallback)})" if fallback else "")
            + ". `measured`: that run's paired overhead; `explained`: the "
            f"layers' µs over the measured. **{agree} of {len(explained)} cases within ±{band} %** (median "
            f"{median}); ⚠ marks the others.", ""]


def _draw_case(ax: Any, y: int, case: dict[str, Any], layers: list[str], in_us: bool) -> tuple[float, float, str, str]:
    """One case's stacked bar (and, in µs, its measured overhead with its CI) at row y: its left
    and right ends, and the label to put beside it with its colour."""
    right = left = 0.0
    values = case["us"] if in_us else {k: v / 1000 for k, v in case["layers"].items()}
    for layer in layers:
        color = LAYER_COLORS.get(layer, "#000000")
        value = values.get(layer, 0.0)
        if value >= 0:
            ax.barh(y, value, left=right, color=color, height=0.7)
            right += value
        else:
            ax.barh(y, value, left=left, color=color, height=0.7)
            left += value
    if not in_us:
        return left, right, f" {case['delta_total'] / 1000:+.1f}k", "black"
    measured = case["measured_delta_us"]
    low, high = case.get("measured_delta_ci_low"), case.get("measured_delta_ci_high")
    xerr = [[measured - low], [high - measured]] if low is not None and high is not None else None
    ax.errorbar(measured, y, xerr=xerr, fmt="D", color="black", ms=3.5, elinewidth=1, capsize=2, zorder=3)
    explained = case.get("explained")
    return (min(left, measured if low is None else low), max(right, measured if high is None else high),
            "" if explained is None else f" {explained:.2f}", "black" if case.get("agrees") else "#B22222")


def figure(document: dict[str, Any], op: str) -> Figure:
    """One stacked bar per case of `op`: its Ir per call over the floor, by layer (below 0 where a
    layer costs less than in the floor)."""
    from matplotlib.figure import Figure
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shown = [c for c in cases(document) if c["op"] == op]
    layers = list(document.get("layers", LAYERS))
    # In µs where the native run timed every case shown (each bar beside its measured overhead),
    # else in instructions.
    in_us = bool(shown) and all(c["us"] is not None and c.get("measured_delta_us") is not None for c in shown)
    fig = Figure(figsize=(10, 1.6 + 0.28 * len(shown)), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    labels = [f"{c['variant']} / {c['mode']}" for c in shown]
    notes = [_draw_case(ax, y, case, layers, in_us) for y, case in enumerate(shown)]
    # The x range holds every bar, interval and label (autoscaling knows nothing of the labels).
    lowest, highest = min([0.0, *(n[0] for n in notes)]), max([0.0, *(n[1] for n in notes)])
    span = (highest - lowest) or 1.0
    ax.set_xlim(lowest - 0.03 * span, highest + 0.1 * span)
    for y, (_, end, text, color) in enumerate(notes):
        ax.text(end + 0.005 * span, y, text, va="center", fontsize=7, color=color)
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.set_ylim(len(shown) - 0.4, -0.6)  # top to bottom, without the default margins
    ax.axvline(0, color="#3A3A3A", lw=1)
    ax.set_xlabel("µs per call over the mode's floor (raw, or function_raw with a graph): each layer's "
                  "instructions\nat the boundary code's instructions per µs; ◆ the measured overhead (95 % CI); "
                  "number: layers ÷ measured"
                  if in_us else
                  "thousand instructions per call over the mode's floor (raw, or function_raw with a graph)")
    env = document.get("env", {})
    ax.set_title(f"{op}: where each variant's cost over its floor goes (CPU tensors, callgrind"
                 f"{' and a native run' if in_us else ''})\n"
                 f"torch {env.get('torch')} · Python {env.get('python')} · {str(env.get('time', ''))[:10]}",
                 fontsize=10)
    handles: list[Artist] = [Patch(color=LAYER_COLORS.get(name, "#000000"), label=name) for name in layers]
    if in_us:
        handles.append(Line2D([], [], marker="D", color="black", ls="", ms=4, label="measured"))
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=min(len(handles), 6))
    ax.grid(axis="x", alpha=0.3)
    return fig


def write_outputs(document: dict[str, Any], out: Path, stem: str = STEM) -> list[Path]:
    """<stem>.breakdown.json (not a result document: a results folder's readers pass it by,
    bench/io/document.py NOT_RESULT_SUFFIXES), <stem>.md and <stem>-<op>.png, each written
    atomically; the paths written."""
    import io

    # One row a line: a few hundred kB for the boundary table, yet a diff shows which rows moved.
    rows = ",\n".join(json.dumps(row) for row in document["rows"])
    head = json.dumps({k: v for k, v in document.items() if k != "rows"}, indent=1)[:-2]
    written = [write_output(out / f"{stem}{SUFFIX}", f'{head},\n "rows": [\n{rows}\n ]\n}}\n'),
               write_output(out / f"{stem}.md", table(document))]
    for op in dict.fromkeys(c["op"] for c in cases(document)):
        buffer = io.BytesIO()
        figure(document, op).savefig(buffer, format="png")
        written.append(write_output(out / f"{stem}-{op}.png", buffer.getvalue()))
    return written


def main(argv: Sequence[str] | None = None, prog: str = "python -m dbench.analysis.breakdown") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("--out", type=path_value, required=True, help="the folder for the JSON, table and figures")
    p.add_argument("--from", dest="source", type=path_value, help="render this breakdown document; no collection")
    p.add_argument("--ops", type=name_list, help="ops to break down (default: the boundary scenario's)")
    p.add_argument("--op", type=op_file, action="append", default=[], metavar="FILE.py[:NAME]",
                   help="a user's op (without --ops, only the user's ops)")
    p.add_argument("--variants", type=name_list, help="default: every variant (each mode's floor is needed)")
    p.add_argument("--calls", type=int, default=DEFAULT_CALLS, help=f"calls per case (default {DEFAULT_CALLS})")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, help=f"functions per case and layer (default {DEFAULT_TOP})")
    p.add_argument("--keep-dumps", type=path_value, help="copy callgrind's dumps there (for callgrind_annotate)")
    p.add_argument("--flames", type=path_value, metavar="DIR",
                   help="also write each case's callgrind dump there, named by its case: a flame graph in speedscope "
                        "(best guess from the call graph) or a call graph in kcachegrind")
    p.add_argument("--no-time", action="store_true",
                   help="instructions only: skip the native run that converts each layer to µs")
    args = p.parse_args(argv)
    if args.calls < 1 or args.top < 0:
        p.error("--calls must be >= 1 and --top >= 0")
    try:
        # What was asked for first, then the folders: a refused run makes none.
        source = read_breakdown(args.source) if args.source is not None else None
        config = checked_config(_config(args)) if source is None else None
        timed = config is not None  # a document read back writes no dumps
        out, _, _ = check_output_dirs((args.out, "--out"), (args.keep_dumps if timed else None, "--keep-dumps"),
                                      (args.flames if timed else None, "--flames"))
        assert out is not None
        document = make_document(config, keep_dumps=args.keep_dumps, top=args.top, time=not args.no_time,
                                 flames=args.flames) if source is None else source
        for path in write_outputs(document, out):
            print(f"[breakdown] wrote {path}", file=sys.stderr)
    except (OutputPathError, BreakdownInputError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _config(args: Any) -> Any:
    from dbench.bench.instructions.collect import Config

    return Config(ops=args.ops, op_files=tuple(args.op), variants=args.variants, calls=args.calls)


def checked_config(config: Any) -> Any:
    """The config with its --op files loaded (their ops, where no --ops named others) and every op
    and variant known; BreakdownInputError (one line) otherwise."""
    from dbench.bench.instructions.collect import check_names, load_op_files

    try:
        names = load_op_files(config)
        config = replace(config, ops=tuple(names)) if names and config.ops is None else config
        check_names(config)
    except ValueError as exc:
        raise BreakdownInputError(str(exc)) from None
    return config


def make_document(config: Any, keep_dumps: Path | None = None, top: int = DEFAULT_TOP, time: bool = True,
                  quick: bool = False, flames: Path | None = None) -> dict[str, Any]:
    """Check the config (BreakdownInputError, one line, before any work), collect its breakdown
    under callgrind, and (time) convert it to µs with a native run of the same cases."""
    from dbench.bench.instructions.breakdown import collect_breakdown
    from dbench.bench.instructions.collect import CollectError, refuse_old_dumps, require_valgrind
    from dbench.bench.instructions.staging import STAGE, StageError, private_folder
    from dbench.bench.core.native_build import build_dir

    config = checked_config(config)
    try:
        refuse_old_dumps(keep_dumps)
        refuse_old_dumps(flames)
        require_valgrind()
        private_folder(STAGE)
        build_dir()
        print(f"[breakdown] {len(config.resolved_ops())} ops, {config.calls} calls per case, under callgrind",
              file=sys.stderr, flush=True)
        document = collect_breakdown(config, keep_dumps=keep_dumps, top=top, flames=flames)
    except (CollectError, StageError, ValueError) as exc:
        raise BreakdownInputError(str(exc)) from None
    return timed(document, quick) if time else document


def timed(document: dict[str, Any], quick: bool = False) -> dict[str, Any]:
    """The document with µs: a native run of the same cases (the boundary scenario, CPU tensors,
    the Python driver) times each case and its floor (bench/instructions/in_time.py)."""
    from dbench.bench.instructions.in_time import native_rows, with_time

    config = document["config"]
    print(f"[breakdown] timing the same cases natively ({config.get('scenario', 'boundary')} scenario, "
          f"{len(config['ops'])} ops, CPU)",
          file=sys.stderr, flush=True)
    try:
        rows, source = native_rows(config, quick)
    except RuntimeError as exc:
        raise BreakdownInputError(f"{exc}: run it alone (run.py --scenario {config.get('scenario', 'boundary')} "
                                  f"--device cpu --no-cpp --ops {','.join(config['ops'])}) to see "
                                  "why, or pass --no-time for instructions only") from None
    return with_time(document, rows, source)


def run_scenario(options: Any, console: Any) -> Any:
    """`run.py --scenario breakdown`: check the run's options (UsageError, before any work), collect,
    time, and write the document, table and figures in the run's folder (scenarios/breakdown.py).
    On a GPU, torch's Python functions timed in windows instead (analysis/windows.py)."""
    import time

    from dbench.bench.harness.cli import UsageError
    from dbench.bench.harness.common import EXIT_FAILED, EXIT_OK, Outcome, shown
    from dbench.bench.harness.device import out_folder
    from dbench.bench.instructions.collect import Config
    from dbench.bench.io import env as envmod
    from dbench.scenarios.breakdown import QUICK_CALLS, refused

    why = refused(options)
    if why is not None:
        raise UsageError(f"argument {why}")
    if options.on_cuda:  # callgrind cannot run the CUDA driver: the functions' windows, timed
        from dbench.analysis.windows import run_windows

        return run_windows(options, console)
    config = Config(ops=options.ops, op_files=options.op_files, variants=options.variants,
                    calls=QUICK_CALLS if options.quick else DEFAULT_CALLS)
    try:
        folder = check_output_dir(out_folder(options, envmod.capture("cpu")), "--out")
        document = make_document(config, time=True, quick=options.quick)
    except (OutputPathError, BreakdownInputError) as exc:
        raise UsageError(str(exc)) from None
    paths = write_outputs(document, folder, f"{options.scenario}-cpu-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    for line in time_summary(document):
        if line:
            console.print(line, soft_wrap=True, markup=False)
    failed = [r for r in document["rows"] if r.get("status") == "failed"]
    console.print(f"{len(cases(document))} cases over their floor; {len(failed)} failed" + "".join(
        f"\nwrote {shown(p)}" for p in paths), soft_wrap=True, markup=False)
    return Outcome(EXIT_FAILED if failed else EXIT_OK, paths[0], document)


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("breakdown", main)
