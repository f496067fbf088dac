"""Rule compare: this study's results (B) against the config's baseline (A) (dlbench.present.comparison)."""

from pathlib import Path

from dlbench.analysis import stats
from dlbench.node.locks import heavy_work, node_lock
from dlbench.present import comparison
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the comparison"):  # never beside a measurement
        # the study's equivalence margins where its config states them (`verdicts`), else compare's defaults
        comparison.run(sm.input.baseline, sm.input.runs, Path(sm.output[0]).parent, name_b="this study",
                    margins=stats.Margins.from_config(sm.config))


joblog.run(sm.log[0], main)
