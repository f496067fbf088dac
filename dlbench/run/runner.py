"""Run one point: the trainer in its framework's environment, the monitor outside it, one record.

The run's files go to a hidden folder first; metrics.json, the file Snakemake and
the aggregation take as the sign of a finished point, is written last and
atomically, so an interrupted point never looks complete.

While it measures, a point holds the node's measurement lock (dlbench.node.locks.measuring): a CPU
point alone, a GPU point on a GPU of its own (CUDA_VISIBLE_DEVICES for the trainer, the same GPU
for the monitor's NVML readings).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from dlbench.atomic import NOT_FINITE
from dlbench.frameworks import base, registry
from dlbench.node import hostload, machine, memcap, oomkill, procs, slurm_job
from dlbench.node.locks import LockTimeout, LockUnusable, lock_timeout, measuring
from dlbench.node.procs import die_with_parent, kill_tree, owner_tag, remove_dead_leftovers
from dlbench.paths import ROOT
from dlbench.record import provenance, statuses, store
from dlbench.record.statuses import MachineFailure
from dlbench.run import build_record
from dlbench.run.monitor import NVML_TIMEOUT_S, SAMPLE_FIELDS, Monitor, bounded, idle_gpu, nvml_index, unanswered

REPO = ROOT  # the trainer is started from the checkout, with it on PYTHONPATH
HANG_S = 1800.0  # a point silent this long is ended as hung (limits.hang_s)
WATCH_S = 2.0  # how often the runner looks at a running trainer
KILL_WAIT_S = 30.0  # longest wait for a killed trainer to be reaped (one stuck in the kernel never is)
PAUSE_S = 30.0  # a watch that wakes this late was stopped (SIGSTOP: a suspended job), not merely slow
TICK_S = 0.1  # how often the watch notes that it runs (Popen.wait itself polls every 50 ms)
STOPPED_GAP_S = 0.5  # a SIGCONT that finds the watch's last note this old ends a stop, not a lone SIGCONT
# The trainer module the runner starts. It exists for the tests of the runner itself (its time budget, hang watch,
# memory guards: dlbench/testing/faults*.py), which set DLBENCH_TRAINER=dlbench.testing.small_trainer, a trainer
# without a framework, so that they do not import one in every point. Read at each start (an environment variable
# reaches the jobs of a Snakemake run too); only dlbench.frameworks.trainer or a module under dlbench.testing is
# started: it
# is no way to run other code.
TRAINER = "dlbench.frameworks.trainer"
TRAINER_VARIABLE = "DLBENCH_TRAINER"


def trainer_module() -> str:
    """The trainer module to start (TRAINER, or the test trainer DLBENCH_TRAINER names); ValueError for another."""
    name = os.environ.get(TRAINER_VARIABLE) or TRAINER
    parts = name.split(".")
    if name != TRAINER and not (parts[:2] == ["dlbench", "testing"] and len(parts) > 2
                                and all(part.isidentifier() for part in parts)):
        raise ValueError(f"{TRAINER_VARIABLE}={name!r}: the runner starts {TRAINER}, or for tests a module under "
                         f"dlbench.testing (dlbench.testing.small_trainer); unset {TRAINER_VARIABLE}")
    return name


def read_events(path: Path) -> list[dict]:
    events = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill
                break
            for name, value in event.pop(NOT_FINITE, {}).items():  # written null: JSON has no inf or nan
                event[name] = float(value)
            events.append(event)
    return events


def trainer_env(point: dict, device: str | None = None) -> dict[str, str]:
    """The trainer's environment variables; `device`: the GPU a GPU point is pinned to."""
    env = dict(os.environ)
    env.update(base.thread_env(point["threads"], point.get("interop_threads")))
    env.update(registry.get(point["framework"]).environment(point))
    if device is not None and point["device"] == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = device
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONHOME", None)
    return env


