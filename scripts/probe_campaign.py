#!/usr/bin/env python3
"""The reliability probe campaign: every entry point tried as a hostile or careless local user would.

    python3 scripts/probe_campaign.py [--fast] [--class NAME ...] [--id TEXT] [--out REPORT.json] [--list] [--keep]

Each probe is data (Probe): a command line, environment additions, a setup that plants files,
links and folders in the probe's own temporary folder, actions taken while the command runs (a
signal at a time or at a moment of the run, a link planted once the result file appears), and the
checks its outcome must pass. The classes:

  links       (a) links and folders planted at every predictable output path and code path (the
              instruction-count stage, --out, <stem>.processes, shards, figures, the CSV,
              DBENCH_BUILD_DIR, --ab build:/env:PYTHONPATH/interpreter, --op), another user's
              (uid 65534, as root; skipped otherwise): refused with one line, or replaced and never
              written through, and no planted code ever runs
  cli         (b) bad command lines of run.py and every `dbench` command, generated as every option x
              every bad value of its kind: exactly one line on stderr, no traceback, exit 2,
              nothing created in the current folder
  damaged     (c) damaged result files for report, gate, compare, history, export, figures: one line,
              exit 2; the files the suite itself writes (complete, interrupted before or during the
              rounds) are read
  injection   (d) terminal and markdown injection through op, variant and reason fields in report
              md/txt/csv and gate md/txt: no raw control character, no extra table row or column
  outputs     (e) outputs that cannot be written (stdout on /dev/full or closed, a full disk, a
              read-only folder) and --plot of one variant: one line and the documented status
  interrupts  (f) SIGTERM / SIGINT at several moments of a run and of --processes 2: exit 130 and a
              result the suite's reader reads, with status interrupted
  gate        (g) the gate on a new run whose status is failed, running, interrupted or incomplete:
              never exit 0
  opfile      (h) an --op file that exits, raises or crashes at import or in its launcher: one
              line, a non-zero exit, and a readable result marked failed where a file was made

The report: a summary table by class, the failing probes with their evidence (exit status, the
first line of stderr, what each check found), and with --out the same as JSON. Exit 0 when no
probe failed, 1 when one did, 2 on a bad command line. --fast runs a few probes of each class
(tests/test_probe_campaign.py runs it in CI). Probes that need root (chown to another user, a
tmpfs) are skipped with the reason when not run as root. Standard library only (and the suite's
torch-free reader, bench/io/document.py); the probes start the suite's commands as subprocesses.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dbench.bench.io.document import ResultFileError, read_json, read_result  # noqa: E402  (standard library only)

PY = sys.executable
GOLDEN = ROOT / "tests" / "golden"
AA_FOLDER = ROOT / "results" / "cpu-gate" / "aa"  # committed A/A A/B runs (.json.gz): what calibrate and nights read
NOBODY = 65534  # another local user
IS_ROOT = os.geteuid() == 0
NOT_ROOT = "needs root: planting another user's (uid 65534) files and links, or mounting a tmpfs"
POLL = 0.02  # seconds between looks at a running probe
PROGRESS = re.compile(r"━|^\[[\w-]+\] ")  # a progress bar's line, or a command's "[name] 3/5" progress
# A real run kept short: one op, one variant, no C++ driver, two rounds (about 3 s on a CPU).
QUICK = ("--scenario", "boundary", "--quick", "--device", "cpu", "--ops", "muladd", "--variants", "raw",
         "--no-cpp", "--no-pin", "--rounds", "2")
# A run long enough to be interrupted at any moment (rounds of ~0.1 s for a minute or more).
LONG = ("--scenario", "boundary", "--quick", "--device", "cpu", "--ops", "muladd", "--no-cpp", "--no-pin",
        "--rounds", "400", "--block-ms", "2")
CLASSES: dict[str, str] = {
    "links": "(a) planted links and folders at output and code paths",
    "cli": "(b) bad command lines",
    "damaged": "(c) damaged and suite-written result files",
    "injection": "(d) terminal and markdown injection",
    "outputs": "(e) outputs that cannot be written",
    "interrupts": "(f) SIGTERM / SIGINT during a run",
    "gate": "(g) the gate on unfinished runs",
    "opfile": "(h) --op files that exit, raise or crash",
}
CLASS_LETTERS = {name[1]: key for key, name in CLASSES.items()}  # "a" -> "links"


class Skip(Exception):
    """A probe that cannot run here (not root, no tmpfs): skipped with this reason."""


class AssetError(Exception):
    """A file a probe needs (one the suite writes) could not be made; the probe fails with why."""


# ---------------------------------------------------------------------------------------------
# The data: a probe, what it runs in, what came out.


@dataclass
class Ctx:
    """One probe's world: its private folder, the command's current folder inside it, the values
    its setup chose (`{name}` in argv and env), what its setup saved to compare with afterwards."""

    tmp: Path
    assets: Assets
    vars: dict[str, str] = field(default_factory=dict)
    saved: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cwd_before: frozenset[str] = frozenset()
    cleanups: list[Callable[[], Any]] = field(default_factory=list)  # after the command (unmount, chmod back)
    memo_key: Any = None  # where in Assets.memo the probe's reference outcome is (injection)

    @property
    def cwd(self) -> Path:
        """The command's current folder: <tmp>/cwd unless the setup chose another (vars["cwd"])."""
        return Path(self.vars.get("cwd") or self.tmp / "cwd")

    def path(self, name: str) -> Path:
        return Path(self.vars[name])


@dataclass
class Outcome:
    code: int | None  # None: timed out (killed); negative: killed by that signal
    out: bytes
    err: bytes
    ctx: Ctx
    seconds: float

    @property
    def stdout(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    def err_lines(self) -> list[str]:
        """stderr's lines, less progress (bars, "[nights] 3/5"): what the command says."""
        return [line for line in self.stderr.splitlines() if line.strip() and not PROGRESS.search(line)]


@dataclass(frozen=True)
class Check:
    """One expectation: `test` returns None when it holds, else what was found."""

    name: str
    test: Callable[[Outcome], str | None]


@dataclass(frozen=True)
class Trigger:
    """An action while the command runs, once: not before `at` seconds, and not before `when` holds."""

    what: str
    do: Callable[[subprocess.Popen[bytes], Ctx], None]
    at: float = 0.0
    when: Callable[[Ctx], bool] | None = None


Setup = Callable[[Ctx], None]


@dataclass(frozen=True)
class Probe:
    id: str
    cls: str
    argv: tuple[str, ...]  # "{run}", "{dbench}", "{module:NAME}" expand to the interpreter's command
    checks: tuple[Check, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    setup: tuple[Setup, ...] = ()
    triggers: tuple[Trigger, ...] = ()
    stdout: str = "pipe"  # pipe, full (/dev/full), closed
    root: bool = False  # needs root (another user's files, a tmpfs)
    slow: bool = False  # starts torch
    fast: bool = False  # part of --fast
    timeout: float = 60.0


@dataclass
class Result:
    probe: Probe
    status: str  # pass, fail, skip
    exit: int | None = None
    stderr: str = ""  # its first line
    stderr_lines: list[str] = field(default_factory=list)  # its first few lines, as evidence
    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"id": self.probe.id, "class": self.probe.cls, "status": self.status, "exit": self.exit,
                "stderr": self.stderr, "stderr_lines": self.stderr_lines, "checks": self.checks, "notes": self.notes,
                "seconds": round(self.seconds, 2), "argv": list(self.probe.argv), "env": dict(self.probe.env)}


# ---------------------------------------------------------------------------------------------
# Checks.

TRACEBACK = "Traceback (most recent call last)"


def _control(text: str, allow_crlf: bool = False) -> str | None:
    """The first raw control character in `text` (C0 but newline and tab, DEL, C1), shown escaped."""
    for i, ch in enumerate(text):
        if ch in "\n\t" or (allow_crlf and ch == "\r" and text[i + 1:i + 2] == "\n"):
            continue
        if unicodedata.category(ch) == "Cc":
            return f"{ch!r} at {i}: ...{text[max(0, i - 30):i + 10]!r}"
    return None


def shown(text: str, limit: int = 200) -> str:
    """A line as evidence: control characters escaped, cut to `limit`."""
    text = text if _control(text) is None else text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."


def exit_in(*codes: int) -> Check:
    return Check(f"exit in {sorted(codes)}", lambda o: None if o.code in codes else f"exit {o.code}")


def exit_not(*codes: int) -> Check:
    def test(o: Outcome) -> str | None:
        if o.code is None:
            return "timed out"
        return f"exit {o.code}" if o.code in codes or o.code < 0 else None

    return Check(f"exit not in {sorted(codes)} (nor a signal)", test)


def one_line() -> Check:
    """Exactly one line on stderr, no traceback."""
    def test(o: Outcome) -> str | None:
        if TRACEBACK in o.stderr + o.stdout:
            return "a traceback"
        lines = o.err_lines()
        return None if len(lines) == 1 else f"{len(lines)} lines on stderr"

    return Check("one line on stderr", test)


def at_most_one_line() -> Check:
    def test(o: Outcome) -> str | None:
        if TRACEBACK in o.stderr + o.stdout:
            return "a traceback"
        lines = o.err_lines()
        return None if len(lines) <= 1 else f"{len(lines)} lines on stderr: {shown(' | '.join(lines[:3]))}"

    return Check("at most one line on stderr", test)


def no_traceback() -> Check:
    return Check("no traceback", lambda o: "a traceback" if TRACEBACK in o.stderr + o.stdout else None)


def not_on_stdout(*words: str) -> Check:
    """A refusal's words (error, usage) belong on stderr: stdout may be a pipe into a file or a report."""
    def test(o: Outcome) -> str | None:
        found = [w for w in words if w in o.stdout.lower()]
        return f"{found[0]!r} on stdout: {shown(o.stdout.strip())}" if found else None

    return Check(f"no {'/'.join(words)} on stdout", test)


def cwd_untouched() -> Check:
    def test(o: Outcome) -> str | None:
        new = sorted(set(os.listdir(o.ctx.cwd)) - o.ctx.cwd_before)
        return f"created in the current folder: {new}" if new else None

    return Check("nothing created in the current folder", test)


def absent(var: str) -> Check:
    """A planted code's marker: it must never be written."""
    return Check(f"{var} not made (planted code never ran)",
                 lambda o: f"{o.ctx.vars[var]} exists" if os.path.lexists(o.ctx.vars[var]) else None)


def unchanged(var: str) -> Check:
    """A victim file (or folder) planted links point at: the same content (entries) as before."""
    def test(o: Outcome) -> str | None:
        return None if _snapshot(o.ctx.path(var)) == o.ctx.saved[var] else f"{o.ctx.vars[var]} was written"

    return Check(f"{var} untouched", test)


def mentions(*words: str) -> Check:
    """The output names the cause (one of `words`), so the user knows why."""
    def test(o: Outcome) -> str | None:
        text = (o.stdout + o.stderr).lower()
        return None if any(w.lower() in text for w in words) else f"does not mention {' or '.join(words)}"

    return Check(f"mentions {' or '.join(words)}", test)


def _result_files(folder: Path, recursive: bool) -> list[Path]:
    if not folder.is_dir():
        return []
    found = folder.rglob("*.json") if recursive else folder.glob("*.json")
    return sorted(p for p in found if not p.name.startswith("."))


def results(var: str = "out", statuses: Iterable[str] | None = None, count: int | None = 1,
            failed_row: bool = False) -> Check:
    """The result files at the top of folder `var`: `count` of them (None: any, even none), each read
    by the suite's reader (bench/io/document.py), with a status in `statuses`; `failed_row`: or a FAILED
    row counts as marked failed. Every *.json below (children's files) must be readable too."""
    wanted = frozenset(statuses or ())

    def test(o: Outcome) -> str | None:
        folder = o.ctx.path(var)
        top = _result_files(folder, recursive=False)
        if count is not None and len(top) != count:
            return f"{len(top)} result files in {folder.name}/, expected {count}"
        for path in _result_files(folder, recursive=True):
            try:
                doc = read_result(path)
            except ResultFileError as exc:
                return f"unreadable: {shown(str(exc))}"
            if path in top and wanted:
                failed = failed_row and any(r.get("status") == "failed" for r in doc["rows"])
                if doc.get("status") not in wanted and not failed:
                    return f"{path.name}: status {doc.get('status')!r}, expected {'/'.join(sorted(wanted))}"
        return None

    what = f"{count if count is not None else 'any'} readable result(s)"
    return Check(what + (f" with status {'/'.join(sorted(wanted))}" if wanted else ""), test)


def no_outputs(var: str) -> Check:
    """Nothing written under `var`: no result, no figure, no temporary file."""
    def test(o: Outcome) -> str | None:
        folder = o.ctx.path(var)
        if not folder.exists() or folder.is_file():
            return None
        made = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != "filler")
        return f"written: {made[:5]}" if made else None

    return Check(f"nothing written in {var}", test)


