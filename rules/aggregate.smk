# Every run record into tidy Parquet tables.


rule aggregate:
    input:
        metrics=METRICS,
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
    script:
        "../workflow/scripts/aggregate.py"
