"""Sharded runs: one table, its cases spread over several processes (one per GPU).

``run.py --gpus all|N`` splits the variants of a run over N child processes,
child i running ``run.py`` itself with ``--device cuda:i`` and its share of the
variants, pinned to its own CPU cores (``--pin-offset i``). The children are
independent (no NCCL, nothing shared); the parent waits for them, merges their
result files into one and prints the same table a one-GPU run prints.
``run.py --shards N`` is the CPU form of the same mechanism (N processes on the
CPU, each pinned to different cores), used to test it on machines without GPUs.

Plan: the non-baseline variants are spread over the shards by a cost weight
(the number of cases the variant times: a differentiable variant runs in three
modes, the others in inference only); every shard also runs the baseline
variants (boundary: ``raw`` and ``function_raw``), so every paired delta is
computed in one process, against a baseline timed in the same rounds.

Merge (``merge_results``):

* ``rows``: every shard's rows, each with ``shard`` (the shard's index) and
  ``gpu_index`` (the CUDA device index of the row, ``null`` for CPU shards).
  Rows are unique per (scenario, op, variant, mode, driver, metric), in the
  order a one-process run writes them, so every reader of result files
  (analysis.table, analysis.compare, the CSV) works unchanged.
* The baseline rows of every shard but the first (shard 0 when it produced a
  result) are kept, whole, under ``duplicate_baseline_rows``, each marked
  ``"duplicate_baseline": true``: a row of shard k is paired with shard k's
  baseline, and its samples are needed to re-derive those deltas. They are
  not in ``rows`` because a key that appears twice there would be joined
  twice by analysis.compare and shown once, arbitrarily, by the table.
* ``status``: ``complete`` only when every shard completed; ``incomplete``
  when a shard failed (its rows, if it wrote any, are kept); else
  ``interrupted``.
* ``config``: shard 0's, with ``rounds_done`` and ``gpu_rounds_done`` the
  minimum over the shards, ``seconds`` the longest shard's CPU pass,
  ``shards`` N and (run.py) ``wall_seconds`` the sharded run's wall-clock.
* ``env``: shard 0's, with ``device`` listing every shard's device,
  ``pinned_cpu`` the union of the shards' cores, ``gpu_index`` null when the
  shards ran on several GPUs, and ``shards``: one entry per shard (index,
  gpu_index, device, variants, seconds (the child process, start to exit),
  rounds_seconds, status, rounds_done, pinned_cpu, speed_probe (its probe's
  median), returncode, command, log, result).
* ``speed_probe``: shard 0's (bench/probe.py).

Interrupting the parent (Ctrl-C, SIGTERM) sends SIGTERM to every child, which
run.py turns into a stop after the current round; the parent then merges what
the children wrote (status ``interrupted``, exit 130). The children run in
their own session, so a terminal's Ctrl-C reaches them only through the
parent; a parent killed with SIGKILL leaves them running to completion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_PY = REPO_ROOT / "run.py"
BOUNDARY_BASELINES: tuple[str, ...] = ("raw", "function_raw")  # scenarios/boundary.py BASELINE
# Options the parent sets for every child (a value follows each); the child's
# own --device, --variants, --out and --pin-offset replace any the user gave.
REWRITTEN_OPTIONS = ("--gpus", "--shards", "--device", "--variants", "--out", "--pin-offset")
ROW_IDENTITY = ("scenario", "op", "variant", "mode", "driver", "metric")
CPP_BENCHMARKS_PER_OP = 7  # bench/cpp driver: direct, typed, boxed, stable (inference) + autograd x 3 modes
LOG_TAIL_LINES = 20


class ShardUsageError(ValueError):
    """A --gpus / --shards request that cannot be honoured (run.py exits 2 with the message)."""


# ---------------------------------------------------------------------------
# Which shards, on which devices.


def resolve_shards(gpus: str | None, shards: int | None, device: str | None, cuda_count: int) -> list[str]:
    """The device of every shard ([] when neither --gpus nor --shards was given)."""
    if gpus is not None and shards is not None:
        raise ShardUsageError("--gpus and --shards are two forms of one option: give one")
    if gpus is not None:
        if device not in (None, "cuda"):
            raise ShardUsageError(f"--gpus runs shard i on cuda:i; drop --device {device}")
        if cuda_count < 1:
            raise ShardUsageError("--gpus: CUDA is not available on this machine (use --shards N for CPU shards)")
        if gpus == "all":
            n = cuda_count
        else:
            try:
                n = int(gpus)
            except ValueError:
                raise ShardUsageError(f"--gpus takes 'all' or a number of GPUs, got {gpus!r}") from None
            if n < 1:
                raise ShardUsageError(f"--gpus must be at least 1, got {n}")
            if n > cuda_count:
                raise ShardUsageError(f"--gpus {n}: this machine has {cuda_count} CUDA device(s) "
                                      f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})")
        return [f"cuda:{i}" for i in range(n)]
    if shards is not None:
        if device not in (None, "cpu"):
            raise ShardUsageError(f"--shards is the CPU form of --gpus and runs on the CPU only; "
                                  f"for {device} use --gpus")
        if shards < 1:
            raise ShardUsageError(f"--shards must be at least 1, got {shards}")
        return ["cpu"] * shards
    return []


def baseline_variants(scenario: str) -> tuple[str, ...]:
    """Variants whose cases other variants' cases are paired with (every shard runs them)."""
    if scenario == "boundary":
        from scenarios.boundary import BASELINE

        return tuple(dict.fromkeys(BASELINE.values()))
    return ()  # compile pairs each case with the same variant's eager case


