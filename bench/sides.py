"""The two sides of an A/B run (run.py --ab A B): what differs between the child processes of each.

A side is one or more parts joined by ``+`` (split only before a known prefix, so a path such
as ``venv-2.11+cu130/bin/python`` stays whole):

* ``env:`` or ``env:KEY=VAL[,KEY=VAL...]``: extra environment variables for the child (``env:``
  alone: the parent's environment as it is). Values cannot contain a comma.
* ``build:PATH``: a build folder of this suite; the child loads the native ops and the C++ driver
  from there (``DBENCH_BUILD_DIR``, read by ops/native.py).
* ``python:PATH``, or a bare path or command name: the interpreter that runs run.py (e.g. another
  virtual environment's python, with another torch). It needs the suite's requirements, and a
  torch whose ABI matches the build folder it loads. Only a Python interpreter is accepted: its
  resolved name must be python* or pypy*, and it must import torch in the side's environment
  (probed once, before any process of the run starts), so no other program is run as a side.

Torch-free: bench/cli.py checks both sides before anything is imported or run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

PREFIXES = ("env", "build", "python")
PROBE_SECONDS = 180  # a first `import torch` from a cold disk can take a minute
# The probe prints a value it computes, so a program that echoes its arguments cannot pass.
_PROBE = 'import sys, torch; print("dbench-side", 6 * 7, sys.version_info[0], torch.__version__)'
_PROBE_MARK = "dbench-side 42 3 "
_INTERPRETER_NAME = re.compile(r"(python|pypy)[0-9.]*(t|d|m)*", re.IGNORECASE)
_PART_SPLIT = re.compile(r"\+(?=(?:env|build|python):)")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BUILD_ENV = "DBENCH_BUILD_DIR"  # ops/native.py build_dir()


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
    return str(folder.resolve())


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


def check_interpreter(python: str, env: dict[str, str], spec: str) -> str:
    """The side's interpreter is a Python that imports torch in the side's environment; returns its
    torch version. A program of another name is refused without being run."""
    name = Path(os.path.realpath(python)).name
    if not _INTERPRETER_NAME.fullmatch(name):  # the resolved name: a link called python to /bin/sh is refused
        raise SideError(f"{spec!r}: {python} is not a Python interpreter (its name is {name!r}; "
                        "expected python*, e.g. a virtual environment's bin/python)")
    try:
        probe = subprocess.run([python, "-c", _PROBE], env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=PROBE_SECONDS)
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
    if python is not None and python != default_python:
        check_interpreter(python, env, spec)
    return Side(spec=spec, python=python or default_python, env=env)
