"""A bytecode cache in the build folder for a run's own process, where Python may not write one
beside the sources.

An image that sets PYTHONDONTWRITEBYTECODE (a GPU host's does, and its torch folders hold no
`__pycache__`) makes every process compile what it imports: ~950 modules before the first round of
a single-process run, seconds of compile() at every start. A run then keeps that bytecode in
`<build>/pycache` (PYTHONPYCACHEPREFIX's layout: the sources' absolute paths below it), from where
the next run loads it; Python checks each file against its source's size and time as usual, so an
edited module is compiled again. Nothing is written beside any source.

Trust: the build folder is already code (its libraries are loaded: bench/core/native_build.py
checks it), and the cache folder is made inside it with mode 0700 and checked the same way, so no
other local user can plant bytecode there. The child processes a run starts inherit the prefix (and
may write there too). A prefix the user set is theirs and is kept; a build folder that is not there
or not trusted leaves Python as it was (the environment's warning then counts the modules compiled).
Standard library only: it runs before torch is imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

from dbench.bench.core.native_build import build_dir
from dbench.bench.core.trust import UntrustedPathError, trusted_code_path

FOLDER = "pycache"


def child_env(folder: Path | None) -> dict[str, str]:
    """The variables that point a child process at the bytecode cache `folder` ({} for None). An
    empty PYTHONDONTWRITEBYTECODE is unset for Python: the child may write bytecode, but only there."""
    return {} if folder is None else {"PYTHONPYCACHEPREFIX": str(folder), "PYTHONDONTWRITEBYTECODE": ""}


def wanted(environ: MutableMapping[str, str]) -> bool:
    """Python may not write bytecode here and the user named no cache folder of their own."""
    return sys.dont_write_bytecode and not environ.get("PYTHONPYCACHEPREFIX") and sys.pycache_prefix is None


def build_cache(environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Point this process's bytecode cache, and its children's, at `<build>/pycache` where wanted();
    the folder, or None where it was not wanted or the build folder is missing or not trusted."""
    environ = os.environ if environ is None else environ
    if not wanted(environ):
        return None
    try:
        build = build_dir(environ)
        if not build.is_dir():
            return None
        folder = build / FOLDER
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        folder = trusted_code_path(folder, "the build folder's bytecode cache")
    except (OSError, UntrustedPathError):
        return None
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False
    environ.update(child_env(folder))  # children (--processes, --ab, ...) start with the same cache
    return folder
