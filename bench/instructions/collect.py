"""Collect instruction counts: run child.py under callgrind and turn its dumps into rows."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dbench.bench.instructions import METRIC, REPO_ROOT, SCHEMA, UNIT
from dbench.bench.instructions.callgrind import read_dumps
from dbench.bench.instructions.staging import STAGE, private_folder, staged
from dbench.bench.core.native_build import build_dir
from dbench.scenarios.arity import counted_scenario
from dbench.bench.instructions.environment import (child_environment, code_digests, disable_aslr, glibc_tunables,
                                                   glibc_version, host_cpu, jemalloc, valgrind_version)

# Every op the boundary scenario times when no --ops is given (the shipped ops with `boundary`), with
# every variant and mode that runs on CPU tensors; or a user's op (--op FILE.py:NAME).
DEFAULT_OPS: tuple[str, ...] | None = None
DEFAULT_CALLS = 10_000
DEFAULT_WARMUP = 200
# The cases are built this many times in the process, each build elsewhere in the heap, and each
# timed for calls / layouts calls; a row's count is the median over the builds (child.py).
# Five builds did not steady the counts under glibc's malloc (7 false alarms in 93 A/A row-trials
# against 3 with one build: results/cpu-instructions/power-glibc-5builds.json), so one is the default.
DEFAULT_LAYOUTS = 1
DUMP_STEM = "callgrind.out"


class CollectError(RuntimeError):
    """Counts could not be collected (valgrind missing, the child failed, dumps missing)."""


@dataclass(frozen=True)
class Config:
    ops: tuple[str, ...] | None = DEFAULT_OPS  # None: the boundary scenario's default ops (resolved_ops)
    op_files: tuple[str, ...] = ()  # --op FILE.py[:NAME] values the measured process loads first
    variants: tuple[str, ...] | None = None  # None: every variant of the factory
    calls: int = DEFAULT_CALLS  # per case, over all its builds
    warmup: int = DEFAULT_WARMUP  # per case and build
    layouts: int = DEFAULT_LAYOUTS
    mask_cpu: bool = True  # glibc hwcaps and cache tunables (environment.py)
    allocator: str = "jemalloc"  # "jemalloc" (preloaded; required) or "glibc" (experiments only)
    instr_atstart: bool = False  # instrument from the start (no callgrind_control; imports ~4x slower)
    inject: tuple[tuple[str, int], ...] = ()  # power tests only: (case label, pad iterations)
    heap_pad: int = 0  # sensitivity tests only: small objects kept alive before the cases are built
    # The breakdown: after the cases, each declared torch Python function a case calls, counted
    # inclusively in its own window of this many calls (python_functions.py); 0: none.
    python_function_calls: int = 0

    @property
    def scenario(self) -> str:
        """The scenario whose cases are counted: `args` for the args scenario's generated ops (each
        kind of argument at one arity), else `boundary` (counted_scenario)."""
        return counted_scenario(self.ops)

    def resolved_ops(self) -> tuple[str, ...]:
        from dbench.ops import OPS

        return self.ops if self.ops is not None else tuple(n for n, c in OPS.items() if c.boundary and not c.origin)

    def resolved_variants(self) -> tuple[str, ...]:
        return self.variants if self.variants is not None else scenario_variants(self.scenario)

    def as_dict(self) -> dict[str, Any]:
        from dbench.ops import OPS

        ops = self.resolved_ops()
        # A user's op by its file's name and declaration (user_op_source), not its folder: the
        # expected file is recorded in one checkout and checked in another.
        users = {o: user_op_source(OPS[o].origin) for o in ops if o in OPS and OPS[o].origin}
        # `scenario` only where it is not the boundary's: the expected counts' files stay as they were.
        counted = self.scenario
        return {**({"scenario": counted} if counted != "boundary" else {}),
                "ops": list(ops), **({"user_ops": users} if users else {}),
                "variants": list(self.resolved_variants()), "calls": self.calls,
                "warmup": self.warmup, "layouts": self.layouts, "mask_cpu": self.mask_cpu,
                "allocator": self.allocator, "device": "cpu", "dtype": "float32"}

    @property
    def calls_per_layout(self) -> int:
        return self.calls // self.layouts

    @staticmethod
    def from_dict(d: dict[str, Any], op_files: tuple[str, ...] = ()) -> "Config":
        """A file's config; op_files: the --op values that declare its user ops (user_ops)."""
        return Config(ops=tuple(d["ops"]), op_files=op_files, variants=tuple(d["variants"]), calls=int(d["calls"]),
                      warmup=int(d.get("warmup", DEFAULT_WARMUP)), layouts=int(d.get("layouts", 1)),
                      mask_cpu=bool(d.get("mask_cpu", True)), allocator=str(d.get("allocator", "glibc")))


