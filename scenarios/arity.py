"""The args scenario's ops as names: one generated op per argument kind and arity.

Plain data, free of torch: the scenario's declaration lists these names, so that run.py checks
--ops before torch is imported. scenarios/args.py declares the op behind each name.
"""

from __future__ import annotations

# What the arguments after the first tensor are. `optional`: `Tensor?` (given a tensor); `list`: one
# `Tensor[]` holding them; `mutable`: plain tensors of which the last is declared `Tensor(a!)`.
ARG_KINDS: tuple[str, ...] = ("tensor", "optional", "list", "mutable", "float", "int", "bool", "str")
ARITIES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
QUICK_ARITIES: tuple[int, ...] = (1, 4, 16, 64)  # --quick: as wide a span, a third of the checks
# The mutable argument comes beside the first tensor (the one the kernel reads): two at the least.
MIN_ARITY: dict[str, int] = {"mutable": 2}


def arities(kind: str, quick: bool = False) -> tuple[int, ...]:
    """The arities (tensors for the tensor kinds, arguments for the scalar ones) `kind` is timed at."""
    return tuple(n for n in (QUICK_ARITIES if quick else ARITIES) if n >= MIN_ARITY.get(kind, 1))


def op_name(kind: str, arity: int) -> str:
    return f"args_{kind}_{arity}"


def kind_and_arity(name: str) -> tuple[str, int]:
    """op_name's inverse."""
    _, kind, arity = name.split("_")
    return kind, int(arity)


ARGS_OPS: tuple[str, ...] = tuple(op_name(k, n) for k in ARG_KINDS for n in arities(k))


def counted_scenario(ops: tuple[str, ...] | None) -> str:
    """Whose cases a breakdown or an instruction count of `ops` builds: `args` where every op is one of
    the args scenario's, `boundary` where none is; ValueError for a mix (the two build their cases
    differently)."""
    generated = [o for o in ops or () if o in ARGS_OPS]
    others = [o for o in ops or () if o not in ARGS_OPS]
    if generated and others:
        raise ValueError(f"the args scenario's ops ({', '.join(generated)}) are counted on their own, not with "
                         f"{', '.join(others)}: run them apart")
    return "args" if generated else "boundary"
