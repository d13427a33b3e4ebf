"""Result documents: the one checked reader.

``read_result(path)`` is how every consumer (the analysis commands, run.py, bench) reads a result
file, plain or gzip-compressed (``*.json.gz``: how large committed results are kept). It refuses,
with a one-line ``ResultFileError`` naming the file and what is wrong, anything
a consumer would trip over: a path that is not a regular file (a folder, /dev/zero, a pipe), a file
over ``MAX_BYTES``, text that is not UTF-8 JSON, nesting deeper than ``MAX_DEPTH``, and a document
of the wrong shape: not an object with an ``env`` object and a ``rows`` list of row objects that
carry the row contract (``REQUIRED_ROW_FIELDS``), ``config``/``ab``/``speed_probe``/``roofs``
that are not objects, a status that is not one of the known ones, or numbers that are not numbers.
In a row that is not FAILED or n/a every number must be finite, and a time (unit ``us``) or a
ratio positive: a NaN, infinite, zero or negative median is bad input, never a value to judge.

It imports only the standard library (and bench.core.identity), so a command refuses bad input before
pandas, scipy, matplotlib or torch are loaded. The writer of these documents is bench.io.results;
analysis.load adds the pandas views.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# The row contract and the document's statuses are declared once, as types (bench/io/result_types.py);
# the reader checks each field by the kind its type gives it.
from dbench.bench.io.result_types import (
    DOCUMENT_STATUSES,
    NUMBER_FIELDS,
    NUMBER_LISTS,
    OBJECT_FIELDS,
    POSITIVE_FIELDS,
    POSITIVE_LISTS,
    REQUIRED_ROW_FIELDS,
    ROW_STATUSES,
    SCHEMA_VERSION,
    SIDE_A,
    TEXT_FIELDS,
    UNTIMED,
)

MAX_BYTES = 256 << 20  # far above any run's file (the largest committed one is ~2 MB), compressed or not
MAX_DEPTH = 32  # a result nests about 5 deep
MAX_INT = 1 << 63  # no count or size of the suite is larger
ROW_COLUMNS = (*REQUIRED_ROW_FIELDS, "status", "reason", "baseline", "shape", "dtype", "axes")
ENV_COLUMNS = ("time", "torch", "cuda_runtime", "gpu_name", "cpu_model", "hostname")


class ResultFileError(ValueError):
    """A file that cannot be read as a result; the message is one line naming the file and the problem."""


class NotAResultError(ResultFileError):
    """Readable JSON, but not a result document (a calibration, an instruction-count file...)."""


# ---------------------------------------------------------------------------------------------
# Reading JSON, bounded


GZIP_MAGIC = b"\x1f\x8b"
# What a folder of results holds: its result files, plain or gzip-compressed.
RESULT_PATTERNS = ("*.json", "*.json.gz")


def _gunzip(path: Path, data: bytes, what: str) -> bytes:
    """A gzip file's content, at most MAX_BYTES of it (a small file may inflate without bound)."""
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, MAX_BYTES + 1)
    except zlib.error as exc:
        raise ResultFileError(f"{path}: a damaged gzip file ({exc}), not a {what} file") from None
    if len(out) > MAX_BYTES:
        raise ResultFileError(f"{path}: inflates past any {what} file ({MAX_BYTES >> 20} MiB)")
    if not inflate.eof:
        raise ResultFileError(f"{path}: a truncated gzip file, not a {what} file")
    return out


