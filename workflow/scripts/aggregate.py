"""Rule aggregate: every run record into runs/curves/samples.parquet (dlbench.aggregate.collect)."""

from dlbench.aggregate import collect
from dlbench.node.locks import heavy_work, node_lock
from dlbench.rules import joblog
from dlbench.run import rebuild

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the aggregation"):  # never beside a measurement
        collect.aggregate(rebuild.records_in(sm.input.records), sm.output.runs, sm.output.curves, sm.output.samples,
                          membership=sm.params.membership, peak_path=sm.input.peak, tuning=sm.params.tuning,
                          cache=sm.params.cache)


joblog.run(sm.log[0], main)
