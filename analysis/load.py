"""Result documents as pandas: any set of runs as one DataFrame.

The checked reader itself lives in bench/io/document.py (standard library only, shared with run.py's
up-front checks); it is re-exported here so every analysis command reads through it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbench.bench.io.document import (  # noqa: F401  (re-exported: the analysis commands' one reader)
    DOCUMENT_STATUSES, ENV_COLUMNS, MAX_BYTES, MAX_DEPTH, REQUIRED_ROW_FIELDS, ROW_COLUMNS, ROW_STATUSES, UNTIMED,
    NotAResultError, ResultFileError, check_result, is_folder, load_result, read_json, read_result, read_results,
    result_files, row_name,
)
from dbench.bench.core.identity import identity_text, row_identity

if TYPE_CHECKING:
    import pandas as pd


# ---------------------------------------------------------------------------------------------
# pandas


def rows_frame(document: dict[str, Any], source: str = "") -> "pd.DataFrame":
    """A result's rows, with `row_id` (the row identity, bench/core/identity.py, as text: the key that joins
    runs) and `group_id` (the same without the variant: the rows one table line-up compares)."""
    import pandas as pd

    # A document without rows (a run stopped before its first case) still has the columns every
    # consumer selects on.
    frame = pd.DataFrame(document["rows"]).reindex(columns=ROW_COLUMNS if not document["rows"] else None)
    for column in ("status", "reason"):
        if column not in frame:
            frame[column] = None
    frame["row_id"] = [identity_text(row_identity(r)) for r in document["rows"]]
    frame["group_id"] = [identity_text(row_identity({**r, "variant": None})) for r in document["rows"]]
    env = document["env"]
    for col in ENV_COLUMNS:
        frame[f"env_{col}"] = env.get(col)
    frame["source"] = source
    return frame


def load_results(paths: Iterable[Path]) -> "pd.DataFrame":
    import pandas as pd

    frames = [rows_frame(read_result(Path(p)), str(p)) for p in paths]
    if not frames:
        raise ValueError("no result files given")
    return pd.concat(frames, ignore_index=True)
