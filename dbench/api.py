"""The library's entry points: time ops in a scenario from Python, and read results as pandas.

    import dbench
    result = dbench.run_scenario("boundary", ops=[my_op], device="cpu", quick=True)
    result.frame()            # one row per case and metric
    dbench.load_results(["results/h200"])   # any runs, as one DataFrame

A declared op passed here runs in this process: it is registered under its name, with its
identity taken from its module and the source of its launchers. (--processes, --ab and --shards
start fresh processes: give those a file, `--op FILE.py:NAME`.)
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from dbench.ops.declare import Op

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Result:
    """One run: its exit status, its result file and the document in it."""

    status: int
    path: Path | None
    document: dict[str, Any]

    def frame(self) -> "pd.DataFrame":
        from dbench.analysis.load import rows_frame

        return rows_frame(self.document, str(self.path or ""))


def _origin(op: Op) -> str:
    """module:name@digest of the launchers' source (or their qualified names, without source)."""
    h = hashlib.sha256()
    for fn in (op.forward, op.backward, op.reference):
        if fn is None:
            continue
        try:
            h.update(inspect.getsource(fn).encode())
        except (OSError, TypeError):
            h.update(f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}".encode())
    module = getattr(op.forward, "__module__", None) or "__main__"
    return f"{module}:{op.name}@{h.hexdigest()[:12]}"


def register(ops: Sequence[Op]) -> list[str]:
    """Add declared ops to the catalogue (their names, for --ops); refuses a name taken by another op."""
    from dbench.ops.declare import contract_of
    from dbench.ops.declare import register as add

    return add([contract_of(op, _origin(op)) for op in ops])


def run_scenario(scenario: str = "boundary", ops: Sequence[Op | str] = (), *, device: str | None = None,
                 out: str | Path | None = None, **options: Any) -> Result:
    """Run a scenario as `run.py` does, in this process, and return its result (the document as
    written, from memory).

    ops: declared ops (dbench.Op) and/or the names of the suite's ops; options: any run.py option by
    its Python name, as a Python value (quick=True, rounds=10, variants=["raw", "custom_op"],
    no_cpp=True, ab=("env:", "env:X=1")...), checked as its command-line words would be. A bad
    option raises dbench.UsageError (a ValueError) before any work."""
    from dbench import run as command
    from dbench.bench.harness import cli
    from dbench.ops.specs import OP_NAMES, USER_OP_NAMES, VARIANT_NAMES
    from dbench.scenarios import DECLARATIONS

    names = register([o for o in ops if isinstance(o, Op)])
    names += [o for o in ops if isinstance(o, str)]
    fields = {"scenario": scenario, "device": device, "out": out, **({"ops": names} if names else {}), **options}
    try:
        given = cli.from_fields({k: v for k, v in fields.items() if v is not None}, tuple(DECLARATIONS),
                                (*OP_NAMES, *USER_OP_NAMES), VARIANT_NAMES, declarations=DECLARATIONS)
    except cli.UsageError:
        cli.remove_made_folders()
        raise
    end = command.run_for_library([], given)
    return Result(end.code, end.path, end.document or {})


def load_results(paths: Iterable[str | Path]) -> "pd.DataFrame":
    """Every result file given (or found in a folder given, or in the folders below it:
    `dbench-results` holds one folder per machine) as one DataFrame."""
    from dbench.analysis.load import load_results as frames
    from dbench.bench.io.document import result_files

    return frames([f for p in paths for f in result_files(p, recursive=True)])


def frame(document: dict[str, Any]) -> "pd.DataFrame":
    """One result document's rows as a DataFrame (row_id joins runs)."""
    from dbench.analysis.load import rows_frame

    return rows_frame(document)
