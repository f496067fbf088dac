"""The fault matrix on the test SLURM cluster (slurm-testbed/slurm-up.sh): suspension, preemption, a requeued job
group, a job that dies with its node. Each runs the workflow through profiles/slurm and injects the fault
with SLURM's own commands; rows as in dlbench.testing.faults.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from dlbench.node import procs
from dlbench.record import store
from dlbench.study import config, sweep
from dlbench.testing.faults import Lab, _row
from dlbench.testing.sandbox import copy_workflow

STUDY = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
         "sweep": {"learning_rate": [0.01], "iterations": [30], "batch_size": [32], "threads": [1]},
         "cluster": {"partition": "debug", "account": "dlbench", "mem_mb": 2000}}


def cluster_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=60)
    return proc.returncode == 0 and any(s.strip("*") in ("idle", "mixed", "allocated") for s in proc.stdout.split())


def slurm_snakemake(workdir: Path, *extra: str) -> subprocess.Popen:
    """The workflow through profiles/slurm, as a user runs it."""
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", "--jobs", "4",
           "--slurm-init-seconds-before-status-checks", "3", "--configfile", "study.yaml", *extra]
    return subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _study(lab: Lab, name: str, **over) -> tuple[Path, list[dict]]:
    """A workflow copy for one scenario; its measurement lock its own, so that nobody else's measurement on this
    machine (the default lock is node-wide) delays the fault's timing."""
    study = {**STUDY, **over, "sweep": {**STUDY["sweep"], **over.get("sweep", {})},
             "measurement": {"lock_file": str(lab.root / f"{name}.lock"), **over.get("measurement", {})}}
    wf = lab.root / name
    shutil.rmtree(wf, ignore_errors=True)
    copy_workflow(wf, study)
    return wf, sweep.expand(config.validate(json.loads(json.dumps(study))))


def _run_dir(wf: Path, p: dict) -> Path:
    return wf / "results" / "runs" / p["framework"] / p["dataset"] / p["id"]


def _training_job(run: Path, timeout: float = 300) -> str:
    """The SLURM job id of the job that trains the point of `run`, once its trainer is training: a live runner's
    mark and its unfinished folder (those of a run killed before are left behind, and are not it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for mark in (run / store.ATTEMPTS).glob(f"{store.STARTED}*.json"):
            try:
                facts = json.loads(mark.read_text())
            except (OSError, ValueError):
                continue
            events = run.parent / f".{run.name}.partial-{facts['host']}-{facts['pid']}" / "events.jsonl"
            lines = events.read_text().splitlines() if events.exists() else []
            if facts.get("slurm_job_id") and procs.alive(int(facts["pid"])) and any('"train"' in ln for ln in lines):
                return str(facts["slurm_job_id"])
        time.sleep(0.5)
    raise TimeoutError(f"no SLURM job started training {run.name}")


@contextlib.contextmanager
def released_requeues(every_s: float = 2.0):
    """SLURM holds a requeued job about two minutes (its begin time set ahead) before it may run again; the
    scenarios test what the workflow does with the requeue, not that wait, so for the block every pending job
    held for its begin time is released at once (scontrol update StartTime=now)."""
    stop = threading.Event()

    def release() -> None:
        while not stop.wait(every_s):
            out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i %r"], capture_output=True, text=True,
                                 timeout=60).stdout
            for job in [line.split()[0] for line in out.splitlines() if line.split()[1:] == ["BeginTime"]]:
                subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True, timeout=60)

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def releasing_requeues(scenario):
    """A scenario run with released_requeues()."""
    @functools.wraps(scenario)
    def run(lab: Lab) -> dict:
        with released_requeues():
            return scenario(lab)
    return run


def _finish(proc: subprocess.Popen, timeout: float = 900) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return out


def _statuses(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in store.attempts(run)]


def suspended(lab: Lab) -> dict:
    """`scontrol suspend` for longer than hang_s, then `resume`: the attempt says suspended (not hung), the
    job fails, the retry measures."""
    hang = lab.hang_s(5)
    wf, (p,) = _study(lab, "slurm-suspend", limits={"hang_s": hang}, measurement={"retries": 1},
                      sweep={"iterations": [300]})
    run = _run_dir(wf, p)
    proc = slurm_snakemake(wf)
    job = _training_job(run)
    subprocess.run(["scontrol", "suspend", job], check=True, timeout=60)
    time.sleep(hang + 7)
    subprocess.run(["scontrol", "resume", job], check=True, timeout=60)
    out = _finish(proc)
    kept = _statuses(run)
    result = store.read(run / store.RESULT) if (run / store.RESULT).exists() else {}
    return _row("SLURM job suspended and resumed", f"scontrol suspend for {hang + 7:g} s, hang_s = {hang:g}, then "
                "resume",
                proc.returncode == 0 and [r["status"] for r in kept] == ["suspended", "ok"]
                and result.get("status") == "ok", not result, attempts=[r["status"] for r in kept],
                paused_s=kept[0].get("paused_s") if kept else None, stopped_s=hang + 7, exit_code=proc.returncode,
                log=out[-300:])


@releasing_requeues
def preempted(lab: Lab) -> dict:
    """A job of a higher partition preempts the training job (PreemptMode=CANCEL): the job requeues itself,
    SLURM runs it again, and the record counts the restart."""
    wf, (p,) = _study(lab, "slurm-preempt", sweep={"iterations": [300]})
    run = _run_dir(wf, p)
    proc = slurm_snakemake(wf)
    _training_job(run)
    cpus = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, timeout=60).stdout.split()[0]
    urgent = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "-c", cpus, "--mem", "500", "-o", "/dev/null",
                             "--wrap", "sleep 3"], capture_output=True, text=True, check=True,
                            timeout=60).stdout.strip()
    out = _finish(proc, timeout=1200)
    kept = _statuses(run)
    result = store.read(run / store.RESULT) if (run / store.RESULT).exists() else {}
    return _row("SLURM preemption (PreemptMode=CANCEL)", f"a {cpus}-CPU job of partition urgent (PriorityTier 10)",
                proc.returncode == 0 and result.get("status") == "ok" and result.get("slurm_restart_count") == 1
                and [r["status"] for r in kept] == ["preempted", "ok"], not result, urgent_job=urgent,
                attempts=[r["status"] for r in kept], restart_count=result.get("slurm_restart_count"),
                exit_code=proc.returncode, log=out[-300:])


@releasing_requeues
def requeued_group(lab: Lab) -> dict:
    """`scontrol requeue` of a job group after its first point finished: the requeued job publishes that point
    again from its kept attempt instead of measuring it twice, and measures the other."""
    wf, points = _study(lab, "slurm-requeue", sweep={"learning_rate": [0.01, 0.02], "iterations": [200]})
    runs = [_run_dir(wf, p) for p in points]
    proc = slurm_snakemake(wf, "--groups", "train=measure", "--group-components", "measure=2")
    deadline = time.monotonic() + 600
    first = second = None
    while time.monotonic() < deadline and second is None:
        done = [r for r in runs if (r / store.RESULT).exists()]
        if done:
            first = done[0]
            other = next(r for r in runs if r != first)
            try:
                job = _training_job(other, timeout=5)
                second = other
            except TimeoutError:
                pass
        time.sleep(0.5)
    if second is None:
        proc.kill()
        return _row("SLURM requeue of a job group", "scontrol requeue mid-group", False, False,
                    skipped="the group never had one point finished and one training")
    before = store.read(first / store.RESULT)
    subprocess.run(["scontrol", "requeue", job], check=True, timeout=60)
    out = _finish(proc, timeout=1200)
    after = store.read(first / store.RESULT) if (first / store.RESULT).exists() else {}
    measured = [r["status"] for r in _statuses(first)]
    return _row("SLURM requeue of a job group", "scontrol requeue while the group's second point trains",
                proc.returncode == 0 and after.get("attempt_id") == before["attempt_id"]
                and after.get("republished_after_requeue") == 1 and measured == ["ok"]
                and store.read(second / store.RESULT)["status"] == "ok", not after,
                first_point_attempts=measured, republished=after.get("republished_after_requeue"),
                second_point_attempts=[r["status"] for r in _statuses(second)], exit_code=proc.returncode,
                log=out[-300:])


def _descendants(pid: int) -> list[int]:
    """A process's descendants, by their parent links in /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _state(job: str) -> str:
    out = subprocess.run(["squeue", "-h", "--states=all", "-j", job, "-o", "%T"], capture_output=True, text=True,
                         timeout=60)
    return out.stdout.strip()


