"""Files the analysis commands write: each output path checked before any work, each write atomic.

A path the user gives that cannot be written (a folder that does not exist or takes no new file, a
folder where a file is expected, a name too long) is refused up front with one line naming it, and
a write that fails later (a full disk) is one line too: both raise OutputPathError, which every
command turns into exit 2. The writes go through bench/io/atomic.py, so a reader sees the old file or
the new one, never a partial one. Standard library only, like the checks of run.py (bench/harness/cli.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dbench.bench.io.atomic import atomic_path, file_output_problem, folder_output_problem, write_atomic


class OutputPathError(ValueError):
    """An output path that cannot be written; the message is one line naming it and why."""


def check_output_file(path: Path | str, option: str) -> Path:
    """`path` can be written (bench.io.atomic.file_output_problem), else OutputPathError."""
    problem = file_output_problem(path)
    if problem:
        raise OutputPathError(f"{option}: {problem}")
    return Path(path)


def _refused(option: str, exc: Exception) -> OutputPathError:
    """trust.py's refusal, told in the option the user typed."""
    return OutputPathError(f"{option}: {str(exc).replace('Use --out', f'Use {option}')}")


def check_output_dir(folder: Path | str, option: str) -> Path:
    """A folder for several outputs: it exists or can be made, only its owner (this user) can write
    it or swap it (bench/core/trust.py make_output_folder, as run.py's --out), and it takes a new file."""
    from dbench.bench.core.trust import UntrustedPathError, make_output_folder

    try:
        make_output_folder(folder)
    except UntrustedPathError as exc:
        raise _refused(option, exc) from None
    except OSError:
        pass  # said below, as for any folder that cannot be made or written
    problem = folder_output_problem(folder)
    if problem:
        raise OutputPathError(f"{option}: {problem}")
    return Path(folder)


def check_output_dirs(*folders: tuple[Path | str | None, str]) -> list[Path | None]:
    """check_output_dir for each (folder, option) given (None: not asked for), after every one's
    owner and mode are checked first: a refused folder leaves none of the others made."""
    from dbench.bench.core.trust import UntrustedPathError, check_output_folder

    for folder, option in folders:
        if folder is not None:
            try:
                check_output_folder(folder)
            except UntrustedPathError as exc:
                raise _refused(option, exc) from None
    return [None if folder is None else check_output_dir(folder, option) for folder, option in folders]


def write_output(path: Path | str, data: str | bytes) -> Path:
    """Write `data` to `path` atomically; OutputPathError (one line) when it cannot be written."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}") from None
    return Path(path)


@contextlib.contextmanager
def output_path(path: Path | str) -> Iterator[Path]:
    """A temporary path to write `path` through (e.g. matplotlib's savefig, which must then be told
    the format: the temporary name ends in .tmp), renamed to `path` on success."""
    try:
        with atomic_path(path) as tmp:
            yield tmp
    except OSError as exc:
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_rows_document(path: Path | str, schema: str, what: str) -> dict[str, Any]:
    """A JSON document of `schema` with a list of rows (gzipped where its name ends in .gz, as the
    committed ones are): a breakdown's, a windows run's. ValueError, one line naming the file, when
    it cannot be read or is another kind of document (`what` says which kind was expected)."""
    import gzip
    import json

    try:
        data = gzip.decompress(Path(path).read_bytes()) if str(path).endswith(".gz") else Path(path).read_bytes()
        document = json.loads(data.decode())
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("schema") != schema or not isinstance(document.get("rows"), list):
        raise ValueError(f"{path}: not {what} (schema {schema})")
    return document
