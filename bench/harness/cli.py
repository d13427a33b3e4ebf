"""run.py's command line: the options, their defaults, and every check that needs no torch.

Everything here is torch-free and fast, so a mistyped option fails before
anything heavy is imported or built: one line on stderr naming the option and
what it accepts, exit status 2. Checks that need torch (is CUDA there, how
many GPUs) come right after, in run.py, still before any work.

The options it leaves unset take the run defaults once the device is known:
bench/harness/options.py ``resolve`` makes the run's one typed, frozen ``RunOptions``,
which run.py, the runner's config and every child process read.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NoReturn, Sequence

from dbench.bench.io.atomic import folder_output_problem
from dbench.bench.core.defaults import ORDERS
from dbench.bench.harness import common  # the command's name (run.py, dbench run): its messages' prefix
from dbench.bench.harness.placement import pin_slots
from dbench.bench.core.trust import UntrustedPathError, make_output_folder, trusted_code_path

DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?")
CACHE_STATES = ("warm", "cold")
# Results go under the current folder, never into the checkout (whose results/ holds the committed
# reference runs that tests and the notebook read): <cwd>/dbench-results/<machine>/ unless --out.
DEFAULT_OUT = Path("dbench-results")
# The longest file name a run writes in its folder: a result's atomic temporary
# (".<scenario>-<device>-<stamp>-<random>.json.<random>.tmp") or a figure's name, with margin.
LONGEST_NAME = 128


class UsageError(ValueError):
    """A command line that cannot be run (run.py prints it as one line and exits 2)."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the message and a pointer to --help, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------
# Value types: each raises ArgumentTypeError, which argparse reports as "argument --x: <message>".


def _number(kind: Callable[[str], Any], what: str, ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value) or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    convert.__name__ = what  # argparse names the type in some messages
    return convert


def whole(low: int, high: int) -> Callable[[str], int]:
    """A whole number in [low, high]."""
    return _number(int, f"a whole number from {low} to {high}", lambda v: low <= v <= high)


def up_to(high: float, unit: str) -> Callable[[str], float]:
    """A number in (0, high]."""
    return _number(float, f"a number of {unit} > 0 and at most {high:g}", lambda v: 0 < v <= high)


# Every numeric option has a range, so a value accepted here is one the run can use, never one that
# fails or hangs later (an overflowing block size, a seed torch or the C++ driver refuses, a day-long
# warm-up). The limits are far above any sensible run.
MAX_SEED = 2**32 - 1  # the C++ driver's seed is an unsigned 32-bit number; torch's generators take it
MAX_COUNT = 1_000_000  # rounds, GPU rounds, C++ repetitions
MAX_PROCESSES = 1_000  # fresh processes of one run (--processes, 2 x --pairs, --shards, --gpus)
MAX_CORES = 65_536  # --pin-cores, --pin-offset: the real check is against the cores allowed (check_pinning)
MAX_MS = 60_000.0  # --block-ms, --warmup-ms: one timed block or warm-up of at most a minute
MAX_CPP_SECONDS = 10.0  # --cpp-min-time: the C++ driver takes blocks shorter than 10 s
MAX_BUDGET_SECONDS = 7 * 86_400.0  # --time-budget: a week
MAX_ELEMENTS = 2**31 - 1  # --shape: the elements of one input (8 GiB of float32; a dispatch benchmark's are small)