def result_stem(path: Path | str) -> str:
    """A result file's name without .json or .json.gz: what the files made from it are named after."""
    name = Path(path).name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def read_json(path: Path | str, what: str = "result") -> Any:
    """The JSON value of a regular file of at most MAX_BYTES, nested at most MAX_DEPTH deep."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ResultFileError(f"{path}: is a folder, not a {what} file")
    if not stat.S_ISREG(info.st_mode):
        raise ResultFileError(f"{path}: not a regular file (a device, pipe or socket), not a {what} file")
    if info.st_size > MAX_BYTES:
        raise ResultFileError(f"{path}: {info.st_size} bytes, larger than any {what} file ({MAX_BYTES >> 20} MiB)")
    try:
        # O_NONBLOCK: should the path turn into a pipe after the stat, opening it must not wait.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ResultFileError(f"{path}: not a regular file, not a {what} file")
            data = f.read(MAX_BYTES + 1)  # the size may have grown since the stat
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise ResultFileError(f"{path}: larger than any {what} file ({MAX_BYTES >> 20} MiB)")
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(path, data, what)
    if not data.strip():
        raise ResultFileError(f"{path}: empty file (a run killed before it wrote anything?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultFileError(f"{path}: not UTF-8 text (byte {exc.start}), not a {what} file") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno}; "
                              "truncated?)") from None
    except RecursionError:
        raise ResultFileError(f"{path}: JSON nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise ResultFileError(f"{path}: not valid JSON ({_first_line(exc)})") from None
    if _depth(value) > MAX_DEPTH:
        raise ResultFileError(f"{path}: JSON nested too deeply (more than {MAX_DEPTH} levels)")
    return value


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _depth(value: Any) -> int:
    """How deep containers nest (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


# ---------------------------------------------------------------------------------------------
# The document's shape


def _number_problem(value: Any, positive: bool = False) -> str | None:
    """Why `value` is not a usable number (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{type(value).__name__} {_short(value)}, not a number"
    if isinstance(value, int) and abs(value) >= MAX_INT:
        return f"an integer of {len(str(abs(value)))} digits, out of range"
    if not math.isfinite(value):
        return f"{value}, not a finite number"
    if positive and value <= 0:
        return f"{value}, not positive"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, list, dict)) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _identity_value_ok(value: Any) -> bool:
    """A value that may enter a row's identity: a scalar or a list of them (lists nest)."""
    return _is_scalar(value) or (isinstance(value, list) and all(_identity_value_ok(v) for v in value))


def row_name(row: Mapping[str, Any]) -> str:
    return f"{row.get('op')}/{row.get('variant')}/{row.get('mode')} {row.get('metric')}"


def _row_problem(row: Any) -> str | None:
    """What is wrong with one row (None: nothing)."""
    if not isinstance(row, dict):
        return f"a {type(row).__name__}, not an object"
    for name in TEXT_FIELDS:
        if row.get(name) is not None and not isinstance(row[name], str):
            return f"{name} is {_short(row[name])}, not text"
    for name in ("status", "a_status"):
        if row.get(name) is not None and row[name] not in ROW_STATUSES:
            return f"{name} is {_short(row[name])}, not one of {', '.join(ROW_STATUSES)}"
    axes = row.get("axes")
    if axes is not None and not (isinstance(axes, list) and all(isinstance(a, str) and a in row for a in axes)):
        return f"axes is {_short(axes)}, not a list of the row's own field names"
    for name in ("shape", *(axes or ())):
        if not _identity_value_ok(row.get(name)):
            return f"{name} is {_short(row.get(name))}, not a value or a list of values"
    timed = row.get("status") not in UNTIMED
    side_a = row.get("a_status") not in UNTIMED
    time_unit = row.get("unit") == "us"
    for name in NUMBER_FIELDS:
        # The values of a FAILED or n/a row (side) are never read as numbers: only their type counts.
        checked = timed and (side_a or name not in SIDE_A)
        problem = _value_problem(row.get(name), checked, time_unit and name in POSITIVE_FIELDS)
        if problem:
            return f"{name} is {problem}"
    for name in NUMBER_LISTS:
        values = row.get(name)
        if values is None:
            continue
        if not isinstance(values, list):
            return f"{name} is {_short(values)}, not a list of numbers"
        checked = timed and (side_a or name not in SIDE_A)
        positive = time_unit and name in POSITIVE_LISTS
        for i, value in enumerate(values):
            problem = _value_problem(value, checked, positive)
            if problem:
                return f"{name}[{i}] is {problem}"
    return None


def _value_problem(value: Any, checked: bool, positive: bool) -> str | None:
    """A row's number: null, or a number (finite, and positive where asked, when `checked`)."""
    if value is None:
        return None
    if not checked:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            f"{type(value).__name__} {_short(value)}, not a number"
    return _number_problem(value, positive)


def check_result(document: Any, source: str | Path) -> dict[str, Any]:
    """`document` if it is a result document every consumer can read; ResultFileError otherwise
    (NotAResultError when it is not meant to be one). `source` names it in the message."""
    if not isinstance(document, dict):
        raise NotAResultError(f"{source}: not a result file (a JSON {type(document).__name__}, not an object)")
    if "kind" in document and "scenario" not in document:
        raise NotAResultError(f"{source}: not a result file (a {_short(document['kind'])} file)")
    version = document.get("schema_version")
    if "schema_version" in document and not (type(version) is int and 1 <= version <= SCHEMA_VERSION):
        # Exactly an int (not "2", 2.0 or true): a version this reader does not know is refused, not guessed at.
        shown = json.dumps(version)  # as the file has it: true, null, "2"
        raise ResultFileError(f"{source}: schema_version {shown[:40]} is not one this dbench reads "
                              f"(the whole numbers 1 to {SCHEMA_VERSION}); read it with the dbench that wrote it")
    rows = document.get("rows")
    if not isinstance(rows, list):
        raise NotAResultError(f"{source}: not a result file (no list of rows)")
    bad = [i for i, row in enumerate(rows) if not isinstance(row, dict)]
    missing = sorted({f for row in rows if isinstance(row, dict) for f in REQUIRED_ROW_FIELDS if f not in row})
    if "env" not in document or missing or bad:
        raise NotAResultError(f"{source}: not a result file (missing env or row fields {missing}"
                              f"{f', rows {bad[:5]} are not objects' if bad else ''})")
    for name in ("env", *OBJECT_FIELDS):
        if (document.get(name) is not None or name == "env") and not isinstance(document[name], dict):
            raise ResultFileError(f"{source}: {name} is a {type(document[name]).__name__}, not an object")
    status = document.get("status")
    if status is not None and status not in DOCUMENT_STATUSES:
        raise ResultFileError(f"{source}: status is {_short(status)}, not one of {', '.join(DOCUMENT_STATUSES)}")
    for name in ("scenario", "error"):
        if document.get(name) is not None and not isinstance(document[name], str):
            raise ResultFileError(f"{source}: {name} is {_short(document[name])}, not text")
    env_time = document["env"].get("time")
    if env_time is not None and not isinstance(env_time, str):
        raise ResultFileError(f"{source}: env.time is {_short(env_time)}, not text")
    for i, row in enumerate(rows):
        problem = _row_problem(row)
        if problem:
            raise ResultFileError(f"{source}: row {i} ({row_name(row)}): {problem}")
    return document


def read_result(path: Path | str) -> dict[str, Any]:
    """A result document, checked (see the module's docstring); ResultFileError names the file and
    the problem in one line."""
    return check_result(read_json(path), path)


load_result = read_result  # the name run.py and bench have always imported


def is_folder(path: Path | str) -> bool:
    """Path.is_dir, False where the path cannot even be looked up (a name too long raises there)."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


# Files a run keeps beside its result that are not results: the C++ driver's Google Benchmark JSON
# of its CPU run and of its GPU pass (bench.io.cpp_results.gbench_path).
COMPANION_SUFFIXES = (".gbench.json", ".gbench-gpu.json")
# JSON files in a results folder that are other documents, not results: the breakdown by layer
# (`--scenario breakdown`, analysis/breakdown.py SUFFIX).
NOT_RESULT_SUFFIXES = (*COMPANION_SUFFIXES, ".breakdown.json", ".windows.json")


# Folders a --processes or --shards run keeps beside its result (<stem>.processes/, <stem>.shards/:
# bench/children/processes.py, bench/children/shard/process.py): their children's results are merged into the run's own.
WORK_FOLDER_SUFFIXES = (".processes", ".shards")


def result_files(path: Path | str, recursive: bool = False) -> list[Path]:
    """A file as itself; a folder as its *.json and *.json.gz files (without the other documents of
    NOT_RESULT_SUFFIXES, or the file this process's output goes to), sorted. Only the folder itself,
    unless `recursive`: then also every folder below it (dbench-results/<machine>/...), except hidden
    ones, links (no loop) and the work folders of WORK_FOLDER_SUFFIXES (counted once, in the merged
    result)."""
    path = Path(path)
    if is_folder(path):
        files = sorted(_listed(path, recursive, _own_output()))
        if not files:
            below = " in it or below it" if recursive else ""
            raise ResultFileError(f"{path}: holds no result files (*.json, *.json.gz){below}")
        return files
    return [path]


def _own_output() -> set[tuple[int, int]]:
    """The files this process writes its standard output and error to (device, inode): a reader
    asked for `DIR` while its output goes to `DIR/verdicts.json` must not read that file, which the
    shell made empty before the reader started."""
    own = set()
    for fd in (1, 2):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            own.add((info.st_dev, info.st_ino))
    return own


def _listed(folder: Path, recursive: bool, own: set[tuple[int, int]]) -> list[Path]:
    files = [p for pattern in RESULT_PATTERNS for p in folder.glob(pattern)
             if not p.name.startswith(".") and not p.name.removesuffix(".gz").endswith(NOT_RESULT_SUFFIXES)
             and _identity(p) not in own]
    if recursive:
        for sub in sorted(folder.iterdir()):
            if (not sub.name.startswith(".") and not sub.name.endswith(WORK_FOLDER_SUFFIXES)
                    and not sub.is_symlink() and is_folder(sub)):
                files += _listed(sub, True, own)
    return files


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None  # read_result names what is wrong with it
    return (info.st_dev, info.st_ino)


def read_results(paths: Sequence[Path | str], note: Any = None) -> list[tuple[Path, dict[str, Any]]]:
    """The result documents of files and folders. A single file must be a result; from several
    files or a folder, files that are not result documents (a calibration beside the runs) are
    skipped, each with a one-line `note(text)`. Raises ResultFileError when no result is left."""
    files = [f for p in paths for f in result_files(p)]
    if len(files) == 1:
        return [(files[0], read_result(files[0]))]
    found = []
    for path in files:
        try:
            found.append((path, read_result(path)))
        except NotAResultError as exc:
            if note is not None:
                note(f"skipped {exc}")
    if not found:
        raise ResultFileError(f"no result files among {', '.join(map(str, paths))}")
    return found
