"""Measure one attempt of a point: its trainer started in the framework's environment, watched to its end, the
monitor outside it; what happened written as the raw measurement (dlbench.record.raw) into the attempt's folder.

This is what a training job runs, and all of it: the code digest that reruns a point (dlbench/rules/code_digest.py)
starts here, at the trainer and at the framework's adapter. How the point's attempts are kept and its record
made and published is dlbench.run.runner's, which calls this, and nothing here depends on it.

While it measures, a point holds the node's measurement lock (dlbench.node.locks.measuring): a CPU point alone, a
GPU point on a GPU of its own (CUDA_VISIBLE_DEVICES for the trainer, the same GPU for the monitor's NVML readings).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlbench.frameworks import protocol, registry
from dlbench.node import hostload, machine, memcap, oomkill, slurm_job
from dlbench.node.deadline import NVML_TIMEOUT_S, bounded, unanswered
from dlbench.node.locks import LockTimeout, LockUnusable, lock_timeout, measuring
from dlbench.node.procs import die_with_parent, kill_tree, owner_tag
from dlbench.paths import ROOT
from dlbench.record import provenance, raw, statuses
from dlbench.record.statuses import MachineFailure
from dlbench.run.monitor import Monitor, idle_gpu, nvml_index
from dlbench.run.options import RunOptions
from dlbench.run.threads import thread_env

REPO = ROOT  # the trainer is started from the checkout, with it on PYTHONPATH
WATCH_S = 2.0  # how often the runner looks at a running trainer
KILL_WAIT_S = 30.0  # longest wait for a killed trainer to be reaped (one stuck in the kernel never is)
PAUSE_S = 30.0  # a watch that wakes this late was stopped (SIGSTOP: a suspended job), not merely slow
TICK_S = 0.1  # how often the watch notes that it runs (Popen.wait itself polls every 50 ms)
CANCELS = ("cancelled", "preempted")  # how the runner ends a trainer whose job was cancelled
STOPPED_GAP_S = 0.5  # a SIGCONT that finds the watch's last note this old ends a stop, not a lone SIGCONT
# The trainer module the runner starts. It exists for the tests of the runner itself (its time budget, hang watch,
# memory guards: dlbench/testing/faults*.py), which set DLBENCH_TRAINER=dlbench.testing.small_trainer, a trainer
# without a framework, so that they do not import one in every point. Read at each start (an environment variable
# reaches the jobs of a Snakemake run too); only dlbench.frameworks.trainer or a module under dlbench.testing is
# started: it is no way to run other code.
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


def trainer_env(point: dict, device: str | None = None) -> dict[str, str]:
    """The trainer's environment variables; `device`: the GPU a GPU point is pinned to."""
    env = dict(os.environ)
    env.update(thread_env(point["threads"], point.get("interop_threads")))
    env.update(registry.get(point["framework"]).environment(point))
    if device is not None and point["device"] == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = device
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONHOME", None)
    return env


@dataclass(frozen=True)
class Work:
    """A point's folders: the published one, and the hidden one its attempt fills first."""

    out_dir: Path
    dataset_dir: Path
    folder: Path

    @property
    def events(self) -> Path:
        return self.folder / raw.EVENTS

    @property
    def log(self) -> Path:
        return self.folder / raw.LOG

    @property
    def point_file(self) -> Path:
        return self.folder / raw.POINT


def folder_prefix(out_dir: Path) -> str:
    """The name an attempt's hidden folder begins with, beside the point's folder (then its host and pid)."""
    return f".{out_dir.name}.partial-"


def prepare(point: dict, dataset_dir: str | Path, out_dir: str | Path) -> Work:
    """The attempt's hidden folder, with the point in it (a trainer module that may not be started is refused
    first, before anything is made)."""
    trainer_module()
    # Absolute: the trainer runs in the repository, the workflow's working directory may be elsewhere.
    out_dir, dataset_dir = Path(out_dir).resolve(), Path(dataset_dir).resolve()
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Work(out_dir, dataset_dir, out_dir.parent / f"{folder_prefix(out_dir)}{owner_tag()}")
        work.folder.mkdir(parents=True)
        work.point_file.write_text(json.dumps(point, indent=2, sort_keys=True))
    except OSError as exc:
        if statuses.disk_full(exc):
            raise MachineFailure("disk_full", f"no space left to start the point in {out_dir.parent}: {exc}") from exc
        raise
    return work


