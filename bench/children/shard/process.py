"""Child processes of run.py (Child: start, watch, stop, classify; used by the shards and by the
repeated processes of bench/children/processes.py) and the sharded run: all shards at once, their progress,
interrupts, and the merged result file."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, TypeVar

from dbench.bench.io.document import COMPANION_SUFFIXES
from dbench.bench.harness import common
from dbench.bench.harness.interrupts import stop_signals_held
from dbench.bench.harness.supervisor import die_with_parent  # no child outlives the run (also the command's own worker)
from dbench.bench.core.passes import Pass
from dbench.bench.core.trust import open_new_file
from dbench.bench.harness.options import RunOptions, child_command, write_child_options
from dbench.bench.children.shard.command import REPO_ROOT, RUN_PY, shard_options
from dbench.bench.io.merging import Pairing, merge
from dbench.bench.io.shard_merge import empty_merge
from dbench.bench.children.shard.plan import cpp_seconds, plan_shards, unit_seconds, variant_weights
from dbench.bench.harness.placement import ShardUsageError, shard_cores

Show = Callable[[dict[str, Any], str], None]  # (merged document, note) -> its tables printed

LOG_TAIL_LINES = 20
REASON_TAIL_LINES = 10  # of a failed child's output, kept in the merged document
T = TypeVar("T")


def latest_result(folder: Path) -> Path | None:
    """The newest result file of a child's folder (not a companion such as the C++ driver's JSON)."""
    files = sorted((p for p in folder.glob("*.json") if not p.name.endswith(COMPANION_SUFFIXES)),
                   key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
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


def last_line(text: str) -> str:
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


class Child:
    """One child process of run.py: its command, where it writes, its log, and how it ended.

    Shards (all at once) and repeated processes (one after another, bench/children/processes.py) both run
    their children through this class and the functions below."""

    def __init__(self, index: int, name: str, python: str, out_dir: Path, log: Path, *, options: RunOptions,
                 describe: str = "", env: Mapping[str, str] | None = None, device: str = "",
                 variants: tuple[str, ...] = (), cpp: bool = False) -> None:
        self.index, self.name, self.out_dir, self.log = index, name, out_dir, log
        # Its options go as a file beside its log (start_child writes it), never as a command line;
        # JSON, named without .json: a folder's result files are its *.json (bench/io/document.py).
        self.options, self.options_file = options, log.with_name(log.stem + ".options")
        self.command = child_command(python, RUN_PY, self.options_file)
        self.describe, self.env = describe, dict(env or {})  # env: extra variables for this child only
        self.device, self.variants, self.cpp = device, variants, cpp
        self.proc: subprocess.Popen[bytes] | None = None
        self.start = self.end = 0.0
        self.status: str | None = None  # None while running (or not started)
        self.result: Path | None = None
        self.mtime = 0.0
        self.rounds_done = 0
        self.reason: str | None = None  # why it failed: exit status and its output's last line

    @property
    def seconds(self) -> float:
        return (self.end or time.perf_counter()) - self.start if self.start else 0.0

    def label(self) -> str:
        return self.name

    def meta(self, root: Path) -> dict[str, Any]:
        """What the parent knows of this child, for the merged document (env.shards / env.processes)."""
        if self.status == "complete" and read_doc(self.result) is None:
            # Its result is gone since it ended (the output folder removed mid-run): a merge without
            # its data is not complete.
            self.status = "failed"
            self.reason = (f"its result in {rel(self.out_dir, root)} is gone or unreadable "
                           "(was the output folder removed?)")
        failed = self.status in (None, "failed") and self.proc is not None
        return {
            "name": self.name,
            "status": self.status or ("failed" if self.proc is not None else "not run"),
            "returncode": None if self.proc is None else self.proc.returncode,
            "seconds": round(self.seconds, 2),
            "command": " ".join(["run.py", *self.command[2:]]),
            "log": rel(self.log, root),
            "result": rel(self.result, root) if self.result else None,
            **({"reason": self.reason or "killed when the parent stopped",
                "tail": log_tail(self.log, REASON_TAIL_LINES)} if failed else {}),
        }


def _shard(index: int, device: str, variants: tuple[str, ...], options: RunOptions, out_dir: Path, log: Path,
           cpp: bool) -> Child:
    return Child(index, f"shard {index} ({device})", sys.executable, out_dir, log, options=options, device=device,
                 variants=variants, cpp=cpp, describe=", ".join(variants) + (" + C++ driver" if cpp else ""))


def _made_fresh(path: Path, make: Callable[[], T]) -> T:
    """make() (which creates `path`), with its OSError as a ResultWriteError naming `path`; a name
    already taken says it may have been planted (run.py prints it as one line)."""
    from dbench.bench.io.results import ResultWriteError

    try:
        return make()
    except FileExistsError:
        exc = FileExistsError(errno.EEXIST, "it is there already, and the run makes it fresh (another user may have "
                              "planted it, with links to files of yours): remove it, or use another --out")
        raise ResultWriteError(path, exc) from None
    except OSError as exc:
        raise ResultWriteError(path, exc) from None


def new_folder(path: Path, mode: int = 0o755) -> None:
    """Make the folder `path`, never using one that is there (no exist_ok): what the run writes in
    its children's folders must not land in a folder someone else made, through their links."""
    _made_fresh(path, lambda: os.mkdir(path, mode))


