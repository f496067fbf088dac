"""Rule findings: what the results say, in words (dlbench.present.findings)."""

from dlbench.analysis import stats
from dlbench.node.locks import heavy_work, node_lock
from dlbench.present import findings
from dlbench.present.charts import catalog
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> None:
    with heavy_work(node_lock(), "the findings"):  # never beside a measurement
        findings.write_findings(sm.input.runs, sm.input.curves, sm.output[0], sm.input.published,
                                margins=stats.Margins.from_config({"verdicts": sm.params.verdicts}),
                                not_drawn=catalog.read_index(sm.input.charts)["not_drawn"],
                                study_file=sm.params.study_file)


joblog.run(sm.log[0], main)