positive_int = whole(1, MAX_COUNT)
cores_value = whole(0, MAX_CORES)
seed_value = whole(0, MAX_SEED)
milliseconds = up_to(MAX_MS, "milliseconds")
fraction = _number(float, "a number between 0 and 1 (exclusive)", lambda v: 0 < v < 1)
processes_value = whole(2, MAX_PROCESSES)
pairs_value = whole(1, MAX_PROCESSES // 2)
shards_value = whole(1, MAX_PROCESSES)
cpp_seconds = _number(float, f"a number of seconds > 0 and below {MAX_CPP_SECONDS:g}",
                      lambda v: 0 < v < MAX_CPP_SECONDS)
# --ab default: 12 processes; the fewest pairs at which the gate's GPU rows gate a full table
# (results/h200/gate/nights).
AB_PAIRS = 6


def name_list(text: str) -> tuple[str, ...]:
    """'a,b' -> ('a', 'b'): no empty list, no empty entry, no name twice."""
    names = tuple(n.strip() for n in text.split(","))
    if not text.strip() or not any(names):
        raise argparse.ArgumentTypeError("expected one or more comma-separated names, got an empty list")
    if "" in names:
        raise argparse.ArgumentTypeError(f"empty name in {text!r}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(map(repr, twice))} given more than once")
    return names


def path_value(text: str) -> Path:
    """A path option's or argument's value (run.py's and every analysis command's): an empty one is
    refused, not read as Path('') (the current folder), where it would read or write silently."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty path, got {text!r}")
    return Path(text)


path_value.__name__ = "path"  # argparse names the type in some messages


def op_file(text: str) -> str:
    """--op FILE.py[:NAME]: the file exists, no other local user can change it, and NAME is a Python
    name (the file is imported later, with torch); returned with the file's resolved path, so child
    processes load the same file."""
    path_text, sep, name = text.rpartition(":") if not text.endswith(".py") else ("", "", "")
    path = Path(path_text if sep else text).expanduser()
    if path.suffix != ".py":
        raise argparse.ArgumentTypeError(f"expected FILE.py or FILE.py:NAME, got {text!r}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{str(path)!r} is not a file")
    if sep and not name.isidentifier():
        raise argparse.ArgumentTypeError(f"{name!r} is not a Python name")
    try:  # it is imported: refused where another local user could change it (bench/core/trust.py)
        path = trusted_code_path(path, "the --op file")
    except UntrustedPathError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return f"{path}{sep}{name}"


def axis_value(text: str) -> tuple[str, tuple[str, ...]]:
    """'size=4096,65536' -> ('size', ('4096', '65536')): an axis name and the values to keep, as labels
    write them (a shape as 8x64)."""
    name, sep, values = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name.strip()):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE[,VALUE...] such as size=4096,65536, got {text!r}")
    return name.strip(), name_list(values)


def shape_value(text: str) -> tuple[int, ...]:
    """'4,32' or '4x32' -> (4, 32): one to four positive sizes."""
    parts = re.split(r"[,x]", text.strip())
    if not 1 <= len(parts) <= 4 or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected 1 to 4 positive sizes such as 4,32 or 4x32, got {text!r}")
    shape = tuple(int(p) for p in parts)
    if math.prod(shape) > MAX_ELEMENTS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_ELEMENTS} elements in all, got {text!r}")
    return shape


def device_name(text: str) -> str:
    if not DEVICE_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"--device must be cpu, cuda or cuda:N, got {text!r}")
    return text


def gpus_value(text: str) -> str:
    if text != "all" and not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_PROCESSES):
        raise argparse.ArgumentTypeError(f"expected 'all' or a number of GPUs from 1 to {MAX_PROCESSES}, "
                                         f"got {text!r}")
    return text


# ---------------------------------------------------------------------------
# The parser.


def option_strings(scenario_names: Iterable[str]) -> list[str]:
    """Every option string of run.py's parser (children's command lines resolve abbreviations with them)."""
    return [s for a in build_parser(tuple(scenario_names))._actions for s in a.option_strings]


def build_parser(scenarios: Sequence[str]) -> Parser:
    p = Parser(prog=common.PROG, description="PyTorch operator boundary benchmarks")
    p.add_argument("--scenario", metavar="NAME", help=f"one of: {', '.join(scenarios)}")
    p.add_argument("--list", action="store_true",
                   help="print the scenarios, ops (the suite's and those --op loads), variants and modes, then exit")
    p.add_argument("--op", type=op_file, action="append", metavar="FILE.py[:NAME]",
                   help="time your own op: a dbench.Op declared in FILE.py (every Op in it without :NAME); "
                        "repeatable; its ops are timed unless --ops selects others")
    p.add_argument("--shape", type=shape_value, action="append", metavar="N[,N...]",
                   help="the inputs' shape in the boundary and compile scenarios (default: each op's own); "
                        "repeatable: one run times every shape given, each its own table (the C++ driver's "
                        "rows keep its built-in 4x32)")
    p.add_argument("--device", type=device_name, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    p.add_argument("--ops", type=name_list, help="comma-separated ops (default: all)")
    p.add_argument("--variants", type=name_list, help="comma-separated variants (default: all)")
    p.add_argument("--modes", type=name_list,
                   help="comma-separated modes of the scenario (default: all; boundary: inference, no_grad, "
                        "inference_mode, fwd_requires_grad, fwd_bwd; --list shows each scenario's)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16", "float16"])
    _timing_options(p)
    _process_options(p)
    _output_options(p)
    p.epilog = ("exit status: 0 every case timed; 1 a case failed (pre-flight, a round, or the C++ driver: "
                "the result lists it), or the result, a figure or standard output could not be written once the "
                "result file was reserved; 2 bad command line, or nothing selected can be timed on this device; "
                "130 interrupted (the result keeps every finished round); "
                "with --baseline, the gate's status when the run completed")
    return p


def _timing_options(p: Parser) -> None:
    """How long and how each case is timed."""
    p.add_argument("--rounds", type=positive_int, help="interleaved rounds (default 30, on CUDA too; --quick 6)")
    p.add_argument("--quick", action="store_true", help="short run: fewer rounds, shorter blocks")
    p.add_argument("--adaptive", action="store_true",
                   help="stop once every median's 95%% CI half-width is within --precision (rounds becomes a cap)")
    p.add_argument("--precision", type=fraction, default=0.01, help="adaptive target: CI half-width / median")
    p.add_argument("--time-budget", type=up_to(MAX_BUDGET_SECONDS, "seconds"),
                   help="stop after this many seconds of rounds")
    p.add_argument("--block-ms", type=milliseconds,
                   help="target duration of one timed block (default 10 ms, boundary on CUDA 2.5 ms; --quick 2 ms)")
    p.add_argument("--warmup-ms", type=milliseconds,
                   help="warm-up of each case after its block is sized (default 20 ms, boundary on CUDA 5 ms; "
                        "--quick 5 ms)")
    p.add_argument("--order", choices=ORDERS,
                   help="the blocks of a round: grouped (default: each case near the floor it is paired with) or "
                        "shuffled (every block at random)")
    p.add_argument("--seed", type=seed_value, default=0,
                   help=f"the seed of the round order and the inputs, 0 to {MAX_SEED} (default 0)")
    p.add_argument("--gpu-timer", default="cupti", choices=["cupti", "events", "off"],
                   help="GPU time per call on CUDA: CUPTI kernel records (falls back to events with a warning)")
    p.add_argument("--gpu-rounds", type=positive_int,
                   help="rounds of the GPU pass (default 8, boundary on CUDA 5; --quick 3)")
    p.add_argument("--cpp-repetitions", type=positive_int,
                   help="C++ driver samples per benchmark: rounds in the grouped order, Google Benchmark's "
                        "repetitions shuffled (default 9, boundary on CUDA 30; --quick 3; args: 10, --quick 5)")
    p.add_argument("--cpp-min-time", type=cpp_seconds,
                   help="C++ driver seconds per sample: a round's block in the grouped order, a repetition's "
                        "minimum shuffled (default 0.1, boundary on CUDA 0.0025; --quick 0.01; args: 0.02, "
                        "--quick 0.005)")
    p.add_argument("--no-cpp", action="store_true",
                   help="boundary, args: skip the 'called from C++' rows (Google Benchmark driver)")
    p.add_argument("--axis", type=axis_value, action="append", metavar="NAME=V[,V...]",
                   help="time only these values of one of the scenario's axes (repeatable, one per axis), e.g. "
                        "--axis size=4096,65536 for the roofline; --list shows each scenario's axes")
    p.add_argument("--cache", type=name_list, default=("warm",), metavar="warm|cold|warm,cold",
                   help="kernel scenarios on CUDA: GPU time with a warm L2, or cold (L2 flushed before each call, "
                        "outside the timed window); the state is part of each row's identity")


def _process_options(p: Parser) -> None:
    """Which cores and processes the run uses."""
    p.add_argument("--pin-cores", type=cores_value, default=1,
                   help="pin the process to the last N allowed cores (default 1; 0 = no pinning)")
    p.add_argument("--no-pin", action="store_true", help="same as --pin-cores 0")
    p.add_argument("--pin-offset", type=cores_value, default=0,
                   help="skip the last K x pin-cores allowed cores before pinning "
                        "(each --gpus/--shards child gets its own K)")
    shard = p.add_mutually_exclusive_group()
    shard.add_argument("--gpus", type=gpus_value, metavar="all|N",
                       help="CUDA: shard the cases over N GPUs of this host (all: every visible one), one process "
                            "per GPU, each pinned to its own cores; one merged result, rows tagged with gpu_index")
    shard.add_argument("--shards", type=shards_value, metavar="N",
                       help="the CPU form of --gpus: N processes on the CPU, each pinned to its own cores")
    p.add_argument("--processes", type=processes_value, metavar="N",
                   help="run the scenario in N fresh processes, one after another, each with a share of the "
                        "rounds; one result whose rows carry each process's median (process_medians)")
    p.add_argument("--ab", nargs=2, metavar=("A", "B"),
                   help="A/B run: the two sides as alternating fresh processes in ABBA order; a side is an "
                        "interpreter path, env:KEY=VAL[,KEY=VAL], build:PATH, or parts joined by + "
                        "(rows get the paired ratio B/A with a 95%% CI)")
    p.add_argument("--pairs", type=pairs_value, metavar="K", help=f"--ab: ABBA pairs (default {AB_PAIRS})")
    p.add_argument("--duet", action="store_true",
                   help="--ab: run each pair's two processes at the same time, each pinned to its own cores "
                        "(duet benchmarking), so a slowdown of the host lands on both sides of the pair at once; "
                        "the pairs still run one after another")
    p.add_argument("--overlap-pairs", action="store_true",
                   help="--duet: start each pair as soon as the pair before it has finished its CPU passes, on "
                        "the next cores, while that pair takes its GPU turns (no two GPU passes overlap); "
                        "needs 4 x --pin-cores cores")
    # Set by run.py on a sharded run's children: each times the share of the selection it was given,
    # which may hold nothing this device can time; the parent checked the whole selection.
    p.add_argument("--shard-child", action="store_true", help=argparse.SUPPRESS)


def _output_options(p: Parser) -> None:
    """Where the result goes and what is done with it."""
    p.add_argument("--baseline", type=path_value, metavar="FILE|DIR",
                   help="after the run, gate it against these result files (analysis.gate); exit with its code")
    p.add_argument("--out", type=path_value,
                   help=f"output folder (default: ./{DEFAULT_OUT}/<machine>/ in the current folder)")
    p.add_argument("--plot", action="store_true",
                   help="also write the scenario's figures (PNG) beside its result file")


def check_names(args: argparse.Namespace, scenarios: Sequence[str], ops: Sequence[str], variants: Sequence[str],
                modes: Sequence[str] | None = None) -> None:
    """Unknown scenario, op, variant or mode names, with the valid ones (no --ops / --variants /
    --modes: all). `modes` None: the scenario's modes are not known here, and --modes is refused."""
    if args.scenario not in scenarios:
        raise UsageError(f"argument --scenario: unknown scenario {args.scenario!r}; "
                         f"valid scenarios: {', '.join(scenarios)}")
    bad_cache = [c for c in args.cache if c not in CACHE_STATES]
    if bad_cache:
        raise UsageError(f"argument --cache: unknown cache state {', '.join(map(repr, bad_cache))}; "
                         f"valid: {', '.join(CACHE_STATES)}")
    if getattr(args, "modes", None) and not modes:
        raise UsageError(f"argument --modes: scenario {args.scenario} has no modes to choose from")
    for option, given, valid in (("--ops", args.ops, ops), ("--variants", args.variants, variants),
                                 ("--modes", getattr(args, "modes", None), modes or ())):
        if option == "--ops" and getattr(args, "op", None):
            continue  # the names --op loads are known once its files are imported (ops.declare)
        unknown = [n for n in given or () if n not in valid]
        if unknown:
            what = option.removeprefix("--").removesuffix("s")
            raise UsageError(f"argument {option}: unknown {what} {', '.join(map(repr, unknown))}; "
                             f"valid {what}s: {', '.join(valid)}")