def start_child(child: Child, repo_root: Path = REPO_ROOT) -> None:
    """Start `child`, its stdout and stderr into its log (the command line first). Its paths are
    absolute (it runs in `repo_root`, not in the caller's folder), and it dies with this process.
    Its folder and log are made new, in the run's folder the caller made (new_folder); the log is
    never opened through a link (ResultWriteError when either is there already)."""
    new_folder(child.out_dir)
    _made_fresh(child.options_file, lambda: write_child_options(child.options, child.options_file))
    fd = _made_fresh(child.log, lambda: open_new_file(child.log))
    with os.fdopen(fd, "wb") as log:
        log.write((" ".join(child.command) + "\n").encode())
        log.flush()
        child.start = time.perf_counter()
        # Own session (so its own process group): a Ctrl-C at the terminal reaches the parent only,
        # which forwards exactly one SIGTERM to each child (one graceful stop each), and the group
        # (the child and what it starts) can be killed as one.
        # A stop signal is held while the child is forked: raised inside the fork's hooks it would be
        # swallowed ("Exception ignored"), and the run would go on. One that came meanwhile is handled
        # once the child is started (and known, so it is stopped with the others).
        with stop_signals_held():
            child.proc = subprocess.Popen(child.command, stdout=log, stderr=subprocess.STDOUT, cwd=repo_root,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1", **child.env},
                                          start_new_session=True, preexec_fn=die_with_parent())


def kill_group(child: Child) -> None:
    """SIGKILL the child's process group: the child, if it still runs, and anything it left running."""
    if child.proc is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.proc.pid, signal.SIGKILL)


def reap(children: Sequence[Child]) -> None:
    """However the parent leaves (its end, an interrupt, an error): no child, nor anything a child
    started, keeps running."""
    for s in children:
        kill_group(s)
    for s in children:
        if s.proc is not None:
            with contextlib.suppress(Exception):
                s.proc.wait(timeout=10)


def kill_children(children: Sequence[Child], console: Any) -> None:
    """A second Ctrl-C: kill what still runs, then classify every started child."""
    for s in children:
        if s.proc is not None and s.proc.poll() is None:
            kill_group(s)
    for s in children:
        if s.proc is not None:
            s.proc.wait()
            finish_child(s, console, interrupted=True)


