"""Rule charts: the study's charts as HTML and SVG (dlbench.charts)."""

from pathlib import Path

from dlbench import charts, joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: charts.draw_all(sm.input.runs, sm.input.curves, sm.input.samples,
                                              Path(sm.output[0]).parent, published=sm.input.published))
