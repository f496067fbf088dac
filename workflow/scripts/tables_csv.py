"""Rule tables_csv: runs.parquet and summary.parquet as CSV beside them (dlbench.present.tables_csv: heavy work)."""

from dlbench.present import tables_csv
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    tables_csv.write(sm.input.runs, sm.output.runs)
    tables_csv.write(sm.input.summary, sm.output.summary)


joblog.run(sm.log[0], main)
