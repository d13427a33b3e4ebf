"""Command line: collect counts, check them against the expected file, print the file to commit,
or measure the check's false alarms and power.

Exit codes: 0 every row within its margin or below it (or collected / updated / studied), 1 a row
above its margin, missing, new or failed (with --strict also a row below it), 2 bad input or
counts that could not be collected, 3 no row compared (nothing measured on either side).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from dbench.bench.instructions import EXPECTED_PATH
from dbench.bench.instructions.check import InputError, Verdict, compare, env_differences, load, updated_expected
from dbench.bench.instructions.spread import spreads
from dbench.bench.instructions import power
from dbench.bench.instructions.staging import STAGE, StageError, private_folder, sibling_stage
from dbench.bench.core.native_build import build_dir
from dbench.bench.io.atomic import file_output_problem, write_atomic
from dbench.bench.harness.cli import Parser, op_file, path_value
from dbench.bench.core.trust import UntrustedPathError
from dbench.bench.instructions.collect import (DEFAULT_CALLS, DEFAULT_LAYOUTS, DEFAULT_OPS, DEFAULT_WARMUP,
                                               CollectError, Config, check_names, collect, load_op_files)

EXIT_NO_DECISION = 3  # as the gate's: nothing was decided
UPDATE_HINT = "python3 -m dbench.bench.instructions check --update-expected --write"


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"empty or repeated names in {text!r}")
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _pads(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _fractions(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {text!r}") from None


def run_power(args: argparse.Namespace) -> int:
    expected = load(args.expected, "expected")
    if args.add_aa is not None:
        document = power.add_collection(_read_study(args.out), expected, load(args.add_aa, "counts"))
        _dump(document, args.out)
        power.report(document)
        return 0
    trials = power.plan(args.heap_pads, args.effects)  # bad values fail here, before any collection
    _check_writable(args.out, "--out")
    _check_code_places()

    def started(i: int, trial: power.Trial) -> None:
        what = (f"A/A, heap pad {trial.heap_pad}" if trial.kind == "aa"
                else f"+{trial.effect:.0%} injected into every row")
        print(f"[power] trial {i}/{len(trials)}: {what}", file=sys.stderr, flush=True)

    def collect_on(config: Config, worker: int) -> dict[str, Any]:
        # Worker 0 stages where the expected file was made; the others beside it (same path length).
        return collect(config, stage=None if worker == 0 else sibling_stage(worker))

    document = power.run(expected, trials, on_trial=started, on_result=lambda doc: _dump(doc, args.out),
                         collect_fn=collect_on, jobs=args.jobs)
    power.report(document)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


PROG = "python3 -m dbench.bench.instructions"  # `dbench instructions` sets its own


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])  # one-line usage errors, as every command's
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="count instructions per call under callgrind and write them as JSON")
    c.add_argument("--out", type=path_value, help="write the counts here (default: stdout)")
    c.add_argument("--ops", type=_names, default=DEFAULT_OPS,
                   help="default: the boundary scenario's (the shipped ops it times), or the --op files' ops")
    c.add_argument("--op", type=op_file, action="append", default=[], metavar="FILE.py[:NAME]",
                   help="count a user's op (as run.py --op); repeatable")
    c.add_argument("--variants", type=_names, default=None, help="default: every variant")
    c.add_argument("--calls", type=_positive, default=DEFAULT_CALLS,
                   help=f"timed calls per case (default {DEFAULT_CALLS})")
    c.add_argument("--warmup", type=_positive, default=DEFAULT_WARMUP,
                   help=f"untimed calls first, per build (default {DEFAULT_WARMUP})")
    c.add_argument("--layouts", type=_positive, default=DEFAULT_LAYOUTS,
                   help=f"builds of the cases at other heap places; a row is their median (default {DEFAULT_LAYOUTS})")
    c.add_argument("--no-mask-cpu", action="store_true", help="leave glibc's CPU feature selection alone")
    c.add_argument("--allocator", choices=("jemalloc", "glibc"), default="jemalloc",
                   help="malloc of the measured process (default jemalloc; glibc's moves counts with the heap layout)")
    c.add_argument("--keep-dumps", type=path_value, help="copy callgrind's dump files to this folder")
    k = sub.add_parser("check", help="collect (or read --actual) and compare with the expected file")
    k.add_argument("--expected", type=path_value, default=EXPECTED_PATH, help="the committed expected counts")
    k.add_argument("--actual", type=path_value,
                   help="a file from `collect` (default: collect now, with the expected file's config)")
    k.add_argument("--out", type=path_value, help="also write the collected counts here")
    k.add_argument("--op", type=op_file, action="append", default=[], metavar="FILE.py[:NAME]",
                   help="the file of a user's op the expected file counts (with --update-expected and no "
                        "expected file yet: count these ops); repeatable")
    k.add_argument("--update-expected", action="store_true",
                   help="print the expected file for these counts (margins kept)")
    k.add_argument("--write", action="store_true", help="with --update-expected: write it to --expected instead")
    k.add_argument("--strict", action="store_true", help="a count that fell beyond its margin fails too")
    k.add_argument("--confirm", action="store_true",
                   help="when a row rises beyond its margin, collect once more: it fails only if it does again")
    k.add_argument("--margins-from", type=path_value, metavar="STUDY.json", action="append", default=[],
                   help="with --update-expected: widen each row's margin to what a `power` study's A/A shifts "
                        "call for (1.5 x its largest shift, rounded up to 0.5 %%); repeatable")
    s = sub.add_parser("spread", help="A/A: per-row spread of several collections of the same code")
    s.add_argument("files", type=path_value, nargs="+")
    w = sub.add_parser("power", help="false alarms under other heap layouts, detections of injected costs "
                                     "(one collection per trial, about 6 minutes each)")
    w.add_argument("--expected", type=path_value, default=EXPECTED_PATH)
    w.add_argument("--out", type=path_value, required=True, help="the study's JSON (rewritten after each collection)")
    w.add_argument("--heap-pads", type=_pads, default=power.DEFAULT_PADS,
                   help=f"heap pads of the A/A collections (default {','.join(map(str, power.DEFAULT_PADS))})")
    w.add_argument("--effects", type=_fractions, default=power.DEFAULT_EFFECTS,
                   help=f"injected costs, fractions of each row (default {','.join(map(str, power.DEFAULT_EFFECTS))})")
    w.add_argument("--jobs", type=_positive, default=1, help="collections at a time (one core each; at most 9)")
    w.add_argument("--add-aa", type=path_value, metavar="COUNTS.json",
                   help="collect nothing: add this collection (of other code, an unrelated edit) to the study "
                        "in --out as one more A/A trial, judged against --expected")
    return p


def run_spread(paths: list[Path]) -> int:
    if len(paths) < 2:
        raise InputError("spread needs two or more counts files")
    rows = spreads([load(p, "counts") for p in paths])
    if not rows:
        raise InputError("the files have no timed row in common")
    for label, spread, counts in rows:
        print(f"{label:<42} {spread:8.4%}  " + " ".join(f"{c:,.1f}" for c in counts))
    values = sorted(s for _, s, _ in rows)
    print(f"{len(rows)} rows: spread median {values[len(values) // 2]:.4%}, max {values[-1]:.4%}")
    return 0


def _dump(document: dict[str, Any], path: Path | None) -> None:
    """Atomically (a full disk leaves the old file, never a partial one)."""
    text = json.dumps(document, indent=1) + "\n"
    if path is None:
        sys.stdout.write(text)
        return
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _check_writable(path: Path | None, what: str) -> None:
    """An output path checked before a collection of minutes, not after it."""
    problem = None if path is None else file_output_problem(path)
    if problem:
        raise InputError(f"{what} {problem}")


def _check_code_places() -> None:
    """The stage and the build folder another user could change are refused (StageError,
    UntrustedPathError) before anything is printed or run: one line, exit 2."""
    private_folder(STAGE)
    build_dir()


def _collect(config: Config, keep_dumps: Path | None = None) -> dict[str, Any]:
    from dbench.ops.specs import MODES

    _check_code_places()
    print(f"[instructions] {len(config.resolved_ops())} ops x {len(config.resolved_variants())} variants x "
          f"{len(MODES)} modes, "
          f"{config.calls} calls per case, under callgrind (one process)", file=sys.stderr, flush=True)
    document = collect(config, keep_dumps)
    print(f"[instructions] collected in {document['env']['wall_s']} s", file=sys.stderr, flush=True)
    return document


def _read_study(path: Path) -> dict[str, Any]:
    from dbench.bench.io.document import ResultFileError, read_json

    try:
        study = read_json(path, "power study")
    except ResultFileError as exc:
        raise InputError(str(exc)) from None
    if not isinstance(study, dict) or not isinstance(study.get("trials"), list):
        raise InputError(f"{path}: not a power study (`power --out`): no list of trials")
    return study


def _user_config(config: Config) -> Config:
    """The config with its --op files loaded (a declaration error: exit 2 before any collection);
    without --ops, a user's ops alone are counted, as run.py --op times them."""
    names = load_op_files(config)
    return replace(config, ops=tuple(names)) if names and config.ops is None else config


