# The study's charts (self-contained HTML + SVG) and its findings in words; the SVGs and
# the findings are the Snakemake report (`snakemake --report report.html`), each chart
# with its own caption in workflow/report/<chart>.rst.


rule charts:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
        published=as_workflow_input(PUBLISHED_CSV),
    output:
        [
            (
                report(
                    path,
                    category=chartlist.category(path),
                    subcategory=chartlist.subcategory(path),
                    caption=f"../report/{chartlist.chart_name(path)}.rst",
                )
                if path.endswith(".svg")
                else path
            )
            for path in CHART_FILES
        ],
    log:
        "logs/charts.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    script:
        "../scripts/charts.py"


rule findings:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        published=as_workflow_input(PUBLISHED_CSV),
    output:
        report(
            "results/findings.md",
            category="Findings",
            caption="../report/findings.rst",
        ),
    log:
        "logs/findings.log",
    params:
        verdicts=CFG["verdicts"],  # the equivalence margins: findings.md is written again where they change
    localrule: True
    conda:
        "../envs/base.yaml"
    script:
        "../scripts/findings.py"
