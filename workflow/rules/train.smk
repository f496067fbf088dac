# One training job per point, in its framework's environment, monitored from outside: its output is the raw
# measurement (dlbench/record/raw.py), which it also makes into the point's record (the record rule makes records
# again, workflow/rules/records.smk); and this machine's GEMM peaks (float32, and bfloat16 where the study has
# bf16 points), the yardsticks of the achieved GFLOP/s.


rule train:
    input:
        data="resources/datasets/{dataset}/data.npz",
        # The build of the point's environment, which the job waits for (none for a site one, or under
        # --sdm conda); the environment itself is params.env.
        env=TRAIN["env_file"],
        prepared=TRAIN["prepared_input"],
    output:
        # written last, naming the raw files beside it (the trainer's events and log, the monitor's samples, the
        # point); the record (metrics.json, curve.csv, samples.csv) lies beside it too
        measurement="results/runs/{framework}/{dataset}/{point}/measurement.json",
    log:
        "results/runs/{framework}/{dataset}/{point}/job.log",
    # A failure of the machine (dlbench/record/statuses.py) fails the job, which runs again this many times, and
    # once more where the last allowed attempt died with its node: that one only publishes `node_lost`.
    retries: TRAIN["retries"] + 1
    conda:
        TRAIN["conda"]
    threads: TRAIN["threads"]
    resources:
        # One CPU measurement per machine at a time (the default profile caps it at 1); GPU points
        # and cluster jobs sharing a node are kept apart by the runner's node-local lock, one
        # GPU point per GPU (dlbench/node/locks.py). Each is a plain value where every point has the
        # same (dlbench/rules/context.py, Study.per_point).
        dlbench_measure=TRAIN["measure"],
        gpu=TRAIN["gpu"],
        gpu_model=TRAIN["gpu_model"],
        cpus_per_task=TRAIN["threads"],
        mem_mb=TRAIN["mem_mb"],
        runtime=TRAIN["runtime"],
        slurm_partition=TRAIN["partition"],
        slurm_account=TRAIN["account"],
        slurm_extra=TRAIN["slurm_extra"],
        # Which attempt this is, and how many there may be: resources, so that neither reruns a point.
        dlbench_attempt=TRAIN["attempt"],
        dlbench_retries=TRAIN["retries"],
    params:
        # The point itself: a changed point is a new id (and path) anyway; its params keep the record's input.
        point=TRAIN["point"],
        # What the job runs (dlbench/rules/code_digest.py): changing a framework's adapter reruns its points only,
        # the measurement or the shared trainer code every point; a comment, a record's field, a chart none.
        code=TRAIN["code"],
        # The point's environment, one value (dlbench/environments/environment.py): another one reruns the point.
        env=TRAIN["env"],
        runner=RUNNER_OPTIONS,
    script:
        "../scripts/train.py"


rule machine_peak:
    input:
        bf16_env=peak_bf16_env,
    output:
        "results/machine/peak.json",
    log:
        "logs/machine_peak.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    resources:
        # a measurement too: never beside a training job (GPU points too: it holds the node lock)
        dlbench_measure=MEASURE_SLOTS,
    params:
        threads=THREAD_COUNTS,
        lock=MEASURE_LOCK,
    script:
        "../scripts/machine_peak.py"
