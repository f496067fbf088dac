# The study's charts (self-contained HTML + SVG) and its findings in words; the SVGs and
# the findings are the Snakemake report (`snakemake --report report.html`), each chart
# with its own caption in report/<chart>.rst.


rule charts:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
        published=str(charts.PUBLISHED_CSV),
    output:
        [
            (
                report(
                    path,
                    category=charts.category(path),
                    caption=f"../report/{charts.chart_name(path)}.rst",
                )
                if path.endswith(".svg")
                else path
            )
            for path in CHART_FILES
        ],
    localrule: True
    run:
        charts.draw_all(
            input.runs,
            input.curves,
            input.samples,
            "results/charts",
            CFG,
            published=input.published,
        )


rule findings:
    input:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        published=str(charts.PUBLISHED_CSV),
    output:
        report(
            "results/findings.md",
            category="Findings",
            caption="../report/findings.rst",
        ),
    localrule: True
    run:
        from dlbench import findings

        findings.write_findings(
            input.runs, input.curves, output[0], input.published
        )