@dataclass(frozen=True)
class Admission:
    """How the point came to its start: the node's lock and the GPU it gave, or why the point ends unstarted."""

    device: str | None = None  # the GPU a GPU point is pinned to (None: whatever the job sees)
    lock_mode: str | None = None
    lock_wait_s: float = 0.0
    lock_intact: Callable[[], bool] | None = None  # whether the node's lock was held throughout (None: no lock)
    refused: tuple[str, str] | None = None  # (status, reason) of a point that ends without starting its trainer
    lost_attempts: int = 0  # earlier runs of the point that died with their job or node


def measure(point: dict, work: Work, options: RunOptions, lost_attempts: int = 0) -> None:
    """Measure the attempt under the node's lock, where the options name one (a lock that stays taken, or cannot be
    used, is a failure of the machine: the attempt ends unstarted with the status that says so)."""
    gpu = point["device"] == "gpu"
    if gpu and not gpu_visible():  # nothing to wait for: the point is recorded as unavailable at once
        return attempt(point, work, options, Admission(lost_attempts=lost_attempts))
    devices = machine.gpu_devices() if gpu else None
    if not options.measure_lock:
        return attempt(point, work, options, Admission(device=devices[0] if devices else None,
                                                        lost_attempts=lost_attempts))
    timeout_s = lock_timeout() if options.lock_timeout_s is None else options.lock_timeout_s
    try:
        with measuring(options.measure_lock, devices, per_device=options.gpu_per_device, timeout_s=timeout_s) as slot:
            return attempt(point, work, options, Admission(
                device=slot.device, lock_mode=slot.mode, lock_wait_s=slot.wait_s, lock_intact=slot.intact,
                lost_attempts=lost_attempts))
    except LockTimeout as exc:
        reason = (f"waited {timeout_s:g} s for the node's measurement lock (measurement.lock_timeout_s) "
                  f"and another process held it the whole time ({exc})")
        return attempt(point, work, options, Admission(
            refused=("lock_timeout", reason), lock_wait_s=timeout_s, lost_attempts=lost_attempts))
    except LockUnusable as exc:
        return attempt(point, work, options, Admission(refused=("lock_unusable", str(exc)),
                                                        lost_attempts=lost_attempts))


def attempt(point: dict, work: Work, options: RunOptions, admission: Admission) -> None:
    """Launch the trainer, watch it to its end and write the raw measurement into work.folder. Where the job itself
    is cancelled meanwhile, the trainer goes with it, the measurement says how it ended, and the exception goes
    on."""
    started = launch(point, work, options, admission)
    if started.proc is None:
        return finish(point, work, options, started, Ended(Monitor(os.getpid(), options.interval_s, None, None)))
    try:
        ended = watch(started, work, options)
    except BaseException:  # the job itself is cancelled: the trainer went with it (watch), the attempt is kept
        with contextlib.suppress(OSError, MachineFailure):  # where it can be written: the cancel goes on either way
            finish(point, work, options, started, started.ended)
        raise
    finish(point, work, options, started, ended)


@dataclass
class Started:
    """A launched attempt: its trainer (None where the point ends unstarted) and what the runner noted of its start."""

    proc: subprocess.Popen | None
    t_launch: float  # the monotonic clock at the start ...
    wall: float  # ... and the wall clock
    gpu_index: int | str | None  # the GPU the monitor reads (the trainer's device 0)
    gpu_idle: dict  # its idle memory and power, read before the start
    fields: dict  # the runner's own fields of the attempt (dlbench.record.fields)
    lock_intact: Callable[[], bool] | None
    watch: Watch
    ended: Ended | None = None  # how it ended, where the job was cancelled while it ran


