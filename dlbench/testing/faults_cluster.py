"""Faults of the cluster's controller and of the node's memory, injected for real (round four).

SLURM's commands are the outside world here: a fake `squeue` or `scontrol` on PATH answers as a controller
that fails or refuses would, and the code under test runs unchanged in a process of its own. The memory rows
use the kernel's own cgroup OOM killer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from dlbench.node import oomkill
from dlbench.paths import ROOT as REPO
from dlbench.record import store
from dlbench.rules import stale_locks
from dlbench.run import measure
from dlbench.testing import small_trainer as small
from dlbench.testing.faults import SMALL_TRAINER, Lab, _row, _wait_for_training, on_small_trainer, point
from dlbench.testing.faults_machine import _job_command


def _on_path(folder: Path, name: str, script: str) -> dict:
    """The environment of a process whose PATH finds `name` as the shell script given first."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(script)
    (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


# squeue as it answers when the controller does not (slurmctld down, a network partition).
FAILING_SQUEUE = """#!/bin/sh
echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2
exit 1
"""
CLEAR = ("import json, sys\nfrom dlbench.rules import stale_locks\n"
         "print(json.dumps(stale_locks.hold_and_clear_stale(sys.argv[1])))")


def squeue_fails(root: Path) -> dict:
    """squeue exits 1 while a new run looks at a killed run's job, marked live with its SLURM job id: unknown is not
    gone, so the mark and Snakemake's locks stay, and the run says so."""
    env = _on_path(root / "failing-squeue", "squeue", FAILING_SQUEUE)
    work = root / "squeue-fails"
    lock = work / ".snakemake" / "locks" / "0.input.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    mark = work / ".snakemake" / stale_locks.LIVE_JOBS / "another-node-77"
    mark.parent.mkdir(parents=True)
    mark.write_text(json.dumps({"host": "another-node", "pid": 77, "slurm_job_id": "4242"}))
    run = subprocess.run([sys.executable, "-c", CLEAR, str(work)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    removed, alive = json.loads(run.stdout) if run.returncode == 0 else (None, run.stderr[-300:])
    said = [ln for ln in run.stderr.splitlines() if "squeue failed" in ln]
    return _row("squeue fails", "a squeue on PATH that exits 1 (no controller) while a killed run's job is marked",
                removed == 0 and bool(alive) and lock.exists() and mark.exists() and bool(said), not mark.exists(),
                removed=removed, alive=alive, lock_kept=lock.exists(), mark_kept=mark.exists(), said=said[:1])


# scontrol as SLURM answers a preempted job that may not be requeued (sbatch --no-requeue, JobRequeue=0).
REFUSING_SCONTROL = """#!/bin/sh
case "$1" in
  show) echo "JobId=$3 JobState=RUNNING Restarts=0 PreemptTime=2026-12-03T10:00:00" ;;
  requeue) echo "Requested operation is presently disabled for job $2" >&2; exit 1 ;;
esac
"""
# The training job as the workflow's script runs it (workflow/scripts/train.py).
JOB = """import json, sys
from pathlib import Path
from dlbench.run import preemption
from dlbench.rules import jobs
from dlbench.run.options import RunOptions
point, data, env, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
with preemption.settled(out):
    sys.exit(jobs.train(point, data, str(out), RunOptions.of_job({}, env=jobs.environment(env))))
"""


@on_small_trainer()
def requeue_refused(lab: Lab) -> dict:
    """SLURM preempts a job (SIGTERM, PreemptTime set) and refuses its `scontrol requeue`: the point is published
    as a failed record with scontrol's words, not left as one that "requeued itself"."""
    out = lab.out("requeue-refused")
    env = {**_on_path(lab.root / "refusing-scontrol", "scontrol", REFUSING_SCONTROL), "SLURM_JOB_ID": "4242",
           "SLURM_RESTART_COUNT": "0"}
    env_json = lab.root / "requeue-refused-env.json"
    env_json.write_text(json.dumps({"env": "pytorch", "kind": "site", "python": lab.trainer_python()}))
    job = subprocess.Popen([sys.executable, "-c", JOB, json.dumps(point(iterations=100000)), str(lab.digits),
                            str(env_json), str(out)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    _wait_for_training(out)
    job.send_signal(signal.SIGTERM)  # what SLURM sends a job it preempts
    _, err = job.communicate(timeout=120)
    record = json.loads((out / store.RESULT).read_text()) if (out / store.RESULT).exists() else {}
    whole = bool(record) and store.disagreement(out / store.RESULT, record) is None
    kept = [json.loads(p.read_text())["status"] for p in store.attempts(out)]
    said = [ln for ln in err.splitlines() if "refused to requeue" in ln]
    return _row("SLURM refuses to requeue a preempted job", "SIGTERM with PreemptTime set, a scontrol on PATH whose "
                "requeue exits 1", record.get("status") == "preempted" and "presently disabled" in record.get(
                    "reason", "") and whole and kept == ["preempted"] and bool(said),
                not kept, exit_code=job.returncode, status=record.get("status"), reason=record.get("reason"),
                whole=whole, attempts=kept, said=said[:1])


CGROUP_LIMIT_MB = 200  # the job's memory cgroup in the OOM row: below what the small trainer allocates


def _limited_cgroup(name: str, limit_mb: int) -> tuple[Path | None, str]:
    """A memory cgroup of its own limited to limit_mb without swap, as SLURM's task/cgroup limits a job (cgroup v1
    where the memory controller is there, else v2); (None, why) where none can be made here."""
    if os.geteuid() != 0:
        return None, "making a memory cgroup needs root"
    mounts = oomkill._mounts()
    kind = "memory" if "memory" in mounts else "unified"
    if kind not in mounts:
        return None, "no cgroup hierarchy is mounted here"
    v1, root = kind == "memory", mounts[kind][1]
    files = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if v1 else ("memory.max", "memory.swap.max")
    group = root / name
    try:
        group.mkdir(exist_ok=True)
        (group / files[0]).write_text(str(limit_mb * 2**20))
        if (group / files[1]).exists():  # no swap either, or the kernel swaps rather than kill
            (group / files[1]).write_text(str(limit_mb * 2**20) if v1 else "0")
    except OSError as exc:
        _remove_cgroup(group)
        return None, f"cannot make a limited memory cgroup under {root} ({exc.strerror}: read-only, or not delegated)"
    return group, ""


def _remove_cgroup(group: Path) -> None:
    """The cgroup gone, anything left in it killed first."""
    for _ in range(50):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return  # never made, or gone
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def cgroup_oom_kill(lab: Lab) -> dict:
    """A training job in a memory cgroup limited to CGROUP_LIMIT_MB (as SLURM's task/cgroup puts a job), its
    trainer allocating past it, no memory budget of dlbench's own: the kernel's OOM killer ends the trainer with
    SIGKILL, and the record says `oom`, naming the cgroup's limit, not `killed`."""
    group, why = _limited_cgroup(f"dlbench-oom-{os.getpid()}", CGROUP_LIMIT_MB)
    if group is None:
        return _row("a job's memory cgroup OOM-kills the trainer", "a memory cgroup limited to 200 MB", None, False,
                    skipped=why)
    out = lab.out("cgroup-oom")
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, measure.TRAINER_VARIABLE: SMALL_TRAINER, small.STEP_S: "0.01",
           small.ALLOCATE_MB_PER_S: "1000"}
    # The job joins the group before it execs, as slurmstepd puts a job's task in it: the runner and the trainer
    # it starts are in it, under its limit.
    cmd = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"),
           *_job_command(lab, point(iterations=100000), out, python=sys.executable)]
    t0 = time.monotonic()
    try:
        job = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        kills = oomkill.oom_kills(group)
    finally:
        _remove_cgroup(group)
    record = json.loads((out / store.RESULT).read_text()) if (out / store.RESULT).exists() else {}
    return _row("a job's memory cgroup OOM-kills the trainer", f"the job in a memory cgroup limited to "
                f"{CGROUP_LIMIT_MB} MB, its trainer allocating 1,000 MB/s", record.get("status") == "oom"
                and f"{CGROUP_LIMIT_MB} MB" in record.get("reason", ""), not record, status=record.get("status"),
                reason=record.get("reason"), oom_by=record.get("oom_by"), returncode=record.get("returncode"),
                rss_peak_mb=record.get("rss_peak_mb"), oom_kills=kills, exit_code=job.returncode,
                seconds=round(time.monotonic() - t0, 1), cgroup_left=group.exists())
