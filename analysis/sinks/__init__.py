"""Output formats: one module per format in this package, found by name. A new format is one file.

A sink module (a name not starting with "_") defines
    FORMAT: str                     its --format name (dbench report, and dbench export for trackers)
    DESCRIPTION: str                one line for --help
    render(results) -> str          results: (result document, display name) pairs, in order
and imports anything heavy inside render, so that a command line is checked before pandas loads.
The tables it renders come as data from analysis/views.py (document_tables, notes, table_frame)."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType
from typing import Any, Mapping, Sequence

Named = tuple[Mapping[str, Any], str]  # (result document, the name it is shown under)


@functools.cache
def sinks() -> dict[str, ModuleType]:
    """FORMAT -> its module, for every module of this package (in module-name order)."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):  # helpers shared by sinks
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        fmt = getattr(module, "FORMAT", None)
        if not isinstance(fmt, str) or not callable(getattr(module, "render", None)):
            raise TypeError(f"sink module {module.__name__} needs FORMAT (a str) and render(results) -> str")
        if fmt in found:
            raise TypeError(f"sink format {fmt!r} is defined by both {found[fmt].__name__} and {module.__name__}")
        found[fmt] = module
    return found


def formats() -> tuple[str, ...]:
    return tuple(sinks())


def render(fmt: str, results: Sequence[Named]) -> str:
    """`results` in format `fmt` (KeyError naming the formats for an unknown one)."""
    if fmt not in sinks():
        raise KeyError(f"unknown format {fmt!r}; formats: {', '.join(sinks())}")
    text = sinks()[fmt].render(results)
    if not isinstance(text, str):
        raise TypeError(f"sink {fmt!r} returned {type(text).__name__}, not str")
    return text
