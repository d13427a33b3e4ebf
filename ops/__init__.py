"""Operators: one contract per op, shared kernels, every registration variant generated from it.

The heavy objects (contracts, variants: they import torch and load the native
build) are imported on first use, so `ops.specs` (the names alone) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from .specs import MODES, OP_NAMES, VARIANT_NAMES, Mode

_LAZY = {
    "OPS": "catalog",
    "InputSpec": "contract",
    "OpContract": "contract",
    "Variant": "variants",
    "VariantUnavailable": "variants",
    "get_variant": "variants",
    "register_all": "variants",
}

__all__ = ["MODES", "OP_NAMES", "VARIANT_NAMES", "Mode"] + list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ops' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
