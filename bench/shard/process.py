"""Child processes of run.py (Child: start, watch, stop, classify; used by the shards and by the
repeated processes of bench/processes.py) and the sharded run: all shards at once, their progress,
interrupts, and the merged result file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from .command import REPO_ROOT, shard_command
from .merge import merge_results
from .plan import ShardUsageError, cpp_seconds, plan_shards, shard_cores, unit_seconds, variant_weights

LOG_TAIL_LINES = 20


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


class Child:
    """One child process of run.py: its command, where it writes, its log, and how it ended.

    Shards (all at once) and repeated processes (one after another, bench/processes.py) both run
    their children through this class and the functions below."""

    def __init__(self, index: int, name: str, command: list[str], out_dir: Path, log: Path, *,
                 describe: str = "", env: Mapping[str, str] | None = None, device: str = "",
                 variants: tuple[str, ...] = (), cpp: bool = False) -> None:
        self.index, self.name, self.command, self.out_dir, self.log = index, name, command, out_dir, log
        self.describe, self.env = describe, dict(env or {})  # env: extra variables for this child only
        self.device, self.variants, self.cpp = device, variants, cpp
        self.proc: subprocess.Popen[bytes] | None = None
        self.start = self.end = 0.0
        self.status: str | None = None  # None while running (or not started)
        self.result: Path | None = None
        self.mtime = 0.0
        self.rounds_done = 0

    @property
    def seconds(self) -> float:
        return (self.end or time.perf_counter()) - self.start if self.start else 0.0

    def label(self) -> str:
        return self.name


def _shard(index: int, device: str, variants: tuple[str, ...], command: list[str], out_dir: Path, log: Path,
           cpp: bool) -> Child:
    return Child(index, f"shard {index} ({device})", command, out_dir, log, device=device, variants=variants,
                 cpp=cpp, describe=", ".join(variants) + (" + C++ driver" if cpp else ""))


def start_child(child: Child, repo_root: Path = REPO_ROOT) -> None:
    """Start `child`, its stdout and stderr into its log (the command line first)."""
    child.out_dir.mkdir(parents=True, exist_ok=True)
    child.log.parent.mkdir(parents=True, exist_ok=True)
    with open(child.log, "wb") as log:
        log.write((" ".join(child.command) + "\n").encode())
        log.flush()
        child.start = time.perf_counter()
        # Own session: a Ctrl-C at the terminal reaches the parent only, which
        # forwards exactly one SIGTERM to each child (one graceful stop each).
        child.proc = subprocess.Popen(child.command, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root,
                                      env={**os.environ, "PYTHONUNBUFFERED": "1", **child.env},
                                      start_new_session=True)


def kill_children(children: Sequence[Child], console: Any) -> None:
    """A second Ctrl-C: kill what still runs, then classify every started child."""
    for s in children:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.kill()
    for s in children:
        if s.proc is not None:
            s.proc.wait()
            finish_child(s, console, interrupted=True)


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
    show: Callable[[list[dict[str, Any]], dict[str, Any], str], None],
    repo_root: Path = REPO_ROOT,
) -> int:
    """Run the shards as child processes of run.py, merge, write, print; returns the exit status.

    show(rows, env, note) prints the merged table (run.py passes the console table).

    Each child writes into <json_path stem>.shards/shard-<i>/ and logs its
    stdout and stderr to <json_path stem>.shards/shard-<i>.log; both are kept.
    Raises ShardUsageError, before starting anything, when the shards cannot
    be pinned to different cores.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from bench.results import write_result

    n = len(devices)
    baselines = scenario.baseline_variants
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
    shards: list[Child] = []
    for i, (device, subset) in enumerate(zip(devices, plan)):
        out_dir = work / f"shard-{i}"
        with_cpp = cpp and i == 0
        command = shard_command(argv, i, n, device, out_dir, subset, cpp=with_cpp, options=options)
        shards.append(_shard(i, device, subset, command, out_dir, work / f"shard-{i}.log", with_cpp))
    where = "GPUs" if on_gpu else "CPU processes"
    console.print(f"[bold]{scenario.name}[/bold]: {n} shards on {n} {where} ({', '.join(devices)}), "
                  f"{rounds} rounds; logs and shard results in {work}")
    for s in shards:
        cores = shard_cores(allowed, s.index, pin_cores) if pin_cores > 0 and allowed else None
        console.print(f"  {s.label()}: {', '.join(v for v in s.variants)}"
                      f"{' + C++ driver' if s.cpp else ''}{f' · cores {cores}' if cores else ''}")

    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    interrupted = False
    previous_sigterm = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for s in shards:
            start_child(s, repo_root)
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
                wait_children(shards, progress, tasks, console)
            except KeyboardInterrupt:
                interrupted = True
                console.print("[yellow]interrupted: stopping the shards (Ctrl-C again to kill them)[/yellow]")
                stop_children(shards, console)
                wait_children(shards, progress, tasks, console, interrupted=True)
    except KeyboardInterrupt:  # second Ctrl-C (or one during the spawns)
        interrupted = True
        kill_children(shards, console)
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
            "log": rel(s.log, repo_root),
            "result": rel(s.result, repo_root) if s.result else None,
        })
    if all(d is None for d in docs):
        console.print(f"[red]no shard wrote a result; nothing merged[/red] (the shards' logs: {rel(work, repo_root)})")
        write_result(json_path, {"scenario": scenario.name, "status": "failed", "config": {"shards": n},
                                 "env": {"command": " ".join(["run.py", *argv]), "shards": meta},
                                 "error": "no shard wrote a result", "rows": []})
        return exit_code(shards, interrupted, [])
    merged = merge_results(docs, meta)
    merged["config"]["wall_seconds"] = round(wall, 2)
    merged["env"]["command"] = " ".join(["run.py", *argv])
    csv_path = write_result(json_path, merged)

    note = scenario.table_note
    if n > 1:
        note += f" Sharded over {n} processes: each delta is against the baseline timed in its own shard."
    show(merged["rows"], merged["env"], note)
    for w in merged["env"].get("shard_warnings", []):
        console.print(f"[yellow]warning:[/yellow] {w}")
    per_shard = ", ".join(f"{s.index}: {s.seconds:.1f} s" for s in shards)
    console.print(f"{merged['status']}: {n} shards, {merged['config']['rounds_done']} rounds, "
                  f"wall-clock {wall:.1f} s for the sharded run (shards {per_shard})")
    console.print(f"wrote {rel(json_path, repo_root)} and {csv_path.name}")
    return exit_code(shards, interrupted, merged["rows"])


