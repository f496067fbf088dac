"""What a point asks a cluster for: partition, account, time, memory, CPUs, GPUs.

Values come from the config's `cluster:` block, else from the environment
(DLBENCH_SLURM_PARTITION, DLBENCH_SLURM_GPU_PARTITION, DLBENCH_SLURM_ACCOUNT),
else the cluster's own defaults. Time is derived from comparable points already
measured when there are any (never from the FLOPs model alone: a guess too
short there would kill the job), and grows with each retry so a timeout gets more.
"""

from __future__ import annotations

import math
import os

from dlbench.node import memcap
from dlbench.plan import estimate

ENV = {"partition": "DLBENCH_SLURM_PARTITION", "gpu_partition": "DLBENCH_SLURM_GPU_PARTITION",
       "account": "DLBENCH_SLURM_ACCOUNT"}


def setting(cfg: dict, key: str):
    value = cfg.get("cluster", {}).get(key)
    return value if value not in (None, "") else os.environ.get(ENV.get(key, ""), None)


def partition(cfg: dict, point: dict) -> str | None:
    if point["device"] == "gpu":
        return setting(cfg, "gpu_partition") or setting(cfg, "partition")
    return setting(cfg, "partition")


def runtime_min(cfg: dict, guess: float | None, attempt: int = 1) -> int:
    """Minutes: twice the estimate from comparable finished points (at least 10), else the configured default."""
    base = cfg.get("cluster", {}).get("runtime_min", 60) if guess is None else max(10, math.ceil(2 * guess / 60))
    if cfg.get("limits", {}).get("time_s"):
        base = max(base, math.ceil(cfg["limits"]["time_s"] / 60) + 5)
    measurement = cfg.get("measurement", {})
    if measurement.get("exclusive", True):  # it may wait that long for the node's measurement lock
        base += math.ceil(measurement.get("lock_timeout_s", 1800) / 60)
    return int(base * attempt)


def runtime_table(cfg: dict, points: list[dict], done: estimate.Finished,
                  model: estimate.Model | None = None) -> dict[str, int]:
    """Point id -> minutes its job asks for at its first attempt; only a measured or scaled estimate counts
    (never the FLOPs model alone: a guess too short would kill the job). model: one of the same finished points
    (its peak plays no part here)."""
    model = model or estimate.Model(done, estimate.peak_gflops([1], measure=False))
    out = {}
    for p in points:
        seconds, source = model.seconds(p)
        out[p["id"]] = runtime_min(cfg, seconds if source in ("measured", "scaled") else None)
    return out


def mem_mb(cfg: dict) -> int:
    """A point's memory: what covers the runner's own cap on its budget (limits.memory_mb: dlbench.node.memcap.job_mb),
    else the cluster's default."""
    limit = cfg.get("limits", {}).get("memory_mb")
    return memcap.job_mb(limit) if limit else int(cfg.get("cluster", {}).get("mem_mb", 8000))


def slurm_extra(cfg: dict) -> str:
    return "--exclusive" if cfg.get("cluster", {}).get("exclusive") else ""
