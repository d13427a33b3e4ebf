"""The two sides of an A/B run (run.py --ab A B): what differs between the child processes of each.

A side is one or more parts joined by ``+`` (split only before a known prefix, so a path such
as ``venv-2.11+cu130/bin/python`` stays whole):

* ``env:`` or ``env:KEY=VAL[,KEY=VAL...]``: extra environment variables for the child (``env:``
  alone: the parent's environment as it is). Values cannot contain a comma.
* ``build:PATH``: a build folder of this suite; the child loads the native ops and the C++ driver
  from there (``DBENCH_BUILD_DIR``, read by ops/libraries.py).
* ``python:PATH``, or a bare path or command name: the interpreter that runs run.py (e.g. another
  virtual environment's python, with another torch). It needs the suite's requirements, and a
  torch whose ABI matches the build folder it loads.

A side runs code from the paths it names, so nothing in it may be another local user's (the
checks of bench/core/trust.py): the build folder, its lib/ and bench/cpp/ and their files; every path
in an ``env:`` variable that names code the child loads or runs (CODE_VARIABLES); the interpreter,
the folder it is named in and every link to it. And only a Python interpreter is run: its file
must be an ELF program whose dynamic symbols name CPython's or PyPy's entry point, read from its
headers without running it (a script, a wrapper, /bin/sh renamed python3 are refused unrun); only
then is it probed to import torch in the side's environment (once, before any process of the run
starts, in the folder the children run in).

Torch-free: bench/harness/cli.py checks both sides before anything is imported or run.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

# the children's current folder (bench/children/shard/process.py)
from dbench.bench.core.native_build import ROOT as CHILD_FOLDER
from dbench.bench.core.native_build import trusted_build
from dbench.bench.core.trust import UntrustedPathError, trusted_code_path

PREFIXES = ("env", "build", "python")
PROBE_SECONDS = 180  # a first `import torch` from a cold disk can take a minute
# The probe prints a value it computes, so a program that echoes its arguments cannot pass.
_PROBE = 'import sys, torch; print("dbench-side", 6 * 7, sys.version_info[0], torch.__version__)'
_PROBE_MARK = "dbench-side 42 3 "
_PART_SPLIT = re.compile(r"\+(?=(?:env|build|python):)")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BUILD_ENV = "DBENCH_BUILD_DIR"  # ops/libraries.py build_dir()
# Environment variables whose value names code a child loads or runs (or caches of compiled code
# it loads), with the separator of their entries (None: one path). An empty entry of a list means
# the current folder; a relative one is taken from it, as the child (run in CHILD_FOLDER) would.
# A library entry without a slash is searched by the loader in LD_LIBRARY_PATH (checked) and the
# system's folders. DBENCH_BUILD_DIR is checked as build:PATH; the instruction-count stage is
# checked where it is made (bench/instructions/staging.py).
CODE_VARIABLES: dict[str, str | None] = {
    "PYTHONPATH": ":", "PYTHONHOME": ":", "PYTHONSTARTUP": None, "PYTHONUSERBASE": None,
    "PYTHONPYCACHEPREFIX": None, "PATH": ":", "LD_LIBRARY_PATH": ":", "LD_PRELOAD": ": ", "LD_AUDIT": ":",
    "TORCH_EXTENSIONS_DIR": None, "TORCHINDUCTOR_CACHE_DIR": None, "TRITON_CACHE_DIR": None,
    "DBENCH_CPP_DRIVER": None, "DBENCH_JEMALLOC": None, "DBENCH_CUPTI_LIBRARY": None,
}
_LIBRARY_VARIABLES = frozenset({"LD_PRELOAD", "LD_AUDIT", "DBENCH_JEMALLOC", "DBENCH_CUPTI_LIBRARY"})
# A Python interpreter's program calls its entry point (CPython 3.8+: Programs/python.c; PyPy:
# rpython's main.c), so the name is in its dynamic string table, whether libpython is linked in
# (exported) or shared (imported). A program that embeds Python (gdb, vim) links libpython without
# calling it.
_ENTRY_POINTS = (b"Py_BytesMain", b"pypy_main_startup")
_ELF_TABLE_LIMIT = 64 << 20  # bytes of program headers, dynamic section or string table read at most


class SideError(ValueError):
    """A side that cannot be run; the message says which part and why."""


@dataclass(frozen=True)
class Side:
    spec: str  # as given: the side's name in the result (`ab.a`, `ab.b`) and on the console
    python: str  # the interpreter the child runs run.py with
    env: dict[str, str] = field(default_factory=dict)  # extra environment of the child

    @property
    def build(self) -> str | None:
        return self.env.get(BUILD_ENV)


def _env_part(text: str, spec: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not _ENV_KEY.fullmatch(key):
            raise SideError(f"{spec!r}: malformed env: item {item!r} (expected KEY=VALUE, KEY a variable name)")
        if key in out:
            raise SideError(f"{spec!r}: {key} given twice")
        out[key] = value
    return out


def _build_part(text: str, spec: str) -> str:
    if not text:
        raise SideError(f"{spec!r}: build: needs a folder (build:PATH)")
    folder = Path(text).expanduser()
    if not folder.is_dir():
        raise SideError(f"{spec!r}: build folder {folder} does not exist")
    if not (folder / "lib").is_dir():
        raise SideError(f"{spec!r}: {folder} is not a build folder of this suite (no lib/; "
                        f"cmake -S . -B {folder} && cmake --build {folder})")
    # The child loads lib/'s libraries and runs bench/cpp/'s driver: each folder and file must be ours.
    try:
        return str(trusted_build(str(folder), "the build folder"))
    except UntrustedPathError as exc:
        raise SideError(f"{spec!r}: {exc}") from None


def _trusted(path: Path, what: str, spec: str) -> Path:
    """bench/core/trust.py's trusted_code_path (a path not there judged by the folder it would be made
    in) as a SideError; `path` resolved."""
    try:
        return trusted_code_path(path, what, missing_ok=True)
    except UntrustedPathError as exc:
        raise SideError(f"{spec!r}: {exc}") from None


def _code_entries(name: str, value: str) -> list[Path]:
    """The paths of code the child loads or runs that `name`=`value` names (none for another variable)."""
    if name not in CODE_VARIABLES or not value:  # an empty value is the same as none
        return []
    separators = CODE_VARIABLES[name]
    entries = re.split(f"[{re.escape(separators)}]", value) if separators else [value]
    if name in ("LD_PRELOAD", "LD_AUDIT"):
        entries = [e for e in entries if e]  # the loader skips empty entries of these two
    if name in _LIBRARY_VARIABLES:
        entries = [e for e in entries if "/" in e]  # a bare name: found in the loader's folders
    return [CHILD_FOLDER / entry for entry in entries]  # '' is the folder itself; an absolute entry stays


def check_code_variables(env: dict[str, str], spec: str) -> None:
    """Every path a variable of the side names for code (CODE_VARIABLES) is one no other local user
    can change, so e.g. PYTHONPATH cannot bring another user's sitecustomize.py into every child."""
    for name, value in env.items():
        for path in _code_entries(name, value):
            _trusted(path, f"the {name} entry", spec)


