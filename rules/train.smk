# One training job per point, in its framework's environment, monitored from outside.


rule train:
    input:
        data="resources/datasets/{dataset}/data.npz",
        env=env_input,
        caffe_data=caffe_data_input,
    output:
        metrics="results/runs/{framework}/{dataset}/{point}/metrics.json",
        curve="results/runs/{framework}/{dataset}/{point}/curve.csv",
        samples="results/runs/{framework}/{dataset}/{point}/samples.csv",
    log:
        "results/runs/{framework}/{dataset}/{point}/job.log",
    conda:
        conda_env
    threads: lambda w: point_of(w)["threads"]
    resources:
        # One measurement per machine at a time (the default profile caps it at 1; on a
        # cluster the runner's node-local lock does it, see dlbench/runner.py).
        dlbench_measure=1 if CFG["measurement"]["exclusive"] else 0,
        gpu=lambda w: 1 if point_of(w)["device"] == "gpu" else 0,
        gpu_model=lambda w: (
            (CFG["cluster"].get("gpu_model") or "")
            if point_of(w)["device"] == "gpu"
            else ""
        ),
        cpus_per_task=lambda w: point_of(w)["threads"],
        mem_mb=lambda w: cluster.mem_mb(CFG, point_of(w)),
        runtime=runtime_of,
        slurm_partition=lambda w: cluster.partition(CFG, point_of(w)) or "",
        slurm_account=lambda w: cluster.setting(CFG, "account") or "",
        slurm_extra=cluster.slurm_extra(CFG),
    params:
        point=lambda w: json.dumps(point_of(w), sort_keys=True),
        # Changing a framework's adapter (or the shared trainer code) reruns its points only.
        code=lambda w: adapter_digest(w.framework),
        interval=CFG["monitor"]["interval_s"],
        lock=(
            f"--measure-lock {CFG['measurement']['lock_file']}"
            if CFG["measurement"]["exclusive"]
            else ""
        ),
        monitor="--no-monitor" if not CFG["monitor"]["enabled"] else "",
        limits=(
            (
                f"--time-limit {CFG['limits']['time_s']} "
                if CFG["limits"]["time_s"]
                else ""
            )
            + (
                f"--memory-limit {CFG['limits']['memory_mb']}"
                if CFG["limits"]["memory_mb"]
                else ""
            )
        ),
    shell:
        "PYTHONPATH={workflow.basedir:q} {PY_TRAIN:q} -m dlbench.cli train --point {params.point:q}"
        " --dataset-dir resources/datasets/{wildcards.dataset}"
        " --env={input.env:q} --out results/runs/{wildcards.framework}/{wildcards.dataset}/{wildcards.point}"
        " --interval {params.interval} {params.monitor} {params.limits} {params.lock} > {log:q} 2>&1"
