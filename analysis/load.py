"""Load any set of result files into one pandas DataFrame (one row per case x metric)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from bench.results import load_result

ENV_COLUMNS = ("time", "torch", "cuda_runtime", "gpu_name", "cpu_model", "hostname")


def rows_frame(document: dict[str, Any], source: str = "") -> pd.DataFrame:
    frame = pd.DataFrame(document["rows"])
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