def refused() -> tuple[Check, ...]:
    """The project's refusal: exit 2, one line on stderr, no traceback, nothing made in the current folder."""
    return exit_in(2), one_line(), cwd_untouched()


def clean_output(stream: str = "both", allow_crlf: bool = False) -> Check:
    def test(o: Outcome) -> str | None:
        for name, text in (("stdout", o.stdout), ("stderr", o.stderr)):
            if stream in (name, "both"):
                found = _control(text, allow_crlf)
                if found:
                    return f"raw control character on {name}: {found}"
        return None

    return Check("no raw control character", test)


# ---------------------------------------------------------------------------------------------
# Setup helpers: plants.


def _snapshot(path: Path) -> bytes:
    if path.is_dir():
        return "\n".join(sorted(os.listdir(path))).encode()
    return path.read_bytes() if path.exists() else b"<absent>"


def chown(path: Path, uid: int = NOBODY, *, recursive: bool = False) -> None:
    paths = [path, *(path.rglob("*") if recursive and path.is_dir() and not path.is_symlink() else ())]
    for p in paths:
        os.lchown(p, uid, uid)


def folder(path: Path, mode: int = 0o755, owner: int | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    if owner is not None:
        chown(path, owner)
    return path


def link(path: Path, target: Path | str, owner: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    if owner is not None:
        chown(path, owner)
    return path


def victim(ctx: Ctx, name: str = "victim", *, is_folder: bool = False) -> Path:
    """A file (or folder) of ours that planted links point at; saved, so `unchanged` can compare."""
    path = ctx.tmp / name
    if is_folder:
        path.mkdir()
    else:
        path.write_text("root's file: keep me\n")
    ctx.vars[name] = str(path)
    ctx.saved[name] = _snapshot(path)
    return path


def marker_code(ctx: Ctx, name: str = "marker") -> str:
    """Python that writes the marker file: planted code that must never run."""
    path = ctx.tmp / name
    ctx.vars[name] = str(path)
    return f"open({str(path)!r}, 'w').write('planted code ran')\n"


def golden_doc(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text())


def _latest_result(folder: Path) -> dict[str, Any] | None:
    """The newest readable top-level result in `folder` while a run writes it (None: none yet)."""
    for path in reversed(_result_files(folder, recursive=False)):
        try:
            return dict(json.loads(path.read_text()), _path=str(path))
        except (OSError, ValueError):
            continue
    return None


def result_state(var: str, predicate: Callable[[dict[str, Any]], bool]) -> Callable[[Ctx], bool]:
    def when(ctx: Ctx) -> bool:
        doc = _latest_result(ctx.path(var))
        return doc is not None and predicate(doc)

    return when


def rounds_done(n: int) -> Callable[[dict[str, Any]], bool]:
    return lambda doc: (doc.get("config") or {}).get("rounds_done", 0) >= n


def send(sig: int, *, group: bool = False, twice: bool = False) -> Callable[[subprocess.Popen[bytes], Ctx], None]:
    """Send `sig` to the command (group: to its whole process group, as a terminal's Ctrl-C)."""
    def do(proc: subprocess.Popen[bytes], _ctx: Ctx) -> None:
        for _ in range(2 if twice else 1):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
            time.sleep(0.01)

    return do


def appears(var: str, pattern: str = "*.json") -> Callable[[Ctx], bool]:
    """The run has made a file matching `pattern` in folder `var` (its reserved result, at first)."""
    return lambda ctx: any(p for p in ctx.path(var).glob(pattern) if not p.name.startswith("."))


def tmpfs(var: str, *, full: bool = False, readonly: bool = False, size: str = "256k") -> Setup:
    """A small tmpfs at <tmp>/<var>: `full` (a filler file took every block) or `readonly` (read-only
    even for root); unmounted when the probe ends. Not root, or no mount: the probe is skipped, except
    that read-only is then a folder of mode 0555 (which binds a user who is not root)."""
    def setup(ctx: Ctx) -> None:
        where = ctx.tmp / var
        where.mkdir()
        ctx.vars[var] = str(where)
        if not IS_ROOT:
            if readonly and not full:
                where.chmod(0o555)
                ctx.cleanups.append(lambda: where.chmod(0o755))
                return
            raise Skip(NOT_ROOT)
        options = f"size={size},mode=0755" + (",ro" if readonly else "")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                              text=True)
        if proc.returncode:
            raise Skip(f"cannot mount a tmpfs: {proc.stderr.strip() or proc.returncode}")
        ctx.cleanups.append(lambda: subprocess.run(["umount", "-l", str(where)], capture_output=True))
        if full:
            _fill(var)(None, ctx)

    return setup


# ---------------------------------------------------------------------------------------------
# Running a command.


def base_env() -> dict[str, str]:
    """The environment of every probe: this one without DBENCH_* settings, the checkout importable
    as `dbench` from any folder, figures headless."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def expand_text(text: str, ctx: Ctx) -> str:
    for key, value in ctx.vars.items():
        text = text.replace("{" + key + "}", value)
    return text


def expand_argv(argv: Sequence[str], ctx: Ctx) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if arg == "{run}":
            out += [PY, str(ROOT / "run.py")]
        elif arg == "{dbench}":
            out += [PY, "-m", "dbench"]
        elif arg.startswith("{module:") and arg.endswith("}"):
            out += [PY, "-m", arg[len("{module:"):-1]]
        else:
            out.append(expand_text(arg, ctx))
    return out


def _close_stdout() -> None:
    os.close(1)


def _fire(triggers: list[Trigger], proc: subprocess.Popen[bytes], ctx: Ctx, elapsed: float) -> None:
    for trigger in list(triggers):
        try:
            ready = elapsed >= trigger.at and (trigger.when is None or trigger.when(ctx))
        except (OSError, ValueError, KeyError):
            ready = False
        if ready:
            triggers.remove(trigger)
            trigger.do(proc, ctx)
            ctx.notes.append(f"{trigger.what}: at {elapsed:.2f} s")


def execute(argv: Sequence[str], ctx: Ctx, env: Mapping[str, str] | None = None, *,
            triggers: Sequence[Trigger] = (), stdout: str = "pipe", timeout: float = 60.0) -> Outcome:
    """Run the command in ctx.cwd, in a process group of its own (killed whole at the end, so no
    child outlives the probe), firing `triggers` while it runs."""
    full_env = base_env()
    full_env.update({k: expand_text(v, ctx) for k, v in (env or {}).items()})
    pending = list(triggers)
    with contextlib.ExitStack() as stack:
        target: Any = subprocess.PIPE
        if stdout == "full":
            target = stack.enter_context(open("/dev/full", "wb"))
        elif stdout == "closed":
            target = subprocess.DEVNULL
        start = time.monotonic()
        proc = subprocess.Popen(expand_argv(argv, ctx), cwd=ctx.cwd, env=full_env, stdin=subprocess.DEVNULL,
                                stdout=target, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_close_stdout if stdout == "closed" else None)
        timed_out = False
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=POLL)
                    break
                except subprocess.TimeoutExpired:
                    pass
                elapsed = time.monotonic() - start
                _fire(pending, proc, ctx, elapsed)
                if elapsed > timeout:
                    timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    out, err = proc.communicate()
                    break
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # children the command left behind
    seconds = time.monotonic() - start
    for trigger in pending:
        ctx.notes.append(f"{trigger.what}: never fired (the command ended after {seconds:.2f} s)")
    if timed_out:
        ctx.notes.append(f"timed out after {timeout:g} s: killed")
    return Outcome(None if timed_out else proc.returncode, out or b"", err or b"", ctx, seconds)


# ---------------------------------------------------------------------------------------------
# Assets: files several probes need, made once per campaign.


class Assets:
    """The campaign's folder, a gzip bomb, and result files the suite itself writes (made on first
    use by real runs, a few seconds each; a failure to make one is kept and reported by each probe
    that needs it)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._made: dict[str, Path | AssetError] = {}
        self.memo: dict[Any, Any] = {}

    def _once(self, key: str, make: Callable[[Path], Path]) -> Path:
        if key not in self._made:
            where = self.base / "assets" / key
            where.mkdir(parents=True)
            try:
                self._made[key] = make(where)
            except AssetError as exc:
                self._made[key] = exc
        made = self._made[key]
        if isinstance(made, AssetError):
            raise made
        return made

    def bomb(self) -> Path:
        """A gzip file of about 300 kB that inflates to 300 MiB, past the reader's 256 MiB bound."""
        def make(where: Path) -> Path:
            squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
            path = where / "bomb.json.gz"
            with open(path, "wb") as f:
                f.write(squeeze.compress(b'{"rows": ['))
                block = b" " * (1 << 20)
                for _ in range(300):
                    f.write(squeeze.compress(block))
                f.write(squeeze.flush())
            return path

        return self._once("bomb", make)

    def suite_file(self, kind: str) -> Path:
        """A result the suite wrote: one of SUITE_RUNS (the file, or AssetError saying why none)."""
        argv, triggers = SUITE_RUNS[kind]

        def make(where: Path) -> Path:
            ctx = Ctx(where, self)
            ctx.cwd.mkdir()
            ctx.vars.update(tmp=str(where), cwd=str(ctx.cwd), out=str(where / "out"))
            outcome = execute(("{run}", *argv, "--out", "{out}"), ctx, triggers=triggers, timeout=300)
            files = _result_files(where / "out", recursive=False)
            if len(files) != 1:
                raise AssetError(f"the run for the {kind!r} file (exit {outcome.code}) left {len(files)} result "
                                 f"files ({', '.join(f.name for f in files) or 'none'}); {'; '.join(ctx.notes)}; "
                                 f"stderr: {shown(outcome.stderr.strip()[-300:])}")
            return files[0]

        return self._once(f"suite-{kind}", make)

    def machine_slug(self) -> str:
        """The folder a run on this machine makes under ./dbench-results/ (from a complete run's env)."""
        env = json.loads(self.suite_file("complete").read_text())["env"]
        name = env.get("gpu_name") or f"cpu-{env.get('cpu_model', 'unknown')}"
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")  # as bench/io/env.py machine_slug
        return re.sub(r"^nvidia-", "", slug)[:60] or "unknown"


def _child_rounds(n: int) -> Callable[[Ctx], bool]:
    """A --processes run's first child has done `n` rounds."""
    def when(ctx: Ctx) -> bool:
        for path in ctx.path("out").glob("*.processes/process-0/*.json"):
            with contextlib.suppress(OSError, ValueError):
                if rounds_done(n)(json.loads(path.read_text())):
                    return True
        return False

    return when


