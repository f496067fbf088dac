"""The SLURM job a training point runs in, as the job itself sees it: which one, whether SLURM preempted it,
and asking SLURM to run it again.

With PreemptMode=CANCEL a preempted job ends as PREEMPTED, which Snakemake's SLURM plugin counts as running
for ever: the workflow would hang. So a job that is being preempted requeues itself (SLURM runs it again,
SLURM_RESTART_COUNT counts the runs) and keeps its attempt as `preempted`. A job that a user cancels
(scancel: no PreemptTime) stays cancelled.

Standard library only.
"""

from __future__ import annotations

import os
import subprocess

TIMEOUT_S = 10.0  # a controller that does not answer must not keep the job past SLURM's KillWait


def job_id() -> str | None:
    return os.environ.get("SLURM_JOB_ID") or None


def restart_count() -> int:
    """How many times SLURM has requeued this job (0: its first run, or no SLURM). The batch script's
    SLURM_RESTART_COUNT does not reach the steps that srun starts, so the controller is asked where it is
    missing."""
    value = os.environ.get("SLURM_RESTART_COUNT")
    if value is None and job_id() is not None:
        value = _show().get("Restarts")
    try:
        return int(value or 0)
    except ValueError:
        return 0


# States of a job SLURM has done with (compact and long forms): squeue still lists one for MinJobAge after it ends.
FINISHED = {"BF", "CA", "CD", "DL", "F", "NF", "OOM", "PR", "TO", "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE",
            "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"}


def running(job: str) -> bool | None:
    """Whether SLURM still runs or queues the job: pending (PD) counts, a job SLURM has not started yet is
    alive. False where SLURM says it is done or unknown; None where SLURM cannot be asked."""
    try:
        proc = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:  # a job it forgot is gone; any other refusal (no controller) says nothing
        return False if "Invalid job id" in proc.stderr else None
    states = proc.stdout.split()
    return bool(states) and states[0] not in FINISHED


def queued_in(workdir: str | os.PathLike) -> list[str] | None:
    """This user's jobs that SLURM has not done with (pending ones too) and that run in `workdir`, as
    "ID (STATE)": those a Snakemake run there submitted (its SLURM plugin submits with -D <workdir>).
    None where SLURM did not answer (squeue failed or timed out: unknown); [] where no squeue is installed."""
    try:
        proc = subprocess.run(["squeue", "--me", "-h", "-o", "%i|%t|%Z"], capture_output=True, text=True,
                              timeout=30)
    except FileNotFoundError:  # no SLURM on this machine: no job of it waits
        return []
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    here, jobs = os.path.realpath(workdir), []
    for line in proc.stdout.splitlines():
        job, state, folder = (line.split("|", 2) + ["", ""])[:3]
        if state.strip() not in FINISHED and os.path.realpath(folder.strip() or "/nonexistent") == here:
            jobs.append(f"{job.strip()} ({state.strip()})")
    return jobs


def final_state(job: str) -> str | None:
    """How SLURM's accounting says a job ended ("CANCELLED by 0", "TIMEOUT", ...); None where it cannot say."""
    try:
        proc = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines() if proc.returncode == 0 else []
    return lines[-1].strip() if lines else None


def _show() -> dict[str, str]:
    job = job_id()
    if job is None:
        return {}
    try:
        out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True,
                             timeout=TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


def preempted() -> bool:
    """Whether SLURM is preempting this job (its PreemptTime is set; a user's scancel leaves it None)."""
    when = _show().get("PreemptTime")
    return bool(when) and when not in ("None", "Unknown")


def requeue() -> str | None:
    """Ask SLURM to run this job again: None where it agreed, else why not (scontrol's own words)."""
    job = job_id()
    if job is None:
        return "not a SLURM job"
    try:
        proc = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"scontrol requeue {job} did not answer ({type(exc).__name__}: {exc})"
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip() or proc.stdout.strip() or f"scontrol requeue {job} exited {proc.returncode}")


_answered: dict[str, object] = {}  # this process's answer to a preemption, once given: preempted, refused


def requeue_if_preempted() -> bool:
    """Whether this job is being preempted; if so, requeue it (once per process, however often it is asked:
    SLURM's KillWait leaves seconds between its SIGTERM and its SIGKILL). Where SLURM refused, requeue_refused
    says why."""
    if not _answered:
        _answered["preempted"] = preempted()
        _answered["refused"] = requeue() if _answered["preempted"] else None
    return bool(_answered["preempted"])


def requeue_refused() -> str | None:
    """Why SLURM refused to requeue this preempted job (scontrol's words); None where it agreed or was not asked.
    Such a job ends PREEMPTED, which Snakemake's SLURM plugin waits on for ever: its point must end here."""
    return _answered.get("refused")  # type: ignore[return-value]
