"""A child process's options: the file its parent wrote (`child_options`). (A command line's are
made by scenarios/select.py `resolved`, which needs the scenarios' declarations.)"""

from __future__ import annotations

from pathlib import Path

from dbench.bench.harness.cli import UsageError
from dbench.bench.harness.options import RunOptions, read_child_options


def child_options(path: Path) -> tuple[RunOptions, list[str]]:
    """A child's options, as its parent resolved them (--options-file), with the user's op files
    loaded and its device made current; a child has no shards of its own."""
    from dbench.bench.harness.device import resolve_device
    from dbench.bench.core.trust import UntrustedPathError
    from dbench.ops.declare import DeclarationError, load_all

    options = read_child_options(path)
    try:
        load_all(options.op_files)
    except (DeclarationError, UntrustedPathError) as exc:  # changed since the parent loaded it
        raise UsageError(f"argument --op: {exc}") from None
    resolve_device(options)
    return options, []