def scenario_variants(scenario: str) -> tuple[str, ...]:
    """The variants a counted scenario makes (the args scenario names its own)."""
    from dbench.ops.specs import VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    return DECLARATIONS[scenario].variants or VARIANT_NAMES


def user_op_source(origin: str) -> str:
    from dbench.ops.declare import split_origin

    return split_origin(origin)[0]


def load_op_files(config: Config) -> list[str]:
    """Import and register the config's --op files (in this process, before the minutes under
    callgrind: a declaration error is one line, exit 2); their op names."""
    from dbench.ops.declare import load_all

    return load_all(config.op_files) if config.op_files else []


def check_names(config: Config, wanted_sources: dict[str, str] | None = None) -> None:
    """Every op and variant known (a user's op once its --op file is loaded); wanted_sources: the
    user ops an expected file counted ({op: 'my_ops.py:NAME'}), each declared by a loaded file."""
    from dbench.ops import OPS
    from dbench.scenarios.arity import ARGS_OPS

    scenario = config.scenario  # ValueError for a mix of the args scenario's ops and others
    known, variant_names = ARGS_OPS if scenario == "args" else tuple(OPS), scenario_variants(scenario)
    for op, source in (wanted_sources or {}).items():
        loaded = OPS.get(op)
        if loaded is None or not loaded.origin or user_op_source(loaded.origin) != source:
            raise ValueError(f"the expected file counts the user op {op!r} of {source}: give its file, "
                             f"--op PATH/TO/{source}")
    bad_ops = [o for o in config.resolved_ops() if o not in known]
    bad_variants = [v for v in config.resolved_variants() if v not in variant_names]
    if bad_ops or bad_variants:
        raise ValueError(f"unknown {'ops ' + ','.join(bad_ops) if bad_ops else ''}"
                         f"{' and ' if bad_ops and bad_variants else ''}"
                         f"{'variants ' + ','.join(bad_variants) if bad_variants else ''}"
                         f" (valid ops: {','.join(OPS)}, or a user's op with --op FILE.py:NAME, or the args "
                         f"scenario's on their own; variants{' of the args scenario' if scenario == 'args' else ''}: "
                         f"{','.join(variant_names)})")
    if config.calls < 1 or config.warmup < 0:
        raise ValueError(f"calls must be >= 1 and warmup >= 0 (got {config.calls}, {config.warmup})")
    if not 1 <= config.layouts <= config.calls:
        raise ValueError(f"layouts must be between 1 and the calls per case (got {config.layouts})")
    if config.allocator not in ("jemalloc", "glibc"):
        raise ValueError(f"allocator must be jemalloc or glibc (got {config.allocator!r})")


