"""Rule runs_table: every run as one sortable, filterable HTML page (dlbench.runs_table: heavy work)."""

from dlbench import joblog, runs_table

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: runs_table.write(sm.input.runs, sm.output[0]))
