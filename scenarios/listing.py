"""`--op` and `--list`: a user's ops loaded into the catalogue, and what a command line can name."""

from __future__ import annotations

import argparse
from typing import Any

from dbench.bench.harness.cli import UsageError


def load_user_ops(args: argparse.Namespace) -> list[str]:
    """Import each --op file and register its ops; --ops names are checked against the catalogue then."""
    from dbench.ops import OPS
    from dbench.bench.core.trust import UntrustedPathError
    from dbench.ops.declare import DeclarationError, load_all

    from . import DECLARATIONS

    try:
        names = load_all(args.op)
    except (DeclarationError, UntrustedPathError) as exc:  # the latter: changed since the command-line check
        raise UsageError(f"argument --op: {exc}") from None
    unknown = [n for n in args.ops or () if n not in OPS]
    if unknown:
        raise UsageError(f"argument --ops: unknown op {', '.join(map(repr, unknown))}; valid ops: {', '.join(OPS)}")
    own = DECLARATIONS[args.scenario].ops
    if own is not None:
        raise UsageError(f"argument --op: the {args.scenario} scenario takes only its own ops ({', '.join(own)})")
    return names


def print_list(console: Any) -> None:
    """Scenarios, ops, variants and modes, each with what it is."""
    from rich.table import Table

    from dbench.ops import MODES, OPS
    from dbench.ops.variants import VARIANT_SPECS

    from . import DECLARATIONS, SCENARIOS

    def table(title: str, *columns: str) -> Table:
        t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for c in columns:
            t.add_column(c, overflow="fold")
        return t

    scenarios = table("scenarios (--scenario)", "name", "what it measures", "modes (--modes)", "axes (--axis)")
    for name, declared in DECLARATIONS.items():
        axes = ", ".join(a.name for a in SCENARIOS[name].axes)
        scenarios.add_row(name, declared.description, ", ".join(declared.modes) or "-", axes or "-")
    ops = table("ops (--ops; --op FILE.py[:NAME] adds yours)", "name", "from", "what it is")
    for name, contract in OPS.items():
        ops.add_row(name, contract.origin or "shipped", contract.description)
    variants = table("variants (--variants)", "name", "what it is")
    for spec in VARIANT_SPECS:
        variants.add_row(spec.name, spec.description)
    for t in (scenarios, ops, variants):
        console.print(t)
        console.print()
    console.print("modes (the columns of the boundary table): " + ", ".join(MODES))
