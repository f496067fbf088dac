# Looking at a study: every run as one sortable, filterable page (results/runs.html, also in the report).


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
