# This study's results against another result set (config `compare: {baseline: PATH}`): the baseline is A,
# this study B (dlbench.present.comparison); the comparison and its ratios chart go into the report.

COMPARE_FILES = []
if CFG.get("compare"):
    from dlbench.present import comparison

    try:
        COMPARE_BASELINE = comparison.baseline_runs(CFG["compare"]["baseline"])
    except comparison.CompareError as exc:
        raise SystemExit(f"dlbench: config error: compare.baseline: {exc}")
    COMPARE_FILES = [f"results/compare/{name}" for name in comparison.OUTPUTS]

    rule compare:
        input:
            runs="results/runs.parquet",
            baseline=COMPARE_BASELINE,
        output:
            [
                (
                    report(
                        path,
                        category="Comparison",
                        caption=f"../report/{os.path.splitext(os.path.basename(path))[0]}.rst",
                    )
                    if path.endswith((".md", ".svg"))
                    else path
                )
                for path in COMPARE_FILES
            ],
        log:
            "logs/compare.log",
        localrule: True
        conda:
            "../envs/base.yaml"
        script:
            "../scripts/compare.py"