# kind -> (run.py's options, what is done while it runs)
SUITE_RUNS: dict[str, tuple[tuple[str, ...], tuple[Trigger, ...]]] = {
    "complete": (QUICK, ()),
    "processes-complete": ((*QUICK, "--processes", "2"), ()),
    "interrupted-early": (LONG, (Trigger("SIGINT before the first round", send(signal.SIGINT),
                                         when=result_state("out", lambda d: d.get("status") == "running"
                                                           and not rounds_done(1)(d))),)),
    "interrupted-rounds": (LONG, (Trigger("SIGINT after 2 rounds", send(signal.SIGINT),
                                          when=result_state("out", rounds_done(2))),)),
    "processes-interrupted": ((*LONG, "--processes", "2"),
                              (Trigger("Ctrl-C (SIGINT to the group) in process 0's rounds",
                                       send(signal.SIGINT, group=True), when=_child_rounds(1)),)),
}


def suite_copy(kind: str, var: str, name: str | None = None) -> Setup:
    """A copy of a result the suite wrote, at <tmp>/<name>."""
    def setup(ctx: Ctx) -> None:
        source = ctx.assets.suite_file(kind)
        path = ctx.tmp / (name or f"{kind}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        ctx.vars[var] = str(path)

    return setup


# ---------------------------------------------------------------------------------------------
# (a) links: another user's links and folders at the paths a run writes or loads code from.

INSTRUCTIONS = ("{module:dbench.bench.instructions}", "collect", "--calls", "1")
STAGE_ENV = {"DBENCH_INSTRUCTIONS_STAGE": "{stage}"}


def _shared(ctx: Ctx, mode: int = 0o1777, owner: int | None = NOBODY, name: str = "shared") -> Path:
    """A folder another user made (world-writable by default, as they would leave it)."""
    return folder(ctx.tmp / name, mode, owner)


def _set(var: str, make: Callable[[Ctx], Path | str]) -> Setup:
    def setup(ctx: Ctx) -> None:
        ctx.vars[var] = str(make(ctx))

    return setup


def _plant_code(where: Path, ctx: Ctx, *names: str) -> None:
    """Python packages at `where` that write the marker when imported."""
    code = marker_code(ctx)
    for name in names:
        (where / name).mkdir(parents=True, exist_ok=True)
        (where / name / "__init__.py").write_text(code)


def _stage_probes() -> list[Probe]:
    def through_link(ctx: Ctx) -> Path:  # /tmp/<another user's link>/stage
        return link(ctx.tmp / "lnk", folder(ctx.tmp / "real", 0o755), NOBODY) / "stage"

    def is_link(ctx: Ctx) -> Path:
        return link(ctx.tmp / "stage", folder(ctx.tmp / "mine", 0o700), NOBODY)

    def planted(ctx: Ctx) -> Path:
        stage = folder(ctx.tmp / "stage", 0o777)
        _plant_code(stage / "src", ctx, "dbench", "torch")
        chown(stage, recursive=True)
        return stage

    def lock_link(ctx: Ctx) -> Path:
        stage = folder(ctx.tmp / "stage", 0o700)
        link(stage / "lock", victim(ctx), NOBODY if IS_ROOT else None)
        return stage

    cases: list[tuple[str, Callable[[Ctx], Path], bool, tuple[Check, ...]]] = [
        ("through-another-users-link", through_link, True, ()),
        ("is-another-users-link", is_link, True, ()),
        ("another-users-folder-with-code", planted, True, (absent("marker"),)),
        ("under-another-users-sticky-folder", lambda ctx: _shared(ctx) / "stage", True, ()),
        ("under-a-writable-folder", lambda ctx: _shared(ctx, 0o777, None) / "stage", False, ()),
    ]
    probes = [Probe(f"links/stage/{name}", "links", INSTRUCTIONS, (*refused(), mentions("refusing"), *extra),
                    env=STAGE_ENV, setup=(_set("stage", make),), root=root, fast=name == "through-another-users-link",
                    timeout=120)
              for name, make, root, extra in cases]
    # The lock is taken once the collection is planned (its plan is a line on stderr before): not
    # followed, and the command stops with exit 2.
    probes.append(Probe("links/stage/lock-is-a-link", "links", INSTRUCTIONS, (exit_in(2), no_traceback(),
                                                                              unchanged("victim")),
                        env=STAGE_ENV, setup=(_set("stage", lock_link),), timeout=120))
    return probes


def _out_probes() -> list[Probe]:
    def others_link(ctx: Ctx) -> Path:
        ctx.vars["real"] = str(folder(ctx.tmp / "real", 0o755))
        return link(ctx.tmp / "lnk", ctx.tmp / "real", NOBODY)

    def dangling(ctx: Ctx) -> Path:
        ctx.vars["real"] = str(ctx.tmp / "nowhere")
        return link(ctx.tmp / "lnk", ctx.tmp / "nowhere", NOBODY)

    cases: list[tuple[str, Callable[[Ctx], Path], bool, tuple[Check, ...]]] = [
        ("another-users-1777", lambda ctx: _shared(ctx), True, ()),
        ("another-users-0755", lambda ctx: _shared(ctx, 0o755), True, ()),
        ("another-users-0777", lambda ctx: _shared(ctx, 0o777), True, ()),
        ("mine-0777", lambda ctx: _shared(ctx, 0o777, None), False, ()),
        ("mine-1777", lambda ctx: _shared(ctx, 0o1777, None), False, ()),
        ("another-users-link", others_link, True, (no_outputs("real"),)),
        ("another-users-dangling-link", dangling, True, (absent("real"),)),
        ("below-a-writable-folder", lambda ctx: _shared(ctx, 0o777, None) / "sub", False, ()),
        ("below-another-users-folder", lambda ctx: _shared(ctx, 0o755) / "sub", True, ()),
    ]
    probes = [Probe(f"links/out/{name}", "links", ("{run}", *QUICK, "--out", "{target}"),
                    (*refused(), no_outputs("target"), *extra), setup=(_set("target", make),), root=root,
                    fast=name == "another-users-1777", timeout=90)
              for name, make, root, extra in cases]
    for mode, owner, root in ((0o777, NOBODY, True), (0o1777, NOBODY, True), (0o755, NOBODY, True),
                              (0o777, None, False)):
        who = "another-users" if owner else "mine"
        probes.append(Probe(f"links/default-out/{who}-{mode:04o}", "links", ("{run}", *QUICK),
                            (*refused(), no_outputs("target")),
                            setup=(_set("target",
                                        lambda ctx, m=mode, o=owner: folder(ctx.cwd / "dbench-results", m, o)),),
                            root=root, timeout=90))

    def machine_folder(ctx: Ctx) -> Path:  # ./dbench-results/<machine>/ made by another user
        return folder(folder(ctx.cwd / "dbench-results", 0o755) / ctx.assets.machine_slug(), 0o755, NOBODY)

    probes.append(Probe("links/default-out/another-users-machine-folder", "links", ("{run}", *QUICK),
                        (*refused(), no_outputs("target")), setup=(_set("target", machine_folder),), root=True,
                        slow=True, timeout=90))
    return probes


def _stem(ctx: Ctx) -> str:
    newest = max(ctx.path("out").glob("*.json"), key=lambda p: p.stat().st_mtime)
    return newest.name[: -len(".json")]


def _plant(ctx: Ctx, path: Path, target: Path) -> None:
    if os.path.lexists(path):
        ctx.notes.append(f"{path.name} was already there: not planted")
        return
    link(path, target, NOBODY if IS_ROOT else None)
    ctx.notes.append(f"planted {path.name} -> {target.name}")


def plant_work(suffix: str, log: str, *, inside: bool) -> Callable[[subprocess.Popen[bytes], Ctx], None]:
    """<stem>.<suffix> as a link to the victim folder (or, `inside` or once the run made it, its
    <log> as a link to the victim file)."""
    def do(_proc: subprocess.Popen[bytes], ctx: Ctx) -> None:
        work = ctx.path("out") / f"{_stem(ctx)}.{suffix}"
        if not inside and not os.path.lexists(work):
            _plant(ctx, work, ctx.path("victim-folder"))
        else:
            _plant(ctx, work / log, ctx.path("victim"))

    return do


def plant_beside(name: str) -> Callable[[subprocess.Popen[bytes], Ctx], None]:
    """<stem><name> (the CSV view, a figure) as a link to the victim file."""
    return lambda _proc, ctx: _plant(ctx, ctx.path("out") / f"{_stem(ctx)}{name}", ctx.path("victim"))


def _victims(ctx: Ctx) -> None:
    victim(ctx)
    victim(ctx, "victim-folder", is_folder=True)


def _race_probes() -> list[Probe]:
    kept = (unchanged("victim"), unchanged("victim-folder"), no_traceback(), results("out", count=None))
    cases: list[tuple[str, tuple[str, ...], Trigger]] = [
        ("csv-view", QUICK, Trigger("plant <stem>.csv", plant_beside(".csv"), when=appears("out"))),
        ("figure", (*QUICK, "--plot"),
         Trigger("plant <stem>-muladd-cpu.png", plant_beside("-muladd-cpu.png"),
                 when=result_state("out", lambda d: d.get("status") == "complete"))),
        ("processes-folder", (*QUICK, "--processes", "2"),
         Trigger("plant <stem>.processes", plant_work("processes", "process-1.log", inside=False),
                 when=appears("out"))),
        ("processes-log", (*QUICK, "--processes", "2"),
         Trigger("plant process-1.log", plant_work("processes", "process-1.log", inside=True),
                 when=appears("out", "*.processes"))),
        ("shards-folder", (*QUICK, "--shards", "2"),
         Trigger("plant <stem>.shards", plant_work("shards", "shard-1.log", inside=False), when=appears("out"))),
        ("shards-log", (*QUICK, "--variants", "raw,cpp", "--shards", "2"),
         Trigger("plant shard-1.log", plant_work("shards", "shard-1.log", inside=True),
                 when=appears("out", "*.shards"))),
    ]
    return [Probe(f"links/race/{name}", "links", ("{run}", *argv, "--out", "{out}"), kept, setup=(_victims,),
                  triggers=(trigger,), slow=True, timeout=180)
            for name, argv, trigger in cases]


def _build_folder(where: Path, owner: int | None = None, lib_owner: int | None = None, real: bool = False) -> Path:
    """Something that looks like a build folder (lib/ with a library), for the checks to judge; `real`:
    a copy of the checkout's libraries, which a run would load and use if the checks let it."""
    lib = folder(where / "lib", 0o755)
    if real:
        for path in (ROOT / "build" / "lib").glob("*.so"):
            shutil.copy2(path, lib / path.name)
    else:
        (lib / "libdbench_ops.so").write_bytes(b"\x7fELF planted")
    if lib_owner is not None:
        chown(lib / "libdbench_ops.so", lib_owner)
    if owner is not None:
        chown(where, owner, recursive=True)
    return where


def _code_probes() -> list[Probe]:
    """Code the user names by path: a build folder, an --ab side's interpreter or PYTHONPATH, an --op file."""
    def op_file(where: Callable[[Ctx], Path], owner: int | None = None, mode: int = 0o644) -> Setup:
        def setup(ctx: Ctx) -> None:
            path = where(ctx) / "ops.py"
            path.write_text(marker_code(ctx) + "from dbench import Op\nprobe_op = Op(name='probe_op', "
                            "forward=lambda x: x.clone())\n")
            path.chmod(mode)
            if owner is not None:
                chown(path, owner)
            ctx.vars["code"] = str(path)

        return setup

    def script(name: str, where: Callable[[Ctx], Path], owner: int | None = None) -> Setup:
        def setup(ctx: Ctx) -> None:
            path = where(ctx) / name
            path.write_text(f"#!/bin/sh\ntouch {ctx.tmp / 'marker'}\nexec {PY} \"$@\"\n")
            ctx.vars["marker"] = str(ctx.tmp / "marker")
            path.chmod(0o755)
            if owner is not None:
                chown(path, owner)
            ctx.vars["code"] = str(path)

        return setup

    def site(ctx: Ctx) -> None:
        where = _shared(ctx, 0o777) / "site"
        where.mkdir()
        (where / "sitecustomize.py").write_text(marker_code(ctx))
        chown(where, recursive=True)
        ctx.vars["code"] = str(where)

    def sh_copy(ctx: Ctx) -> None:
        path = folder(ctx.tmp / "bin") / "python3.99"
        shutil.copy2("/bin/sh", path)
        ctx.vars.update(code=str(path), marker=str(ctx.tmp / "marker"))

    def python_link(ctx: Ctx) -> None:
        ctx.vars.update(code=str(link(ctx.tmp / "bin" / "python3", PY, NOBODY)), marker=str(ctx.tmp / "marker"))

    def shared_bin(ctx: Ctx) -> Path:
        return _shared(ctx, 0o777)

    def own_bin(ctx: Ctx) -> Path:
        return folder(ctx.tmp / "bin")

    def others_link(ctx: Ctx) -> Path:
        return link(ctx.tmp / "lnk", folder(ctx.tmp / "real"), NOBODY)

    run_quick = ("{run}", *QUICK, "--out", "{out}")
    ab = ("{run}", *QUICK, "--out", "{out}", "--ab", "env:")
    cases: list[tuple[str, tuple[str, ...], dict[str, str], Setup, bool]] = [
        ("build-dir/in-another-users-folder", run_quick, {"DBENCH_BUILD_DIR": "{code}"},
         _set("code", lambda ctx: _build_folder(_shared(ctx, 0o777) / "build")), True),
        ("build-dir/another-users-folder", run_quick, {"DBENCH_BUILD_DIR": "{code}"},
         _set("code", lambda ctx: _build_folder(ctx.tmp / "build", owner=NOBODY)), True),
        ("build-dir/another-users-link", run_quick, {"DBENCH_BUILD_DIR": "{code}"},
         _set("code", lambda ctx: link(ctx.tmp / "build", ROOT / "build", NOBODY)), True),
        ("build-dir/another-users-library", run_quick, {"DBENCH_BUILD_DIR": "{code}"},
         _set("code", lambda ctx: _build_folder(ctx.tmp / "build", lib_owner=NOBODY, real=True)), True),
        ("build-dir/writable-by-all", run_quick, {"DBENCH_BUILD_DIR": "{code}"},
         _set("code", lambda ctx: _build_folder(folder(ctx.tmp / "build", 0o777))), False),
        ("ab-build/in-another-users-folder", (*ab, "build:{code}"), {},
         _set("code", lambda ctx: _build_folder(_shared(ctx, 0o777) / "build")), True),
        ("ab-build/another-users-library", (*ab, "build:{code}"), {},
         _set("code", lambda ctx: _build_folder(ctx.tmp / "build", lib_owner=NOBODY)), True),
        ("ab-env-pythonpath/another-users-folder", (*ab, "env:PYTHONPATH={code}"), {}, site, True),
        ("ab-env-ld-preload/another-users-library", (*ab, "env:LD_PRELOAD={code}/lib/libdbench_ops.so"), {},
         _set("code", lambda ctx: _build_folder(_shared(ctx, 0o777) / "build")), True),
        ("ab-python/in-another-users-folder", (*ab, "{code}"), {}, script("python3", shared_bin, NOBODY), True),
        ("ab-python/script-named-python", (*ab, "{code}"), {}, script("python", own_bin), False),
        ("ab-python/script-named-python3", (*ab, "python:{code}"), {}, script("python3", own_bin), False),
        ("ab-python/sh-copy-named-python3.99", (*ab, "{code}"), {}, sh_copy, False),
        ("ab-python/another-users-link-to-python", (*ab, "{code}"), {}, python_link, True),
        ("op/in-another-users-folder", (*run_quick, "--op", "{code}"), {}, op_file(shared_bin), True),
        ("op/another-users-file", (*run_quick, "--op", "{code}"), {}, op_file(own_bin, NOBODY), True),
        ("op/through-another-users-link", (*run_quick, "--op", "{code}"), {}, op_file(others_link), True),
        ("op/writable-by-all", (*run_quick, "--op", "{code}"), {}, op_file(own_bin, mode=0o666), False),
        ("op/list-in-another-users-folder", ("{dbench}", "list", "--op", "{code}"), {}, op_file(shared_bin), True),
    ]
    return [Probe(f"links/{name}", "links", argv, (*refused(), no_outputs("out"), absent("marker")), env=env,
                  setup=(lambda ctx: ctx.vars.setdefault("marker", str(ctx.tmp / "marker")), make), root=root,
                  fast=name == "op/in-another-users-folder", timeout=90)
            for name, argv, env, make, root in cases]


def links_probes() -> list[Probe]:
    return [*_stage_probes(), *_out_probes(), *_race_probes(), *_code_probes()]


# ---------------------------------------------------------------------------------------------
# (b) cli: every option of every command x every bad value of its kind.

HUGE_INT = "99999999999999999999999"
BAD: dict[str, dict[str, str]] = {
    "count1": {"zero": "0", "negative": "-1", "fraction": "2.5", "word": "x", "empty": "", "huge": HUGE_INT,
               "nan": "nan", "exponent": "1e3"},
    "count0": {"negative": "-1", "fraction": "2.5", "word": "x", "empty": "", "huge": HUGE_INT, "nan": "nan"},
    "positive": {"zero": "0", "negative": "-5", "nan": "nan", "inf": "inf", "word": "x", "empty": "",
                 "huge": "1e300", "12-digits": "1e12"},
    "fraction": {"zero": "0", "one": "1", "negative": "-0.5", "above-one": "1.5", "nan": "nan", "inf": "inf",
                 "word": "x", "empty": ""},
    "alpha": {"zero": "0", "above-half": "0.6", "negative": "-0.1", "nan": "nan", "inf": "inf", "word": "x",
              "empty": ""},
    "nonnegative": {"negative": "-1", "nan": "nan", "inf": "inf", "word": "x", "empty": ""},
    "choice": {"unknown": "bogus", "empty": "", "upper-case": "MD"},
    "regex": {"unbalanced": "(", "empty-class": "[", "bad-escape": "\\"},
    "names": {"unknown": "bogus", "empty": "", "comma": ",", "trailing-comma": "muladd,",
              "twice": "muladd,muladd"},
}


@dataclass(frozen=True)
class Option:
    name: str
    kind: str  # a key of BAD, or "" for the values given
    values: Mapping[str, str] = field(default_factory=dict)
    extra: tuple[str, ...] = ()  # what it needs beside it (--pairs: --ab)
    only: tuple[str, ...] = ()  # of BAD[kind], only these

    def bad(self) -> dict[str, str]:
        base = {k: v for k, v in BAD.get(self.kind, {}).items() if not self.only or k in self.only}
        return {**base, **self.values}


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]  # a good command line the bad option is added to
    options: tuple[Option, ...]
    setup: tuple[Setup, ...] = ()
    lines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # other bad command lines, whole
    env_lines: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # bad settings of its environment


