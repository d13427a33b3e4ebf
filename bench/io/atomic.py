"""Atomic file writes: a reader sees the old file or the new one, never a partial or empty one.

Every writer of the suite (result documents, CSV/markdown views, figures, calibration files,
instruction counts) goes through here: the data goes to a temporary file in the target's folder,
is flushed and fsynced, then renamed over the target. On any failure (a full disk, a folder made
read-only or removed mid-run) the temporary file is removed and the previous file, if any, stays.
Standard library only: the command-line checks import this before torch or pandas.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: Path | str, mode: int = 0o666) -> Iterator[Path]:
    """A temporary path beside `path` to write to (for writers that want a file name, such as
    matplotlib's savefig); on a clean exit it is fsynced and renamed to `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        _finish(Path(tmp), mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_atomic(path: Path | str, data: str | bytes, mode: int = 0o666) -> None:
    """Write `data` (text as UTF-8) to `path` atomically; the folder must exist."""
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def create_exclusive(path: Path | str, data: str | bytes, mode: int = 0o666) -> bool:
    """Create `path` holding `data` only if no file has that name (False when one does). The data is
    written and fsynced under a temporary name, then hard-linked to `path` (a link never replaces a
    file), so no reader and no crash ever sees the new name empty. File systems without hard links
    get an exclusive create, then an atomic replace of it."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    os.close(fd)
    try:
        Path(tmp).write_bytes(data.encode() if isinstance(data, str) else data)
        _finish(Path(tmp), mode)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                return False
            try:
                os.replace(tmp, path)
            except BaseException:
                path.unlink(missing_ok=True)  # never leave the new name empty
                raise
    finally:
        Path(tmp).unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return True


def create_unique(folder: Path | str, stem: str, suffix: str, data: str | bytes) -> Path:
    """A new file `<stem>-<6 random hex digits><suffix>` in `folder`, holding `data` from the start:
    runs started in the same second into one folder never share (and overwrite) a file."""
    for _ in range(100):
        path = Path(folder) / f"{stem}-{secrets.token_hex(3)}{suffix}"
        if create_exclusive(path, data):
            return path
    raise FileExistsError(errno.EEXIST, "100 new names were all taken", str(folder))


def _finish(tmp: Path, mode: int) -> None:
    os.chmod(tmp, mode & ~_umask())  # mkstemp makes 0600; results are for sharing
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable; some file systems refuse a directory fsync: that is fine."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def file_output_problem(path: Path | str) -> str | None:
    """Why a file cannot be written at `path` (None: it can), found before any work rather than
    after it: its folder missing or refusing a new file (probed by creating and removing one), a
    name too long there, a folder, device or pipe in its place (an atomic rename would replace it)."""
    path = Path(path)
    folder = path.parent
    try:
        if not folder.is_dir():
            return f"{path}: the folder {folder} does not exist"
        limit = _name_max(folder)
        if len(os.fsencode(path.name)) > limit:
            return f"{path.name[:40]}...: a file name longer than {limit} bytes"
        mode = path.stat().st_mode if path.exists() else None
        if mode is not None and stat.S_ISDIR(mode):
            return f"{path} is a folder; give a file name"
        if mode is not None and not stat.S_ISREG(mode):
            return f"{path} is a device or pipe, not a file to write"
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def folder_output_problem(folder: Path | str, longest_name: int = 128, what: str = "files") -> str | None:
    """Why files cannot be written in `folder` (None: they can), after making it if missing: a file
    in its place, a parent that refuses it, or a name of `longest_name` characters (the longest the
    caller writes there) too long for its file system, probed by creating and removing one."""
    folder = Path(folder)
    try:
        if folder.exists() and not folder.is_dir():
            return f"{folder} exists and is not a folder"
        folder.mkdir(parents=True, exist_ok=True)
        prefix = ".write-probe-"
        with tempfile.NamedTemporaryFile(dir=folder, prefix=prefix, suffix="x" * (longest_name - len(prefix) - 8)):
            pass
    except OSError as exc:
        return f"cannot write {what} in {folder}: {exc.strerror or exc}"
    return None


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255