# A known extra cost for the gate's power studies: on the host before the C++ `cpp` op's launch
# (DBENCH_INJECT_CPU_NS; DBENCH_INJECT_NS is its older name), inside its forward CUDA kernels
# (ops/csrc/torch_library.cpp), and in the Python kernel of the `define_impl` variant (ops/variants.py).
INJECT_KNOBS = ("DBENCH_INJECT_CPU_NS", "DBENCH_INJECT_NS", "DBENCH_INJECT_GPU_NS", "DBENCH_INJECT_PY_NS")


def check_knobs(environ: dict[str, str]) -> None:
    """DBENCH_* settings the kernel layer reads mid-run: a bad value fails here, before any work; so
    does a build folder or C++ driver another local user could change (bench/core/trust.py)."""
    from dbench.ops.specs import MM_KERNEL_AUTO, MM_KERNEL_ENV, MM_KERNELS

    from dbench.bench.core.native_build import DRIVER_ENV, build_dir

    try:
        build_dir(environ)
        if environ.get(DRIVER_ENV):
            trusted_code_path(environ[DRIVER_ENV], f"the C++ driver ({DRIVER_ENV})", missing_ok=True)
    except UntrustedPathError as exc:
        raise UsageError(str(exc)) from None

    value = environ.get(MM_KERNEL_ENV)
    valid = (MM_KERNEL_AUTO, *MM_KERNELS)
    if value and value not in valid:
        raise UsageError(f"{MM_KERNEL_ENV}={value!r}: valid values are {', '.join(valid)} (unset: {MM_KERNEL_AUTO})")
    for name in INJECT_KNOBS:  # the native layer would read a bad value as 0 and inject nothing
        value = environ.get(name)
        if value is not None and not (value.isascii() and value.isdigit() and len(value) <= 12):
            raise UsageError(f"{name}={value!r}: expected a whole number of nanoseconds (0 to 10^12)")


