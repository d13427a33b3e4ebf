"""Operators: one contract per op, shared kernels, every registration variant generated from it."""

from .catalog import OPS
from .contract import InputSpec, OpContract
from .variants import MODES, VARIANT_NAMES, Mode, Variant, get_variant, register_all

__all__ = ["OPS", "InputSpec", "OpContract", "MODES", "VARIANT_NAMES", "Mode", "Variant", "get_variant", "register_all"]