def _package_version(package: str) -> str | None:
    """The Debian package's version (None where dpkg-query is absent or does not know it)."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def valgrind_command(valgrind: str, out_dir: Path, config: Config, manifest: Path) -> list[str]:
    python = os.path.realpath(sys.executable)  # not a shim script: valgrind must see the interpreter
    return [
        valgrind, "--tool=callgrind",
        # Imports and registrations uninstrumented (several times faster); the child switches it on.
        f"--instr-atstart={'yes' if config.instr_atstart else 'no'}",
        "--collect-atstart=no",  # only the windows the child toggles are counted
        "--dump-line=no", "--dump-instr=no",  # totals and function names are all that is read
        f"--callgrind-out-file={out_dir / DUMP_STEM}",
        f"--log-file={out_dir / 'valgrind.log'}",
        python, "-m", "dbench.bench.instructions.child", "--scenario", config.scenario,
        *(a for spec in config.op_files for a in ("--op", spec)),
        "--ops", ",".join(config.resolved_ops()), "--variants", ",".join(config.resolved_variants()),
        "--calls", str(config.calls_per_layout), "--layouts", str(config.layouts), "--warmup", str(config.warmup),
        "--manifest", str(manifest),
        *([] if config.instr_atstart else ["--instrumentation-on"]),
        *(["--heap-pad", str(config.heap_pad)] if config.heap_pad else []),
        *(["--python-functions", str(config.python_function_calls)] if config.python_function_calls else []),
        *(["--inject", ";".join(f"{label}={n}" for label, n in config.inject)] if config.inject else []),
    ]


def _rows(manifest: dict[str, Any], dumps: list[Any], config: Config) -> tuple[Any, list[dict[str, Any]]]:
    """The calibration dump, and one row per case: a timed case's instructions per call (the median
    over its builds), else its status and reason. The dumps come in the manifest's case order."""
    timed = [c for c in manifest["cases"] if c["status"] == "timed"]
    layouts, per_layout = config.layouts, config.calls_per_layout
    functions = manifest.get("python_functions")
    extra = 1 + len(functions["windows"]) if functions else 0  # their calibration, then a dump per window
    if len(dumps) != len(timed) * layouts + 1 + extra:
        raise CollectError(f"expected {len(timed) * layouts + 1 + extra} callgrind dumps (calibration + {len(timed)} "
                           f"cases x {layouts} builds{f' + {extra} for Python functions' if extra else ''}), "
                           f"found {len(dumps)}")
    calibration, counts = dumps[0], iter(dumps[1:])
    per_case = _function_counts(functions, dumps[len(timed) * layouts + 1:]) if functions else {}
    rows, index = [], 0  # index: the timed case's, as the windows name it
    for case in manifest["cases"]:
        row = {**case["key"], "driver": "python", "metric": METRIC, "unit": UNIT}
        if row.get("op_source"):  # the op's file and name; its source digest goes to env (user_op_digests)
            row["op_source"] = user_op_source(row["op_source"])
        if case["status"] == "timed":
            totals = [next(counts).instructions for _ in range(layouts)]
            row.update(status=None, instructions=round(statistics.median(t / per_layout for t in totals), 1),
                       layout_counts=[round(t / per_layout, 1) for t in totals], total=sum(totals),
                       calls=per_layout * layouts)
            if functions:
                row["python_functions"] = per_case.get(index, {})
            index += 1
        else:
            row.update(status=case["status"], reason=case["reason"], instructions=None)
        rows.append(row)
    return calibration, rows


def _function_counts(functions: dict[str, Any], dumps: list[Any]) -> dict[int, dict[str, dict[str, float]]]:
    """Per timed case (by its index): each declared Python function's inclusive instructions per
    call of the case, the wrapper's own taken off, and its outermost calls per call of the case."""
    calls = functions["calls"]
    wrapper = dumps[0].instructions / max(functions["calibration_calls"], 1)  # Ir a wrapped call adds
    out: dict[int, dict[str, dict[str, float]]] = {}
    for window, dump in zip(functions["windows"], dumps[1:]):
        outermost = window["outermost_calls"]
        out.setdefault(window["case"], {})[window["function"]] = {
            "instructions": round(max(dump.instructions - wrapper * outermost, 0.0) / calls, 1),
            "calls": round(outermost / calls, 3)}
    return out


def stage_op_files(specs: tuple[str, ...], src: Path) -> tuple[str, ...]:
    """Each --op file copied into the stage (src/user_ops/<i>/<its name>), and the specs naming the
    copies: the measured process loads a user's op from a fixed path, as it does the suite's code
    (a checkout elsewhere has path strings of other lengths, which move the heap: staging.py).
    Only the file travels: an op file that reads files beside it, or imports a module beside it
    that is not installed, cannot be counted this way (it fails in the measured process, which
    says so)."""
    from dbench.ops.declare import split_spec

    staged: list[str] = []
    for i, spec in enumerate(specs):
        path, name = split_spec(spec)
        target = src / "user_ops" / str(i) / path.name
        target.parent.mkdir(parents=True)
        shutil.copy2(path, target)
        staged.append(f"{target}:{name}" if name else str(target))
    return tuple(staged)


def extensions_dir() -> str:
    """Where torch.utils.cpp_extension builds (the child's HOME is not the user's)."""
    from torch.utils.cpp_extension import get_default_build_root

    return os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()


def digests_of_user_ops(manifest: dict[str, Any]) -> dict[str, str]:
    """{'my_ops.py:NAME': source digest} of the user ops counted: a check notes an edited file."""
    from dbench.ops.declare import split_origin

    return dict(split_origin(c["key"]["op_source"]) for c in manifest["cases"] if c["key"].get("op_source"))


def refuse_old_dumps(folder: Path | None) -> None:
    """A folder to keep dumps in must hold no earlier run's: numbered dumps of two runs cannot be
    told apart (by callgrind_annotate or by whoever reads them)."""
    if folder is not None and Path(folder).is_dir() and any(Path(folder).glob(f"{DUMP_STEM}.*")):
        raise CollectError(f"{folder} already holds callgrind dumps ({DUMP_STEM}.*) of an earlier run: "
                           "name an empty folder to keep this run's, or remove them")