def _names(valid: str) -> dict[str, str]:
    return {"unknown": "bogus", "empty": "", "comma": ",", "trailing-comma": f"{valid},", "twice": f"{valid},{valid}"}


RUN_OPTIONS = (
    Option("--scenario", "", {"unknown": "bogus", "empty": "", "space": " ", "upper-case": "BOUNDARY",
                              "trailing-space": "boundary "}),
    Option("--device", "", {"unknown": "tpu", "empty": "", "cuda-word": "cuda:x", "cpu-index": "cpu:0",
                            "negative-index": "cuda:-1", "upper-case": "CPU"}),
    Option("--ops", "", _names("muladd")),
    Option("--variants", "", {**_names("raw"), "not-of-the-scenario": "fastest"}),
    Option("--modes", "", _names("inference")),
    Option("--cache", "", _names("warm")),
    Option("--shape", "", {"zero": "0", "negative": "-1,4", "word": "x", "empty": "", "five-sizes": "1,1,1,1,1",
                           "huge": "99999999999,99999999999", "comma": ",", "semicolon": "4;32", "unicode-digit": "٣"}),
    Option("--dtype", "choice"), Option("--order", "choice"), Option("--gpu-timer", "choice"),
    Option("--rounds", "count1"), Option("--gpu-rounds", "count1"), Option("--cpp-repetitions", "count1"),
    Option("--seed", "count0"), Option("--pin-cores", "count0"), Option("--pin-offset", "count0"),
    Option("--shards", "count1"), Option("--processes", "count1", {"one": "1"}),
    Option("--pairs", "count1", extra=("--ab", "env:", "env:")),
    Option("--block-ms", "positive"), Option("--warmup-ms", "positive"), Option("--time-budget", "positive"),
    Option("--cpp-min-time", "positive"), Option("--precision", "fraction", extra=("--adaptive",)),
    Option("--gpus", "", {"zero": "0", "word": "two", "empty": "", "negative": "-1", "huge": HUGE_INT}),
    Option("--baseline", "", {"missing": "{tmp}/no-such.json", "junk": "{tmp}/junk.json", "empty-folder": "{tmp}/empty",
                              "device": "/dev/zero", "empty": "", "fifo": "{tmp}/fifo.json"}),
    Option("--out", "", {"a-file": "{tmp}/junk.json", "below-a-file": "{tmp}/junk.json/below",
                         "proc": "/proc/no-such-folder", "name-too-long": "{tmp}/" + "x" * 300, "empty": "",
                         "device": "/dev/null"}),
    Option("--op", "", {"missing": "{tmp}/no-such.py", "not-python": "{tmp}/notes.txt",
                        "bad-name": "{tmp}/ops.py:1bad", "empty-name": "{tmp}/ops.py:", "empty": "",
                        "folder": "{tmp}/empty"}),
)
RUN_LINES: dict[str, tuple[str, ...]] = {
    "unknown-option": ("--nosuch",), "positional": ("extra",),
    "processes-with-ab": ("--processes", "2", "--ab", "env:", "env:"),
    "processes-with-shards": ("--processes", "2", "--shards", "2"), "pairs-without-ab": ("--pairs", "2"),
    "baseline-with-ab": ("--baseline", "{good}", "--ab", "env:", "env:"),
    "shards-on-cuda": ("--shards", "2", "--device", "cuda"),
    "gpus-on-cpu": ("--gpus", "2", "--device", "cpu"), "shards-with-gpus": ("--shards", "2", "--gpus", "2"),
    "ab-one-side": ("--ab", "env:"), "ab-unknown-prefix": ("--ab", "env:", "bogus:x"),
    "ab-env-no-value": ("--ab", "env:", "env:X"), "ab-env-bad-key": ("--ab", "env:", "env:1X=2"),
    "ab-env-twice": ("--ab", "env:", "env:A=1,A=2"), "ab-missing-python": ("--ab", "/no/such/python", "env:"),
    "ab-empty-side": ("--ab", "", "env:"), "ab-empty-build": ("--ab", "env:", "build:"),
    "ab-missing-build": ("--ab", "env:", "build:/no/such/build"),
    "ab-not-a-build": ("--ab", "env:", "build:{tmp}/empty"),
    "ab-empty-python": ("--ab", "env:", "python:"), "ab-shell": ("--ab", "/bin/sh", "env:"),
    "ab-true": ("--ab", "env:", "python:/bin/true"), "ab-bad-knob": ("--ab", "env:", "env:DBENCH_MM_KERNEL=bogus"),
    "ab-missing-build-env": ("--ab", "env:", "env:DBENCH_BUILD_DIR=/nonexistent"),
}
RUN_ENV_LINES: dict[str, dict[str, str]] = {
    "mm-kernel-bogus": {"DBENCH_MM_KERNEL": "bogus"}, "inject-ns-float": {"DBENCH_INJECT_NS": "3e2"},
    "inject-cpu-ns-negative": {"DBENCH_INJECT_CPU_NS": "-1"}, "inject-gpu-ns-huge": {"DBENCH_INJECT_GPU_NS": HUGE_INT},
    "build-dir-missing": {"DBENCH_BUILD_DIR": "/nonexistent"},
    "build-dir-empty-folder": {"DBENCH_BUILD_DIR": "{tmp}/empty"},
    "build-dir-a-file": {"DBENCH_BUILD_DIR": "{tmp}/junk.json"},
}