# ---------------------------------------------------------------------------
# The plan.


def default_weight(variant: str) -> float:
    """Cases a variant times per op in the boundary scenario: 3 with autograd, else 1 (inference only)."""
    from ops.variants import MODES, SPECS

    spec = SPECS.get(variant)
    return float(len(MODES)) if spec is None or spec.differentiable else 1.0


def variant_weights(variants: Sequence[str], ops: Sequence[str], device: str, modes: Sequence[str]) -> dict[str, float]:
    """Runnable cases per variant on `device` (a variant this machine lacks weighs 0)."""
    from ops.catalog import OPS
    from ops.variants import MODES, SPECS, Variant, unavailable_reason

    weights = {}
    for name in variants:
        spec = SPECS.get(name)
        if spec is None or not ops:
            weights[name] = default_weight(name) * max(1, len(ops))
            continue
        try:
            reason = unavailable_reason(spec, device)
        except Exception:  # noqa: BLE001  # e.g. the native build is missing: the children will say so
            reason = None
        v = Variant(spec, OPS[ops[0]], None, reason)
        runs = sum(v.na_reason(m if m in MODES else MODES[0]) is None for m in modes)
        weights[name] = float(runs * len(ops))
    return weights


def plan_shards(
    variants: Sequence[str],
    n: int,
    baselines: Sequence[str] = BOUNDARY_BASELINES,
    weights: Mapping[str, float] | None = None,
    preload: Sequence[float] | None = None,
) -> list[tuple[str, ...]]:
    """Split `variants` over at most `n` shards; each shard is a tuple of variant names.

    The non-baseline variants go to exactly one shard each, heaviest first to
    the least-loaded shard (ties: lower weight index, then lower shard index),
    so the loads differ by at most one variant's weight. Every shard also gets
    the selected baselines, so pairing stays within a process. `preload[i]` is
    work shard i already has (e.g. the C++ driver section), in weight units.
    There are never more shards than non-baseline variants (at least one shard);
    each shard lists its variants in the order of `variants`. Deterministic.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    variants = list(dict.fromkeys(variants))
    base = [v for v in variants if v in set(baselines)]
    rest = [v for v in variants if v not in set(baselines)]
    k = max(1, min(n, len(rest)))
    weight = {v: float(weights[v]) if weights is not None and v in weights else default_weight(v) for v in rest}
    loads = [float(preload[i]) if preload is not None and i < len(preload) else 0.0 for i in range(k)]
    members: list[set[str]] = [set() for _ in range(k)]
    for index, v in sorted(enumerate(rest), key=lambda iv: (-weight[iv[1]], iv[0])):
        target = min(range(k), key=lambda s: (loads[s], s))
        members[target].add(v)
        loads[target] += weight[v]
    return [tuple(v for v in variants if v in set(base) or v in members[s]) for s in range(k)]


def shard_loads(plan: Sequence[Sequence[str]], baselines: Sequence[str] = BOUNDARY_BASELINES,
                weights: Mapping[str, float] | None = None) -> list[float]:
    """Weight of the non-baseline variants of every shard (what plan_shards balances)."""
    return [sum(float(weights[v]) if weights is not None and v in weights else default_weight(v)
                for v in shard if v not in set(baselines)) for shard in plan]


def unit_seconds(rounds: int, block_seconds: float, warmup_seconds: float, gpu_rounds: int = 0) -> float:
    """Rough seconds one runnable case costs a shard (rounds, warm-up, GPU pass; runner overhead ~1.6x)."""
    return 1.6 * block_seconds * (rounds + gpu_rounds) + warmup_seconds + 0.01


def cpp_seconds(n_ops: int, repetitions: int, min_time: float) -> float:
    """Rough seconds of the C++ driver section for n_ops ops."""
    return 1.3 * n_ops * CPP_BENCHMARKS_PER_OP * repetitions * min_time + 1.0


def shard_cores(allowed: Sequence[int], index: int, pin_cores: int) -> list[int]:
    """The cores process `index` pins to with --pin-cores P --pin-offset index: the P allowed cores that
    end index x P cores from the last one (run.py pin_cpus pins to these)."""
    cpus = sorted(allowed)
    end = len(cpus) - index * pin_cores
    if pin_cores <= 0:
        return []
    if end - pin_cores < 0:
        raise ShardUsageError(f"shard {index} needs cores {index * pin_cores + 1}..{(index + 1) * pin_cores} "
                              f"from the end, but only {len(cpus)} are allowed")
    return cpus[end - pin_cores:end]


# ---------------------------------------------------------------------------
# The child command line.


def _resolve_option(name: str, options: Iterable[str]) -> str:
    """argparse's view of an option token: exact, else a unique prefix of a known option."""
    options = list(options)
    if name in options or not options:
        return name
    matches = [o for o in options if o.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def shard_command(
    argv: Sequence[str],
    shard_index: int,
    n: int,
    device: str,
    out_dir: Path | str,
    variants: Sequence[str],
    *,
    cpp: bool = True,
    options: Iterable[str] = (),
    python: str = sys.executable,
    script: Path | str = RUN_PY,
) -> list[str]:
    """The command line of child `shard_index` of `n`: the parent's arguments, with
    --gpus/--shards removed and --device, --variants, --out, --pin-offset replaced
    (``--opt value`` and ``--opt=value`` forms, and abbreviations when `options`
    lists the parser's option strings); ``--no-cpp`` added when `cpp` is False."""
    if not 0 <= shard_index < n:
        raise ValueError(f"shard index {shard_index} out of range for {n} shards")
    options = list(options)
    kept: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":  # everything after is positional: keep as is
            kept.extend(tokens[i:])
            break
        if token.startswith("--"):
            name, eq, _ = token.partition("=")
            if _resolve_option(name, options) in REWRITTEN_OPTIONS:
                i += 1 if eq else 2
                continue
        kept.append(token)
        i += 1
    if not cpp and not any(_resolve_option(t, options) == "--no-cpp" for t in kept if t.startswith("--")):
        kept.append("--no-cpp")
    return [python, str(script), *kept, "--device", device, "--variants", ",".join(variants),
            "--out", str(out_dir), "--pin-offset", str(shard_index)]


# ---------------------------------------------------------------------------
# Merging.


def _gpu_index(device: Any, env: Mapping[str, Any]) -> int | None:
    text = str(device or "")
    if not text.startswith("cuda"):
        return None
    _, _, index = text.partition(":")
    if index.isdigit():
        return int(index)
    value = env.get("gpu_index")
    return int(value) if isinstance(value, int) else 0


def _identity(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(k) if k != "driver" else row.get(k) or "python" for k in ROW_IDENTITY)


def _row_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One-process order: Python CPU rows, Python GPU rows, then other drivers; op, variant, mode within."""
    from ops.variants import MODES, VARIANT_NAMES

    ops: dict[Any, int] = {}
    seen: dict[Any, int] = {}
    modes: dict[Any, int] = {m: i for i, m in enumerate(MODES)}
    for r in rows:
        ops.setdefault(r.get("op"), len(ops))
        seen.setdefault(r.get("variant"), len(seen))
        modes.setdefault(r.get("mode"), len(modes))
    variant_index = {v: i for i, v in enumerate(VARIANT_NAMES)}

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        driver = r.get("driver") or "python"
        group = 0 if driver == "python" and r.get("metric") == "cpu_us" else 1 if driver == "python" else 2
        v = r.get("variant")
        return group, ops[r.get("op")], variant_index.get(v, len(variant_index) + seen[v]), modes[r.get("mode")]

    return sorted(rows, key=key)  # stable: metrics of one case keep their order


def merge_results(
    docs: Sequence[Mapping[str, Any] | None],
    meta: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """One result document from the shards' documents (docs[i] is shard i's; None when it wrote none).

    meta[i] may carry what only the parent knows about shard i (variants,
    seconds, status, command, log, result...): it goes into env["shards"][i],
    and its "status" (complete / interrupted / failed) wins over the document's.
    See the module docstring for the merge rules.
    """
    meta = list(meta or [])
    meta += [{}] * (len(docs) - len(meta))
    present = [(i, d) for i, d in enumerate(docs) if d is not None]
    if not present:
        raise ValueError("no shard wrote a result")
    first = present[0][1]

    rows: list[dict[str, Any]] = []
    duplicates: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    shard_info: list[dict[str, Any]] = []
    warnings: list[str] = []
    statuses: list[str] = []
    for i, doc in enumerate(docs):
        m = dict(meta[i])
        env = dict(doc.get("env", {})) if doc else {}
        config = dict(doc.get("config", {})) if doc else {}
        status = m.pop("status", None) or (None if doc is None else
                                           "complete" if doc.get("status") == "complete" else "interrupted")
        status = status or "failed"
        statuses.append(status)
        device = m.pop("device", None) or env.get("device")
        doc_rows = list(doc.get("rows", [])) if doc else []
        labels = {f"{r.get('op')}/{r.get('variant')}/{r.get('mode')}" for r in doc_rows
                  if (r.get("driver") or "python") == "python"}
        for row in doc_rows:
            row = {**row, "shard": i, "gpu_index": _gpu_index(row.get("device", device), env)}
            if (row.get("driver") or "python") == "python" and row.get("baseline") and row["baseline"] not in labels:
                warnings.append(f"shard {i}: {row['op']}/{row['variant']}/{row['mode']} is paired with "
                                f"{row['baseline']}, which that shard did not run")
            ident = _identity(row)
            if ident in seen:
                duplicates.append({**row, "duplicate_baseline": True})
            else:
                seen.add(ident)
                rows.append(row)
        variants = m.pop("variants", None) or list(dict.fromkeys(
            r.get("variant") for r in doc_rows if (r.get("driver") or "python") == "python"))
        shard_info.append({
            "shard": i,
            "gpu_index": _gpu_index(device, env),
            "device": device,
            "variants": list(variants),
            "seconds": m.pop("seconds", config.get("seconds")),  # the child process, start to exit
            "rounds_seconds": config.get("seconds"),  # its CPU pass (config.seconds of a one-process run)
            "status": status,
            "rounds_done": config.get("rounds_done"),
            "gpu_rounds_done": config.get("gpu_rounds_done"),
            "stop_reason": config.get("stop_reason"),
            "pinned_cpu": env.get("pinned_cpu"),
            "speed_probe": (doc.get("speed_probe") or {}).get("median") if doc else None,
            **m,
        })

    def shard_min(key: str) -> Any:
        values = [d.get("config", {}).get(key) for _, d in present]
        values = [v for v in values if v is not None]
        return min(values) if values else None

    config = dict(first.get("config", {}))
    config.update(rounds_done=shard_min("rounds_done"), shards=len(docs))
    if "gpu_rounds_done" in config:
        config["gpu_rounds_done"] = shard_min("gpu_rounds_done")
    seconds = [s["rounds_seconds"] for s in shard_info if isinstance(s["rounds_seconds"], (int, float))]
    if seconds:
        config["seconds"] = max(seconds)
    reasons = list(dict.fromkeys(d.get("config", {}).get("stop_reason") for _, d in present))
    if "stop_reason" in config:
        config["stop_reason"] = "; ".join(str(r) for r in reasons)

    env = dict(first.get("env", {}))
    devices = list(dict.fromkeys(s["device"] for s in shard_info if s["device"]))
    env["device"] = ",".join(devices) if devices else env.get("device")
    cores = sorted({c for s in shard_info for c in (s["pinned_cpu"] or [])})
    env["pinned_cpu"] = cores or None
    gpus = {s["gpu_index"] for s in shard_info if s["gpu_index"] is not None}
    if len(gpus) > 1:
        env["gpu_index"] = None
    env["shards"] = shard_info
    if warnings:
        env["shard_warnings"] = warnings

    status = ("complete" if all(s == "complete" for s in statuses)
              else "incomplete" if "failed" in statuses else "interrupted")
    return {
        "scenario": first.get("scenario"),
        "status": status,
        "config": config,
        "env": env,
        "speed_probe": first.get("speed_probe"),  # each shard's median: env.shards[i].speed_probe
        "rows": _row_order(rows),
        "duplicate_baseline_rows": duplicates,
    }


# ---------------------------------------------------------------------------
# Running the shards (run.py --gpus / --shards).


def latest_result(folder: Path) -> Path | None:
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return files[-1] if files else None


def read_doc(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    # rich progress bars redraw with carriage returns: keep the last state of each line
    out = [line.rsplit("\r", 1)[-1] for line in text.splitlines()]
    return "\n".join(line for line in out[-lines:])


class _Shard:
    def __init__(self, index: int, device: str, variants: tuple[str, ...], command: list[str],
                 out_dir: Path, log: Path, cpp: bool) -> None:
        self.index, self.device, self.variants, self.command = index, device, variants, command
        self.out_dir, self.log, self.cpp = out_dir, log, cpp
        self.proc: subprocess.Popen[bytes] | None = None
        self.start = self.end = 0.0
        self.status: str | None = None  # None while running
        self.result: Path | None = None
        self.mtime = 0.0
        self.rounds_done = 0

    @property
    def seconds(self) -> float:
        return (self.end or time.perf_counter()) - self.start if self.start else 0.0

    def label(self) -> str:
        return f"shard {self.index} ({self.device})"


def run_sharded(
    *,
    argv: Sequence[str],
    options: Iterable[str],
    scenario: Any,
    ops: Sequence[str],
    variants: Sequence[str],
    devices: Sequence[str],
    args: Any,
    json_path: Path,
    console: Any,
    repo_root: Path = REPO_ROOT,
) -> int:
    """Run the shards as child processes of run.py, merge, write, print; returns the exit status.

    Each child writes into <json_path stem>.shards/shard-<i>/ and logs its
    stdout and stderr to <json_path stem>.shards/shard-<i>.log; both are kept.
    Raises ShardUsageError, before starting anything, when the shards cannot
    be pinned to different cores.
    """
    import pandas as pd
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from analysis.table import print_tables
    from bench.results import write_result

    n = len(devices)
    baselines = baseline_variants(scenario.name)
    rounds = args.rounds  # every run option arrives resolved (bench/cli.py DEFAULTS)
    block_s = args.block_ms / 1e3
    on_gpu = devices[0].startswith("cuda")
    gpu_rounds = args.gpu_rounds if on_gpu and args.gpu_timer != "off" else 0
    weights = variant_weights(variants, ops, devices[0], scenario.modes)
    cpp = scenario.name == "boundary" and not args.no_cpp
    preload = None
    if cpp:
        # The C++ driver section goes to shard 0, so it runs on cuda:0 as in a one-GPU run (the
        # driver does not make its device the current one), and counts there in case-equivalents.
        unit = unit_seconds(rounds, block_s, args.warmup_ms / 1e3, gpu_rounds)
        cpp_cost = cpp_seconds(len(ops), args.cpp_repetitions, args.cpp_min_time)
        preload = [cpp_cost / unit] + [0.0] * (n - 1)
    plan = plan_shards(variants, n, baselines, weights, preload)
    if len(plan) < n:
        selected_baselines = [v for v in variants if v in baselines]
        console.print(f"[yellow]{len(variants)} variant(s), {len(selected_baselines)} of them baselines: "
                      f"{len(plan)} shard(s) instead of {n}[/yellow]")
    devices = list(devices[:len(plan)])
    n = len(plan)

    pin_cores = 0 if args.no_pin else args.pin_cores
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if pin_cores > 0 and allowed and n * pin_cores > len(allowed):
        raise ShardUsageError(f"{n} shards x --pin-cores {pin_cores} need {n * pin_cores} cores, {len(allowed)} "
                              f"are allowed: use fewer shards, a smaller --pin-cores, or --no-pin")

    work = json_path.parent / f"{json_path.stem}.shards"
    shards: list[_Shard] = []
    for i, (device, subset) in enumerate(zip(devices, plan)):
        out_dir = work / f"shard-{i}"
        with_cpp = cpp and i == 0
        command = shard_command(argv, i, n, device, out_dir, subset, cpp=with_cpp, options=options)
        shards.append(_Shard(i, device, subset, command, out_dir, work / f"shard-{i}.log", with_cpp))
    where = "GPUs" if on_gpu else "CPU processes"
    console.print(f"[bold]{scenario.name}[/bold]: {n} shards on {n} {where} ({', '.join(devices)}), "
                  f"{rounds} rounds; logs and shard results in {work}")
    for s in shards:
        cores = shard_cores(allowed, s.index, pin_cores) if pin_cores > 0 and allowed else None
        console.print(f"  {s.label()}: {', '.join(v for v in s.variants)}"
                      f"{' + C++ driver' if s.cpp else ''}{f' · cores {cores}' if cores else ''}")

    work.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    interrupted = False
    previous_sigterm = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for s in shards:
            s.out_dir.mkdir(parents=True, exist_ok=True)
            with open(s.log, "wb") as log:
                log.write((" ".join(s.command) + "\n").encode())
                log.flush()
                s.start = time.perf_counter()
                # Own session: a Ctrl-C at the terminal reaches the parent only, which
                # forwards exactly one SIGTERM to each child (one graceful stop each).
                s.proc = subprocess.Popen(s.command, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root,
                                          env=child_env, start_new_session=True)
        if pin_cores > 0 and allowed:  # after the spawns: children inherit the full set and pin themselves
            spare = sorted(set(allowed) - {c for s in shards for c in shard_cores(allowed, s.index, pin_cores)})
            if spare:
                os.sched_setaffinity(0, set(spare))
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        # One bar per shard (rounds done, from its checkpoint file), redrawn at each poll
        # (no refresh thread); a line per shard as it finishes.
        with Progress(*columns, console=console, auto_refresh=False, transient=True) as progress:
            tasks = {s.index: progress.add_task(f"{s.label()} starting", total=rounds) for s in shards}
            try:
                _wait(shards, progress, tasks, console)
            except KeyboardInterrupt:
                interrupted = True
                console.print("[yellow]interrupted: stopping the shards (Ctrl-C again to kill them)[/yellow]")
                _stop(shards, console)
                _wait(shards, progress, tasks, console, interrupted=True)
    except KeyboardInterrupt:  # second Ctrl-C (or one during the spawns)
        interrupted = True
        for s in shards:
            if s.proc is not None and s.proc.poll() is None:
                s.proc.kill()
        for s in shards:
            if s.proc is not None:
                s.proc.wait()
            _finish(s, console, interrupted=True)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    wall = time.perf_counter() - start

    docs = []
    meta = []
    for s in shards:
        s.result = latest_result(s.out_dir)
        docs.append(read_doc(s.result))
        meta.append({
            "variants": list(s.variants),
            "seconds": round(s.seconds, 2),
            "status": s.status or "failed",
            "returncode": None if s.proc is None else s.proc.returncode,
            "cpp": s.cpp,
            "command": " ".join(["run.py", *s.command[2:]]),
            "log": _rel(s.log, repo_root),
            "result": _rel(s.result, repo_root) if s.result else None,
        })
    if all(d is None for d in docs):
        console.print("[red]no shard wrote a result; nothing merged[/red]")
        return _exit_code(shards, interrupted, [])
    merged = merge_results(docs, meta)
    merged["config"]["wall_seconds"] = round(wall, 2)
    merged["env"]["command"] = " ".join(["run.py", *argv])
    csv_path = write_result(json_path, merged)

    note = scenario.table_note
    if n > 1:
        note += f" Sharded over {n} processes: each delta is against the baseline timed in its own shard."
    print_tables(pd.DataFrame(merged["rows"]), merged["env"], console, note=note)
    for w in merged["env"].get("shard_warnings", []):
        console.print(f"[yellow]warning:[/yellow] {w}")
    per_shard = ", ".join(f"{s.index}: {s.seconds:.1f} s" for s in shards)
    console.print(f"{merged['status']}: {n} shards, {merged['config']['rounds_done']} rounds, "
                  f"wall-clock {wall:.1f} s for the sharded run (shards {per_shard})")
    console.print(f"wrote {_rel(json_path, repo_root)} and {csv_path.name}")
    return _exit_code(shards, interrupted, merged["rows"])


def _rel(path: Path, root: Path) -> str:
    path = Path(path)
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _exit_code(shards: Sequence[_Shard], interrupted: bool, rows: Sequence[Mapping[str, Any]]) -> int:
    failed = [s for s in shards if s.status == "failed"]
    if failed:
        codes = [s.proc.returncode for s in failed if s.proc is not None and s.proc.returncode not in (0, 130, None)]
        return codes[0] if codes and codes[0] > 0 else 1
    if interrupted or any(s.status == "interrupted" for s in shards):
        return 130
    return 1 if any(r.get("status") == "failed" for r in rows) else 0


def _poll_progress(s: _Shard, progress: Any, task: Any) -> None:
    path = latest_result(s.out_dir)
    if path is None:
        return
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return
    if mtime == s.mtime:
        return
    s.mtime = mtime
    doc = read_doc(path)
    if doc is None:
        return
    s.rounds_done = int(doc.get("config", {}).get("rounds_done") or 0)
    total = int(doc.get("config", {}).get("rounds") or 1)
    phase = "rounds" if s.rounds_done < total else "GPU / C++ pass"
    progress.update(task, completed=s.rounds_done, total=total, description=f"{s.label()} {phase}")


def _finish(s: _Shard, console: Any, interrupted: bool = False) -> None:
    """Classify a child that has exited and print its line."""
    if s.status is not None:
        return
    s.end = time.perf_counter()
    rc = None if s.proc is None else s.proc.returncode
    s.result = latest_result(s.out_dir)
    doc = read_doc(s.result)
    doc_status = None if doc is None else doc.get("status")
    if doc_status == "complete" and rc in (0, 1):  # 1: some case failed its pre-flight check (in the table)
        s.status = "complete"
    elif interrupted or rc in (130, -signal.SIGINT, -signal.SIGTERM):
        s.status = "interrupted"
    else:
        s.status = "failed"
    rounds = doc.get("config", {}).get("rounds_done") if doc else None
    colour = {"complete": "green", "interrupted": "yellow", "failed": "red"}[s.status]
    what = f"{rounds} rounds" if rounds is not None else "no result"
    console.print(f"[{colour}]{s.label()} {s.status}[/{colour}] (exit {rc}): {what} in {s.seconds:.1f} s"
                  f" — {', '.join(s.variants)}{' + C++ driver' if s.cpp else ''}")
    if s.status == "failed":
        console.print(f"[red]{s.label()} failed; last lines of {s.log}:[/red]")
        console.print(log_tail(s.log), markup=False, highlight=False)


def _wait(shards: Sequence[_Shard], progress: Any, tasks: Mapping[int, Any], console: Any,
          interrupted: bool = False, poll_seconds: float = 0.5) -> None:
    while True:
        running = 0
        for s in shards:
            if s.proc is None or s.status is not None:
                continue
            if s.proc.poll() is None:
                running += 1
                _poll_progress(s, progress, tasks[s.index])
            else:
                _poll_progress(s, progress, tasks[s.index])
                _finish(s, console, interrupted)
                progress.update(tasks[s.index], description=f"{s.label()} {s.status}")
        progress.refresh()
        if not running:
            return
        time.sleep(poll_seconds)


def _stop(shards: Sequence[_Shard], console: Any, grace_seconds: float = 30.0) -> None:
    """SIGTERM to every running child: run.py turns it into KeyboardInterrupt, so the child drops its
    unfinished round and writes what it has (before run.py installs that handler, SIGTERM just ends it)."""
    for s in shards:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.send_signal(signal.SIGTERM)
    deadline = time.perf_counter() + grace_seconds
    for s in shards:
        if s.proc is None:
            continue
        try:
            s.proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            console.print(f"[red]{s.label()} did not stop within {grace_seconds:.0f} s: killed[/red]")
            s.proc.kill()
            s.proc.wait()