# The output folders this process made for a run (each with the first of its ancestors that was
# missing): a run refused afterwards removes them again while they are empty (remove_made_folders).
MADE_FOLDERS: list[tuple[Path, Path]] = []


def _first_missing(folder: Path) -> Path | None:
    """The outermost of `folder` and its ancestors that does not exist (None: it exists)."""
    missing = None
    for path in (folder, *folder.parents):
        try:
            if path.exists():
                break
        except OSError:  # a name the file system refuses (too long): nothing is made there
            return None
        missing = path
    return missing


def remove_made_folders() -> None:
    """A refused run leaves no folder behind: the ones check_out_dir made, innermost first, while empty."""
    while MADE_FOLDERS:
        folder, top = MADE_FOLDERS.pop()
        for path in (folder, *folder.parents):
            try:
                path.rmdir()
            except OSError:  # not empty (a file was written there), or gone
                break
            if path == top:
                break


def check_out_dir(folder: Path, option: str = "--out") -> Path:
    """The output folder exists or can be created, and a file with a name as long as any a run writes
    can be created in it (bench.io.atomic.folder_output_problem): a name too long for the file system, a
    read-only or missing parent, or a file in the way fail here, before any work. So does a folder
    another local user could plant or swap files in (bench/core/trust.py make_output_folder)."""
    top = _first_missing(folder.absolute())
    if top is not None:
        MADE_FOLDERS.append((folder.absolute(), top))
    try:
        make_output_folder(folder)
    except UntrustedPathError as exc:
        raise UsageError(f"argument {option}: {exc}") from None
    except OSError:
        pass  # it cannot be made: folder_output_problem says why
    problem = folder_output_problem(folder, LONGEST_NAME, "result files")
    if problem:
        raise UsageError(f"argument {option}: {problem}")
    return folder


