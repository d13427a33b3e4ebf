"""CSV: every table's data (numbers, CI, flags, reasons), one row per cell, of every result. Text
cells pass bench/io/escape.py `csv_cell`: no control characters, no formula a spreadsheet would run."""

from __future__ import annotations

from typing import Sequence

from . import Named

FORMAT = "csv"
DESCRIPTION = "CSV: the tables' data, one row per cell"


def render(results: Sequence[Named]) -> str:
    import pandas as pd

    from dbench.bench.io.escape import csv_cell, frame
    from dbench.analysis.views import table_frame

    cells = pd.concat([table_frame(doc, name) for doc, name in results], ignore_index=True)
    return frame(cells, csv_cell).to_csv(index=False)
