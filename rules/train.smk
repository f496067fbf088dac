# One training job per point, in its framework's environment, monitored from outside; and this
# machine's GEMM peaks (float32, and bfloat16 where the study has bf16 points), the yardsticks of the
# achieved GFLOP/s.


rule train:
    input:
        data="resources/datasets/{dataset}/data.npz",
        env=framework_env_file,
        caffe_data=caffe_data_files,
    output:
        metrics="results/runs/{framework}/{dataset}/{point}/metrics.json",
        curve="results/runs/{framework}/{dataset}/{point}/curve.csv",
        samples="results/runs/{framework}/{dataset}/{point}/samples.csv",
    log:
        "results/runs/{framework}/{dataset}/{point}/job.log",
    conda:
        point_conda_file
    threads: point_threads
    resources:
        # One CPU measurement per machine at a time (the default profile caps it at 1); GPU points
        # and cluster jobs sharing a node are kept apart by the runner's node-local lock, one
        # GPU point per GPU (dlbench/locks.py).
        dlbench_measure=point_measure_slots,
        gpu=point_gpus,
        gpu_model=point_gpu_model,
        cpus_per_task=point_threads,
        mem_mb=point_mem_mb,
        runtime=point_runtime,
        slurm_partition=point_partition,
        slurm_account=cluster.setting(CFG, "account") or "",
        slurm_extra=cluster.slurm_extra(CFG),
    params:
        point=point_params,
        code=point_code,
        env=point_env_params,
        runner=RUNNER_OPTIONS,
    script:
        "../workflow/scripts/train.py"


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
        "../workflow/scripts/machine_peak.py"
