"""Rule runs_table: every run as one sortable, filterable HTML page (dlbench.present.runs_table: heavy work)."""

from dlbench.present import runs_table
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: runs_table.write(sm.input.runs, sm.output[0]))