def run_sharded(
    *,
    argv: Sequence[str],
    scenario: Any,
    ops: Sequence[str],
    variants: Sequence[str],
    devices: Sequence[str],
    options: RunOptions,
    json_path: Path,
    console: Any,
    show: Show,
    repo_root: Path = REPO_ROOT,
) -> int:
    """Run the shards as child processes of run.py, merge, write, print; returns the exit status.

    show(document, note) prints the merged table (run.py passes the console table).

    Each child writes into <json_path stem>.shards/shard-<i>/ and logs its
    stdout and stderr to <json_path stem>.shards/shard-<i>.log; both are kept.
    Raises ShardUsageError, before starting anything, when the shards cannot
    be pinned to different cores.
    """
    plan = _plan(scenario, ops, variants, devices, options, console)
    devices = list(devices[:len(plan)])
    pin_cores = options.pin_cores
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if pin_cores > 0 and allowed and len(plan) * pin_cores > len(allowed):
        raise ShardUsageError(f"{len(plan)} shards x --pin-cores {pin_cores} need {len(plan) * pin_cores} cores, "
                              f"{len(allowed)} are allowed: use fewer shards, a smaller --pin-cores, or --no-pin")
    json_path = Path(json_path).absolute()  # the children run elsewhere: every path they get is absolute
    work = json_path.parent / f"{json_path.stem}.shards"
    cpp = scenario.makes(Pass.CPP_DRIVER) and not options.no_cpp
    shards = [_shard(i, device, subset, shard_options(options, i, device, work / f"shard-{i}", subset, cpp and i == 0),
                     work / f"shard-{i}", work / f"shard-{i}.log", cpp and i == 0)
              for i, (device, subset) in enumerate(zip(devices, plan))]
    where = "GPUs" if devices[0].startswith("cuda") else "CPU processes"
    console.print(f"[bold]{scenario.name}[/bold]: {len(plan)} shards on {len(plan)} {where} ({', '.join(devices)}), "
                  f"{options.rounds} rounds; logs and shard results in {work}")
    for s in shards:
        cores = shard_cores(allowed, s.index, pin_cores) if pin_cores > 0 and allowed else None
        console.print(f"  {s.label()}: {', '.join(v for v in s.variants)}"
                      f"{' + C++ driver' if s.cpp else ''}{f' · cores {cores}' if cores else ''}")
    new_folder(work)  # beside the reserved result file, whose stem no other run has
    start = time.perf_counter()
    interrupted = _run_shards(shards, options.rounds, pin_cores, allowed, console, repo_root)
    wall = time.perf_counter() - start
    return _merge_and_show(shards, scenario, argv, json_path, wall, interrupted, show, console, repo_root)


def _plan(scenario: Any, ops: Sequence[str], variants: Sequence[str], devices: Sequence[str], options: RunOptions,
          console: Any) -> list[tuple[str, ...]]:
    """The variants of each shard, balanced by their expected time (bench/children/shard/plan.py)."""
    n = len(devices)
    on_gpu = devices[0].startswith("cuda")
    gpu_rounds = options.gpu_rounds if on_gpu and options.gpu_timer != "off" else 0
    weights = variant_weights(variants, ops, devices[0], scenario.modes)
    preload = None
    if scenario.makes(Pass.CPP_DRIVER) and not options.no_cpp:
        # The C++ driver section goes to shard 0, so it runs on cuda:0 as in a one-GPU run (the
        # driver does not make its device the current one), and counts there in case-equivalents.
        unit = unit_seconds(options.rounds, options.block_ms / 1e3, options.warmup_ms / 1e3, gpu_rounds)
        preload = [cpp_seconds(len(ops), options.cpp_repetitions, options.cpp_min_time) / unit] + [0.0] * (n - 1)
    plan = plan_shards(variants, n, scenario.baseline_variants, weights, preload)
    if len(plan) < n:
        baselines = [v for v in variants if v in scenario.baseline_variants]
        console.print(f"[yellow]{len(variants)} variant(s), {len(baselines)} of them baselines: "
                      f"{len(plan)} shard(s) instead of {n}[/yellow]")
    return plan