def _cli_files(ctx: Ctx) -> None:
    """What the command lines name: a junk file, an empty folder, a FIFO, notes, an op file, good results."""
    (ctx.tmp / "junk.json").write_text('{"rows": "no"}')
    (ctx.tmp / "empty").mkdir()
    os.mkfifo(ctx.tmp / "fifo.json")
    (ctx.tmp / "notes.txt").write_text("notes\n")
    (ctx.tmp / "ops.py").write_text("from dbench import Op\n"
                                    "probe_op = Op(name='probe_op', forward=lambda x: x.clone())\n")
    for name, var in (("gate-new.json", "new"), ("gate-base.json", "base"), ("boundary-small-a.json", "a")):
        shutil.copyfile(GOLDEN / name, ctx.tmp / name)
        ctx.vars[var] = str(ctx.tmp / name)
    ctx.vars["good"] = ctx.vars["base"]
    nights = folder(ctx.tmp / "nights")
    for name in ("gate-new.json", "gate-base.json"):
        shutil.copyfile(GOLDEN / name, nights / name)
    ctx.vars["nights"] = str(nights)
    aa = sorted(AA_FOLDER.glob("*.json.gz"))
    ctx.vars.update(aa1=str(aa[0]), aa2=str(aa[1]))


RUN_ARGV = ("--scenario", "boundary", "--device", "cpu", "--quick", "--ops", "muladd", "--variants", "raw", "--no-cpp",
            "--no-pin", "--rounds", "2", "--out", "{tmp}/out")
GATE = ("{new}", "{base}")
COMMANDS: tuple[Command, ...] = (
    Command("run.py", ("{run}", *RUN_ARGV), RUN_OPTIONS, lines=RUN_LINES, env_lines=RUN_ENV_LINES),
    Command("gate", ("{dbench}", "gate", *GATE), (
        Option("--delta", "fraction"), Option("--alpha", "alpha"), Option("--alpha-night", "fraction"),
        Option("--target", "fraction"), Option("--format", "choice"), Option("--metric", "choice"),
        Option("--require", "", {"unknown": "bogus", "empty": "", "comma": ","}),
        Option("--calibration", "", {"missing": "{tmp}/no-such.json", "junk": "{tmp}/junk.json",
                                     "a-result": "{base}", "device": "/dev/zero", "fifo": "{tmp}/fifo.json"})),
        lines={"no-arguments": ("{dbench}", "gate"), "missing-new": ("{dbench}", "gate", "{tmp}/no-such.json"),
               "empty-folder-new": ("{dbench}", "gate", "{tmp}/empty", "{base}"),
               "missing-baseline": ("{dbench}", "gate", "{new}", "{tmp}/no-such.json"),
               "unknown-option": ("{dbench}", "gate", *GATE, "--nosuch")}),
    Command("report", ("{dbench}", "report", "{a}"), (Option("--format", "choice"),),
            lines={"no-arguments": ("{dbench}", "report"), "missing-file": ("{dbench}", "report", "{tmp}/no-such.json"),
                   "empty-folder": ("{dbench}", "report", "{tmp}/empty"),
                   "unknown-option": ("{dbench}", "report", "{a}", "-x")}),
    Command("figures", ("{dbench}", "figures", "{a}", "--out", "{tmp}/figs"), (
        Option("--kinds", "", {"unknown": "bogus", "empty": "", "comma": ",", "twice": "cpu,cpu"}),
        Option("--history-mode", "", {"unknown": "bogus", "empty": ""}),
        Option("--out", "", {"a-file": "{tmp}/junk.json", "proc": "/proc/no-such-folder", "empty": ""})),
        lines={"no-out": ("{dbench}", "figures", "{a}"), "no-arguments": ("{dbench}", "figures"),
               "missing-file": ("{dbench}", "figures", "{tmp}/no-such.json", "--out", "{tmp}/figs")}),
    Command("compare", ("{dbench}", "compare", *GATE), (
        Option("--max-spread", "nonnegative"), Option("--value", "choice"),
        Option("--csv", "", {"below-a-file": "{tmp}/junk.json/x.csv", "proc": "/proc/no-such/x.csv",
                             "a-folder": "{tmp}/empty", "empty": ""})),
        lines={"one-file": ("{dbench}", "compare", "{new}"), "three-files": ("{dbench}", "compare", *GATE, "{a}"),
               "missing-file": ("{dbench}", "compare", "{new}", "{tmp}/no-such.json")}),
    Command("history", ("{dbench}", "history", "{nights}"), (
        Option("--format", "choice"),
        Option("--penalty", "positive", only=("zero", "negative", "nan", "inf", "word", "empty")),
        Option("--plot", "", {"below-a-file": "{tmp}/junk.json/h.png", "proc": "/proc/no-such/h.png"})),
        lines={"missing-folder": ("{dbench}", "history", "{tmp}/no-such"), "a-file": ("{dbench}", "history", "{base}"),
               "empty-folder": ("{dbench}", "history", "{tmp}/empty"), "no-arguments": ("{dbench}", "history")}),
    Command("calibrate", ("{dbench}", "calibrate", "{aa1}", "{aa2}", "--out", "{tmp}/cal.json"), (
        Option("--alpha-nightly", "fraction"), Option("--alpha-row", "fraction"), Option("--power", "fraction"),
        Option("--floor", "nonnegative"),
        Option("--target-effect", "positive", only=("zero", "negative", "nan", "inf", "word")),
        Option("--processes", "positive", only=("zero", "negative", "nan", "inf", "word", "huge")),
        Option("--injected-metric", "choice"), Option("--injected-row", "regex", extra=("--injected", "{aa2}"))),
        lines={"no-out": ("{dbench}", "calibrate", "{aa1}", "{aa2}"),
               "out-below-a-file": ("{dbench}", "calibrate", "{aa1}", "{aa2}", "--out", "{tmp}/junk.json/c.json"),
               "missing-run": ("{dbench}", "calibrate", "{tmp}/no-such.json", "--out", "{tmp}/cal.json")}),
    Command("nights", ("{dbench}", "nights", "{aa1}", "{aa2}", "--nights", "5"), (
        Option("--pairs", "count1"), Option("--nights", "count1"), Option("--seed", "count0"),
        Option("--injected-pairs", "count1", extra=("--injected", "{aa2}")), Option("--delta", "fraction"),
        Option("--alpha-night", "fraction"), Option("--alpha", "alpha"), Option("--target", "fraction"),
        Option("--injected-row", "regex", extra=("--injected", "{aa2}")), Option("--injected-metric", "choice"),
        Option("--require", "", {"unknown": "bogus", "empty": ""}),
        Option("--calibration", "", {"missing": "{tmp}/no-such.json", "junk": "{tmp}/junk.json"})),
        lines={"no-arguments": ("{dbench}", "nights"), "missing-file": ("{dbench}", "nights", "{tmp}/no-such.json")}),
    Command("export", ("{dbench}", "export", "{a}", "--format", "bencher"), (
        Option("--format", "", {"unknown": "bogus", "empty": "", "md": "md"}),
        Option("--out", "", {"below-a-file": "{tmp}/junk.json/x.json", "proc": "/proc/no-such/x.json",
                             "a-folder": "{tmp}/empty", "empty": ""})),
        lines={"no-format": ("{dbench}", "export", "{a}"), "missing-file": ("{dbench}", "export", "{tmp}/no-such.json",
                                                                          "--format", "bencher")}),
)
DBENCH_LINES: dict[str, tuple[str, ...]] = {
    "no-command": ("{dbench}",), "unknown-command": ("{dbench}", "bogus"), "empty-command": ("{dbench}", ""),
    "option-as-command": ("{dbench}", "--bogus"), "list-unknown-option": ("{dbench}", "list", "--nosuch"),
    "list-missing-op": ("{dbench}", "list", "--op", "{tmp}/no-such.py"),
    "run-no-scenario-value": ("{dbench}", "run", "--scenario"),
}
FAST_CLI = {"cli/run.py/--seed=huge", "cli/run.py/--block-ms=huge", "cli/run.py/--warmup-ms=12-digits",
            "cli/run.py/--scenario=empty", "cli/gate/--delta=nan", "cli/dbench/no-command"}


def _cli(name: str, argv: tuple[str, ...], env: Mapping[str, str] | None = None) -> Probe:
    # A bad value that is accepted starts a run: the timeout bounds it, and the probe fails.
    return Probe(name, "cli", argv, refused(), env=env or {}, setup=(_cli_files,), fast=name in FAST_CLI, timeout=40)


def cli_probes() -> list[Probe]:
    probes: list[Probe] = []
    for command in COMMANDS:
        for option in command.options:
            for kind, value in option.bad().items():
                probes.append(_cli(f"cli/{command.name}/{option.name}={kind}", (*command.argv, *option.extra,
                                                                                 option.name, value)))
            probes.append(_cli(f"cli/{command.name}/{option.name}=missing-value", (*command.argv, *option.extra,
                                                                                   option.name)))
            if command.name != "run.py":  # the module form: python3 -m dbench.analysis.NAME
                kind, value = next(iter(option.bad().items()))
                module = ("{module:dbench.analysis." + command.name + "}", *command.argv[2:])
                probes.append(_cli(f"cli/analysis.{command.name}/{option.name}={kind}", (*module, *option.extra,
                                                                                         option.name, value)))
        prefix = ("{run}", *RUN_ARGV) if command.name == "run.py" else ()
        for line, argv in command.lines.items():
            probes.append(_cli(f"cli/{command.name}/{line}", (*prefix, *argv)))
        for line, env in command.env_lines.items():
            probes.append(_cli(f"cli/{command.name}/env/{line}", ("{run}", *RUN_ARGV), env))
    for option in RUN_OPTIONS:  # dbench run: the same parser behind the wrapper, one bad value each
        kind, value = next(iter(option.bad().items()))
        probes.append(_cli(f"cli/dbench-run/{option.name}={kind}", ("{dbench}", "run", *RUN_ARGV, *option.extra,
                                                                     option.name, value)))
    probes += [_cli(f"cli/dbench/{name}", argv) for name, argv in DBENCH_LINES.items()]
    probes.append(Probe("cli/dbench/no-command-usage-on-stderr", "cli", ("{dbench}",),
                        (exit_in(2), not_on_stdout("usage", "error")), setup=(_cli_files,)))
    probes.append(Probe("cli/run.py/env/build-dir-missing-error-on-stderr", "cli", ("{run}", *RUN_ARGV),
                        (exit_in(2), not_on_stdout("error"), one_line()), env={"DBENCH_BUILD_DIR": "/nonexistent"},
                        setup=(_cli_files,), timeout=40))
    probes += _list_probes()
    return probes


def _list_probes() -> list[Probe]:
    """run.py --list makes nothing in the current folder, even a read-only one."""
    quiet = (exit_in(0), no_traceback(), cwd_untouched())
    probes = [Probe(f"cli/{name}/list-makes-nothing", "cli", argv, quiet, slow=True, timeout=120)
              for name, argv in (("run.py", ("{run}", "--list")), ("dbench", ("{dbench}", "list")))]

    def read_only_cwd(ctx: Ctx) -> None:
        tmpfs("ro", readonly=True)(ctx)
        ctx.vars["cwd"] = ctx.vars["ro"]

    probes.append(Probe("cli/run.py/list-in-a-read-only-folder", "cli", ("{run}", "--list"),
                        (exit_in(0), no_traceback()), setup=(read_only_cwd,), slow=True, timeout=120))
    return probes


