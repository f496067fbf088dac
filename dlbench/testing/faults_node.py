"""The fault matrix, round four: the node's locks held or made private by others, heavy work asked for beside a
measurement, SLURM jobs not yet started, marks cut short, a hung NVML, signals, a trainer's leftovers.

Each scenario injects its fault for real (a lock file flocked by another process, a job-private tmpfs in a mount
namespace of its own, a `squeue` that answers PD, a file-size limit, a `pynvml` whose nvmlInit sleeps, SIGCONT,
SIGHUP and SIGINT to a job, a trainer that leaves a child) and returns a row like dlbench.testing.faults does.
The outside world is faked where it cannot be had here (SLURM's queue, NVML); dlbench's own code never is.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr
from pathlib import Path

from dlbench.node import locks, procs
from dlbench.paths import ROOT as REPO
from dlbench.present import partial
from dlbench.record import store
from dlbench.record.statuses import EXIT_RETRY
from dlbench.rules import stale_locks
from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.testing import sandbox, study
from dlbench.testing import small_trainer as small
from dlbench.testing.faults import Lab, _row, _wait_for_training, on_small_trainer, point, small_trainer
from dlbench.testing.faults_machine import _job, _job_command, _statuses

# Another process holds a lock file: flocked as any local user could (exclusive, or shared as a build holds
# .heavy), then it says so and sleeps until it is killed.
HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def _hold(path: Path, mode: str = "exclusive") -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), mode], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def _release(holder: subprocess.Popen) -> None:
    holder.kill()
    holder.communicate(timeout=60)


@on_small_trainer()
def gate_held(lab: Lab) -> dict:
    """Another process holds the gate, or .heavy shared (a hung build), past lock_timeout_s = 2: the point ends
    as `lock_timeout` within seconds (recorded, the sweep goes on); heavy work waiting on the gate fails in one
    line."""
    lock = lab.root / "gate-held.lock"
    seen = {}
    for name, held, mode in (("gate", locks.gate_lock(lock), "exclusive"),
                             ("heavy", locks.heavy_lock(lock), "shared")):
        holder = _hold(held, mode)
        try:
            t0 = time.monotonic()
            r = runner.run_point(point(iterations=20), lab.digits, lab.out(f"gateheld-{name}"),
                                 RunOptions(python=lab.trainer_python(), measure_lock=str(lock), lock_timeout_s=2))
            seen[name] = {"status": r["status"], "seconds": round(time.monotonic() - t0, 1),
                          "lock_wait_s": r["lock_wait_s"], "published": (lab.out(f"gateheld-{name}")
                                                                          / store.RESULT).exists()}
            if name == "gate":
                t0 = time.monotonic()
                try:
                    with locks.heavy_work(lock, "a build", timeout_s=2):
                        said = None
                except locks.LockTimeout as exc:
                    said = str(exc)
                seen["heavy_work"] = {"said": said, "seconds": round(time.monotonic() - t0, 1)}
        finally:
            _release(holder)
    return _row("the gate or .heavy held by another process", "a process flocks <lock>.gate (exclusive), then "
                "<lock>.heavy (shared), lock_timeout_s = 2", all(seen[n]["status"] == "lock_timeout"
                                                                  for n in ("gate", "heavy"))
                and bool(seen["heavy_work"]["said"]), False, cases=seen)


def _in_job_namespace(cmd: list[str], private: Path | None) -> list[str]:
    """cmd in a mount namespace of its own, as SLURM's job_container/tmpfs runs a job: `private` (if given) a
    tmpfs there, another folder than the node's at that path; the namespace's pid 1 keeps the node's view."""
    mount = f"mount -t tmpfs tmpfs {private} && " if private else ""
    # pid 1 is the first sh, which stays in the namespace's first mount view: it forks the inner unshare
    return ["unshare", "--pid", "--fork", "--mount", "--mount-proc", "sh", "-c", '"$@"; exit $?', "sh",
            "unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mount}exec "$@"', "sh", *cmd]


def private_lock_folder(lab: Lab) -> dict:
    """A SLURM job whose lock folder is private to it (a tmpfs in its own mount namespace, as job_container/tmpfs
    makes /tmp): refused in one line as `lock_unusable`; the same job with the node's folder trains."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return _row("lock folder private to the job", "tmpfs in a mount namespace", None, False,
                    skipped="needs root and unshare")
    folder = lab.root / "jobtmp"
    folder.mkdir(exist_ok=True)
    env = {**os.environ, "SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "0",
           measure.TRAINER_VARIABLE: "dlbench.testing.small_trainer"}
    seen = {}
    for name, private in (("private", folder), ("node's", None)):
        out = lab.out(f"privatelock-{name[:4]}")
        shutil.rmtree(out, ignore_errors=True)
        cmd = _job_command(lab, point(iterations=20), out, "--measure-lock", str(folder / "measure.lock"),
                           "--attempt", "1", "--retries", "1", python=sys.executable)
        run = subprocess.run(_in_job_namespace(cmd, private), cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=300)
        lines = [ln for ln in run.stderr.splitlines() if "private to this SLURM job" in ln]
        seen[name] = {"exit": run.returncode, "attempts": _statuses(out), "said": lines[:1],
                      "traceback": "Traceback" in run.stderr}
    return _row("lock folder private to the job", "SLURM_JOB_ID set, a tmpfs over the lock's folder in the job's "
                "own mount namespace", seen["private"]["exit"] == EXIT_RETRY
                and seen["private"]["attempts"] == ["lock_unusable"] and len(seen["private"]["said"]) == 1
                and not seen["private"]["traceback"] and seen["node's"]["exit"] == 0, False, cases=seen)


FAKE_SQUEUE = """#!/bin/sh
# squeue as SLURM answers for job 4242 in state $FAKE_STATE (PD: queued, not started; CD: done, still listed
# for MinJobAge): -j JOB -o %T, or --me -o %i|%t|%Z
case "$FAKE_STATE" in PD) long=PENDING ;; *) long=COMPLETED ;; esac
case "$*" in
  *-j*) echo "$long" ;;
  *) echo "4242|$FAKE_STATE|$FAKE_WORKDIR" ;;
