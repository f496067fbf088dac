"""Rule summary: runs.parquet into summary.parquet, a row per setting and metric with its interval
(dlbench.analysis.summary)."""

import pandas as pd

from dlbench.aggregate.collect import write_parquet
from dlbench.analysis.summary import summary_table
from dlbench.node.locks import heavy_work, node_lock
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the summary"):  # never beside a measurement, as the other tables
        write_parquet(summary_table(pd.read_parquet(sm.input.runs)), sm.output.summary)


joblog.run(sm.log[0], main)