def _check_config(expected: dict[str, Any] | None, op_files: tuple[str, ...]) -> Config:
    """What `check` collects: the expected file's config (its user ops from the --op files given)."""
    if expected is None:
        return _user_config(Config(op_files=op_files))
    config = Config.from_dict(expected["config"], op_files)
    load_op_files(config)
    check_names(config, expected["config"].get("user_ops"))
    return config


def _confirmed(verdicts: list[Verdict], expected: dict[str, Any], config: Config) -> list[Verdict]:
    """--confirm: a second collection of the same code; a row stays a regression only when that one
    puts it beyond its margin too. A few rows take one of two counts about 2 % apart from run to
    run of identical code (results/cpu-instructions/README.md); a real rise shows in both."""
    rose = [v.label for v in verdicts if v.status == "regression"]
    print(f"{len(rose)} row(s) above their margin: collecting once more to confirm ({', '.join(rose)})",
          file=sys.stderr, flush=True)
    again = {v.label: v for v in compare(expected, _collect(config))}
    out = []
    for v in verdicts:
        second = again.get(v.label)
        if v.status == "regression" and second is not None and second.status != "regression":
            then = "n/a" if second.change is None else f"{second.change:+.2%}"
            print(f"not confirmed: {v.label} {v.change or 0:+.2%} then {then} (margin ±{v.margin:.1%})",
                  file=sys.stderr)
            v = replace(v, status="ok")
        out.append(v)
    return out