def check_baseline(path: Path) -> list[Path]:
    """--baseline: a result file, or a folder with result files (*.json, *.json.gz, not searched below
    it), each read and checked as a result document now, so a broken one fails before the run, not after it."""
    from dbench.bench.io.document import (  # the one checked reader and lister (standard library only)
        ResultFileError, load_result, result_files)

    try:
        if not path.exists():
            raise UsageError(f"argument --baseline: {path} does not exist")
        if not (path.is_file() or path.is_dir()):
            raise UsageError(f"argument --baseline: {path} is neither a regular file nor a folder")
        files = result_files(path)  # a folder's result files; none is a ResultFileError
        for file in files:
            if not file.is_file():
                raise UsageError(f"argument --baseline: {file} is not a regular file")
            load_result(file)
    except ResultFileError as exc:
        raise UsageError(f"argument --baseline: {exc}") from None
    except OSError as exc:  # e.g. a name too long, a folder that cannot be listed
        raise UsageError(f"argument --baseline: {path}: {exc.strerror or exc}") from None
    return files


def check_pinning(args: argparse.Namespace) -> None:
    """--pin-cores (with --pin-offset) within the cores this process may run on: asking for more is
    an error, not a silent clamp (a sharded run checks its shards' cores itself, bench/children/shard)."""
    sharded = args.gpus is not None or args.shards is not None
    if args.no_pin or args.pin_cores <= 0 or not hasattr(os, "sched_getaffinity") or sharded:
        return
    allowed = len(os.sched_getaffinity(0))
    slots = args.pin_offset + pin_slots(args.duet, args.overlap_pairs)
    need = args.pin_cores * slots
    if need > allowed:
        most = allowed // slots
        asked = f"{args.pin_cores} with --pin-offset {args.pin_offset}" if args.pin_offset else str(args.pin_cores)
        asked += (" for each side of two overlapping pairs" if args.overlap_pairs
                  else " for each side of --duet" if args.duet else "")
        together = "--overlap-pairs" if args.overlap_pairs else "--duet" if args.duet else None
        if most:
            hint = f"give at most {most}"
        elif args.pin_offset:
            hint = f"--pin-offset {args.pin_offset} leaves no core to pin to"
        else:
            hint = f"{together} needs {slots} cores or more: run without it"
        # --duet cannot do without pinning (check_repeats): no --no-pin to suggest there
        raise UsageError(f"argument --pin-cores: {asked} needs {need} cores, but this process may run on {allowed}; "
                         f"{hint}{'' if together else ' (or --no-pin)'}")


