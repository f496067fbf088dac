"""Rule page: the study's results on one page, results/index.html (dlbench.present.results_page: heavy work)."""

from pathlib import Path

from dlbench.present import results_page
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: results_page.write(Path(sm.input.runs).parent, sm.output[0]))
