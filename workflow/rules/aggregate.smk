# Every run record into tidy Parquet tables; then, from runs.parquet alone, the study's summary: one row
# per setting and metric with its 95 % interval (failed and contended runs counted apart).


rule aggregate:
    input:
        records="results/records.json",  # the study's records, each made by the current code
        peak="results/machine/peak.json",
    output:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
    log:
        "logs/aggregate.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        membership=MEMBERSHIP,
        tuning=TUNING,
        # The parsed CSVs of every record, kept between aggregations: only new or changed records are read.
        cache="results/.aggregate-cache",
    script:
        "../scripts/aggregate.py"


rule summary:
    input:
        runs="results/runs.parquet",
    output:
        summary=report(
            "results/summary.parquet",
            category="Findings",
            caption="../report/summary.rst",
        ),
    log:
        "logs/summary.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    script:
        "../scripts/summary.py"
