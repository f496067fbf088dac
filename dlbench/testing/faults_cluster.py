"""Faults of the cluster's controller and of the node's memory, injected for real (round four).

SLURM's commands are the outside world here: a fake `squeue` or `scontrol` on PATH answers as a controller
that fails or refuses would, and the code under test runs unchanged in a process of its own. The memory rows
use the kernel's own cgroup OOM killer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from dlbench import locks, records
from dlbench.paths import ROOT as REPO
from dlbench.testing.faults import Lab, _row, _wait_for_training, on_small_trainer, point


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
CLEAR = "import json, sys\nfrom dlbench import locks\nprint(json.dumps(locks.hold_and_clear_stale(sys.argv[1])))"


def squeue_fails(root: Path) -> dict:
    """squeue exits 1 while a new run looks at a killed run's job, marked live with its SLURM job id: unknown is not
    gone, so the mark and Snakemake's locks stay, and the run says so."""
    env = _on_path(root / "failing-squeue", "squeue", FAILING_SQUEUE)
    work = root / "squeue-fails"
    lock = work / ".snakemake" / "locks" / "0.input.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    mark = work / ".snakemake" / locks.LIVE_JOBS / "another-node-77"
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
from dlbench import cli, preemption
point, data, env, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
with preemption.settled(out):
    sys.exit(cli.train(point, data, str(out), env))
"""


@on_small_trainer()
def requeue_refused(lab: Lab) -> dict:
    """SLURM preempts a job (SIGTERM, PreemptTime set) and refuses its `scontrol requeue`: the point is published
    as a failed record with scontrol's words, not left as one that "requeued itself"."""
    out = lab.out("requeue-refused")
    env = {**_on_path(lab.root / "refusing-scontrol", "scontrol", REFUSING_SCONTROL), "SLURM_JOB_ID": "4242",
           "SLURM_RESTART_COUNT": "0"}
    env_json = lab.root / "requeue-refused-env.json"
    env_json.write_text(json.dumps({"python": lab.trainer_python()}))
    job = subprocess.Popen([sys.executable, "-c", JOB, json.dumps(point(iterations=100000)), str(lab.digits),
                            str(env_json), str(out)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    _wait_for_training(out)
    job.send_signal(signal.SIGTERM)  # what SLURM sends a job it preempts
    _, err = job.communicate(timeout=120)
    record = json.loads((out / records.RESULT).read_text()) if (out / records.RESULT).exists() else {}
    whole = bool(record) and records.disagreement(out / records.RESULT, record) is None
    kept = [json.loads(p.read_text())["status"] for p in records.attempts(out)]
    said = [ln for ln in err.splitlines() if "refused to requeue" in ln]
    return _row("SLURM refuses to requeue a preempted job", "SIGTERM with PreemptTime set, a scontrol on PATH whose "
                "requeue exits 1", record.get("status") == "preempted" and "presently disabled" in record.get(
                    "reason", "") and whole and kept == ["preempted"] and bool(said),
                not kept, exit_code=job.returncode, status=record.get("status"), reason=record.get("reason"),
                whole=whole, attempts=kept, said=said[:1])
