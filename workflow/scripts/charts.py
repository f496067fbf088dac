"""Rule charts: the study's charts as HTML and SVG, those it has data for, and their index (dlbench.charts)."""

from dlbench import charts, joblog
from dlbench.locks import heavy_work, node_lock

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the charts"):  # never beside a measurement
        charts.draw_all(sm.input.runs, sm.input.curves, sm.input.samples, sm.output[0], published=sm.input.published)


joblog.run(sm.log[0], main)