def absolute_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every path option made absolute against the current folder, once, here: child processes
    (--processes, --ab, --shards) run elsewhere and must write and read the same places."""
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.type is path_value and isinstance(value, Path):
            setattr(args, action.dest, value.absolute())


def check_repeats(args: argparse.Namespace) -> None:
    """--processes, --ab, --pairs: one way to repeat a run at a time, and sides that can run."""
    from dbench.bench.harness.sides import SideError, parse_side

    sharded = "--gpus" if args.gpus is not None else "--shards" if args.shards is not None else None
    if args.processes is not None and args.ab is not None:
        raise UsageError("argument --processes: --ab runs its own processes (2 x --pairs); give one of them")
    for option, given in (("--processes", args.processes), ("--ab", args.ab)):
        if given is not None and sharded:
            raise UsageError(f"argument {option}: not with {sharded} (repeated processes run one at a time, "
                             "on one device)")
    if args.ab is not None and args.baseline is not None:
        raise UsageError("argument --baseline: an A/B run is judged on its own pairs (python -m dbench.analysis.gate "
                         "on its result); give no baseline")
    if args.pairs is not None and args.ab is None:
        raise UsageError("argument --pairs: only with --ab")
    if args.duet and args.ab is None:
        raise UsageError("argument --duet: only with --ab (it runs the two sides of each pair at once)")
    if args.overlap_pairs and not args.duet:
        raise UsageError("argument --overlap-pairs: only with --duet (it overlaps a pair's GPU turns with the "
                         "next pair's CPU passes)")
    if args.duet and (args.no_pin or args.pin_cores <= 0):
        raise UsageError("argument --duet: each side needs its own cores; give --pin-cores 1 or more, not --no-pin")
    if args.ab is not None:
        try:
            args.ab_sides = tuple(parse_side(spec) for spec in args.ab)
        except SideError as exc:
            raise UsageError(f"argument --ab: {exc}") from None
        for side in args.ab_sides:  # a side's own settings, checked before side A runs a whole process
            try:
                check_knobs({**os.environ, **side.env})
            except UsageError as exc:
                raise UsageError(f"argument --ab: {side.spec!r}: {exc}") from None
        args.pairs = args.pairs or AB_PAIRS


def parse(argv: Sequence[str] | None, scenarios: Sequence[str], ops: Sequence[str], variants: Sequence[str],
          default_out: Path | None = None, declarations: Mapping[str, Any] | None = None) -> argparse.Namespace:
    """Parse and check the whole command line; exits 2 with one line on the first problem.
    declarations: each scenario's declaration (scenarios/declaration.py; read here for its own
    variant names `variants`, the ops it takes `ops` and its modes); a scenario without one takes
    `ops` and `variants`. The run defaults are not filled here: bench/harness/options.py resolve does that
    once, when the device is known.
    default_out: the folder the machine's folder goes in without --out (DEFAULT_OUT in the current
    folder); made absolute, as every path option, in args.default_out."""
    parser = build_parser(scenarios)
    args = parser.parse_args(argv)
    try:
        return checked(parser, args, scenarios, ops, variants, default_out, declarations)
    except UsageError as exc:
        remove_made_folders()
        parser.error(str(exc))


def from_fields(fields: Mapping[str, Any], scenarios: Sequence[str], ops: Sequence[str], variants: Sequence[str],
                default_out: Path | None = None, declarations: Mapping[str, Any] | None = None) -> argparse.Namespace:
    """What `parse` makes, from run.py's options given as Python values by their names (`rounds=10`,
    `ops=["noop"]`, `quick=True`: dbench.run_scenario), not from a command line. Each value passes
    its option's own converter and choices, so it means what it means on the command line; raises
    UsageError (one line naming the option) on the first problem."""
    parser = build_parser(scenarios)
    actions = {a.dest: a for a in parser._actions if a.dest != "help" and a.help != argparse.SUPPRESS}
    args = argparse.Namespace(**{a.dest: a.default for a in parser._actions if a.dest != "help"})
    for name, value in fields.items():
        action = actions.get(name)
        if action is None:
            raise UsageError(f"unknown option {name!r}; valid: {', '.join(sorted(actions))}")
        setattr(args, name, _field_value(action, value))
    return checked(parser, args, scenarios, ops, variants, default_out, declarations)


def _field_value(action: argparse.Action, value: Any) -> Any:
    """One option's Python value, checked as its command-line words would be."""
    option = action.option_strings[0]
    if action.nargs == 0:  # a flag
        if not isinstance(value, bool):
            raise UsageError(f"argument {option}: True or False, not {value!r}")
        return value
    if value is None:
        return action.default

    def one(item: Any) -> Any:
        text = ",".join(map(str, item)) if isinstance(item, (list, tuple)) else str(item)
        try:
            converted = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError(f"argument {option}: {exc}") from None
        if action.choices is not None and converted not in action.choices:
            raise UsageError(f"argument {option}: invalid choice {converted!r} (choose from "
                             f"{', '.join(map(repr, action.choices))})")
        return converted

    if isinstance(action, argparse._AppendAction) or action.nargs == 2:  # --op FILE (repeatable), --ab A B
        if action.type is axis_value and isinstance(value, Mapping):  # axis={"size": (256, 65536)}
            value = [f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in value.items()]
        one_shape = action.type is shape_value and not any(isinstance(v, (list, tuple)) for v in value)
        items = [value] if isinstance(value, str) or one_shape else list(value)  # shape=(8, 64): one shape
        if action.nargs == 2 and len(items) != 2:
            raise UsageError(f"argument {option}: two values (A, B), not {value!r}")
        return [one(item) for item in items]
    return one(value)