def _run_shards(shards: Sequence[Child], rounds: int, pin_cores: int, allowed: Sequence[int], console: Any,
                repo_root: Path) -> bool:
    """Start every shard, show their progress until all ended; whether the run was interrupted. A
    first Ctrl-C (or SIGTERM) stops them gracefully, a second kills them; none outlives this call."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
        reap(shards)  # whatever ends the wait (an error too), no shard runs on
    return interrupted


def _merge_and_show(shards: Sequence[Child], scenario: Any, argv: Sequence[str], json_path: Path, wall: float,
                    interrupted: bool, show: Show,
                    console: Any, repo_root: Path) -> int:
    """The shards' results merged into json_path (bench/io/shard_merge.py), its table, the exit status."""
    docs, meta = [], []
    for s in shards:
        s.result = latest_result(s.out_dir)
        docs.append(read_doc(s.result))
        meta.append({"variants": list(s.variants), "cpp": s.cpp, **s.meta(repo_root)})
    from dbench.bench.io.env import redact_paths  # the merged file's paths as every result's (the shards' commands)

    command = " ".join(["run.py", *argv])
    n = len(shards)

    def empty(error: str | None = None) -> dict[str, Any]:
        doc = empty_merge(scenario.name, "shard", meta, {"shards": n}, {"command": command, "shards": meta})
        return redact_paths({**doc, "error": error} if error else doc)

    def merged_doc() -> dict[str, Any]:
        if all(d is None for d in docs):
            return empty()
        return redact_paths(merge(docs, meta, Pairing.SHARDS, config={"wall_seconds": round(wall, 2)},
                                  env={"command": command}))

    merged, csv_path = write_merged(json_path, merged_doc, empty, console)
    if csv_path is None:  # the final write failed (said on stderr): 1, as every failed result write
        return 1
    if not merged["rows"]:
        from rich.markup import escape

        work = json_path.parent / f"{json_path.stem}.shards"
        console.print(f"[red]{escape(merged['error'])}[/red] (the shards' logs: {rel(work, repo_root)})",
                      soft_wrap=True)
        return exit_code(shards, interrupted, [])
    note = scenario.table_note
    if n > 1:
        note += f" Sharded over {n} processes: each delta is against the baseline timed in its own shard."
    show(merged, note)
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
    """A failed child's own status (1 when it has none to give), 130 when interrupted, 1 when nothing
    was merged or a row failed, else 0."""
    failed = [s for s in shards if s.status == "failed"]
    if failed:
        codes = [s.proc.returncode for s in failed if s.proc is not None and s.proc.returncode not in (0, 130, None)]
        return codes[0] if codes and codes[0] > 0 else 1
    if interrupted or any(s.status == "interrupted" for s in shards):
        return 130
    return 1 if not rows or any(r.get("status") == "failed" for r in rows) else 0


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT / SIGTERM noted and ignored while the merged result is written, so an interrupt cannot
    leave it without its final status (the write itself is atomic either way)."""
    def note(*_: Any) -> None:
        sys.stderr.write("already stopping: writing the result\n")

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def write_merged(json_path: Path, merged: Callable[[], dict[str, Any]], fallback: Callable[[str], dict[str, Any]],
                 console: Any) -> tuple[dict[str, Any], Path | None]:
    """Write the final merged document (signals deferred): the merge, or when the merge itself breaks,
    `fallback(error)` (failed, the children named) before the error is raised. Returns the document and
    its CSV path, None when it could not be written (said on stderr; the file keeps its last write)."""
    from dbench.bench.io.results import ResultWriteError, write_result

    with signals_deferred():
        try:
            doc = merged()
        except Exception as exc:  # a bug in the merge: the file still gets a final status, then the traceback
            with contextlib.suppress(Exception):
                write_result(json_path, fallback(f"merge failed: {type(exc).__name__}: {exc}"))
            raise
        try:
            return doc, write_result(json_path, doc)
        except ResultWriteError as exc:
            print(f"{common.PROG}: error: {exc}; that file keeps its previous contents", file=sys.stderr)
            console.print("[red]the merged result was not written[/red] (each child's own result is in its folder)")
            return doc, None


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
        s.reason = (f"exit {rc}" + ("" if doc else ", no result file") + ": "
                    + (last_line(log_tail(s.log)) or "no output"))
    kill_group(s)  # anything it started and left running
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
            kill_group(s)
            s.proc.wait()