def launch(point: dict, work: Work, options: RunOptions, admission: Admission) -> Started:
    """Start the trainer, pinned to the admitted GPU; where the point cannot start (refused, no GPU, no
    interpreter), write the status that says why instead, and return no process."""
    trainer = trainer_module()
    environ = trainer_env(point, admission.device)
    # The monitor reads the GPU the trainer sees as its device 0.
    gpu_index = nvml_index(environ.get("CUDA_VISIBLE_DEVICES")) if point["device"] == "gpu" else None
    refused = admission.refused
    # Opt-in: wait (bounded) for others to quieten, before the clocks of the point start.
    quiet_waited = (hostload.wait_quiet(options.contended_pct, options.quiet_wait_s)
                    if options.quiet_wait_s and refused is None else 0.0)
    wall, t_launch = time.time(), time.monotonic()
    if refused is None and gpu_index is not None and not gpu_visible():
        # No GPU on this machine at all: say so without starting a framework to find out.
        refused = ("unavailable", "no NVIDIA GPU is visible on this machine (no /dev/nvidia*, NVML "
                   + ("did not answer: GPU state unknown)" if machine.gpu_state() else "finds none)"))
    # NVML's figures are the whole GPU's: its idle ones first.
    idle = _idle_gpu(gpu_index) if refused is None and gpu_index is not None else {}
    started = Started(None, t_launch, wall, gpu_index, idle, _attempt_fields(point, work, options, admission, wall,
                                                                             quiet_waited),
                      admission.lock_intact, Watch(t_launch))
    if refused is None:
        try:
            with open(work.log, "wb") as log:
                started.proc = subprocess.Popen(
                    [options.interpreter, "-m", trainer, str(work.point_file), str(work.dataset_dir), str(work.events)],
                    stdout=log, stderr=subprocess.STDOUT, env=environ, cwd=REPO, start_new_session=True,
                    preexec_fn=_child_setup(options.memory_limit_mb))
            return started
        except OSError as exc:  # the environment's interpreter is gone or cannot run
            refused = ("env_damaged", f"the framework's interpreter {options.interpreter} cannot be started: "
                                      f"{type(exc).__name__}: {exc}")
    work.events.write_text(protocol.encode(protocol.STATUS, t_launch, {"status": refused[0], "reason": refused[1]})
                           + "\n")
    work.log.write_text("")
    return started


def _attempt_fields(point: dict, work: Work, options: RunOptions, admission: Admission, wall: float,
                    quiet_waited: float) -> dict:
    """The runner's own fields of the attempt (dlbench.record.fields: the attempt, the environment, the limits)."""
    env = options.env
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(wall)),
        "monitor_interval_s": options.interval_s if options.monitor else None, "lock_mode": admission.lock_mode,
        "lock_wait_s": admission.lock_wait_s, "quiet_wait_s": quiet_waited,
        "gpu_device": admission.device if point["device"] == "gpu" else None,
        "env_name": env.get("env", point["framework"]), "env_kind": env.get("kind", "current"),
        "env_key": env.get("key"), "env_python": options.interpreter, "dataset_dir": str(work.dataset_dir),
        **dataset_provenance(work.dataset_dir),
        # How many times SLURM requeued this job (a preemption, `scontrol requeue`, a node failure): 0 where none.
        "attempt": options.attempt, "lost_attempts": admission.lost_attempts,
        "slurm_restart_count": slurm_job.restart_count()}


@dataclass
class Ended:
    """How a trainer's run ended, as the runner saw it."""

    monitor: Monitor
    returncode: int | None = None
    how: str | None = None  # how the runner ended it: timeout, hung, cancelled, preempted (None: it exited)
    cgroup: oomkill.Baseline | None = None  # its memory cgroup as it started (dlbench.node.oomkill)