def run_point(point: dict, dataset_dir: str | Path, out_dir: str | Path, *, measure_lock: str | None = None,
              gpu_per_device: bool = True, lock_timeout_s: float | None = None, after_last: bool = False,
              **kw) -> dict | None:
    """Train one point (see _run_point), holding the node's measurement lock if one is given.

    The lock is node-local: jobs sharing a machine (cluster jobs, grouped points) do not disturb each
    other's measurement. gpu_per_device: GPU points measure side by side, one per GPU (else one at a time).
    lock_timeout_s: the longest wait for the node's locks (None: dlbench.node.locks.lock_timeout()).
    A lock that stays taken, or cannot be used, is a failure of the machine (dlbench.record.statuses): the
    attempt is kept and, unless it is the last one allowed, nothing is published.

    In a job SLURM requeued, a point this job already finished is published again, not measured twice. An
    attempt that died with its node leaves only a mark (records.mark_started); where every earlier run of
    the point did (Snakemake's attempts and SLURM's own requeues of the job alike, `tries`), the last
    allowed one publishes `node_lost` rather than try again, so that the study's tables are drawn from what
    finished. after_last: this attempt follows the last allowed one, only to publish `node_lost` where that
    one died with its node too; None (nothing published) where it ended otherwise.
    """
    out = Path(out_dir)
    if slurm_job.restart_count():
        done = store.finished_in_job(out, slurm_job.job_id(), statuses.RETRIED)
        if done is not None:
            return store.republish(done, out, republished_after_requeue=slurm_job.restart_count())
    lost = store.lost_attempts(out, _job_alive)
    if after_last and not lost:
        return None
    attempt = kw.get("attempt", 1)
    runs = tries(attempt)
    try:
        mark = store.mark_started(out, attempt=attempt)
    except OSError as exc:
        if statuses.disk_full(exc):
            raise MachineFailure("disk_full", f"no space left to start the point in {out}: {exc}") from exc
        raise
    try:
        if after_last or (kw.get("final_attempt", True) and runs > 1 and len(lost) >= runs - 1):
            reason = (f"{len(lost)} runs of this point before this one ended without a word (their job or node "
                      "died: no record, no status); the point is given up here, so that the study's tables are "
                      "drawn")
            return _run_point(point, dataset_dir, out_dir, refused=("node_lost", reason), lost_attempts=len(lost),
                              **kw)
        return _measure(point, dataset_dir, out_dir, measure_lock=measure_lock, gpu_per_device=gpu_per_device,
                        lock_timeout_s=lock_timeout_s, lost_attempts=len(lost), **kw)
    finally:
        mark.unlink(missing_ok=True)
        if (out / store.RESULT).exists():  # a record stands: the marks of lost attempts are history now
            for facts in lost:
                (out / store.ATTEMPTS / f"{store.STARTED}{facts['host']}-{facts['pid']}.json").unlink(
                    missing_ok=True)


def cancel_stands(out_dir: str | Path) -> bool:
    """Whether the point's last attempt was cancelled by somebody (scancel; SIGTERM to a job off SLURM), so
    that a retry of its job would undo what they asked for. SLURM's SIGTERM at a job's time limit is no such
    cancel: its job ends TIMEOUT, and its retry asks for more time (wiring.point_runtime). Where SLURM's
    accounting cannot say how the job ended, the retry runs."""
    record = store.cancelled_last(out_dir)
    if record is None:
        return False
    if not record.get("slurm_job_id"):
        return True
    state = slurm_job.final_state(str(record["slurm_job_id"]))
    return state is not None and state.startswith("CANCELLED")


def tries(attempt: int) -> int:
    """How many times this point's job has run, this run included: Snakemake's attempts, and the runs of this
    SLURM job that SLURM itself requeued (a node failure, a preemption, `scontrol requeue`), which Snakemake
    never sees as failed."""
    return attempt + slurm_job.restart_count()


def _job_alive(facts: dict) -> bool | None:
    """Whether the job of an attempt's mark still lives: its pid on this host, else SLURM's word. An earlier
    run of this very SLURM job (requeued since) is dead: SLURM runs one at a time."""
    if facts.get("host") == socket.gethostname():
        return procs.alive(int(facts["pid"]))
    if facts.get("slurm_job_id") and str(facts["slurm_job_id"]) == slurm_job.job_id():
        return False
    return slurm_job.running(str(facts["slurm_job_id"])) if facts.get("slurm_job_id") else None


