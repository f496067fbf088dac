"""Rule charts: the study's charts as HTML and SVG, those it has data for, and their index
(dlbench.present.charts.draw)."""

from dlbench.node.locks import heavy_work, node_lock
from dlbench.present.charts import draw
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the charts"):  # never beside a measurement
        draw.draw_all(sm.input.runs, sm.input.curves, sm.input.samples, sm.output[0], published=sm.input.published)


joblog.run(sm.log[0], main)