def watch(started: Started, work: Work, options: RunOptions) -> Ended:
    """Monitor the trainer until it exits, or end it (its whole process tree) past its time budget or silent
    for too long. Where the job itself is cancelled meanwhile, the trainer goes with it, `started.ended` says
    how, and the exception goes on."""
    proc = started.proc
    cgroup = oomkill.baseline(proc.pid)  # its memory cgroup's OOM kills so far: a cluster job's limit
    mon = Monitor(proc.pid, options.interval_s, started.gpu_index, options.memory_limit_mb)
    if options.monitor or options.memory_limit_mb:
        mon.start()
    try:
        how = started.watch.run(proc, work.events, options.time_limit_s, options.hang_s)
        if how:  # over its time, or silent for too long: end the whole tree
            kill_tree(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _kill_and_reap(proc, started.watch)  # whatever of its group is left, also if the leader exited
        else:  # it exited: what it started and left behind must not load the node's next measurement
            kill_tree(proc.pid, signal.SIGKILL)
    except BaseException:
        how = "preempted" if slurm_job.requeue_if_preempted() else "cancelled"  # first: KillWait is short
        _kill_and_reap(proc, started.watch)
        mon.stop()
        started.ended = Ended(mon, proc.returncode, how)
        raise
    mon.stop()
    return Ended(mon, proc.returncode, how, cgroup)


def finish(point: dict, work: Work, options: RunOptions, started: Started, ended: Ended) -> None:
    """The attempt's raw measurement written whole: the monitor's samples and the runner's facts (measurement.json,
    last). A full disk raises MachineFailure("disk_full")."""
    try:
        raw.write(work.folder, facts(point, work, options, started, ended), ended.monitor.samples)
    except OSError as exc:
        if not statuses.disk_full(exc):
            raise
        raise MachineFailure("disk_full", f"no space left while writing the measurement into {work.folder}: "
                                          f"{exc}") from exc


def cap_suspected(events: list[dict], memory_limit_mb: float | None, over_memory: bool) -> bool:
    """Whether the hard cap may have ended the point, so that the runner looks for its traces
    (dlbench.node.memcap.ended_by_cap): only a point under a budget that the monitor did not end and that did not
    finish well. A harmless allocator warning in an ok point's log ("out of memory" in TensorFlow's) says nothing."""
    return bool(memory_limit_mb) and not over_memory and protocol.last_status(events) not in ("ok", "diverged")


def facts(point: dict, work: Work, options: RunOptions, started: Started, ended: Ended) -> raw.Facts:
    """What the runner knows of the attempt besides the trainer's events and the monitor's samples."""
    mon = ended.monitor
    # Whether the node's lock was held throughout (None: no lock); a cancelled attempt's record does not ask.
    intact = None if started.lock_intact is None or ended.how in CANCELS else bool(started.lock_intact())
    log_tail = raw.log_tail(work.log)
    # Read before ended_by_cap removes the runner's own cgroup child, where the trainer had one.
    oom_killed = oomkill.killed_since(ended.cgroup) if ended.returncode == -signal.SIGKILL else None
    limit = options.memory_limit_mb
    capped = (bool(limit) and cap_suspected(protocol.read(work.events), limit, mon.over_memory)
              and memcap.ended_by_cap(mon.pid, log_tail))
    return raw.Facts(
        t_launch=started.t_launch, t_end=time.monotonic(), wall=started.wall, returncode=ended.returncode,
        ended=ended.how, over_memory=mon.over_memory, capped=capped, oom_killed=oom_killed,
        pauses=tuple(started.watch.pauses), unreaped=started.watch.unreaped, kill_wait_s=KILL_WAIT_S,
        lock_intact=intact, requeue_refused=slurm_job.requeue_refused() if ended.how == "preempted" else None,
        time_limit_s=options.time_limit_s, memory_limit_mb=limit, memory_cap=memcap.kind() if limit else None,
        hang_s=options.hang_s, contended_pct=options.contended_pct, monitor_cpu_s=mon.own_cpu_s,
        gpu_nvml_failures=mon.gpu_failures(), gpu_readings_stopped=mon.gpu_gave_up, monitor_died=mon.died,
        gpu_idle=started.gpu_idle, machine=_machine(point, started.gpu_idle), attempt=started.fields)


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


def dataset_provenance(dataset_dir: Path) -> dict:
    """Where the prepared dataset came from (its meta.json): `dataset_source`, and `dataset_test_copy`, what a test
    copy is (config `data_test_copy`), None for the published data."""
    try:
        meta = json.loads((Path(dataset_dir) / "meta.json").read_text())
    except (OSError, ValueError):
        return {"dataset_source": None, "dataset_test_copy": None}
    return {"dataset_source": meta.get("source"), "dataset_test_copy": meta.get("test_copy")}
