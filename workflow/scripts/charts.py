"""Rule charts: the study's charts as HTML and SVG (dlbench.charts)."""

from pathlib import Path

from dlbench import charts, joblog
from dlbench.locks import heavy_work, node_lock

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the charts"):  # never beside a measurement
        charts.draw_all(sm.input.runs, sm.input.curves, sm.input.samples, Path(sm.output[0]).parent,
                        published=sm.input.published)


joblog.run(sm.log[0], main)
