"""Snakemake's lock files told apart from live ones, and the marks that say a workflow job is still alive.

Snakemake locks its working directory with plain files, which a SIGKILL or a power loss leaves behind; the next
run then refuses to start until `--unlock`. Every dlbench run also holds an flock on .snakemake/dlbench.lock for
its lifetime. If a new run can take it, no other run is alive here; if, besides, no job of a killed run is alive
(its marks in .snakemake/dlbench-jobs/, or under SLURM its queued jobs), Snakemake's lock files are stale and
safe to remove.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from pathlib import Path

from dlbench import atomic
from dlbench.node import procs
from dlbench.node.locks import LockUnusable, flocked
from dlbench.node.slurm_job import queued_in as _slurm_jobs_in
from dlbench.node.slurm_job import running as _slurm_job_running

_held: contextlib.ExitStack | None = None  # this run's lock, held for the life of the process


LIVE_JOBS = "dlbench-jobs"  # under .snakemake/: one file per running training job of this working directory


@contextlib.contextmanager
def live_job(meta: str | os.PathLike = ".snakemake"):
    """Mark a workflow job as alive for its lifetime: host, pid and SLURM job id, in .snakemake/dlbench-jobs/.

    A Snakemake killed alone (the OOM killer, a lost login) leaves its jobs running; the next run reads
    these marks and keeps Snakemake's locks while any of those jobs lives (hold_and_clear_stale). Written
    atomically: a job killed while it writes leaves no half mark.
    """
    folder = Path(meta) / LIVE_JOBS
    mark = folder / f"{socket.gethostname()}-{os.getpid()}"
    atomic.write_text(mark, json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                        "started": procs.identity(os.getpid()),  # a pid taken again is not this job
                                        "slurm_job_id": os.environ.get("SLURM_JOB_ID")}))
    try:
        yield mark
    finally:
        mark.unlink(missing_ok=True)


def live_jobs(meta: str | os.PathLike = ".snakemake") -> list[str]:
    """The marked jobs that are still alive (a description each); marks of jobs known to be gone are removed.

    A job of this host is alive while its process is: its pid, started as the mark says (`started`; a mark without
    it, while no process took the pid after the mark was written); one with a SLURM job id while SLURM runs or
    queues it; one of
    another host without a SLURM id cannot be checked from here, so it counts as alive. So does a mark that
    cannot be read: it is kept, with a warning, as nobody can tell whose job it was.
    """
    folder = Path(meta) / LIVE_JOBS
    alive = []
    for mark in sorted(folder.glob("[!.]*")) if folder.is_dir() else []:  # .*: a mark being written (atomic)
        try:
            job = json.loads(mark.read_text())
            pid = int(job["pid"])
        except (OSError, ValueError, TypeError, KeyError) as exc:
            print(f"dlbench: the live-job mark {mark} cannot be read ({type(exc).__name__}); it counts as a live "
                  "job: remove it once no job of this workflow runs", file=sys.stderr)
            alive.append(f"an unreadable mark ({mark.name})")
            continue
        if job.get("slurm_job_id"):
            running = _slurm_job_running(str(job["slurm_job_id"]))
            if running is None:  # squeue failed or timed out: unknown, never "gone"
                print(f"dlbench: SLURM did not say whether job {job['slurm_job_id']} still runs (squeue failed); "
                      f"its live-job mark {mark} is kept, and asked about again at the next run", file=sys.stderr)
        elif job.get("host") == socket.gethostname():
            running = procs.alive_as(pid, job.get("started"), procs.mtime(mark))
        else:
            running = None
        if running is False:
            mark.unlink(missing_ok=True)
        else:
            alive.append(f"pid {pid} on {job.get('host')}"
                         + (f" (SLURM job {job['slurm_job_id']})" if job.get("slurm_job_id") else ""))
    return alive


def hold_and_clear_stale(workdir: str | os.PathLike = ".") -> tuple[int, list[str]]:
    """Take this run's lock; if no other run and none of their jobs is alive, remove stale Snakemake locks.

    A killed run's jobs are its marked ones (live_jobs) and, under SLURM, those it submitted that have not
    started yet (pending: no mark), found by their working directory.
    Returns (how many lock files were removed, the live jobs of a killed run that kept them).
    """
    global _held
    if _held is not None:
        return 0, []
    meta = Path(workdir) / ".snakemake"
    held = contextlib.ExitStack()
    try:
        taken = held.enter_context(flocked(meta / "dlbench.lock", wait=False))
    except LockUnusable:  # not a lock file this run can take: nothing proves the others dead, nothing is removed
        return 0, []
    if taken is None:  # another dlbench run is alive in this directory: its locks are real
        held.close()
        return 0, []
    _held = held
    stale = sorted((meta / "locks").glob("*.lock")) if (meta / "locks").is_dir() else []
    alive = live_jobs(meta)
    if stale and not alive:  # asked only where there is something to remove: squeue is a call to the controller
        alive = _queued_here(workdir)
    if alive:  # a killed run's jobs still measure or wait: its locks stay, nothing of theirs is run again beside them
        return 0, alive
    for lock in stale:
        lock.unlink(missing_ok=True)
    return len(stale), []


def _queued_here(workdir: str | os.PathLike) -> list[str]:
    """A killed run's jobs that SLURM queues or runs in workdir; where squeue failed, one entry that says so: whether
    any waits is unknown, so Snakemake's locks stay (a job run twice beside itself costs more than a wait)."""
    jobs = _slurm_jobs_in(workdir)
    if jobs is None:
        print("dlbench: SLURM did not say whether a killed run's jobs wait here (squeue failed); Snakemake's locks "
              "stay, and SLURM is asked again at the next run (`snakemake --unlock` where no job of this workflow "
              "is queued)", file=sys.stderr)
        return ["jobs SLURM did not answer for (squeue failed)"]
    return [f"SLURM job {job}" for job in jobs]
