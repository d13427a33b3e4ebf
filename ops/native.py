"""Locate and load the native libraries built by the top-level CMakeLists.txt."""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

import torch

from dbench.bench.native_build import ROOT as REPO_ROOT, build_dir, built_extension, import_extension

__all__ = ["REPO_ROOT", "NativeBuildMissing", "build_dir", "built_extension", "has_cuda_kernels", "import_extension",
           "load_cpp_ops", "load_stable_ops", "raw"]


class NativeBuildMissing(RuntimeError):
    pass


def _lib_path(name: str) -> Path:
    path = build_dir() / "lib" / name
    if not path.exists():
        raise NativeBuildMissing(
            f"{path} not found: build the native libraries first "
            f"(bash scripts/setup.sh, or cmake -S . -B build && cmake --build build)"
        )
    return path


@functools.cache
def raw() -> ModuleType:
    """The pybind11 module of launchers (variant `raw`)."""
    path = built_extension("_dbench_raw")
    if path is None:
        _lib_path("_dbench_raw.so")  # raises with the build hint
    assert path is not None
    return import_extension("_dbench_raw", path)


@functools.cache
def load_cpp_ops() -> None:
    """TORCH_LIBRARY ops: torch.ops.dbench.* (variants cpp, cpp_autograd)."""
    torch.ops.load_library(str(_lib_path("libdbench_ops.so")))


STABLE_MIN_TORCH = (2, 10)


def torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


@functools.cache
def load_stable_ops() -> bool:
    """STABLE_TORCH_LIBRARY ops: torch.ops.dbench_stable.* (variant stable)."""
    if torch_version() < STABLE_MIN_TORCH:
        return False
    torch.ops.load_library(str(_lib_path("libdbench_stable.so")))
    return True


def has_cuda_kernels() -> bool:
    return bool(raw().has_cuda_kernels())
