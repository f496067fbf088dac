# Looking at a study: its results on one page (results/index.html: the findings, every chart, the table of runs,
# the tables as files; also in the report), the tables as CSV, and the points finished so far while it runs.
from dlbench.present import partial as partial_look  # the rule below is named partial


rule tables_csv:
    input:
        runs="results/runs.parquet",
        summary="results/summary.parquet",
    output:
        runs="results/runs.csv",
        summary="results/summary.csv",
    log:
        "logs/tables_csv.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    script:
        "../scripts/tables_csv.py"


# Every file the page links to is among its inputs, so that its links resolve when it is written.
rule page:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
        summary="results/summary.parquet",
        csv=rules.tables_csv.output,
        findings="results/findings.md",
        charts=CHARTS_DIR,
    output:
        report(
            "results/index.html",
            category="Results page",
            caption="../report/page.rst",
        ),
    log:
        "logs/page.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    script:
        "../scripts/page.py"


# A look at a study before it ends: `snakemake partial` draws from the points finished so far into
# results/partial/ (the same page, tables and charts), training nothing and waiting for nothing but the point
# being measured on this node (dlbench/present/partial.py: heavy work). It has no inputs, so that it shares no file
# with a study running beside it; it runs again when another point has finished.
rule partial:
    output:
        runs="results/partial/runs.parquet",
        curves="results/partial/curves.parquet",
        samples="results/partial/samples.parquet",
        summary="results/partial/summary.parquet",
        runs_csv="results/partial/runs.csv",
        summary_csv="results/partial/summary.csv",
        findings="results/partial/findings.md",
        charts=directory("results/partial/charts"),
        page="results/partial/index.html",
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
        study_file=STUDY_FILE,
    script:
        "../scripts/partial.py"
