"""The cluster queue: 40 short points as 40 SLURM jobs, and packed 10 to a job with job groups.

    .venv/bin/python bench/slurm_groups.py [--points 40] [--per-job 10]

Needs a SLURM cluster that answers `sinfo` (the one-node test cluster: slurm-testbed/slurm-up.sh). A copy of the
workflow (dlbench.testing.sandbox) runs the same study twice through profiles/slurm: PyTorch with Caffe's
preset on digits, 20 iterations, --points points (learning rates x repeats); once one job per point, once
with the job-group options that profiles/slurm/config.yaml documents. Reported for each: the SLURM jobs
submitted for training points (sacct), the wall time of the whole `snakemake` run, and the points' statuses
(the learning rate 0.2 diverges on digits: those points end `diverged`, a finished record like any other).
The data, the environments and the machine peak are made before the timed runs. About 10 minutes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _common as c
import pandas as pd

from dlbench.testing import sandbox

LRS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.2]


def study(points: int) -> dict:
    return {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
            "sweep": {"learning_rate": LRS, "iterations": [20], "batch_size": [32], "threads": [1]},
            "repeats": max(1, points // len(LRS)), "cluster": {"partition": "debug", "account": "dlbench",
                                                               "mem_mb": 2000}}


def grouped(per_job: int) -> list[str]:
    return ["--groups", "train=measure", "--group-components", f"measure={per_job}"]


def snakemake(wf: Path, *args: str) -> float:
    t0 = time.monotonic()
    # targets and options first: --configfile takes every word after it
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args, "--profile", "profiles/slurm", "--jobs", "50",
                           "--slurm-init-seconds-before-status-checks", "3", "--configfile", "study.yaml"],
                          cwd=wf, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return time.monotonic() - t0


def train_jobs(since: str) -> int:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", since, "--format", "JobID,JobName,State"],
                         capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=40)
    ap.add_argument("--per-job", type=int, default=10)
    args = ap.parse_args(argv)
    if not shutil.which("sinfo") or subprocess.run(["sinfo"], capture_output=True).returncode:
        raise SystemExit("no SLURM cluster answers `sinfo` (start the test cluster with slurm-testbed/slurm-up.sh)")
    load = c.busy_cores(1.0)
    c.header(f"SLURM: {args.points} short points, one job per point vs {args.per_job} per job", load)
    rows = []
    for name, extra in (("one job per point", []), (f"{args.per_job} points per job", grouped(args.per_job))):
        wf = sandbox.copy_workflow(c.WORK / "slurm_groups" / name.replace(" ", "_"), study(args.points))
        shutil.rmtree(wf / "results", ignore_errors=True)
        # what is not training runs on the submitting host: made first, outside the timed run
        snakemake(wf, "resources/datasets/digits/data.npz", "resources/envs/pytorch.json",
                  "results/machine/peak.json")
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        with c.ForeignCpu() as foreign:
            wall = snakemake(wf, *extra)
        runs = pd.read_parquet(wf / "results/runs.parquet")
        statuses = runs.status.value_counts()
        rows.append({"how": name, "points": len(runs),
                     "statuses": ", ".join(f"{n} {st}" for st, n in statuses.items()),
                     "SLURM jobs": train_jobs(since), "allocations in records": runs.slurm_job_id.nunique(),
                     "wall s": wall, "others' cores": foreign.cores})
        print(c.table(rows[-1:]), flush=True)
    c.summary("each way run once, one after the other", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
