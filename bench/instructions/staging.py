"""A fixed place for the measured process's code, whatever the checkout's path.

The counts depend on the heap layout, and the layout on the length of every path string the
process allocates before the cases run: the same code and build run from another folder (CI's
clone) moved rows by up to 2.8 %. So the Python packages the child imports and the native
libraries are copied to STAGE/src, always the same path, and the child runs from there. A lock
serialises collections (they share that path).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

# Not $TMPDIR: the path must not vary. DBENCH_INSTRUCTIONS_STAGE runs collections side by side
# (another path of the same length keeps the layout; the expected file is made at the default).
STAGE = Path(os.environ.get("DBENCH_INSTRUCTIONS_STAGE", "/tmp/dbench-instructions"))


def sibling_stage(index: int) -> Path:
    """A stage beside STAGE with a name of the same length (worker `index` >= 1 of parallel
    collections): the same path lengths, so the same allocation sizes."""
    if not 1 <= index <= 9:
        raise ValueError(f"at most 9 sibling stages (got {index})")
    return STAGE.with_name(STAGE.name[:-1] + str(index))
PACKAGES = ("bench", "ops", "scenarios")


def _copy_package(src: Path, dst: Path) -> None:
    for path in src.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


@contextlib.contextmanager
def staged(repo_root: Path, build_dir: Path, stage: Path | None = None) -> Iterator[tuple[Path, Path]]:
    """(src, out): the copied code (cwd of the child) and an empty folder for its dumps."""
    stage = STAGE if stage is None else stage
    stage.mkdir(parents=True, exist_ok=True)
    with open(stage / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("[instructions] waiting for another collection to finish", file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        src, out = stage / "src", stage / "out"
        for folder in (src, out):
            shutil.rmtree(folder, ignore_errors=True)
        for package in PACKAGES:
            _copy_package(repo_root / package, src / package)
        libs = build_dir / "lib"
        if libs.is_dir():
            (src / "build" / "lib").mkdir(parents=True)
            for lib in libs.glob("*.so"):
                shutil.copy2(lib, src / "build" / "lib" / lib.name)
        out.mkdir()
        os.chmod(out, 0o700)
        try:
            yield src, out
        finally:
            shutil.rmtree(out, ignore_errors=True)