def checked(parser: argparse.ArgumentParser, args: argparse.Namespace, scenarios: Sequence[str], ops: Sequence[str],
            variants: Sequence[str], default_out: Path | None = None,
            declarations: Mapping[str, Any] | None = None) -> argparse.Namespace:
    """The checks of a whole set of options, after each one's own (raises UsageError)."""
    MADE_FOLDERS.clear()  # an earlier run's folders (several runs in one process, the API) are its own
    if args.scenario is None and not args.list:
        raise UsageError("the following arguments are required: --scenario (or --list)")
    if args.scenario is None:  # --list alone; an empty --scenario '' is refused as an unknown name below
        args.scenario = "boundary"
    absolute_paths(parser, args)
    args.default_out = (DEFAULT_OUT if default_out is None else Path(default_out)).absolute()
    declared = (declarations or {}).get(args.scenario)
    modes: Sequence[str] | None = None
    if declared is not None:
        ops = declared.ops or (*ops, *declared.also_ops)
        variants, modes = declared.variants or variants, declared.modes
    check_names(args, scenarios, ops, variants, modes)
    if args.shards is not None and args.device not in (None, "cpu"):
        raise UsageError(f"argument --shards: runs on the CPU only; for --device {args.device} use --gpus")
    if args.gpus is not None and args.device not in (None, "cuda"):
        raise UsageError(f"argument --gpus: runs shard i on cuda:i; drop --device {args.device}")
    check_repeats(args)
    check_pinning(args)
    check_knobs(dict(os.environ))
    if args.plot and importlib.util.find_spec("matplotlib") is None:  # not after a whole run
        raise UsageError("argument --plot: matplotlib is not installed (pip install matplotlib)")
    if not args.list:  # --list prints and stops: it writes nothing, so it makes no folder
        check_out_dir(args.out or args.default_out)
    if args.baseline is not None:
        args.baseline_files = check_baseline(args.baseline)
    return args
