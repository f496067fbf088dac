# The study's charts (self-contained HTML + SVG), part of the Snakemake report.


rule charts:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
    output:
        [
            report(path, category="Charts", caption="../report/charts.rst")
            for path in CHART_FILES
        ],
    localrule: True
    run:
        charts.draw_all(input.runs, input.curves, input.samples, "results/charts", CFG)