esac
"""
CLEAR = ("import sys\nfrom dlbench.rules import stale_locks\n"
         "print(*stale_locks.hold_and_clear_stale(sys.argv[1]), sep='\\n')")


def _fake_squeue(folder: Path) -> dict:
    """The environment of a process whose PATH finds a squeue that answers PD (FAKE_SQUEUE)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "squeue").write_text(FAKE_SQUEUE)
    (folder / "squeue").chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def pending_jobs(lab: Lab) -> dict:
    """A Snakemake run killed after it submitted jobs that SLURM has not started (PD, no mark yet), and one whose
    marked job is pending again (requeued): the next run keeps Snakemake's locks, so nothing runs twice."""
    seen = {}
    env = _fake_squeue(lab.root / "fake-squeue")
    for name, state in (("submitted", "PD"), ("marked", "PD"), ("done", "CD")):
        work = lab.root / f"pending-{name}"
        shutil.rmtree(work, ignore_errors=True)
        (work / ".snakemake" / "locks").mkdir(parents=True)
        (work / ".snakemake" / "locks" / "0.input.lock").write_text("")
        env.update(FAKE_STATE=state, FAKE_WORKDIR=str(work) if name != "marked" else "/elsewhere")
        if name == "marked":
            mark = work / ".snakemake" / stale_locks.LIVE_JOBS / "another-node-77"
            mark.parent.mkdir(parents=True)
            mark.write_text(json.dumps({"host": "another-node", "pid": 77, "slurm_job_id": "4242"}))
        run = subprocess.run([sys.executable, "-c", CLEAR, str(work)], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=120)
        removed, alive = run.stdout.splitlines()[:2] if run.returncode == 0 else ("?", run.stderr[-300:])
        seen[name] = {"removed": removed, "alive": alive,
                      "locks_kept": (work / ".snakemake" / "locks" / "0.input.lock").exists()}
    kept = all(seen[n]["locks_kept"] and "4242" in seen[n]["alive"] for n in ("submitted", "marked"))
    return _row("a killed run's jobs pending in SLURM", "a fake squeue on PATH answers PD (a job submitted, not "
                "started; a marked job requeued); then CD (done)", kept and not seen["done"]["locks_kept"], False,
                cases=seen)


# A job's mark written under a file-size limit of 16 bytes (EFBIG part-way: what a full disk does to a write).
CUT_MARK = """
import resource, sys
from dlbench.rules import stale_locks
resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))
try:
    with stale_locks.live_job(sys.argv[1]):
        print("marked")
except OSError as exc:
    print("refused", exc.errno)
"""


