# One training job per point, in its framework's environment, monitored from outside; and this
# machine's GEMM peaks (float32, and bfloat16 where the study has bf16 points), the yardsticks of the
# achieved GFLOP/s.


rule train:
    input:
        data="resources/datasets/{dataset}/data.npz",
        env=TRAIN_INPUT["env"],
        caffe_data=TRAIN_INPUT["caffe_data"],
    output:
        metrics="results/runs/{framework}/{dataset}/{point}/metrics.json",
        curve="results/runs/{framework}/{dataset}/{point}/curve.csv",
        samples="results/runs/{framework}/{dataset}/{point}/samples.csv",
    log:
        "results/runs/{framework}/{dataset}/{point}/job.log",
    # A failure of the machine (dlbench/outcomes.py) fails the job, which runs again this many times, and
    # once more where the last allowed attempt died with its node: that one only publishes `node_lost`.
    retries: CFG["measurement"]["retries"] + 1
    conda:
        TRAIN_CONDA
    threads: TRAIN_THREADS
    resources:
        # One CPU measurement per machine at a time (the default profile caps it at 1); GPU points
        # and cluster jobs sharing a node are kept apart by the runner's node-local lock, one
        # GPU point per GPU (dlbench/locks.py). Each is a plain value where every point has the
        # same (rules/common.smk, per_point).
        dlbench_measure=TRAIN_RESOURCES["dlbench_measure"],
        gpu=TRAIN_RESOURCES["gpu"],
        gpu_model=TRAIN_RESOURCES["gpu_model"],
        cpus_per_task=TRAIN_THREADS,
        mem_mb=TRAIN_RESOURCES["mem_mb"],
        runtime=point_runtime,
        slurm_partition=TRAIN_RESOURCES["slurm_partition"],
        slurm_account=cluster.setting(CFG, "account") or "",
        slurm_extra=cluster.slurm_extra(CFG),
        # Which attempt this is, and how many there may be: resources, so that neither reruns a point.
        dlbench_attempt=lambda wildcards, attempt: attempt,
        dlbench_retries=CFG["measurement"]["retries"],
    params:
        # The point itself: a changed point is a new id (and path) anyway; its params keep the record's input.
        point=point_params,
        # Changing a framework's adapter (or the shared trainer code) reruns its points only.
        code=TRAIN_CODE,
        env=TRAIN_ENV,
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
