# Every run record into tidy Parquet tables.


rule aggregate:
    input:
        METRICS,
    output:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
    localrule: True
    run:
        from dlbench import results

        results.aggregate(input, output.runs, output.curves, output.samples)
