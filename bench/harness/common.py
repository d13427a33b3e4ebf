"""What every way to run shares: exit statuses, how a path is shown, the checkpoint period."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from dbench.bench.core.native_build import ROOT  # the folder run.py lives in: the checkout, or the installed package's

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# The running result file is rewritten at most this often during the rounds: a write of the boundary
# table (~250 rows summarised) takes ~0.1 s, and a Ctrl-C or SIGTERM always writes the last round.
CHECKPOINT_SECONDS = 5.0
# The command as the user typed it, the prefix of its one-line messages ("run.py: error: ..."):
# dbench/main.py sets "dbench run" / "dbench list" for the console script. Read it when a message is
# made (common.PROG), never copied at import.
PROG = "run.py"


class Outcome(NamedTuple):
    """How a run ended: its exit status, the result file written and the document in it (None: nothing run)."""

    code: int
    path: Path | None
    document: dict[str, Any] | None = None


def shown(path: Path) -> Path:
    """A path as the console shows it: relative to the checkout when inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
