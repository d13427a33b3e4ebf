"""CSV: every table's data (numbers, CI, flags, reasons), one row per cell, of every result."""

from __future__ import annotations

from typing import Sequence

from . import Named

FORMAT = "csv"
DESCRIPTION = "CSV: the tables' data, one row per cell"


def render(results: Sequence[Named]) -> str:
    import pandas as pd

    from dbench.analysis.views import table_frame

    return pd.concat([table_frame(doc, name) for doc, name in results], ignore_index=True).to_csv(index=False)
