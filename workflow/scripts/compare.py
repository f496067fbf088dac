"""Rule compare: this study's results (B) against the config's baseline (A) (dlbench.compare)."""

from pathlib import Path

from dlbench import compare, joblog, stats
from dlbench.locks import heavy_work, node_lock

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the comparison"):  # never beside a measurement
        # the study's equivalence margins where its config states them (`verdicts`), else compare's defaults
        compare.run(sm.input.baseline, sm.input.runs, Path(sm.output[0]).parent, name_b="this study",
                    margins=stats.Margins.from_config(sm.config))


joblog.run(sm.log[0], main)
