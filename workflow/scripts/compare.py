"""Rule compare: this study's results (B) against the config's baseline (A) (dlbench.compare)."""

from pathlib import Path

from dlbench import compare, joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: compare.run(sm.input.baseline, sm.input.runs, Path(sm.output[0]).parent,
                                          name_b="this study"))
