# Looking at a study: every run as one sortable, filterable page (results/runs.html, also in the report),
# and the points finished so far while it runs.
from dlbench.present import partial as partial_look  # the rule below is named partial


rule runs_table:
    input:
        runs="results/runs.parquet",
    output:
        report(
            "results/runs.html",
            category="Runs",
            caption="../report/runs.rst",
        ),
    log:
        "logs/runs_table.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    script:
        "../scripts/runs_table.py"


# A look at a study before it ends: `snakemake partial` draws from the points finished so far into
# results/partial/, training nothing and waiting for nothing but the point being measured on this node
# (dlbench/present/partial.py: heavy work). It has no inputs, so that it shares no file with a study running beside
# it; it runs again when another point has finished.
rule partial:
    output:
        runs="results/partial/runs.parquet",
        curves="results/partial/curves.parquet",
        samples="results/partial/samples.parquet",
        findings="results/partial/findings.md",
        runs_html="results/partial/runs.html",
        charts=directory("results/partial/charts"),
    log:
        "logs/partial.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        metrics=METRICS,
        finished=lambda wildcards: partial_look.state(METRICS),
        membership=MEMBERSHIP,
        tuning=TUNING,
        peak="results/machine/peak.json",
        published=as_workflow_input(PUBLISHED_CSV),
        verdicts=CFG["verdicts"],
    script:
        "../scripts/partial.py"
