"""Load any set of result files into one pandas DataFrame (one row per case x metric)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from bench.identity import identity_text, row_identity
from bench.results import load_result

ENV_COLUMNS = ("time", "torch", "cuda_runtime", "gpu_name", "cpu_model", "hostname")


def rows_frame(document: dict[str, Any], source: str = "") -> pd.DataFrame:
    """A result's rows, with `row_id` (the row identity, bench/identity.py, as text: the key that joins
    runs) and `group_id` (the same without the variant: the rows one table line-up compares)."""
    frame = pd.DataFrame(document["rows"])
    frame["row_id"] = [identity_text(row_identity(r)) for r in document["rows"]]
    frame["group_id"] = [identity_text(row_identity({**r, "variant": None})) for r in document["rows"]]
    env = document["env"]
    for col in ENV_COLUMNS:
        frame[f"env_{col}"] = env.get(col)
    frame["source"] = source
    return frame


def load_results(paths: Iterable[Path]) -> pd.DataFrame:
    frames = [rows_frame(load_result(Path(p)), str(p)) for p in paths]
    if not frames:
        raise ValueError("no result files given")
    return pd.concat(frames, ignore_index=True)