def _python_part(text: str, spec: str) -> str:
    if not text:
        raise SideError(f"{spec!r}: python: needs an interpreter (python:PATH)")
    if os.sep not in text:
        found = shutil.which(text)
        if found is None:
            raise SideError(f"{spec!r}: interpreter {text!r} is not on the PATH")
        return found
    path = Path(text).expanduser()
    if not path.is_file():
        raise SideError(f"{spec!r}: interpreter {path} does not exist")
    if not os.access(path, os.X_OK):
        raise SideError(f"{spec!r}: interpreter {path} is not executable")
    return str(path.absolute())  # absolute, not resolved: a venv's python is a symlink that must stay one


class _NotAnInterpreter(ValueError):
    """What the headers of a file said that a Python interpreter's would not."""


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    if size > _ELF_TABLE_LIMIT:
        raise ValueError(f"a table of {size} bytes")
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("the file ends inside a table")
    return data


def _segments(f: BinaryIO) -> tuple[str, bool, list[tuple[int, int, int]], tuple[int, int]]:
    """The ELF program's byte order (struct's), width (64-bit), loaded segments (address, offset,
    size) and dynamic section (offset, size), from its header and program headers."""
    head = f.read(64)
    if head[:4] != b"\x7fELF":
        what = "a script" if head.startswith(b"#!") else "not an ELF program"
        raise _NotAnInterpreter(f"it is {what} (it starts with {head[:16]!r})")
    wide, end = head[4:5] == b"\x02", "<" if head[5:6] == b"\x01" else ">"
    if not {head[4:5], head[5:6]} <= {b"\x01", b"\x02"} or len(head) < (64 if wide else 52):  # class, order
        raise ValueError("a damaged ELF header")
    (e_type,) = struct.unpack_from(end + "H", head, 16)
    (phoff,) = struct.unpack_from(end + ("Q" if wide else "I"), head, 32 if wide else 28)
    phentsize, phnum = struct.unpack_from(end + "HH", head, 54 if wide else 42)
    if e_type not in (2, 3) or phentsize < (56 if wide else 32):  # ET_EXEC, ET_DYN
        raise _NotAnInterpreter("it is an ELF file but no program (a library or an object file)")
    table = _read(f, phoff, phentsize * phnum)
    loads, dynamic, interp = [], None, False
    for i in range(phnum):
        if wide:
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIQQQQ", table, i * phentsize)
        else:
            p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIIII", table, i * phentsize)
        if p_type == 1:  # PT_LOAD
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:  # PT_DYNAMIC
            dynamic = (p_offset, p_filesz)
        interp = interp or p_type == 3  # PT_INTERP: a program the dynamic loader starts
    if dynamic is None or not interp:
        raise _NotAnInterpreter("it is not a dynamically linked program, as a Python interpreter is")
    return end, wide, loads, dynamic


