"""A fixed, private place for the measured process's code, whatever the checkout's path.

The counts depend on the heap layout, and the layout on the length of every path string the
process allocates before the cases run: the same code and build run from another folder (CI's
clone) moved rows by up to 2.8 %. So the Python packages the child imports and the native
libraries are copied to STAGE/src, always the same path for a user, and the child runs from there.
A lock serialises collections (they share that path).

The stage sits in a shared folder (/tmp) and the child executes what is in it, so it is trusted
only when this user made it: a folder of ours, mode 0700, no symbolic link, reached through
folders that no other user can rename (owned by us or root, and sticky where others can write)
and through no link another user owns (bench/core/trust.py). Anything else there (another user's
folder planted before ours, a link) stops the collection with an error that names it; nothing in
it is read, run or truncated. The child runs from the resolved path, so a link on the way
re-pointed after the checks changes nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from dbench.bench.core.trust import describe, entry_folder_problem

STAGE_ENV = "DBENCH_INSTRUCTIONS_STAGE"


class StageError(RuntimeError):
    """The stage folder cannot be trusted or made; the message names the path and why."""


def default_stage() -> Path:
    """/tmp/dbench-<uid as 8 hex digits>-ins: one per user, and always 24 characters (the length of
    the path the expected counts were recorded at), whatever the uid. Not $TMPDIR: the path must
    not vary."""
    return Path(f"/tmp/dbench-{os.getuid():08x}-ins")


# DBENCH_INSTRUCTIONS_STAGE runs collections elsewhere (a path of the same length keeps the layout;
# the expected file is made at the default). It gets the same checks.
STAGE = Path(os.environ.get(STAGE_ENV) or default_stage())


def sibling_stage(index: int) -> Path:
    """A stage beside STAGE with a name of the same length (worker `index` >= 1 of parallel
    collections): the same path lengths, so the same allocation sizes."""
    if not 1 <= index <= 9:
        raise ValueError(f"at most 9 sibling stages (got {index})")
    return STAGE.with_name(STAGE.name[:-1] + str(index))


PACKAGES = ("dbench", "bench", "ops", "scenarios")


def private_folder(path: Path) -> Path:
    """Create `path` as a folder only this user can use, or accept the one there if it is exactly
    that (ours, a real folder, no access for others); refuse anything else. Returns it resolved (the
    folders above it may be links of ours): use that path from then on, so re-pointing a link after
    this check changes nothing."""
    path = Path(os.path.abspath(path))
    problem = entry_folder_problem(path.parent)  # bench/core/trust.py: links, owners, who can rename entries
    if problem:
        raise StageError(f"refusing the instruction-count stage {path}: {problem}; use a folder only you "
                         f"(or root) can change, or set {STAGE_ENV} to one")
    path = Path(os.path.realpath(path.parent)) / path.name
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise StageError(f"refusing the instruction-count stage {path}: it is not a plain folder "
                         f"({stat.filemode(st.st_mode)}); remove it and run again")
    if st.st_uid != os.getuid():
        raise StageError(f"refusing the instruction-count stage {path}: it belongs to another user ({describe(st)}); "
                         f"remove it (or set {STAGE_ENV} to a path of the same length) and run again")
    if st.st_mode & 0o077:
        raise StageError(f"refusing the instruction-count stage {path}: others have access ({describe(st)}); "
                         f"remove it and run again")
    return path


def _copy_package(src: Path, dst: Path) -> None:
    for path in src.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


@contextlib.contextmanager
def _locked(stage: Path) -> Iterator[None]:
    # O_NOFOLLOW: even in our own folder, never open through a link.
    try:
        fd = os.open(stage / "lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StageError(f"cannot take the lock {stage / 'lock'}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("[instructions] waiting for another collection to finish", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged(repo_root: Path, build_dir: Path, stage: Path | None = None) -> Iterator[tuple[Path, Path]]:
    """(src, out): the copied code (cwd of the child) and an empty folder for its dumps."""
    stage = private_folder(STAGE if stage is None else stage)
    with _locked(stage):
        src, out = stage / "src", stage / "out"
        for folder in (src, out):
            shutil.rmtree(folder, ignore_errors=True)
        # A checkout: dbench/ beside bench/, ops/, scenarios/; installed (pip): they live inside dbench/.
        root = src if (repo_root / "dbench" / "__init__.py").is_file() else src / "dbench"
        if root == src:
            for package in PACKAGES:
                _copy_package(repo_root / package, src / package)
        else:
            _copy_package(repo_root, root)
        libs = build_dir / "lib"
        if libs.is_dir():
            (root / "build" / "lib").mkdir(parents=True)
            for lib in libs.glob("*.so"):
                shutil.copy2(lib, root / "build" / "lib" / lib.name)
        out.mkdir(mode=0o700)
        try:
            yield src, out
        finally:
            shutil.rmtree(out, ignore_errors=True)
