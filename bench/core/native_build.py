"""Where the native build is, and how its Python extensions are imported: the build folder of the
top-level CMakeLists.txt (<checkout>/build, or dbench/build when installed; DBENCH_BUILD_DIR
overrides it). Standard library only: the GPU timer's collector and the ops' libraries both load
from here."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from dbench.bench.core.trust import trusted_code_path

ROOT = Path(__file__).resolve().parents[2]  # the checkout, or the installed package's folder


BUILD_ENV = "DBENCH_BUILD_DIR"
DRIVER_ENV = "DBENCH_CPP_DRIVER"  # the C++ driver elsewhere than in the build (bench/io/cpp_results.py)


LOADED = ("lib", "bench/cpp")  # the build's folders whose files are loaded or run: libraries, the C++ driver


def trusted_build(folder: str, what: str) -> Path:
    """`folder` resolved, once it and the folders and files in it that a run loads or executes
    (LOADED) are ones no other local user can change (bench/core/trust.py); else UntrustedPathError
    naming the first that is not. A folder not there is judged by where it would be made."""
    real = trusted_code_path(folder, what, missing_ok=True)
    for sub in LOADED:
        if (real / sub).is_dir():
            trusted_code_path(real / sub, f"{what}'s {sub}/")
            for path in sorted((real / sub).iterdir()):
                if path.is_file():
                    trusted_code_path(path, f"{what}'s {sub}/")
    return real


def build_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The CMake build directory (override with DBENCH_BUILD_DIR in `environ`, default os.environ),
    resolved and checked (trusted_build): its libraries are loaded into the process. A folder not
    there is returned as it is, when no one else could create it (the loaders then say how to build)."""
    given = (os.environ if environ is None else environ).get(BUILD_ENV)
    what = f"the build folder ({BUILD_ENV})" if given else "the build folder"
    return trusted_build(given or str(ROOT / "build"), what)


def built_extension(name: str) -> Path | None:
    """<build>/lib/<name>*.so (a Python extension module built by CMake), or None."""
    lib_dir = build_dir() / "lib"
    candidates = sorted(lib_dir.glob(f"{name}*.so")) if lib_dir.is_dir() else []
    return candidates[0] if candidates else None


def import_extension(name: str, path: Path) -> ModuleType:
    """Import the extension module `name` from `path` (outside sys.path)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