def _dynamic_strings(f: BinaryIO) -> bytes:
    """The ELF program's dynamic string table: the names of the symbols it exports and imports."""
    end, wide, loads, dynamic = _segments(f)
    entries, size = _read(f, *dynamic), 16 if wide else 8
    tags: dict[int, int] = {}
    for offset in range(0, len(entries) - size + 1, size):
        tag, value = struct.unpack_from(end + ("qQ" if wide else "iI"), entries, offset)
        if tag == 0:  # DT_NULL
            break
        tags.setdefault(tag, value)
    address, strsz = tags.get(5), tags.get(10)  # DT_STRTAB (an address), DT_STRSZ
    where = [off + address - va for va, off, sz in loads if address is not None and va <= address < va + sz]
    if not where or strsz is None:
        raise _NotAnInterpreter("it has no dynamic string table")
    return _read(f, where[0], strsz)


def interpreter_problem(program: str) -> str | None:
    """Why the file `program` resolves to is not a CPython or PyPy interpreter, judged from its ELF
    headers without running it (None: it is one)."""
    real = os.path.realpath(program)
    try:  # non-blocking: a FIFO planted in its place cannot hang the check
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot read {real}: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"{real} is not a regular file"
        try:
            names = b"\0" + _dynamic_strings(f)
            problem = None if any(b"\0" + name + b"\0" in names for name in _ENTRY_POINTS) else (
                f"it is a program without a Python interpreter's entry point "
                f"({' or '.join(n.decode() for n in _ENTRY_POINTS)})")
        except _NotAnInterpreter as exc:
            problem = str(exc)
        except (OSError, ValueError, OverflowError, struct.error) as exc:  # damaged: offsets past any file
            problem = f"its ELF headers cannot be read ({exc})"
    if problem is None or real == program:
        return problem
    return f"{real}: {problem}"  # the file it resolves to: a link named python to /bin/sh says so


def check_interpreter(python: str, env: dict[str, str], spec: str) -> str:
    """The side's interpreter is a Python that imports torch in the side's environment; returns its
    torch version. Nothing is run before its file is known to be a Python interpreter that no other
    local user can change."""
    problem = interpreter_problem(python)
    if problem:
        raise SideError(f"{spec!r}: {python} is not a Python interpreter: {problem}. Give an interpreter's "
                        "path, e.g. a virtual environment's bin/python (a wrapper script or a version "
                        "manager's shim is not one: e.g. $(pyenv which python3))")
    # The file, every link to it, and the folder it is named in (whose entry is what is run).
    _trusted(Path(python), "the interpreter", spec)
    _trusted(Path(python).parent, "the interpreter's folder", spec)
    try:  # run where the children run: `-c` puts the current folder first on sys.path
        probe = subprocess.run([python, "-c", _PROBE], env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=PROBE_SECONDS, cwd=CHILD_FOLDER)
    except subprocess.TimeoutExpired:
        raise SideError(f"{spec!r}: {python} did not import torch within {PROBE_SECONDS} s") from None
    except OSError as exc:
        raise SideError(f"{spec!r}: cannot run {python}: {exc.strerror or exc}") from None
    line = next((ln for ln in probe.stdout.splitlines() if ln.startswith(_PROBE_MARK)), None)
    if probe.returncode != 0 or line is None:
        tail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise SideError(f"{spec!r}: {python} is not a Python 3 that can import torch (exit {probe.returncode}: {tail})")
    return line.removeprefix(_PROBE_MARK).strip()


def parse_side(spec: str, default_python: str = sys.executable) -> Side:
    """One side from its text; raises SideError naming the spec and the part that is wrong."""
    if not spec.strip():
        raise SideError("empty side (use env: for the parent's environment as it is)")
    python: str | None = None
    env: dict[str, str] = {}
    for part in _PART_SPLIT.split(spec):
        prefix, colon, rest = part.partition(":")
        if colon and prefix in ("env", "build"):
            extra = _env_part(rest, spec) if prefix == "env" else {BUILD_ENV: _build_part(rest, spec)}
            if prefix == "env" and BUILD_ENV in extra:  # the same folder checks as build:PATH
                extra[BUILD_ENV] = _build_part(extra[BUILD_ENV], spec)
            twice = sorted(set(extra) & set(env))
            if twice:
                raise SideError(f"{spec!r}: {', '.join(twice)} given twice")
            env.update(extra)
            continue
        if python is not None:
            raise SideError(f"{spec!r}: two interpreters")
        python = _python_part(rest if colon and prefix == "python" else part, spec)
    check_code_variables(env, spec)  # before the probe, which runs with them
    if python is not None and python != default_python:
        check_interpreter(python, env, spec)
    return Side(spec=spec, python=python or default_python, env=env)
