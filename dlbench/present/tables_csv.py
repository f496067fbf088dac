"""A Parquet table as CSV, for the tools that read no Parquet (a spreadsheet, R without arrow): results/runs.csv
and results/summary.csv beside their Parquet files, the same rows and columns (the rule tables_csv).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench import atomic
from dlbench.node import locks


def write(parquet: str | Path, out: str | Path) -> Path:
    """`parquet` as the CSV file `out` (a header line, then one line per row; a blank cell where a value is
    missing), written whole or not at all. Heavy work at 20,000 runs: never beside a measurement on this node."""
    with locks.heavy_work(locks.node_lock(), "the CSV tables"):
        with atomic.atomic_path(out, suffix=".csv") as tmp:
            pd.read_parquet(parquet).to_csv(tmp, index=False)
    return Path(out)