def run_check(args: argparse.Namespace) -> int:
    if (args.write or args.margins_from) and not args.update_expected:
        raise InputError("--write and --margins-from go with --update-expected")
    measured: dict[str, float] = {}
    for study in args.margins_from:  # the widest any study calls for
        for row, margin in power.margins_from(_read_study(study)).items():
            measured[row] = max(measured.get(row, 0.0), margin)
    expected = None
    if args.expected.exists() or not args.update_expected:
        expected = load(args.expected, "expected")
    actual = load(args.actual, "counts") if args.actual else _collect(_check_config(expected, tuple(args.op)))
    if args.out:
        _dump(actual, args.out)
    if args.update_expected:
        new = updated_expected(actual, expected, measured or None)
        _dump(new, args.expected if args.write else None)
        if args.write:
            print(f"wrote {args.expected} ({len(new['rows'])} rows)", file=sys.stderr)
        return 0
    assert expected is not None
    for note in env_differences(expected, actual):
        print(f"note: {note} (counts are expected to move)", file=sys.stderr)
    verdicts = compare(expected, actual)
    if args.confirm and not args.actual and any(v.status == "regression" for v in verdicts):
        verdicts = _confirmed(verdicts, expected, _check_config(expected, tuple(args.op)))
    if not verdicts:  # nothing measured on either side: a check that decided nothing is no pass
        print("no row was compared: neither file has a count (every row n/a or failed on both sides)")
        return EXIT_NO_DECISION
    bad = [v for v in verdicts if not v.ok]
    for v in bad:
        print(v.line())
    ok = len(verdicts) - len(bad)
    print(f"{len(verdicts)} rows: {ok} within their margin, {len(bad)} not")
    if any(v.status == "improvement" for v in bad):
        print(f"a count fell beyond its margin{'' if args.strict else ' (this passes; --strict fails it)'}: "
              f"update the expected file to keep the gain ({UPDATE_HINT})")
    if any(v.status in ("regression", "missing", "new", "failed") for v in bad):
        print(f"a count rose, or a row appeared or vanished: fix it, or if intended, update the expected file "
              f"({UPDATE_HINT})")
    return 1 if any(v.fails(args.strict) for v in verdicts) else 0


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    args = parser(prog).parse_args(argv)
    from dbench.ops.declare import DeclarationError  # imports torch: not before the command line is read

    try:
        if args.command in ("collect", "check"):
            _check_writable(args.out, "--out")
        if args.command == "check" and args.write:
            _check_writable(args.expected, "--expected")
        if args.command == "collect":
            config = Config(ops=args.ops, op_files=tuple(args.op), variants=args.variants, calls=args.calls,
                            warmup=args.warmup,
                            layouts=args.layouts, mask_cpu=not args.no_mask_cpu, allocator=args.allocator)
            _dump(_collect(_user_config(config), args.keep_dumps), args.out)
            return 0
        if args.command == "spread":
            return run_spread(args.files)
        if args.command == "power":
            return run_power(args)
        return run_check(args)
    except (InputError, ValueError, CollectError, StageError, DeclarationError, UntrustedPathError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
