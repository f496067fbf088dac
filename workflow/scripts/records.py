"""Rule records: every record made again from its raw measurement where the code that makes records changed
(dlbench.run.rebuild)."""

from dlbench.node.locks import heavy_work, node_lock
from dlbench.rules import joblog
from dlbench.run import rebuild

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "making the records"):  # never beside a measurement
        rebuild.main(list(sm.input), sm.output[0], sm.params.code)


joblog.run(sm.log[0], main)
