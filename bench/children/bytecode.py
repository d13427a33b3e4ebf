"""One bytecode cache for a repeated run's children, where this process found its modules without one.

A process that imports torch, scipy and pandas loads ~2 700 modules. Where their bytecode is not on
disk (PYTHONDONTWRITEBYTECODE, or a site-packages this user cannot write, as on a container's
read-only image), every child compiles ~1 800 of them again as it starts: 4.8 s of compile() a
process on a GPU host (results/h100/start-profile-20261206), most of a duet pair's start-up. The
children of one run then share a cache in the run's own folder (PYTHONPYCACHEPREFIX): the first
pair compiles, the later ones load. Nothing is written next to any source, the folder is made new
with the run's (mode 0700, so no other user can plant bytecode in it), and it goes with the run's
folder. A prefix the user set is theirs and is kept; so is a side's own (--ab env:...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dbench.bench.harness.pycache import child_env
from dbench.bench.io import env as envmod

__all__ = ["child_env", "shared_folder"]  # child_env: one definition, beside the build folder's cache

FOLDER = "pycache"


def shared_folder(work: Path, environ: Mapping[str, str] | None = None,
                  uncached: Mapping[str, object] | None = None) -> Path | None:
    """The one bytecode cache of the children of the run in `work`, or None where this process found
    its modules' bytecode on disk (fewer than UNCACHED_WARN without) or the user set a prefix.
    `uncached`: this process's bytecode_uncached() (taken here when not given)."""
    environ = os.environ if environ is None else environ
    if environ.get("PYTHONPYCACHEPREFIX"):
        return None
    uncached = envmod.bytecode_uncached() if uncached is None else uncached
    modules = uncached.get("modules")
    if not isinstance(modules, int) or modules < envmod.UNCACHED_WARN:
        return None
    return work / FOLDER