def _history(job: str) -> list[str]:
    """The states of every run of a SLURM job, oldest first (sacct -D: a requeued job's earlier runs too)."""
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-j", job, "--format=State"], capture_output=True,
                         text=True, timeout=60).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


@releasing_requeues
def node_died(lab: Lab) -> dict:
    """The node dies under a training job twice running (slurmd, the job's slurmstepd and everything under it
    SIGKILLed; SLURM marks the node down, ends the run NODE_FAIL and requeues the job, which Snakemake never sees
    fail; then slurmd is started again): the job's third run, the last that measurement.retries allows, publishes
    `node_lost` instead of trying again, and the study's tables are drawn."""
    wf, (p,) = _study(lab, "slurm-node", measurement={"retries": 2}, sweep={"iterations": [200000]})
    run = _run_dir(wf, p)
    proc = slurm_snakemake(wf)
    state = Path(os.environ.get("DLBENCH_SLURM_DIR", "/tmp/dlbench-slurm"))
    killed = []
    for _ in range(2):
        job = _training_job(run, timeout=600)
        slurmd = int((state / "run" / "slurmd.pid").read_text())
        steps = [int(line.split()[0]) for line in subprocess.run(
            ["ps", "-eo", "pid=,args="], capture_output=True, text=True, timeout=60).stdout.splitlines()
            if f"slurmstepd: [{job}." in line]
        for pid in [slurmd, *steps, *(d for s in steps for d in _descendants(s))]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _state(job) in ("RUNNING", "COMPLETING"):
            time.sleep(2)
        killed.append((job, _state(job)))
        subprocess.run(["/usr/sbin/slurmd"], check=True, timeout=60)  # the node comes back (ReturnToService=2)
    out = _finish(proc, timeout=1500)
    result = store.read(run / store.RESULT) if (run / store.RESULT).exists() else {}
    tables = (wf / "results" / "runs.parquet").exists()
    history = _history(killed[0][0])
    return _row("SLURM node failure past the retries", "slurmd, slurmstepd and the job SIGKILLed under two of "
                "three runs (SLURM: NODE_FAIL, the job requeued)", proc.returncode == 0
                and result.get("status") == "node_lost" and tables, not tables, killed_jobs=killed, history=history,
                result_status=result.get("status"), lost_attempts=result.get("lost_attempts"),
                restart_count=result.get("slurm_restart_count"), reason=result.get("reason"), tables_drawn=tables,
                exit_code=proc.returncode, log=out[-300:])


SCENARIOS = [suspended, preempted, requeued_group, node_died]