def require_valgrind() -> str:
    """valgrind's path; CollectError naming the install step where it (or callgrind_control) is missing."""
    valgrind = shutil.which("valgrind")
    if valgrind is None or shutil.which("callgrind_control") is None:
        raise CollectError("valgrind (with callgrind_control) is not installed: apt-get install valgrind")
    return valgrind


def collect(config: Config, keep_dumps: Path | None = None, stage: Path | None = None) -> dict[str, Any]:
    """One run under callgrind; returns the counts document (rows keyed like result rows).
    keep_dumps: copy callgrind's dump files there (to read with callgrind_annotate); stage: where
    the code is staged (default staging.STAGE)."""
    refuse_old_dumps(keep_dumps)
    load_op_files(config)
    check_names(config)
    stage = private_folder(STAGE if stage is None else stage)  # a planted stage is refused first
    valgrind = require_valgrind()
    allocator = jemalloc() if config.allocator == "jemalloc" else None
    if config.allocator == "jemalloc" and allocator is None:
        raise CollectError("jemalloc is not installed (the counts are taken under it): apt-get install libjemalloc2, "
                           "or name the library in DBENCH_JEMALLOC")
    start = time.monotonic()
    digests = code_digests(REPO_ROOT)
    with staged(REPO_ROOT, build_dir(), stage) as (src, out_dir):  # build_dir: checked (bench/core/trust.py)
        manifest_path = out_dir / "manifest.json"
        child_config = replace(config, op_files=stage_op_files(config.op_files, src))
        cmd = valgrind_command(valgrind, out_dir, child_config, manifest_path)
        # The child's environment names the staged code only (no DBENCH_BUILD_DIR: src/build).
        env = child_environment(src, config.mask_cpu, allocator)
        env.pop("DBENCH_BUILD_DIR", None)
        if config.op_files:  # a user's op built at import (load_inline) is found where this process built it
            env["TORCH_EXTENSIONS_DIR"] = extensions_dir()
        proc = subprocess.run(cmd, cwd=src, env=env, stdin=subprocess.DEVNULL, preexec_fn=disable_aslr)
        if proc.returncode != 0 or not manifest_path.exists():
            log = (out_dir / "valgrind.log").read_text(errors="replace") if (out_dir / "valgrind.log").exists() else ""
            tail = "\n".join(log.strip().splitlines()[-8:])
            raise CollectError(f"the callgrind run failed (exit {proc.returncode})"
                               + (f"; valgrind log:\n{tail}" if tail else ""))
        manifest = json.loads(manifest_path.read_text())
        dumps, variants = read_dumps(out_dir, DUMP_STEM)
        if keep_dumps is not None:
            shutil.copytree(out_dir, keep_dumps, dirs_exist_ok=True)
    if code_digests(REPO_ROOT)["build_digest"] != digests["build_digest"]:
        raise CollectError("the native build changed during the collection: run it again")
    calibration, rows = _rows(manifest, [d for d in dumps if d.part > 0], config)
    about = _environment(config, manifest, digests, valgrind, allocator, sorted(variants))
    about["loop_instructions_per_call"] = round(calibration.instructions / config.calls_per_layout, 1)
    about["wall_s"] = round(time.monotonic() - start, 1)
    return {"schema": SCHEMA, "config": config.as_dict(), "env": about, "rows": rows}


def _environment(config: Config, manifest: dict[str, Any], digests: dict[str, Any], valgrind: str,
                 allocator: str | None, libc_variants: list[str]) -> dict[str, Any]:
    """What the counts depend on besides the code: the counts document's `env`."""
    user_digests = digests_of_user_ops(manifest)
    return {
        "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": manifest["torch"], "python": manifest["python"], "glibc": glibc_version(),
        "valgrind": valgrind_version(valgrind), "host_cpu": host_cpu(), **digests,
        "aslr_disabled": manifest.get("aslr_disabled"), "cpu_capability_seen": manifest["cpu_capability"],
        "torch_threads": manifest["num_threads"],
        "glibc_tunables": glibc_tunables(config.mask_cpu), "aten_cpu_capability": "default",
        "pythonhashseed": 0, "libc_variants": libc_variants,
        "allocator": {"name": config.allocator, "library": allocator,
                      "version": _package_version("libjemalloc2") if allocator else None},
        **({"injected": manifest["injected"]} if manifest.get("injected") else {}),
        **({"heap_pad": manifest["heap_pad"]} if manifest.get("heap_pad") else {}),
        **({"user_op_digests": user_digests} if user_digests else {}),
    }
