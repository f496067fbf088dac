"""Rule aggregate: every run record into runs/curves/samples.parquet (dlbench.results)."""

from dlbench import joblog, results

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: results.aggregate(sm.input.metrics, sm.output.runs, sm.output.curves, sm.output.samples,
                                                membership=sm.params.membership, peak_path=sm.input.peak,
                                                tuning=sm.params.tuning, cache=sm.params.cache))