def _measure(point: dict, dataset_dir: str | Path, out_dir: str | Path, *, measure_lock: str | None,
             gpu_per_device: bool, lock_timeout_s: float | None, **kw) -> dict:
    """run_point's measurement: the node's lock, then the trainer (see run_point)."""
    gpu = point["device"] == "gpu"
    if gpu and not gpu_visible():  # nothing to wait for: the point is recorded as unavailable at once
        return _run_point(point, dataset_dir, out_dir, **kw)
    devices = machine.gpu_devices() if gpu else None
    if not measure_lock:
        return _run_point(point, dataset_dir, out_dir, device=devices[0] if devices else None, **kw)
    lock_timeout_s = lock_timeout() if lock_timeout_s is None else lock_timeout_s
    try:
        with measuring(measure_lock, devices, per_device=gpu_per_device, timeout_s=lock_timeout_s) as slot:
            return _run_point(point, dataset_dir, out_dir, device=slot.device, lock_mode=slot.mode,
                              lock_wait_s=slot.wait_s, lock_intact=slot.intact, **kw)
    except LockTimeout as exc:
        reason = (f"waited {lock_timeout_s:g} s for the node's measurement lock (measurement.lock_timeout_s) "
                  f"and another process held it the whole time ({exc})")
        return _run_point(point, dataset_dir, out_dir, refused=("lock_timeout", reason), lock_wait_s=lock_timeout_s,
                          **kw)
    except LockUnusable as exc:
        return _run_point(point, dataset_dir, out_dir, refused=("lock_unusable", str(exc)), **kw)