# ---------------------------------------------------------------------------------------------
# (c) damaged: result files broken in every way, through every reader; and the suite's own files.


def _good_bytes() -> bytes:
    return (GOLDEN / "gate-base.json").read_bytes()


def _edited(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path, Ctx], None]:
    def write(path: Path, _ctx: Ctx) -> None:
        doc = golden_doc("gate-base.json")
        edit(doc)
        path.write_text(json.dumps(doc))  # NaN and Infinity as Python writes them

    return write


def _first_row(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["rows"][0].__setitem__(key, value)


def _bytes(data: bytes | Callable[[], bytes]) -> Callable[[Path, Ctx], None]:
    return lambda path, _ctx: path.write_bytes(data if isinstance(data, bytes) else data())


def _sparse(path: Path, _ctx: Ctx) -> None:
    with open(path, "wb") as f:
        f.truncate(300 << 20)


DAMAGES: dict[str, Callable[[Path, Ctx], None]] = {
    "truncated": _bytes(lambda: _good_bytes()[: len(_good_bytes()) // 2]),
    "truncated-gzip": _bytes(lambda: gzip.compress(_good_bytes())[:200]),
    "corrupt-gzip": _bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4),
    "gzip-bomb": lambda path, ctx: shutil.copyfile(ctx.assets.bomb(), path),
    "deep-nesting": _bytes(b"[" * 200_000 + b"]" * 200_000),
    "deep-objects": _bytes(b'{"rows": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001),
    "nan-median": _edited(_first_row("median", float("nan"))),
    "infinite-median": _edited(_first_row("median", float("inf"))),
    "negative-median": _edited(_first_row("median", -1.0)),
    "zero-median": _edited(_first_row("median", 0.0)),
    "400-digit-median": _edited(_first_row("median", 10 ** 400)),
    "text-median": _edited(_first_row("median", "fast")),
    "schema-99": _edited(lambda d: d.__setitem__("schema_version", 99)),
    "schema-text-2": _edited(lambda d: d.__setitem__("schema_version", "2")),
    "schema-2.5": _edited(lambda d: d.__setitem__("schema_version", 2.5)),
    "schema-negative": _edited(lambda d: d.__setitem__("schema_version", -1)),
    "status-unknown": _edited(lambda d: d.__setitem__("status", "done")),
    "rows-an-object": _edited(lambda d: d.__setitem__("rows", {})),
    "env-a-list": _edited(lambda d: d.__setitem__("env", [])),
    "row-without-op": _edited(lambda d: d["rows"][0].pop("op")),
    "empty": _bytes(b""),
    "whitespace": _bytes(b"  \n\t\n"),
    "not-utf8": _bytes(b'{"rows": "\xff\xfe"}'),
    "nul-bytes": _bytes(b"\0" * 64),
    "json-array": _bytes(b"[1, 2, 3]"),
    "fifo": lambda path, _ctx: os.mkfifo(path),
    "folder": lambda path, _ctx: path.mkdir(),
    "link-to-dev-zero": lambda path, _ctx: path.symlink_to("/dev/zero"),
    "dangling-link": lambda path, ctx: path.symlink_to(ctx.tmp / "nowhere"),
    "sparse-300-MiB": _sparse,
}
# reader -> its command line with {bad} (the damaged file) and {good}; history reads a folder of both.
READERS: dict[str, tuple[str, ...]] = {
    "report": ("{dbench}", "report", "{bad}"),
    "gate-new": ("{dbench}", "gate", "{bad}", "{good}"),
    "gate-baseline": ("{dbench}", "gate", "{good}", "{bad}"),
    "compare": ("{dbench}", "compare", "{good}", "{bad}"),
    "history": ("{dbench}", "history", "{nights}"),
    "export": ("{dbench}", "export", "{bad}", "--format", "bencher"),
    "figures": ("{dbench}", "figures", "{bad}", "--out", "{figs}"),
}
FAST_DAMAGED = {"damaged/gate-new/truncated", "damaged/report/gzip-bomb", "damaged/history/fifo"}


def damaged_file(damage: Callable[[Path, Ctx], None]) -> Setup:
    def setup(ctx: Ctx) -> None:
        nights = folder(ctx.tmp / "nights")
        good = nights / "good.json"
        shutil.copyfile(GOLDEN / "gate-base.json", good)
        shutil.copyfile(GOLDEN / "gate-new.json", nights / "new.json")
        bad = nights / "bad.json"
        damage(bad, ctx)
        ctx.vars.update(nights=str(nights), good=str(good), bad=str(bad), figs=str(ctx.tmp / "figs"))

    return setup


# A file the suite wrote -> what each reader must answer: readable, so never "bad input" (2).
SUITE_FILES = ("complete", "interrupted-early", "interrupted-rounds", "processes-complete", "processes-interrupted")
SUITE_READERS: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "report": (("{dbench}", "report", "{bad}"), (0,)),
    "report-txt": (("{dbench}", "report", "{bad}", "--format", "txt"), (0,)),
    "export": (("{dbench}", "export", "{bad}", "--format", "bencher"), (0,)),
    "compare": (("{dbench}", "compare", "{bad}", "{bad}"), (0, 1)),
    "figures": (("{dbench}", "figures", "{bad}", "--out", "{figs}"), (0,)),
    "gate-baseline": (("{dbench}", "gate", "{complete}", "{bad}"), (0, 1, 3)),
}


# Valid JSON that is no result at all: a folder of results may hold such files (the C++ driver's JSON
# beside a run), so a folder's reader skips them with a line saying so; a file named on its own is refused.
NOT_A_RESULT = ("rows-an-object", "row-without-op", "json-array")


def damaged_probes() -> list[Probe]:
    skipped = (exit_in(0, 1, 3), one_line(), mentions("skipped"), cwd_untouched())
    probes = [Probe(f"damaged/{reader}/{kind}", "damaged", argv,
                    skipped if reader == "history" and kind in NOT_A_RESULT else (*refused(), no_outputs("figs")),
                    setup=(damaged_file(damage),), fast=f"damaged/{reader}/{kind}" in FAST_DAMAGED, timeout=60)
              for kind, damage in DAMAGES.items() for reader, argv in READERS.items()]
    for kind in SUITE_FILES:
        for reader, (argv, codes) in SUITE_READERS.items():
            probes.append(Probe(f"damaged/suite-file/{kind}/{reader}", "damaged", argv,
                                (exit_in(*codes), no_traceback(), cwd_untouched()),
                                setup=(suite_copy(kind, "bad"), suite_copy("complete", "complete", "complete-run.json"),
                                       _set("figs", lambda ctx: ctx.tmp / "figs")),
                                slow=True, fast=(kind, reader) == ("interrupted-early", "report"), timeout=120))
    return probes


# ---------------------------------------------------------------------------------------------
# (d) injection: hostile text in a result's fields, through every sink that prints it.

PAYLOADS: dict[str, str] = {
    "osc-title": "\x1b]0;pwned\x07",
    "clear-screen": "\x1b[2J\x1b[H",
    "c1-csi": "\x9b31mred",
    "img": "<img src=x onerror=alert(1)>",
    "fake-row": "x | y |\n| fake | row |",
    "carriage-return": "ok\rFAKE",
}
TOKEN = "probetoken"  # the harmless value in the same places: the output's shape to compare with
IDENTITY = ("op", "variant")  # row identity: refusing such a file (one line, exit 2) is an answer too


def _rename(doc: dict[str, Any], key: str, old: str, new: str) -> None:
    """Every row's `key` equal to `old` becomes `new`, and so does that part of the rows' baseline names."""
    for row in doc["rows"]:
        if row.get(key) == old:
            row[key] = new
        if isinstance(row.get("baseline"), str):
            row["baseline"] = "/".join(new if part == old else part for part in row["baseline"].split("/"))


def _fail_row(doc: dict[str, Any], variant: str, reason: str) -> None:
    row = next(r for r in doc["rows"] if r["variant"] == variant and r["status"] == "ok" and r["metric"] == "cpu_us")
    row.update(status="failed", reason=reason, samples=[],
               **{k: None for k in ("median", "q1", "q3", "ci_low", "ci_high")})
    doc.setdefault("failures", []).append({"row": f"{row['op']}/{variant}/{row['mode']}", "driver": row["driver"],
                                           "metric": row["metric"], "reason": reason})


def _inject(doc: dict[str, Any], key: str, value: str, *, for_gate: bool) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    if key == "reason":
        if for_gate:
            next(r for r in doc["rows"] if r["status"] == "failed")["reason"] = value
        else:
            _fail_row(doc, "define_impl", value)
    elif key == "op":
        _rename(doc, "op", "muladd" if for_gate else "l2norm", value)
    elif key == "variant":
        _rename(doc, "variant", "cpp" if for_gate else "cpp_autograd", value)
    else:
        doc["env"][key] = value
    return doc


# sink -> (its command line on {doc} (and {base}), the exits it may give, its format)
SINKS: dict[str, tuple[tuple[str, ...], tuple[int, ...], str]] = {
    "report-md": (("{dbench}", "report", "{doc}", "--format", "md"), (0,), "md"),
    "report-txt": (("{dbench}", "report", "{doc}", "--format", "txt"), (0,), "txt"),
    "report-csv": (("{dbench}", "report", "{doc}", "--format", "csv"), (0,), "csv"),
    "gate-md": (("{dbench}", "gate", "{doc}", "{base}", "--format", "md"), (0, 1, 3), "md"),
    "gate-txt": (("{dbench}", "gate", "{doc}", "{base}", "--format", "txt"), (0, 1, 3), "txt"),
}
WIDE = {"COLUMNS": "4000"}  # no table wrapped: line counts compare


def _write_pair(where: Path, sink: str, key: str, value: str) -> dict[str, str]:
    where.mkdir(parents=True, exist_ok=True)
    gate = sink.startswith("gate")
    new = _inject(golden_doc("gate-new.json" if gate else "boundary-small-a.json"), key, value, for_gate=gate)
    (where / "doc.json").write_text(json.dumps(new))
    paths = {"doc": str(where / "doc.json")}
    if gate:
        base = golden_doc("gate-base.json")
        if key != "reason":
            base = _inject(base, key, value, for_gate=True)
        (where / "base.json").write_text(json.dumps(base))
        paths["base"] = str(where / "base.json")
    return paths


def injected(sink: str, key: str, payload: str) -> Setup:
    """The hostile document(s) in <tmp>/, and the same with TOKEN in <tmp>/clean/, whose output (run
    once per sink and field) is what the hostile one's shape is compared with."""
    def setup(ctx: Ctx) -> None:
        ctx.vars.update(_write_pair(ctx.tmp, sink, key, payload))
        memo = ("clean", sink, key)
        if memo not in ctx.assets.memo:
            clean = Ctx(ctx.tmp / "clean", ctx.assets, vars=dict(ctx.vars))
            clean.vars.update(_write_pair(clean.tmp, sink, key, TOKEN))
            ctx.assets.memo[memo] = execute(SINKS[sink][0], clean, WIDE, timeout=60)
        ctx.memo_key = memo

    return setup


def _md_shape(text: str) -> list[int]:
    """Per table line, its unescaped pipes: a cell's | or newline changes it."""
    return [len(re.findall(r"(?<!\\)\|", line)) for line in text.splitlines() if line.lstrip().startswith("|")]


def _csv_records(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _shape_problem(fmt: str, got: str, clean: str) -> str | None:
    if fmt == "md":
        if "<img" in got:
            return "raw <img in markdown"
        a, b = _md_shape(got), _md_shape(clean)
        if a == b:
            return None
        return f"table lines and columns differ from the clean document's ({len(a)} vs {len(b)} lines)"
    if fmt == "csv":
        records = _csv_records(got)
        for record in records:
            for value in record:
                if _control(value) or "\n" in value:
                    return f"a field with a control character or newline: {shown(value)}"
        n = len(_csv_records(clean))
        return None if len(records) == n else f"{len(records)} CSV records, the clean document gives {n}"
    a, b = len(got.splitlines()), len(clean.splitlines())
    return None if a == b else f"{a} lines, the clean document gives {b}"


def injection_ok(sink: str, key: str) -> Check:
    _, codes, fmt = SINKS[sink]

    def test(o: Outcome) -> str | None:
        if o.code == 2 and key in IDENTITY and len(o.err_lines()) == 1:
            found = _control(o.stderr)
            return f"refused, but its line has a raw control character: {found}" if found else None
        if o.code not in codes:
            return f"exit {o.code}: {shown(o.stderr.strip()[-200:])}"
        found = _control(o.stdout, allow_crlf=fmt == "csv") or _control(o.stderr)
        if found:
            return f"raw control character: {found}"
        clean: Outcome = o.ctx.assets.memo[o.ctx.memo_key]
        if clean.code not in codes:
            return f"the clean document's run failed (exit {clean.code}): {shown(clean.stderr.strip()[-200:])}"
        return _shape_problem(fmt, o.stdout, clean.stdout)

    return Check("escaped: no control character, no extra row or column (or refused in one line)", test)


FAST_INJECTION = {"injection/report-md/reason/fake-row", "injection/gate-md/reason/osc-title"}


def injection_probes() -> list[Probe]:
    return [Probe(f"injection/{sink}/{key}/{name}", "injection", SINKS[sink][0],
                  (injection_ok(sink, key), cwd_untouched()), env=WIDE, setup=(injected(sink, key, payload),),
                  fast=f"injection/{sink}/{key}/{name}" in FAST_INJECTION)
            for sink in SINKS for key in ("reason", "op", "variant", "gpu_name") for name, payload in PAYLOADS.items()]


# ---------------------------------------------------------------------------------------------
# (e) outputs: stdout that cannot be written, a full disk, a read-only folder, --plot of one variant.

# What prints its answer on stdout: each must say in one line that it could not, and exit non-zero.
STDOUT_COMMANDS: dict[str, tuple[str, ...]] = {
    "report-md": ("{dbench}", "report", "{a}"), "report-txt": ("{dbench}", "report", "{a}", "--format", "txt"),
    "report-csv": ("{dbench}", "report", "{a}", "--format", "csv"),
    "report-json": ("{dbench}", "report", "{a}", "--format", "json"),
    "gate-md": ("{dbench}", "gate", "{new}", "{base}", "--format", "md"),
    "gate-txt": ("{dbench}", "gate", "{new}", "{base}", "--format", "txt"),
    "gate-json": ("{dbench}", "gate", "{new}", "{base}", "--format", "json"),
    "compare": ("{dbench}", "compare", "{new}", "{base}"), "history": ("{dbench}", "history", "{nights}"),
    "export-bencher": ("{dbench}", "export", "{a}", "--format", "bencher"),
    "export-github": ("{dbench}", "export", "{a}", "--format", "github-action-benchmark"),
    "analysis.report": ("{module:dbench.analysis.report}", "{a}"),
}
# What writes a file where --out (or --csv, --plot) says: {w} is the folder that cannot be written.
FILE_COMMANDS: dict[str, tuple[str, ...]] = {
    "export": ("{dbench}", "export", "{a}", "--format", "bencher", "--out", "{w}/export.json"),
    "figures": ("{dbench}", "figures", "{a}", "--out", "{w}/figures"),
    "figures-into-folder": ("{dbench}", "figures", "{a}", "--out", "{w}"),
    "compare-csv": ("{dbench}", "compare", "{new}", "{base}", "--csv", "{w}/spread.csv"),
    "calibrate": ("{dbench}", "calibrate", "{aa1}", "{aa2}", "--out", "{w}/calibration.json"),
    "history-plot": ("{dbench}", "history", "{nights}", "--plot", "{w}/history.png"),
    "nights": ("{dbench}", "nights", "{aa1}", "{aa2}", "--nights", "5", "--out", "{w}/nights.json"),
}
OUTPUT_EXITS = (1, 2)  # docs/usage.md: an output that cannot be written is bad input (2), a failed write mid-run 1
FAST_OUTPUTS = {"outputs/stdout-full/report-md", "outputs/read-only/export"}


def _where(kind: str) -> Setup:
    def setup(ctx: Ctx) -> None:
        if kind == "full":
            tmpfs("w", full=True)(ctx)
        elif kind == "read-only":
            tmpfs("w", readonly=True)(ctx)
        else:  # below a file: ENOTDIR, for root too
            (ctx.tmp / "a-file").write_text("x")
            ctx.vars["w"] = str(ctx.tmp / "a-file")

    return setup


def outputs_probes() -> list[Probe]:
    probes: list[Probe] = []
    for stream in ("full", "closed"):
        for name, argv in STDOUT_COMMANDS.items():
            probes.append(Probe(f"outputs/stdout-{stream}/{name}", "outputs", argv,
                                (exit_in(*OUTPUT_EXITS), one_line(), cwd_untouched()), setup=(_cli_files,),
                                stdout=stream, fast=f"outputs/stdout-{stream}/{name}" in FAST_OUTPUTS))
    for kind in ("full", "read-only", "below-a-file"):
        for name, argv in FILE_COMMANDS.items():
            probes.append(Probe(f"outputs/{kind}/{name}", "outputs", argv,
                                (exit_in(2), one_line(), cwd_untouched(), no_outputs("w")),
                                setup=(_cli_files, _where(kind)), fast=f"outputs/{kind}/{name}" in FAST_OUTPUTS,
                                timeout=120))
    probes += [
        Probe("outputs/run-plot-one-variant", "outputs", ("{run}", *QUICK, "--plot", "--out", "{out}"),
              (exit_in(0), at_most_one_line(), results("out", ["complete"])), slow=True, timeout=180),
        Probe("outputs/run-plot-one-variant-processes", "outputs",
              ("{run}", *QUICK, "--plot", "--processes", "2", "--out", "{out}"),
              (exit_in(0), at_most_one_line(), results("out", ["complete"])), slow=True, timeout=180),
        # A full disk before the run: the --out check finds it (bad input, nothing run); filled once the
        # result file is reserved: its first write fails, "a result write failed mid-run" (exit 1).
        Probe("outputs/run-disk-full-before", "outputs", ("{run}", *QUICK, "--out", "{w}"),
              (*refused(), no_outputs("w")), setup=(_where("full"),), timeout=90),
        Probe("outputs/run-disk-full-after-reserving", "outputs", ("{run}", *QUICK, "--out", "{w}"),
              (exit_in(1), one_line(), cwd_untouched()), setup=(tmpfs("w", size="4m"),),
              triggers=(Trigger("fill the disk once the result file is reserved", _fill("w"), when=appears("w")),),
              slow=True, timeout=180),
        Probe("outputs/run-read-only-out", "outputs", ("{run}", *QUICK, "--out", "{w}/results"),
              (*refused(), no_outputs("w")), setup=(_where("read-only"),), timeout=90),
        Probe("outputs/run-plot-disk-full-after-the-result", "outputs", ("{run}", *QUICK, "--plot", "--out", "{w}"),
              (exit_in(*OUTPUT_EXITS), one_line(), results("w", ["complete"])), setup=(tmpfs("w", size="4m"),),
              triggers=(Trigger("fill the disk once the result is complete", _fill("w"),
                                when=result_state("w", lambda d: d.get("status") == "complete")),),
              slow=True, timeout=180),
    ]
    return probes


def _fill(var: str) -> Callable[[subprocess.Popen[bytes] | None, Ctx], None]:
    """Fill the file system of folder `var`: a filler file takes every block left."""
    def do(_proc: subprocess.Popen[bytes] | None, ctx: Ctx) -> None:
        with contextlib.suppress(OSError), open(ctx.path(var) / "filler", "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)

    return do


# ---------------------------------------------------------------------------------------------
# (f) interrupts: a signal at every moment of a run; what is left must be readable and say so.


def _moments(processes: bool) -> dict[str, tuple[float, Callable[[Ctx], bool] | None]]:
    """name -> (seconds after the start, and the state of the run to wait for)."""
    moments: dict[str, tuple[float, Callable[[Ctx], bool] | None]] = {
        "0.2s": (0.2, None), "1s": (1.0, None), "3s": (3.0, None),
        "before-the-rounds": (0.0, result_state("out",
                                                lambda d: d.get("status") == "running" and not rounds_done(1)(d))),
    }
    if processes:
        moments.update({"9s": (9.0, None), "in-process-0-rounds": (0.0, _child_rounds(2)),
                         "in-process-1": (0.0, appears("out", "*.processes/process-1.log"))})
    else:
        moments["mid-rounds"] = (0.0, result_state("out", rounds_done(2)))
    return moments


FAST_INTERRUPTS = {"interrupts/run/SIGTERM/1s", "interrupts/processes/SIGINT-group/in-process-0-rounds"}


def interrupts_probes() -> list[Probe]:
    stopped = (exit_in(130), no_traceback(), cwd_untouched(), results("out", ["interrupted"]))
    probes = []
    for target, extra in (("run", ()), ("processes", ("--processes", "2"))):
        signals = {"SIGTERM": send(signal.SIGTERM), "SIGINT": send(signal.SIGINT)}
        if target == "processes":
            signals["SIGINT-group"] = send(signal.SIGINT, group=True)  # a terminal's Ctrl-C reaches every child
        for sig_name, do in signals.items():
            for moment, (at, when) in _moments(target == "processes").items():
                pid = f"interrupts/{target}/{sig_name}/{moment}"
                probes.append(Probe(pid, "interrupts", ("{run}", *LONG, *extra, "--out", "{out}"), stopped,
                                    triggers=(Trigger(f"{sig_name} at {moment}", do, at=at, when=when),),
                                    slow=True, fast=pid in FAST_INTERRUPTS, timeout=240))
    probes.append(Probe("interrupts/run/SIGINT-twice/mid-rounds", "interrupts", ("{run}", *LONG, "--out", "{out}"),
                        stopped, triggers=(Trigger("two SIGINTs", send(signal.SIGINT, twice=True),
                                                   when=result_state("out", rounds_done(2))),), slow=True, timeout=240))
    mid_rounds = result_state("out", rounds_done(2))
    probes.append(Probe("interrupts/run/SIGTERM-then-SIGINT/mid-rounds", "interrupts",
                        ("{run}", *LONG, "--out", "{out}"), stopped,
                        triggers=(Trigger("SIGTERM", send(signal.SIGTERM), when=mid_rounds),
                                  Trigger("SIGINT", send(signal.SIGINT), at=0.0, when=mid_rounds)),
                        slow=True, timeout=240))
    return probes


# ---------------------------------------------------------------------------------------------
# (g) the gate on a run that did not finish: never a PASS.

UNFINISHED = ("failed", "running", "interrupted", "incomplete")
FAST_GATE = {"gate/interrupted/md", "gate/running/txt"}


def _status(status: str, source: Path = GOLDEN / "gate-base.json") -> Setup:
    """<tmp>/new.json: `source` (by default identical to the baseline: it would PASS) with `status`."""
    def setup(ctx: Ctx) -> None:
        doc = read_json(source)
        doc["status"] = status
        if status == "failed":
            doc.setdefault("error", "the harness broke")
        (ctx.tmp / "new.json").write_text(json.dumps(doc))
        shutil.copyfile(GOLDEN / "gate-base.json", ctx.tmp / "base.json")
        ctx.vars.update(new=str(ctx.tmp / "new.json"), base=str(ctx.tmp / "base.json"))

    return setup


def _new_in_a_folder(ctx: Ctx) -> None:
    """The new run (after _status) moved into <tmp>/runs/: the gate given a folder."""
    folder(ctx.tmp / "runs")
    shutil.move(ctx.vars["new"], ctx.tmp / "runs")


def gate_probes() -> list[Probe]:
    never_pass = (exit_in(1, 2, 3), no_traceback(), cwd_untouched())
    probes = []
    for status in UNFINISHED:
        for fmt in ("md", "txt", "json"):
            probes.append(Probe(f"gate/{status}/{fmt}", "gate",
                                ("{dbench}", "gate", "{new}", "{base}", "--format", fmt),
                                (*never_pass, mentions(status)), setup=(_status(status),),
                                fast=f"gate/{status}/{fmt}" in FAST_GATE))
        probes.append(Probe(f"gate/{status}/module-form", "gate",
                            ("{module:dbench.analysis.gate}", "{new}", "{base}", "--hide-same"), never_pass,
                            setup=(_status(status),)))
        probes.append(Probe(f"gate/{status}/new-in-a-folder", "gate", ("{dbench}", "gate", "{tmp}/runs", "{base}"),
                            never_pass, setup=(_status(status), _new_in_a_folder)))
        aa = sorted(AA_FOLDER.glob("*.json.gz"))[0]
        probes.append(Probe(f"gate/{status}/ab-run", "gate", ("{dbench}", "gate", "{new}"), never_pass,
                            setup=(_status(status, aa),)))
    for kind in ("interrupted-early", "interrupted-rounds", "processes-interrupted"):
        probes.append(Probe(f"gate/suite-file/{kind}", "gate", ("{dbench}", "gate", "{new}", "{complete}"), never_pass,
                            setup=(suite_copy(kind, "new"), suite_copy("complete", "complete", "complete-run.json")),
                            slow=True, timeout=120))
        probes.append(Probe(f"gate/suite-file/{kind}-against-itself", "gate", ("{dbench}", "gate", "{new}", "{new}"),
                            never_pass, setup=(suite_copy(kind, "new"),), slow=True, timeout=120))
    return probes


# ---------------------------------------------------------------------------------------------
# (h) opfile: a user's op that exits, raises or crashes, at import or while it is timed.

OP_TEMPLATE = """\
import os, signal, sys
import torch
from dbench import Op
{at_import}
CALLS = [0]


def forward(a, b):
    CALLS[0] += 1
    if CALLS[0] > {after}:
        {in_call}
    return a * b


probe_op = Op(name="probe_op", forward=forward, inputs=("a", "b"), reference=lambda a, b: a * b)
"""
IN_CALL = {
    "raises": "raise RuntimeError('boom \\x1b]0;pwned\\x07 | fake |\\n| row |')",
    "sys-exit-0": "sys.exit(0)",
    "keyboard-interrupt": "raise KeyboardInterrupt",
    "segfault": "os.kill(os.getpid(), signal.SIGSEGV)",
    "abort": "os.abort()",
    "sigkill": "os.kill(os.getpid(), signal.SIGKILL)",
}
AT_IMPORT = {"sys-exit-0": "sys.exit(0)", "sys-exit-3": "sys.exit(3)", "raises": "raise RuntimeError('broken op file')",
             "syntax-error": "def (:"}
OP_RUN = ("--scenario", "boundary", "--quick", "--device", "cpu", "--variants", "raw", "--modes", "inference",
          "--no-cpp", "--no-pin", "--rounds", "20", "--op", "{tmp}/ops.py", "--out", "{out}")
FAST_OPFILE = {"opfile/import/sys-exit-0", "opfile/call/segfault"}


def _op_file(at_import: str = "", in_call: str = "pass", after: int = 0) -> Setup:
    def setup(ctx: Ctx) -> None:
        (ctx.tmp / "ops.py").write_text(OP_TEMPLATE.format(at_import=at_import, in_call=in_call, after=after))

    return setup


def opfile_probes() -> list[Probe]:
    probes = [Probe(f"opfile/import/{name}", "opfile", ("{run}", *OP_RUN), (*refused(), no_outputs("out")),
                    setup=(_op_file(at_import=code),), slow=True, fast=f"opfile/import/{name}" in FAST_OPFILE,
                    timeout=120)
              for name, code in AT_IMPORT.items()]
    # A run-time failure is no refusal: the run goes on (a FAILED line, its tables), or ends saying why.
    marked = (exit_not(0), no_traceback(), cwd_untouched(), results("out", ["failed"], failed_row=True))
    for name, code in IN_CALL.items():
        for when, after in (("", 0), ("-mid-rounds", 20_000)):
            for how, extra in (("call", ()), ("processes", ("--processes", "2"))):
                if how == "processes" and when:
                    continue
                checks = (*marked, clean_output()) if name == "raises" else marked
                if name == "keyboard-interrupt":  # the op's own Ctrl-C: an interrupted run is an answer too
                    checks = (exit_not(0), no_traceback(), results("out", ["failed", "interrupted"], failed_row=True))
                pid = f"opfile/{how}/{name}{when}"
                probes.append(Probe(pid, "opfile", ("{run}", *OP_RUN, *extra), checks,
                                    setup=(_op_file(in_call=code, after=after),), slow=True,
                                    fast=pid in FAST_OPFILE, timeout=180))
    return probes


PROBE_TABLES: tuple[Callable[[], list[Probe]], ...] = (links_probes, cli_probes, damaged_probes, injection_probes,
                                                       outputs_probes, interrupts_probes, gate_probes, opfile_probes)


# ---------------------------------------------------------------------------------------------
# The campaign.


def all_probes() -> list[Probe]:
    probes = [p for table in PROBE_TABLES for p in table()]
    ids = [p.id for p in probes]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise SystemExit(f"probe_campaign: error: probe ids given twice: {twice[:5]}")
    return probes


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", text)[-80:]


def _remove(path: Path) -> None:
    def writable(func: Callable[..., Any], name: str, _exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o755)
            func(name)

    shutil.rmtree(path, onerror=writable)


def run_probe(probe: Probe, assets: Assets, index: int, keep: bool) -> Result:
    if probe.root and not IS_ROOT:
        return Result(probe, "skip", notes=[NOT_ROOT])
    tmp = assets.base / f"{index:04d}-{_slug(probe.id)}"
    ctx = Ctx(tmp, assets)
    tmp.mkdir()
    ctx.cwd.mkdir()
    ctx.vars.update(tmp=str(tmp), cwd=str(ctx.cwd), out=str(tmp / "out"))
    started = time.monotonic()
    try:
        for setup in probe.setup:
            setup(ctx)
        ctx.cwd_before = frozenset(os.listdir(ctx.cwd))
        outcome = execute(probe.argv, ctx, probe.env, triggers=probe.triggers, stdout=probe.stdout,
                          timeout=probe.timeout)
        checks = []
        for check in probe.checks:
            try:
                found = check.test(outcome)
            except Exception as exc:  # noqa: BLE001  # a check that cannot look is a failed check, with why
                found = f"could not check: {type(exc).__name__}: {exc}"
            checks.append({"check": check.name, "ok": found is None, **({"found": found} if found else {})})
        lines = outcome.err_lines()
        return Result(probe, "pass" if all(c["ok"] for c in checks) else "fail", outcome.code,
                      shown(lines[0]) if lines else "", [shown(line) for line in lines[:6]], checks, ctx.notes,
                      time.monotonic() - started)
    except Skip as exc:
        return Result(probe, "skip", notes=[str(exc)])
    except Exception as exc:  # noqa: BLE001  # the setup or a needed asset broke: the probe could not be tried
        return Result(probe, "fail", notes=[*ctx.notes, f"setup: {type(exc).__name__}: {shown(str(exc), 400)}"],
                      seconds=time.monotonic() - started)
    finally:
        for cleanup in reversed(ctx.cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        if not keep:
            _remove(tmp)


def select(probes: list[Probe], fast: bool, classes: Sequence[str], ids: Sequence[str]) -> list[Probe]:
    return [p for p in probes if (not fast or p.fast) and (not classes or p.cls in classes)
            and (not ids or any(i in p.id for i in ids))]


def summary(results: list[Result]) -> str:
    rows = [("class", "probes", "pass", "fail", "skip", "seconds")]
    for cls in CLASSES:
        mine = [r for r in results if r.probe.cls == cls]
        if mine:
            rows.append((cls, *(str(n) for n in (len(mine), *(sum(r.status == s for r in mine)
                                                             for s in ("pass", "fail", "skip")))),
                         f"{sum(r.seconds for r in mine):.0f}"))
    rows.append(("all", *(str(n) for n in (len(results), *(sum(r.status == s for r in results)
                                                          for s in ("pass", "fail", "skip")))),
                 f"{sum(r.seconds for r in results):.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    failed = [r for r in results if r.status == "fail"]
    if failed:
        lines += ["", f"failed ({len(failed)}):"]
        for r in failed:
            found = "; ".join(f"{c['check']}: {c['found']}" for c in r.checks if not c["ok"]) or "; ".join(r.notes)
            lines.append(f"  {r.probe.id}  [exit {r.exit}] {found}")
            if r.stderr:
                lines.append(f"      stderr: {r.stderr}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="probe_campaign.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--fast", action="store_true", help="a few probes of each class (CI: about a minute)")
    p.add_argument("--class", dest="classes", action="append", default=[], metavar="NAME",
                   help=f"only this class (repeatable): {', '.join(CLASSES)} (or its letter a-h)")
    p.add_argument("--id", dest="ids", action="append", default=[], metavar="TEXT",
                   help="only probes whose id contains TEXT (repeatable)")
    p.add_argument("--out", type=Path, help="write the report (every probe's evidence) here as JSON")
    p.add_argument("--list", action="store_true", help="list the selected probes and exit")
    p.add_argument("--keep", action="store_true", help="keep each probe's folder (printed at the end)")
    p.add_argument("--verbose", "-v", action="store_true", help="a line per probe as it ends")
    args = p.parse_args(argv)
    args.classes = [CLASS_LETTERS.get(c, c) for c in args.classes]
    unknown = [c for c in args.classes if c not in CLASSES]
    if unknown:
        p.error(f"unknown class {', '.join(unknown)}; valid: {', '.join(CLASSES)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    probes = select(all_probes(), args.fast, args.classes, args.ids)
    if args.list:
        for probe in probes:
            print(f"{probe.id}{'  [slow]' if probe.slow else ''}{'  [root]' if probe.root else ''}")
        print(f"{len(probes)} probes")
        return 0
    base = Path(tempfile.mkdtemp(prefix="dbench-campaign-"))
    assets = Assets(base)
    results: list[Result] = []
    started = time.monotonic()
    try:
        for index, probe in enumerate(probes):
            result = run_probe(probe, assets, index, args.keep)
            results.append(result)
            if args.verbose or result.status == "fail":
                print(f"[{index + 1}/{len(probes)} {time.monotonic() - started:.0f}s] {result.status:4} {probe.id}"
                      f"  (exit {result.exit}, {result.seconds:.1f} s)", flush=True)
    finally:
        if not args.keep:
            _remove(base)
    print(summary(results))
    if args.keep:
        print(f"probe folders kept in {base}")
    if args.out:
        report = {"root": IS_ROOT, "fast": args.fast, "classes": args.classes or list(CLASSES),
                  "counts": {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")},
                  "seconds": round(time.monotonic() - started, 1), "probes": [r.as_json() for r in results]}
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if any(r.status == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
