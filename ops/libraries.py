"""Locate and load the native libraries built by the top-level CMakeLists.txt (their ops: ops/native/)."""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

import torch

from dbench.bench.core.native_build import ROOT as REPO_ROOT, build_dir, built_extension, import_extension

__all__ = ["REPO_ROOT", "NativeBuildMissing", "build_dir", "built_extension", "define_stable_copy_first_op",
           "has_cuda_kernels", "import_extension",
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


def define_stable_copy_first_op(ns: str, name: str, signature: str, rest: str) -> None:
    """Defines ns::name with `signature` as a stable-ABI op (libdbench_stable.so), whose one boxed CPU/CUDA
    kernel copies the first argument and takes every later one, all of schema type `rest` ("Tensor",
    "Tensor?", "Tensor[]", "float", "int", "bool", "str"), off the stack: the stable twin of
    raw().define_copy_first_op, for schemas only known at run time (the args scenario)."""
    import ctypes

    if not load_stable_ops():
        raise NativeBuildMissing(f"the stable ABI needs torch >= 2.10 (have {torch.__version__})")
    if torch._C._dispatch_has_kernel(f"{ns}::{name}") or hasattr(getattr(torch.ops, ns), name):
        raise RuntimeError(f"{ns}::{name} is already defined")
    define = ctypes.CDLL(str(_lib_path("libdbench_stable.so"))).dbench_stable_define_copy_first
    define.restype = ctypes.c_int
    define.argtypes = [ctypes.c_char_p] * 4 + [ctypes.c_char_p, ctypes.c_size_t]
    error = ctypes.create_string_buffer(1024)
    if define(ns.encode(), name.encode(), signature.encode(), rest.encode(), error, len(error)):
        raise RuntimeError(f"{ns}::{name}: {error.value.decode(errors='replace')}")


def has_cuda_kernels() -> bool:
    return bool(raw().has_cuda_kernels())