def _run_point(point: dict, dataset_dir: str | Path, out_dir: str | Path, *, python: str | None = None,
               env: dict | None = None, interval_s: float = 0.2, monitor_enabled: bool = True,
               time_limit_s: float | None = None, memory_limit_mb: float | None = None,
               hang_s: float | None = HANG_S, device: str | None = None, lock_mode: str | None = None,
               lock_wait_s: float = 0.0, refused: tuple[str, str] | None = None,
               contended_pct: float = hostload.CONTENDED_PCT, quiet_wait_s: float = 0.0, attempt: int = 1,
               final_attempt: bool = True, lock_intact=None, lost_attempts: int = 0) -> dict:
    """Train one point and write metrics.json, curve.csv, samples.csv and trainer.log into out_dir.

    python: the framework environment's interpreter (None: this one); env: its description for the record
    (name, kind, key); device: the GPU a GPU point is pinned to (None: whatever the job sees); refused:
    (status, reason) of a point that ends without starting its trainer. contended_pct: others' share of a
    core over which a point counts as contended; quiet_wait_s: wait up to that long for others to use less
    before the trainer starts (0: do not wait; dlbench.node.hostload).
    lock_intact: whether the node's lock was held throughout (checked before the record is written); attempt:
    Snakemake's count of this job's attempts; final_attempt: whether a failure of the machine is published as
    the record (else only kept as an attempt, and the job is to fail so that it runs again).
    Every finished attempt (any status) is also kept under out_dir/attempts/ (dlbench.record.store).
    A full disk while the record is written raises MachineFailure("disk_full"), leaving what was there.
    """
    trainer = trainer_module()  # refused before anything is made
    # Absolute: the trainer runs in the repository, the workflow's working directory may be elsewhere.
    out_dir, dataset_dir = Path(out_dir).resolve(), Path(dataset_dir).resolve()
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        # Unfinished folders are named by host and pid: only those of dead runners of this host are removed,
        # and one whose trainer had finished is kept aside under attempts/ first (records.set_aside).
        remove_dead_leftovers(out_dir.parent, f".{out_dir.name}.partial-",
                              keep=lambda folder: store.set_aside(out_dir, folder))
        work = out_dir.parent / f".{out_dir.name}.partial-{owner_tag()}"
        work.mkdir(parents=True)
        (work / "point.json").write_text(json.dumps(point, indent=2, sort_keys=True))
    except OSError as exc:
        if statuses.disk_full(exc):
            raise MachineFailure("disk_full", f"no space left to start the point in {out_dir.parent}: {exc}") from exc
        raise
    events_path = work / "events.jsonl"
    log_path = work / "trainer.log"
    environ = trainer_env(point, device)
    # The monitor reads the GPU the trainer sees as its device 0.
    gpu_index = nvml_index(environ.get("CUDA_VISIBLE_DEVICES")) if point["device"] == "gpu" else None
    # Opt-in: wait (bounded) for others to quieten, before the clocks of the point start.
    quiet_waited = hostload.wait_quiet(contended_pct, quiet_wait_s) if quiet_wait_s and refused is None else 0.0
    started_wall = time.time()
    t_launch = time.monotonic()
    mon = Monitor(os.getpid(), interval_s, None, None)  # replaced by the trainer's monitor once it runs
    returncode, ended, watch, idle, cgroup = None, None, Watch(t_launch), {}, None
    if refused is None and gpu_index is not None and not gpu_visible():
        # No GPU on this machine at all: say so without starting a framework to find out.
        refused = ("unavailable", "no NVIDIA GPU is visible on this machine (no /dev/nvidia*, NVML "
                   + ("did not answer: GPU state unknown)" if machine.gpu_state() else "finds none)"))
    if refused is None and gpu_index is not None:  # NVML's figures are the whole GPU's: its idle ones first
        idle = _idle_gpu(gpu_index)
    env = env or {}
    # The runner's own fields of the attempt (dlbench.record.fields: the attempt, the environment, the limits).
    attempt_fields = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started_wall)),
        "monitor_interval_s": interval_s if monitor_enabled else None, "lock_mode": lock_mode,
        "lock_wait_s": lock_wait_s, "quiet_wait_s": quiet_waited,
        "gpu_device": device if point["device"] == "gpu" else None,
        "env_name": env.get("env", point["framework"]), "env_kind": env.get("kind", "current"),
        "env_key": env.get("key"), "env_python": python or sys.executable, "dataset_dir": str(dataset_dir),
        **dataset_provenance(dataset_dir),
        # How many times SLURM requeued this job (a preemption, `scontrol requeue`, a node failure): 0 where none.
        "attempt": attempt, "lost_attempts": lost_attempts, "slurm_restart_count": slurm_job.restart_count()}
    context = {"t_launch": t_launch, "log_path": log_path, "time_limit_s": time_limit_s,
               "memory_limit_mb": memory_limit_mb, "hang_s": hang_s, "contended_pct": contended_pct,
               "gpu_idle": idle, "attempt": attempt_fields}
    if refused is None:
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([python or sys.executable, "-m", trainer, str(work / "point.json"),
                                         str(dataset_dir), str(events_path)], stdout=log, stderr=subprocess.STDOUT,
                                        env=environ, cwd=REPO, start_new_session=True,
                                        preexec_fn=_child_setup(memory_limit_mb))
        except OSError as exc:  # the environment's interpreter is gone or cannot run
            refused = ("env_damaged", f"the framework's interpreter {python or sys.executable} cannot be started: "
                                      f"{type(exc).__name__}: {exc}")
    if refused is not None:
        status_line = {"e": "status", "t": t_launch, "status": refused[0], "reason": refused[1]}
        events_path.write_text(json.dumps(status_line) + "\n")
        log_path.write_text("")
    else:
        cgroup = oomkill.baseline(proc.pid)  # its memory cgroup's OOM kills so far: a cluster job's limit
        mon = Monitor(proc.pid, interval_s, gpu_index, memory_limit_mb)
        if monitor_enabled or memory_limit_mb:
            mon.start()
        try:
            ended = watch.run(proc, events_path, time_limit_s, hang_s)
            if ended:  # over its time, or silent for too long: end the whole tree
                kill_tree(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                _kill_and_reap(proc, watch)  # whatever of its group is left, also if the leader exited
            else:  # it exited: what it started and left behind must not load the node's next measurement
                kill_tree(proc.pid, signal.SIGKILL)
        except BaseException:  # the job itself is cancelled: take the trainer with it, keep the attempt
            ended = "preempted" if slurm_job.requeue_if_preempted() else "cancelled"  # first: KillWait is short
            _kill_and_reap(proc, watch)
            mon.stop()
            record = _record(point, read_events(events_path), mon, proc.returncode, ended, watch, lock_intact=None,
                             **context)
            store.keep_attempt(out_dir, record, work, store.attempt_name(started_wall))
            shutil.rmtree(work, ignore_errors=True)
            raise
        returncode = proc.returncode
        mon.stop()
    events = read_events(events_path)
    record = _record(point, events, mon, returncode, ended, watch, lock_intact=lock_intact, cgroup=cgroup,
                     **context)
    publish = final_attempt or not record["machine_failure"]
    try:
        store.publish(out_dir, work, record,
                        [("curve.csv", build_record.CURVE_FIELDS, build_record.curve_rows(events, t_launch)),
                         ("samples.csv", ("phase",) + SAMPLE_FIELDS, build_record.sample_rows(mon.samples, events,
                                                                                               t_launch))],
                        store.attempt_name(started_wall), result=publish)
    except OSError as exc:
        if not statuses.disk_full(exc):
            raise
        shutil.rmtree(work, ignore_errors=True)
        raise MachineFailure("disk_full", f"no space left while writing the record into {out_dir}: {exc}") from exc
    shutil.rmtree(work, ignore_errors=True)
    return record


def _record(point: dict, events: list[dict], mon: Monitor, returncode: int | None, ended: str | None, watch: Watch,
            *, lock_intact, t_launch: float, log_path: Path, memory_limit_mb: float | None,
            cgroup: oomkill.Baseline | None = None, **facts) -> dict:
    """The attempt's record (dlbench.run.build_record), from the facts the runner gathered; lock_intact: a callable
    that says whether the node's lock was held throughout (None: no lock); cgroup: the trainer's memory cgroup
    as it started (dlbench.node.oomkill)."""
    log_tail = _tail(log_path)
    # Read before ended_by_cap removes the runner's own cgroup child, where the trainer had one.
    oom_killed = oomkill.killed_since(cgroup) if returncode == -signal.SIGKILL else None
    capped = (build_record.cap_suspected(events, memory_limit_mb, mon.over_memory)
              and memcap.ended_by_cap(mon.pid, log_tail))
    return build_record.build_record(point, events, mon.samples, build_record.Facts(
        t_launch=t_launch, t_end=time.monotonic(), returncode=returncode, ended=ended, log_tail=log_tail,
        over_memory=mon.over_memory, capped=capped, oom_killed=oom_killed, pauses=tuple(watch.pauses),
        unreaped=watch.unreaped,
        kill_wait_s=KILL_WAIT_S, lock_intact=None if lock_intact is None else bool(lock_intact()),
        memory_limit_mb=memory_limit_mb, memory_cap=memcap.kind() if memory_limit_mb else None,
        monitor_cpu_s=mon.own_cpu_s, gpu_nvml_failures=mon.gpu_failures(), gpu_readings_stopped=mon.gpu_gave_up,
        monitor_died=mon.died,
        machine=_machine(point, facts.get("gpu_idle")), **facts))


def _machine(point: dict, idle: dict | None) -> dict:
    """The record's machine fields: NVML is asked for a GPU point only; gpu_state says where it did not answer."""
    facts = {**machine.host(gpu=point["device"] == "gpu"), **provenance.dlbench_build()}
    if idle and idle.get("gpu_state"):
        facts["gpu_state"] = idle["gpu_state"]
    return facts


def _idle_gpu(index: int | str) -> dict:
    """monitor.idle_gpu within NVML_TIMEOUT_S (the node's lock is held now); where NVML hangs, no figures and
    the gpu_state that says so."""
    try:
        return bounded(lambda: idle_gpu(index), NVML_TIMEOUT_S)
    except TimeoutError:
        return {"gpu_mem_idle_mb": None, "gpu_power_idle_w": None, "gpu_state": unanswered()}


def _kill_and_reap(proc: subprocess.Popen, watch: Watch) -> None:
    """SIGKILL the trainer's group and wait for it, at most KILL_WAIT_S: one stuck in the kernel (an
    uninterruptible sleep, a frozen cgroup) is left behind, named in the record, so that the job and the
    node's lock are not held for ever."""
    kill_tree(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        watch.unreaped = proc.pid


def note_continue_signals() -> None:
    """Note the stops of this process (a suspended job, resumed) for the watch; only the main thread may set a
    handler."""
    signal.signal(signal.SIGCONT, _on_continue)


_CONTINUED: list[float] = []  # seconds each stop of this process lasted, as the SIGCONT that ended it found
_TICK: list[float | None] = [None]  # when the watch last noted that it runs; None while no watch runs


def _on_continue(*_) -> None:
    """A SIGCONT that ends a stop (SIGSTOP, SIGTSTP) finds the watch's last note as old as the stop; a SIGCONT
    alone (kill -CONT to a running job) finds it fresh, and is no suspension."""
    if _TICK[0] is not None and (gap := time.monotonic() - _TICK[0]) > STOPPED_GAP_S:
        _CONTINUED.append(gap)


class Watch:
    """The runner's watch over a trainer, on the monotonic clock only: a step of the wall clock (NTP, a
    hand-set date) neither ends nor prolongs anything. Silence is measured from the last change of the
    events file as the runner saw it; a stop of the whole job (SIGSTOP, as SLURM's suspend sends) is
    noted as a pause, and the silence it caused is not a hang."""

    def __init__(self, t_launch: float):
        self.t_launch = t_launch
        self.pauses: list[float] = []  # seconds of each stop noticed
        self.unreaped: int | None = None  # pid of a trainer that outlived SIGKILL
        self._continued = len(_CONTINUED)

    def run(self, proc: subprocess.Popen, events_path: Path, time_limit_s: float | None,
            hang_s: float | None) -> str | None:
        """Wait for the trainer; "timeout" past its time budget, "hung" after hang_s without an event, else None.

        Looks at the events file every few seconds only (a busy waiter would cost a measured point a share of
        a core).
        """
        try:
            return self._run(proc, events_path, time_limit_s, hang_s)
        finally:
            _TICK[0] = None

    def _run(self, proc: subprocess.Popen, events_path: Path, time_limit_s: float | None,
             hang_s: float | None) -> str | None:
        last_size, last_change = -1, self.t_launch
        last_wake = time.monotonic()
        while True:
            wake = WATCH_S if time_limit_s is None else max(0.05, min(WATCH_S, self.t_launch + time_limit_s
                                                                       - time.monotonic()))
            if _ended_within(proc, wake):
                return None
            now = time.monotonic()
            late = now - last_wake - wake
            stops = _CONTINUED[self._continued:]
            if stops or late > PAUSE_S:
                self._continued = len(_CONTINUED)
                self.pauses.append(round(max(late, sum(stops), 0.0), 3))
                last_change = now  # the trainer was stopped too: its silence was the pause
            last_wake = now
            size = _size(events_path)
            if size != last_size:
                last_size, last_change = size, now
            if time_limit_s is not None and now - self.t_launch >= time_limit_s:
                return "timeout"
            if hang_s and now - last_change >= hang_s:
                return "hung"


def _ended_within(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether the trainer ends within timeout_s; notes every TICK_S that the watch runs (_on_continue)."""
    end = time.monotonic() + timeout_s
    while True:
        _TICK[0] = time.monotonic()
        try:
            proc.wait(timeout=max(0.0, min(TICK_S, end - _TICK[0])))
            return True
        except subprocess.TimeoutExpired:
            if time.monotonic() >= end:
                return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _child_setup(memory_limit_mb: float | None):
    """What the trainer does before it execs: die with the runner, and live under the memory cap if one is set."""
    def setup() -> None:
        die_with_parent()
        if memory_limit_mb:
            memcap.apply_in_child(memory_limit_mb)
    return setup


def gpu_visible() -> bool:
    """Whether this machine shows any NVIDIA GPU (device files or NVML); a pinned job sees its own."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or bool(machine.gpus())


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def dataset_provenance(dataset_dir: Path) -> dict:
    """Where the prepared dataset came from (its meta.json): `dataset_source`, and `dataset_test_copy`, what a test
    copy is (config `data_test_copy`), None for the published data."""
    try:
        meta = json.loads((Path(dataset_dir) / "meta.json").read_text())
    except (OSError, ValueError):
        return {"dataset_source": None, "dataset_test_copy": None}
    return {"dataset_source": meta.get("source"), "dataset_test_copy": meta.get("test_copy")}
