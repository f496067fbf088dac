"""Rule findings: what the results say, in words (dlbench.findings)."""

from dlbench import findings, joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: findings.write_findings(sm.input.runs, sm.input.curves, sm.output[0],
                                                      sm.input.published))