def rel(path: Path, root: Path) -> str:
    path = Path(path)
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def exit_code(shards: Sequence[Child], interrupted: bool, rows: Sequence[Mapping[str, Any]]) -> int:
    failed = [s for s in shards if s.status == "failed"]
    if failed:
        codes = [s.proc.returncode for s in failed if s.proc is not None and s.proc.returncode not in (0, 130, None)]
        return codes[0] if codes and codes[0] > 0 else 1
    if interrupted or any(s.status == "interrupted" for s in shards):
        return 130
    return 1 if any(r.get("status") == "failed" for r in rows) else 0


def poll_progress(s: Child, progress: Any, task: Any) -> None:
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


def finish_child(s: Child, console: Any, interrupted: bool = False) -> None:
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
                  + (f" — {s.describe}" if s.describe else ""))
    if s.status == "failed":
        console.print(f"[red]{s.label()} failed; last lines of {s.log}:[/red]")
        console.print(log_tail(s.log), markup=False, highlight=False)


def wait_children(shards: Sequence[Child], progress: Any, tasks: Mapping[int, Any], console: Any,
          interrupted: bool = False, poll_seconds: float = 0.5) -> None:
    while True:
        running = 0
        for s in shards:
            if s.proc is None or s.status is not None:
                continue
            if s.proc.poll() is None:
                running += 1
                poll_progress(s, progress, tasks[s.index])
            else:
                poll_progress(s, progress, tasks[s.index])
                finish_child(s, console, interrupted)
                progress.update(tasks[s.index], description=f"{s.label()} {s.status}")
        progress.refresh()
        if not running:
            return
        time.sleep(poll_seconds)


def stop_children(shards: Sequence[Child], console: Any, grace_seconds: float = 30.0) -> None:
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
