# The study's charts (self-contained HTML, SVG, PNG, PDF, and the Vega spec the results page draws them from) and
# its findings in words; the SVGs and the findings are the Snakemake report (`snakemake --report report.html`). The
# charts are a folder: those the study has data for, and index.json (drawn, and not drawn and why; the findings say
# it in a line). The report takes every SVG found there, each
# under its chart's category and with its caption (its branch of workflow/report/charts.rst).


rule charts:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
        published=as_workflow_input(PUBLISHED_CSV),
    output:
        report(
            directory(CHARTS_DIR),
            patterns=["{name,[a-z0-9_]+}.svg"],
            category=lambda wildcards: catalog.category(wildcards.name),
            subcategory=lambda wildcards: catalog.subcategory(wildcards.name),
            caption="../report/charts.rst",
        ),
    log:
        "logs/charts.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        formats=catalog.FORMATS,  # the files of each chart: drawn again where they change
        code=charts_digest(),  # what draws them (dlbench/rules/code_digest.py): drawn again where it changes
    script:
        "../scripts/charts.py"


rule findings:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        published=as_workflow_input(PUBLISHED_CSV),
        charts=CHARTS_DIR,  # its index: the charts not drawn, and why
    output:
        report(
            "results/findings.md",
            category="Findings",
            caption="../report/findings.rst",
        ),
    log:
        "logs/findings.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        verdicts=CFG["verdicts"],  # the equivalence margins: findings.md is written again where they change
        study_file=STUDY_FILE,  # the calibration its sentences quote
        code=findings_digest(),  # what computes and writes them: written again where it changes
    script:
        "../scripts/findings.py"
