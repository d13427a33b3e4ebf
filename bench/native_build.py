"""Where the native build is, and how its Python extensions are imported: the build folder of the
top-level CMakeLists.txt (<checkout>/build, or dbench/build when installed; DBENCH_BUILD_DIR
overrides it). Standard library only: the GPU timer's collector and the ops' libraries both load
from here."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent  # the checkout, or the installed package's folder


def build_dir() -> Path:
    """The CMake build directory (override with DBENCH_BUILD_DIR)."""
    return Path(os.environ.get("DBENCH_BUILD_DIR", ROOT / "build")).resolve()


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
