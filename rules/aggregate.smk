# Every run record into tidy Parquet tables.


rule machine_peak:
    output:
        "results/machine/peak.json",
    log:
        "logs/machine_peak.log",
    localrule: True
    resources:
        # a measurement too: never beside a training job
        dlbench_measure=1 if CFG["measurement"]["exclusive"] else 0,
    params:
        threads=sorted({p["threads"] for p in POINTS.values()}),
    shell:
        "PYTHONPATH={workflow.basedir:q} {PY:q} -m dlbench.peak --threads {params.threads} --out {output:q} 2> {log:q}"


rule aggregate:
    input:
        metrics=METRICS,
        peak="results/machine/peak.json",
    output:
        runs="results/runs.parquet",
        curves="results/curves.parquet",
        samples="results/samples.parquet",
    localrule: True
    run:
        from dlbench import results

        results.aggregate(
            input.metrics,
            output.runs,
            output.curves,
            output.samples,
            membership=MEMBERSHIP,
            peak_path=input.peak,
        )