def marks_cut_short(lab: Lab) -> dict:
    """A live-job mark whose write fails part-way leaves nothing behind; a mark that cannot be read (cut short by
    an older writer, or damaged) is kept and counted live, with a warning, and Snakemake's locks stay."""
    meta = lab.root / "marks" / ".snakemake"
    shutil.rmtree(meta.parent, ignore_errors=True)
    (meta / "locks").mkdir(parents=True)
    (meta / "locks" / "0.input.lock").write_text("")
    cut = subprocess.run([sys.executable, "-c", CUT_MARK, str(meta)], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    marks = meta / stale_locks.LIVE_JOBS
    left = sorted(p.name for p in marks.glob("*")) if marks.is_dir() else []
    (meta / stale_locks.LIVE_JOBS).mkdir(exist_ok=True)
    broken = meta / stale_locks.LIVE_JOBS / "node-4242"
    broken.write_text('{"host": "node", "pi')
    said = io.StringIO()
    with redirect_stderr(said):
        alive = stale_locks.live_jobs(meta)
    clear = subprocess.run([sys.executable, "-c", CLEAR, str(meta.parent)], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    return _row("a live-job mark cut short or unreadable", "the mark written under RLIMIT_FSIZE 16 bytes; a mark "
                "holding half its JSON", cut.stdout.strip().startswith("refused") and not left
                and broken.exists() and len(alive) == 1 and (meta / "locks" / "0.input.lock").exists(), False,
                write=cut.stdout.strip(), left_by_cut_write=left, alive=alive,
                warned=[ln for ln in said.getvalue().splitlines() if "cannot be read" in ln][:1],
                next_run=clear.stdout.splitlines()[:1])


# A measurement on a fake GPU ("0") under umask 077, its locks' modes and the slot's check after its GPU's lock
# file is removed; then heavy work whose .heavy is removed while it works.
REPLACED = """
import json, os, sys
from pathlib import Path
from dlbench.node import locks
os.umask(0o077)
lock = Path(sys.argv[1])
with locks.measuring(str(lock), ["0"], per_device=True, timeout_s=30) as slot:
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in lock.parent.glob(lock.name + "*")}
    before = slot.intact()
    locks.device_lock(lock, "0").unlink()
    after = slot.intact()
with locks.heavy_work(lock, "a build", timeout_s=30):
    locks.heavy_lock(lock).unlink()
print(json.dumps({"modes": modes, "intact_before": before, "intact_after": after}))
"""


def lock_files_replaced(lab: Lab) -> dict:
    """Every lock file is created 0644 (under umask 077 too), and every lock held through the work is checked for
    removal: a GPU's lock removed under a point makes its slot not intact (`lock_lost`), .heavy removed under a
    build is said in its log."""
    folder = lab.root / "replaced"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    run = subprocess.run([sys.executable, "-c", REPLACED, str(folder / "measure.lock")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    facts = json.loads(run.stdout) if run.returncode == 0 else {"error": run.stderr[-500:]}
    said = [ln for ln in run.stderr.splitlines() if "removed or replaced" in ln]
    modes = facts.get("modes", {})
    return _row("a GPU's or heavy work's lock file removed while held; lock files' modes",
                "unlink of <lock>.gpu-0 under a point, of <lock>.heavy under a build; umask 077",
                facts.get("intact_before") is True and facts.get("intact_after") is False and len(said) == 1
                and set(modes.values()) == {"0o644"}, False, said=said[:1], **{"modes": modes, **facts})


FAKE_PYNVML = """
import time
from pathlib import Path
CALLED = Path(__file__).with_name("called")


def nvmlInit():
    CALLED.write_text("nvmlInit")
    time.sleep(300)  # a hung driver
"""


def nvml_hangs(lab: Lab) -> dict:
    """NVML hangs (a pynvml whose nvmlInit sleeps, on PYTHONPATH) while a point holds the node's lock: a CPU point
    never asks it and ends ok; a GPU point is answered within NVML's timeout, its GPU state said unknown."""
    site = lab.root / "hung-pynvml"
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir()
    (site / "pynvml.py").write_text(FAKE_PYNVML)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           measure.TRAINER_VARIABLE: "dlbench.testing.small_trainer"}
    env.pop("DLBENCH_GPU_DEVICES", None)
    seen = {}
    for device in ("cpu", "gpu"):
        out = lab.out(f"nvml-{device}")
        t0 = time.monotonic()
        job = _job(lab, point(iterations=20, device=device), out, "--measure-lock", str(lab.root / "nvml.lock"),
                   env=env, python=sys.executable)
        _, stderr = job.communicate(timeout=180)
        record = store.read(out / store.RESULT) if (out / store.RESULT).exists() else {}
        seen[device] = {"exit": job.returncode, "seconds": round(time.monotonic() - t0, 1),
                        "status": record.get("status"), "gpu_state": record.get("gpu_state"),
                        "reason": (record.get("reason") or "")[:160], "nvml_called": (site / "called").exists()}
        (site / "called").unlink(missing_ok=True)
    return _row("NVML hangs", "a pynvml on PYTHONPATH whose nvmlInit sleeps 300 s",
                seen["cpu"]["status"] == "ok" and not seen["cpu"]["nvml_called"]
                and seen["gpu"]["status"] == "unavailable" and (seen["gpu"]["gpu_state"] or "").startswith("unknown"),
                False, cases=seen)


@on_small_trainer()
def lone_sigcont(lab: Lab) -> dict:
    """SIGCONT alone (no stop before it) to a job and its trainer while it trains: not a suspension, the point
    ends ok."""
    out = lab.out("lonecont")
    job = _job(lab, point(iterations=300), out)
    trainer = _wait_for_training(out)
    for _ in range(3):
        for pid in (job.pid, trainer):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        time.sleep(0.3)
    job.communicate(timeout=180)
    record = store.read(out / store.RESULT) if (out / store.RESULT).exists() else {}
    return _row("SIGCONT alone", "three SIGCONTs to the job and its trainer, 0.3 s apart, no stop",
                record.get("status") == "ok", not record, status=record.get("status"),
                paused_s=record.get("paused_s"), exit_code=job.returncode)


@on_small_trainer()
def child_left_behind(lab: Lab) -> dict:
    """A trainer that starts a child (sleep 120) and exits normally, leaving it: the child is gone once the point
    is, not loading the node's next measurement."""
    out = lab.out("childleft")
    with sandbox.environment({small.CHILD_S: "120"}):
        r = runner.run_point(point(iterations=20), lab.digits, out, RunOptions(python=lab.trainer_python()))
    pids = [int(ln.split(":")[1]) for ln in (out / "trainer.log").read_text().splitlines()
            if ln.startswith("left a child:")]
    deadline = time.monotonic() + 5  # its parent gone, init reaps it
    while pids and procs.alive(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = bool(pids) and procs.alive(pids[0])
    if alive:
        os.kill(pids[0], signal.SIGKILL)
    return _row("a trainer's child left behind", "the trainer starts `sleep 120` and exits ok without it",
                r["status"] == "ok" and bool(pids) and not alive, False, status=r["status"], child=pids[:1],
                child_alive_after=alive)


def _cancelled_by(lab: Lab, sig: int) -> dict:
    """SIGHUP (a lost login) or SIGINT (Ctrl-C) to a training job, as SIGTERM: the trainer is stopped, the attempt
    kept as `cancelled`, exit 128 + the signal."""
    name = signal.Signals(sig).name
    out = lab.out(f"cancel-{name}")
    job = _job(lab, point(iterations=100000), out)
    trainer = _wait_for_training(out)
    os.kill(job.pid, sig)
    job.communicate(timeout=120)
    trainer_left = procs.alive(trainer)
    return _row(f"{name} to the job", f"{name} to the job mid-training", job.returncode == 128 + sig
                and _statuses(out) == ["cancelled"] and not trainer_left, False, exit_code=job.returncode,
                attempts=_statuses(out), trainer_left=trainer_left)


@on_small_trainer()
def cancel_sighup(lab: Lab) -> dict:
    return _cancelled_by(lab, signal.SIGHUP)


@on_small_trainer()
def cancel_sigint(lab: Lab) -> dict:
    return _cancelled_by(lab, signal.SIGINT)


# The main process's probe of a site interpreter (envs.site) as Snakemake's parse runs it (context.Study), in a
# folder of its own; a StudyError ends it with its one line on stderr, exit 1.
PARSE = """
import json, sys
from dlbench.rules import context
from dlbench.study import config
context.Study(config.validate(json.loads(sys.argv[1])), context.Reader(main=True, dryrun=False, forcerun=False))
print("probed")
"""
HEAVY_TIMEOUT_S = 2  # the lock timeout the heavy work is given beside a held measurement


def _small_records(lab: Lab) -> Path:
    """A results folder of two small-trainer points, trained for real: runs/<framework>/digits/<point>/."""
    folder = lab.root / "drawn"
    for lr in (0.01, 0.02):
        p = point(iterations=20, learning_rate=lr)
        out = folder / "runs" / p["framework"] / "digits" / p["id"]
        if not (out / store.RESULT).exists():
            runner.run_point(p, lab.digits, out, RunOptions(python=lab.trainer_python()))
    return folder


def _partial_outputs(folder: Path) -> dict:
    """The partial rule's outputs (workflow/rules/browse.smk) in folder."""
    return {"runs": str(folder / "runs.parquet"), "curves": str(folder / "curves.parquet"),
            "samples": str(folder / "samples.parquet"), "summary": str(folder / "summary.parquet"),
            "runs_csv": str(folder / "runs.csv"), "summary_csv": str(folder / "summary.csv"),
            "findings": str(folder / "findings.md"), "charts": str(folder / "charts"),
            "page": str(folder / "index.html")}


def _draw_partial(metrics: list[str], folder: Path, timeout_s: float) -> dict:
    """dlbench.present.partial.draw into folder under a lock timeout: what it said (one line) and drew, and how long."""
    t0 = time.monotonic()
    try:
        with sandbox.environment({locks.LOCK_TIMEOUT_ENV: f"{timeout_s:g}"}):
            drawn, said = partial.draw(metrics, _partial_outputs(folder)), None
    except locks.LockTimeout as exc:
        drawn, said = None, str(exc)
    return {"drawn": drawn, "said": said, "seconds": round(time.monotonic() - t0, 1),
            "written": sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []}


def _command(args: list[str], env: dict, cwd: Path, wrote: Path) -> dict:
    """A dlbench entry point in a process of its own: its exit, its stderr's lines, how long, and whether `wrote`
    (its output) exists."""
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return {"exit": run.returncode, "said": run.stderr.strip().splitlines(), "seconds": round(time.monotonic() - t0, 1),
            "written": wrote.exists()}


def _metrics(lab: Lab) -> tuple[Path, list[str]]:
    """The small records folder and its records' paths."""
    with small_trainer(step_s=0):
        folder = _small_records(lab)
    return folder, sorted(str(p) for p in folder.glob(f"runs/*/*/*/{store.RESULT}"))


def heavy_beside_a_measurement(lab: Lab) -> dict:
    """A process holds the node's measurement lock (a CPU point measuring) past lock_timeout_s = 2: partial's
    drawing, compare's entry point, the runs table's and the main process's probe of a site interpreter each
    wait, then fail in one line naming measurement.lock_timeout_s, having written nothing."""
    folder, metrics = _metrics(lab)
    lock = lab.root / "heavy-beside.lock"
    work = lab.root / "heavy-beside"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    study.make_runs().to_parquet(work / "runs.parquet")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           locks.NODE_LOCK_ENV: str(lock), locks.LOCK_TIMEOUT_ENV: f"{HEAVY_TIMEOUT_S}"}
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"iterations": [30], "threads": [1]}, "envs": {"site": {"pytorch": sys.executable}},
           "measurement": {"lock_file": str(lock), "lock_timeout_s": HEAVY_TIMEOUT_S}}
    seen = {}
    holder = _hold(lock)  # as a CPU point holds it while it measures
    try:
        with sandbox.environment({locks.NODE_LOCK_ENV: str(lock)}):
            seen["partial"] = _draw_partial(metrics, work / "partial", HEAVY_TIMEOUT_S)
        seen["compare"] = {**_command(["-m", "dlbench.present.comparison", str(folder), str(folder),
                                       "--out", str(work / "compare")], env, REPO, work / "compare"),
                           "refusal_exit": 2}  # compare's "could not compare" (1 is its gate's failure)
        seen["runs_table"] = _command(["-m", "dlbench.present.runs_table", str(work / "runs.parquet"),
                                       str(work / "runs.html")], env, REPO, work / "runs.html")
        seen["site_probe"] = _command(["-c", PARSE, json.dumps(cfg)], env, work, work / ".never")
    finally:
        _release(holder)
    return _row("heavy work beside a measurement (partial, compare, the runs table, parse-time probes)",
                "a process flocks the node's measurement lock; lock_timeout_s = 2",
                all(_refused_in_one_line(case) for case in seen.values()), False, cases=seen)


def partial_after_a_measurement(lab: Lab) -> dict:
    """partial asked for while a point measures (its lock held by another process, let go 1 s later) waits for it,
    then draws every finished record."""
    _, metrics = _metrics(lab)
    lock = lab.root / "partial-after.lock"
    out = lab.root / "partial-after"
    shutil.rmtree(out, ignore_errors=True)
    holder = _hold(lock)
    ends = threading.Timer(1.0, _release, (holder,))
    ends.start()
    try:
        with sandbox.environment({locks.NODE_LOCK_ENV: str(lock)}):
            case = _draw_partial(metrics, out, 60)
    finally:
        ends.join(timeout=60)
    case["written"] = len(case["written"])
    return _row("partial while a point measures", "a process flocks the node's measurement lock for 1 s",
                case["drawn"] == len(metrics) and case["seconds"] >= 1.0, False, **case)


def _refused_in_one_line(case: dict) -> bool:
    """Whether heavy work failed in one line that names the setting, having written nothing (the line that said,
    while it waited, what it waits for is not a refusal)."""
    lines = [case["said"]] if isinstance(case["said"], str) else case["said"] or []
    refused = [ln for ln in lines if not _says_it_waits(ln)]
    return (len(refused) == 1 and "measurement.lock_timeout_s" in refused[0] and not case["written"]
            and case.get("exit", 1) == case.get("refusal_exit", 1))


def _says_it_waits(line: str) -> bool:
    """The line heavy work says once it has waited a second for the node's locks (dlbench.node.locks)."""
    return " waits for the measurement on this node to end (the node's lock " in line


def said_it_waits(case: dict) -> bool:
    """Whether a command's stderr held exactly one line saying, while it waited, what it waits for."""
    lines = [case["said"]] if isinstance(case["said"], str) else case["said"] or []
    return sum(_says_it_waits(ln) for ln in lines) == 1


def pid_taken_again(lab: Lab) -> dict:
    """A killed run's live-job mark, or a leftover folder, names a pid that another process took since: with the
    start the mark recorded (another one), and without one (a mark written before the process started), the
    next run knows the job gone and removes Snakemake's stale locks; the folder is removed as dead. A mark of
    the process itself, with or without its start, keeps them."""
    host, seen = socket.gethostname(), {}
    other = subprocess.Popen(["sleep", "120"])  # the process that took the pid
    time.sleep(0.1)
    hour_ago = time.time() - 3600
    try:
        for name in ("another start", "written before it started", "its own start", "written after it started"):
            meta = lab.root / f"pid-again-{name.split()[0]}-{name.split()[-1]}" / ".snakemake"
            shutil.rmtree(meta.parent, ignore_errors=True)
            (meta / "locks").mkdir(parents=True)
            (meta / "locks" / "0.input.lock").write_text("")
            mark = meta / stale_locks.LIVE_JOBS / f"{host}-{other.pid}"
            mark.parent.mkdir()
            job = {"host": host, "pid": other.pid, "slurm_job_id": None}
            if name == "another start":
                boot, ticks = procs.identity(other.pid)
                job["started"] = [boot, ticks - 500]  # the job that had the pid before started 5 s earlier
            elif name == "its own start":
                job["started"] = procs.identity(other.pid)
            mark.write_text(json.dumps(job))
            if name == "written before it started":
                os.utime(mark, (hour_ago, hour_ago))
            run = subprocess.run([sys.executable, "-c", CLEAR, str(meta.parent)], cwd=REPO, capture_output=True,
                                 text=True, timeout=120)
            seen[name] = {"exit": run.returncode, "removed": run.stdout.splitlines()[:1],
                          "locks_kept": (meta / "locks" / "0.input.lock").exists(), "mark_kept": mark.exists()}
        leftover = lab.root / "pid-again-folders" / f".point.partial-{host}-{other.pid}"
        shutil.rmtree(leftover.parent, ignore_errors=True)
        leftover.mkdir(parents=True)
        os.utime(leftover, (hour_ago, hour_ago))
        removed = procs.remove_dead_leftovers(leftover.parent, ".point.partial-")
        seen["leftover folder"] = {"removed": [p.name for p in removed], "left": leftover.exists()}
    finally:
        other.kill()
        other.wait(timeout=60)
    gone = all(not seen[n]["locks_kept"] and not seen[n]["mark_kept"]
               for n in ("another start", "written before it started"))
    kept = all(seen[n]["locks_kept"] and seen[n]["mark_kept"] for n in ("its own start", "written after it started"))
    return _row("a killed job's pid taken again", "a live `sleep` named by a live-job mark with another start, or "
                "written an hour before it started; a leftover folder as old", gone and kept
                and not seen["leftover folder"]["left"], False, cases=seen)

SCENARIOS = [gate_held, heavy_beside_a_measurement, private_lock_folder, pending_jobs, marks_cut_short,
             lock_files_replaced, nvml_hangs, lone_sigcont, child_left_behind, cancel_sighup, cancel_sigint,
             pid_taken_again]
