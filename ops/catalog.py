"""The shipped ops, by name: each declared once, in ops/shipped/<name>.py (its Python half: the
contract, and its Triton launchers where it has them) and ops/native/<name>.h (its native half).
Variants are generated from these (ops/variants.py); user ops join them (ops/declare.py)."""

from __future__ import annotations

import importlib

from .contract import OpContract
from .specs import OP_NAMES


def _own_module(name: str) -> OpContract:
    """The op declared in ops/shipped/<name>.py, as its CONTRACT."""
    module = importlib.import_module(f".shipped.{name}", __package__)
    contract = module.CONTRACT
    assert isinstance(contract, OpContract) and contract.name == name, \
        f"ops/shipped/{name}.py must declare CONTRACT for {name!r}"
    return contract


# Every shipped op, in the order of ops/specs.py OP_NAMES (the one list of their names).
OPS: dict[str, OpContract] = {name: _own_module(name) for name in OP_NAMES}
