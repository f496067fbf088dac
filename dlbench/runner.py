"""Run one point: the trainer in its framework's environment, the monitor outside it, one record.

The run's files go to a hidden folder first; metrics.json, the file Snakemake and
the aggregation take as the sign of a finished point, is written last and
atomically, so an interrupted point never looks complete.

While it measures, a point holds the node's measurement lock (dlbench.locks.measuring): a CPU
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

from dlbench import (
    hostload,
    identity,
    initialisers,
    inputs,
    machine,
    memcap,
    models,
    outcomes,
    presets,
    procs,
    provenance,
    records,
    slurmjob,
)
from dlbench.frameworks import base, registry
from dlbench.locks import LockTimeout, LockUnusable, measuring
from dlbench.monitor import GPU_SAMPLE_FIELDS, SAMPLE_FIELDS, Monitor, idle_gpu, nvml_index
from dlbench.outcomes import MachineFailure
from dlbench.procs import die_with_parent, kill_tree, owner_tag, remove_dead_leftovers
from dlbench.trainer import EXIT as TRAINER_EXIT

REPO = Path(__file__).resolve().parent.parent
HANG_S = 1800.0  # a point silent this long is ended as hung (limits.hang_s)
LOCK_TIMEOUT_S = 1800.0  # longest wait for the node's measurement lock (measurement.lock_timeout_s)
WATCH_S = 2.0  # how often the runner looks at a running trainer
KILL_WAIT_S = 30.0  # longest wait for a killed trainer to be reaped (one stuck in the kernel never is)
PAUSE_S = 30.0  # a watch that wakes this late was stopped (SIGSTOP: a suspended job), not merely slow
CURVE_FIELDS = ("kind", "iteration", "epoch", "loss", "accuracy", "lr", "train_time_s", "test_time_s", "t")
# Record fields taken from the point itself (the rest of the point, the layer list, is summarised).
POINT_FIELDS = ("id", "framework", "dataset", "preset", "network", "optimizer", "momentum", "weight_decay",
                "learning_rate", "batch_size", "test_batch_size", "iterations", "epochs", "test_interval",
                "shuffle", "ema_decay", "device", "threads", "interop_threads", "library", "version", "repeat", "seed")


def read_events(path: Path) -> list[dict]:
    events = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill
                break
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
              gpu_per_device: bool = True, lock_timeout_s: float | None = LOCK_TIMEOUT_S, after_last: bool = False,
              **kw) -> dict | None:
    """Train one point (see _run_point), holding the node's measurement lock if one is given.

    The lock is node-local: jobs sharing a machine (cluster jobs, grouped points) do not disturb each
    other's measurement. gpu_per_device: GPU points measure side by side, one per GPU (else one at a time).
    A lock that stays taken, or cannot be used, is a failure of the machine (dlbench.outcomes): the
    attempt is kept and, unless it is the last one allowed, nothing is published.

    In a job SLURM requeued, a point this job already finished is published again, not measured twice. An
    attempt that died with its node leaves only a mark (records.mark_started); where every earlier run of
    the point did (Snakemake's attempts and SLURM's own requeues of the job alike, `tries`), the last
    allowed one publishes `node_lost` rather than try again, so that the study's tables are drawn from what
    finished. after_last: this attempt follows the last allowed one, only to publish `node_lost` where that
    one died with its node too; None (nothing published) where it ended otherwise.
    """
    out = Path(out_dir)
    if slurmjob.restart_count():
        done = records.finished_in_job(out, slurmjob.job_id(), outcomes.RETRIED)
        if done is not None:
            return records.republish(done, out, republished_after_requeue=slurmjob.restart_count())
    lost = records.lost_attempts(out, _job_alive)
    if after_last and not lost:
        return None
    attempt = kw.get("attempt", 1)
    runs = tries(attempt)
    try:
        mark = records.mark_started(out, attempt=attempt)
    except OSError as exc:
        if outcomes.disk_full(exc):
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
        if (out / records.RESULT).exists():  # a record stands: the marks of lost attempts are history now
            for facts in lost:
                (out / records.ATTEMPTS / f"{records.STARTED}{facts['host']}-{facts['pid']}.json").unlink(
                    missing_ok=True)


def tries(attempt: int) -> int:
    """How many times this point's job has run, this run included: Snakemake's attempts, and the runs of this
    SLURM job that SLURM itself requeued (a node failure, a preemption, `scontrol requeue`), which Snakemake
    never sees as failed."""
    return attempt + slurmjob.restart_count()


def _job_alive(facts: dict) -> bool | None:
    """Whether the job of an attempt's mark still lives: its pid on this host, else SLURM's word. An earlier
    run of this very SLURM job (requeued since) is dead: SLURM runs one at a time."""
    if facts.get("host") == socket.gethostname():
        return procs.alive(int(facts["pid"]))
    if facts.get("slurm_job_id") and str(facts["slurm_job_id"]) == slurmjob.job_id():
        return False
    return slurmjob.running(str(facts["slurm_job_id"])) if facts.get("slurm_job_id") else None


def _measure(point: dict, dataset_dir: str | Path, out_dir: str | Path, *, measure_lock: str | None,
             gpu_per_device: bool, lock_timeout_s: float | None, **kw) -> dict:
    """run_point's measurement: the node's lock, then the trainer (see run_point)."""
    gpu = point["device"] == "gpu"
    if gpu and not gpu_visible():  # nothing to wait for: the point is recorded as unavailable at once
        return _run_point(point, dataset_dir, out_dir, **kw)
    devices = machine.gpu_devices() if gpu else None
    if not measure_lock:
        return _run_point(point, dataset_dir, out_dir, device=devices[0] if devices else None, **kw)
    try:
        with measuring(measure_lock, devices, per_device=gpu_per_device, timeout_s=lock_timeout_s) as slot:
            return _run_point(point, dataset_dir, out_dir, device=slot.device, lock_mode=slot.mode,
                              lock_wait_s=slot.wait_s, lock_intact=slot.intact, **kw)
    except LockTimeout as exc:
        reason = (f"waited {lock_timeout_s:g} s for the node's measurement lock (measurement.lock_timeout_s) "
                  f"and another point held it the whole time ({exc})")
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
    before the trainer starts (0: do not wait; dlbench.hostload).
    lock_intact: whether the node's lock was held throughout (checked before the record is written); attempt:
    Snakemake's count of this job's attempts; final_attempt: whether a failure of the machine is published as
    the record (else only kept as an attempt, and the job is to fail so that it runs again).
    Every finished attempt (any status) is also kept under out_dir/attempts/ (dlbench.records).
    A full disk while the record is written raises MachineFailure("disk_full"), leaving what was there.
    """
    # Absolute: the trainer runs in the repository, the workflow's working directory may be elsewhere.
    out_dir, dataset_dir = Path(out_dir).resolve(), Path(dataset_dir).resolve()
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        # Unfinished folders are named by host and pid: only those of dead runners of this host are removed,
        # and one whose trainer had finished is kept aside under attempts/ first (records.set_aside).
        remove_dead_leftovers(out_dir.parent, f".{out_dir.name}.partial-",
                              keep=lambda folder: records.set_aside(out_dir, folder))
        work = out_dir.parent / f".{out_dir.name}.partial-{owner_tag()}"
        work.mkdir(parents=True)
        (work / "point.json").write_text(json.dumps(point, indent=2, sort_keys=True))
    except OSError as exc:
        if outcomes.disk_full(exc):
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
    returncode, ended, watch, idle = None, None, Watch(t_launch), {}
    if refused is None and gpu_index is not None and not gpu_visible():
        # No GPU on this machine at all: say so without starting a framework to find out.
        refused = ("unavailable", "no NVIDIA GPU is visible on this machine (no /dev/nvidia*, NVML finds none)")
    if refused is None and gpu_index is not None:  # NVML's figures are the whole GPU's: its idle ones first
        idle = idle_gpu(gpu_index)
    if refused is None:
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([python or sys.executable, "-m", "dlbench.trainer", str(work / "point.json"),
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
        except BaseException:  # the job itself is cancelled: take the trainer with it, keep the attempt
            ended = "preempted" if slurmjob.requeue_if_preempted() else "cancelled"  # first: KillWait is short
            _kill_and_reap(proc, watch)
            mon.stop()
            record = build_record(point, read_events(events_path), mon, proc.returncode, ended=ended,
                                  time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
                                  t_launch=t_launch, t_end=time.monotonic(), log_tail=_tail(log_path),
                                  hang_s=hang_s, contended_pct=contended_pct, gpu_idle=idle)
            records.keep_attempt(out_dir, record, work, records.attempt_name(started_wall))
            shutil.rmtree(work, ignore_errors=True)
            raise
        returncode = proc.returncode
        mon.stop()
    t_end = time.monotonic()

    events = read_events(events_path)
    record = build_record(point, events, mon, returncode, ended=ended, time_limit_s=time_limit_s,
                          memory_limit_mb=memory_limit_mb, t_launch=t_launch, t_end=t_end,
                          log_tail=_tail(log_path), hang_s=hang_s, contended_pct=contended_pct, watch=watch,
                          gpu_idle=idle)
    if lock_intact is not None and not lock_intact() and record["status"] not in ("cancelled", "preempted"):
        record["status"], record["reason"] = "lock_lost", (
            "the node's measurement lock file was removed while this point held it, so another point may have "
            "measured beside it; its times are not trusted")
    record["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started_wall))
    record["monitor_interval_s"] = interval_s if monitor_enabled else None
    record["lock_mode"] = lock_mode
    record["lock_wait_s"] = lock_wait_s
    record["quiet_wait_s"] = quiet_waited
    record["gpu_device"] = device if point["device"] == "gpu" else None
    record["gpu_readings_stopped"] = mon.gpu_gave_up
    env = env or {}
    record["env_name"] = env.get("env", point["framework"])
    record["env_kind"] = env.get("kind", "current")
    record["env_key"] = env.get("key")
    record["env_python"] = python or sys.executable
    record["dataset_dir"] = str(dataset_dir)
    record.update(dataset_provenance(dataset_dir))
    # How many times SLURM requeued this job (a preemption, `scontrol requeue`, a node failure): 0 where none.
    record.update(attempt=attempt, machine_failure=outcomes.retried(record["status"]), lost_attempts=lost_attempts,
                  slurm_restart_count=slurmjob.restart_count())
    publish = final_attempt or not record["machine_failure"]
    try:
        records.publish(out_dir, work, record, [("curve.csv", CURVE_FIELDS, curve_rows(events, t_launch)),
                                                ("samples.csv", ("phase",) + SAMPLE_FIELDS,
                                                 sample_rows(mon.samples, events, t_launch))],
                        records.attempt_name(started_wall), result=publish)
    except OSError as exc:
        if not outcomes.disk_full(exc):
            raise
        shutil.rmtree(work, ignore_errors=True)
        raise MachineFailure("disk_full", f"no space left while writing the record into {out_dir}: {exc}") from exc
    shutil.rmtree(work, ignore_errors=True)
    return record


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
    """Count SIGCONTs (a suspended job resumed) for the watch; only the main thread may set a handler."""
    signal.signal(signal.SIGCONT, lambda *_: _CONTINUED.append(time.monotonic()))


_CONTINUED: list[float] = []  # monotonic times of the SIGCONTs this process received


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

        Woken every few seconds only (a busy waiter would cost a measured point a share of a core).
        """
        last_size, last_change = -1, self.t_launch
        last_wake = time.monotonic()
        while True:
            wake = WATCH_S if time_limit_s is None else max(0.05, min(WATCH_S, self.t_launch + time_limit_s
                                                                       - time.monotonic()))
            try:
                proc.wait(timeout=wake)
                return None
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            late = now - last_wake - wake
            if len(_CONTINUED) > self._continued or late > PAUSE_S:
                self._continued = len(_CONTINUED)
                self.pauses.append(round(max(late, 0.0), 3))
                last_change = now  # the trainer was stopped too: its silence was the pause
            last_wake = now
            size = _size(events_path)
            if size != last_size:
                last_size, last_change = size, now
            if time_limit_s is not None and now - self.t_launch >= time_limit_s:
                return "timeout"
            if hang_s and now - last_change >= hang_s:
                return "hung"


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


def phases(events: list[dict]) -> list[tuple[str, float, float]]:
    """(name, start, end) of every phase the trainer marked, on the monotonic clock."""
    open_at: dict[str, float] = {}
    out = []
    for e in events:
        if e["e"] == "phase_start":
            open_at[e["name"]] = e["t"]
        elif e["e"] == "phase_end" and e["name"] in open_at:
            out.append((e["name"], open_at.pop(e["name"]), e["t"]))
    last_t = events[-1]["t"] if events else 0.0
    out += [(name, start, last_t) for name, start in open_at.items()]  # cut short by a failure
    return sorted(out, key=lambda p: p[1])


def phase_of(t: float, spans: list[tuple[str, float, float]]) -> str:
    for name, start, end in spans:
        if start <= t <= end:
            return name
    return "startup" if not spans or t < spans[0][1] else "other"


def sample_rows(samples: list[dict], events: list[dict], t0: float) -> list[dict]:
    spans = phases(events)
    return [{**s, "phase": phase_of(s["t"], spans), "t": round(s["t"] - t0, 4)} for s in samples]


def curve_rows(events: list[dict], t0: float) -> list[dict]:
    """Train and test rows of the learning curve; `t` in seconds since launch, as in the samples."""
    rows = []
    for e in events:
        if e["e"] in ("step", "test"):
            row = {"kind": "train" if e["e"] == "step" else "test", **{k: e.get(k) for k in CURVE_FIELDS[1:]}}
            row["t"] = round(e["t"] - t0, 4)
            rows.append(row)
    return rows


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def resource_summary(samples: list[dict], spans: list[tuple[str, float, float]], gpu_idle: dict | None = None) -> dict:
    train = [s for s in samples if phase_of(s["t"], spans) == "train"] or samples
    out = {
        "cpu_util_mean_pct": _mean([s["cpu_pct"] for s in train[1:]] or [s["cpu_pct"] for s in train]),
        "cpu_util_peak_pct": max((s["cpu_pct"] for s in samples), default=None),
        "rss_peak_mb": max((s["rss_mb"] for s in samples), default=None),
        "rss_mean_mb": _mean([s["rss_mb"] for s in train]),
        "threads_peak": max((s["threads"] for s in samples), default=None),
        "samples": len(samples),
    }
    if gpu_idle or any(key in s for s in samples for key in GPU_SAMPLE_FIELDS):
        out.update(gpu_summary(samples, train, spans, gpu_idle or {}))
    return out


def gpu_summary(samples: list[dict], train: list[dict], spans: list[tuple[str, float, float]], idle: dict) -> dict:
    """The GPU fields of a record. NVML reads the whole device, so memory and power come with the device's
    idle figures read before the trainer started (`*_idle_*`) and what the point added to them (`*_above_idle_*`).

    gpu_energy_train_j: the device's energy over the `train` phase (its interval tests included), from NVML's
    energy counter interpolated at the phase's start and end; where the device has no counter, mean power
    times the phase's length (gpu_energy_source says which).
    """
    def values(key: str, rows: list[dict]) -> list[float]:
        return [s[key] for s in rows if s.get(key) is not None]

    peak = max(values("gpu_mem_mb", samples), default=None)
    power = _mean(values("gpu_power_w", train))
    mem_idle, power_idle = idle.get("gpu_mem_idle_mb"), idle.get("gpu_power_idle_w")
    span = next(((start, end) for name, start, end in spans if name == "train"), None)
    energy, source = None, None
    if span is not None:
        counter = [(s["t"], s["gpu_energy_j"]) for s in samples if s.get("gpu_energy_j") is not None]
        start, end = _interpolate(counter, span[0]), _interpolate(counter, span[1])
        if start is not None and end is not None:
            energy, source = end - start, "counter"
        elif power is not None:
            energy, source = power * (span[1] - span[0]), "power x time"
    return {
        "gpu_util_mean_pct": _mean(values("gpu_util_pct", train)),
        "gpu_mem_peak_mb": peak,
        "gpu_mem_idle_mb": mem_idle,
        "gpu_mem_peak_above_idle_mb": peak - mem_idle if peak is not None and mem_idle is not None else None,
        "gpu_power_mean_w": power,
        "gpu_power_idle_w": power_idle,
        "gpu_energy_train_j": energy,
        "gpu_energy_train_above_idle_j": (energy - power_idle * (span[1] - span[0])
                                          if energy is not None and power_idle is not None else None),
        "gpu_energy_source": source,
    }


def _interpolate(points: list[tuple[float, float]], t: float) -> float | None:
    """The value at time t, linear between the readings either side of it; None where t is not between two."""
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return None


def status_of(events: list[dict], returncode: int | None, *, ended: str | None, over_memory: bool,
              hang_s: float | None = None, capped: bool = False, watch: Watch | None = None) -> tuple[str, str | None]:
    """The point's status and its reason, from what happened: how the runner ended it, a stop of the job, the
    memory guards, else what the trainer said, else how it died (its exit code or signal)."""
    last = next((e for e in reversed(events) if e["e"] == "status"), None)
    if ended == "cancelled":
        return "cancelled", ("the job was cancelled (SIGTERM or SIGINT) before the point finished; "
                             "it runs again next time")
    if ended == "preempted":
        return "preempted", "SLURM preempted the job before the point finished; the job requeued itself"
    if watch is not None and watch.pauses:
        return "suspended", (f"the job was stopped for {sum(watch.pauses):.0f} s while the point measured "
                             f"(SIGSTOP and SIGCONT, as a suspended SLURM job is): its times include the pause")
    if ended == "timeout":
        return "timeout", "the point exceeded its time budget"
    if ended == "hung":
        tail = "; ".join(_describe_event(e) for e in events[-3:]) or "none"
        return "hung", f"no event from the trainer for {hang_s:g} s (limits.hang_s); its last events: {tail}"
    if over_memory:
        return "oom", "the point exceeded its memory budget (the monitor read its resident memory over it)"
    if capped:
        return "oom", ("the point exceeded its memory budget (an allocation failed under the hard cap before the "
                       "monitor's next reading)")
    if last is not None:
        return last["status"], last.get("reason")
    if returncode is not None and returncode < 0:
        return "killed", f"the trainer was killed by {outcomes.signal_name(-returncode)}"
    if returncode == TRAINER_EXIT["disk_full"]:
        return "disk_full", "the trainer could not write its events: no space left on the device"
    if returncode is not None and not any(e["e"] == "process_start" for e in events):
        return "env_damaged", (f"the trainer exited with code {returncode} before it could start (its interpreter "
                               "or the dlbench package cannot be loaded in the framework's environment)")
    return "error", f"the trainer exited with code {returncode} before reporting a status"


def _describe_event(e: dict) -> str:
    detail = e.get("name") or e.get("iteration") or e.get("status") or ""
    return f"{e['e']} {detail}".strip()


def build_record(point: dict, events: list[dict], mon: Monitor, returncode: int | None, *, ended: str | None,
                 time_limit_s, memory_limit_mb, t_launch: float, t_end: float, log_tail: str,
                 hang_s: float | None = None, contended_pct: float = hostload.CONTENDED_PCT,
                 watch: Watch | None = None, gpu_idle: dict | None = None) -> dict:
    reported = next((e["status"] for e in reversed(events) if e["e"] == "status"), None)
    # Only a point that did not finish well can have been ended by the cap: a harmless allocator warning in
    # an ok point's log ("out of memory" in TensorFlow's) says nothing.
    capped = (bool(memory_limit_mb) and not mon.over_memory and reported not in ("ok", "diverged")
              and memcap.ended_by_cap(mon.pid, returncode, log_tail))
    status, reason = status_of(events, returncode, ended=ended, over_memory=mon.over_memory, hang_s=hang_s,
                               capped=capped, watch=watch)
    if watch is not None and watch.unreaped:
        reason = (f"{reason}; the trainer (pid {watch.unreaped}) did not exit within {KILL_WAIT_S:g} s of SIGKILL "
                  "(stuck in the kernel) and was left behind")
    info = merged_info(events)
    result = next((e for e in events if e["e"] == "result"), {})
    plan = next((e for e in events if e["e"] == "plan"), {})
    spans = phases(events)
    shape = tuple(point.get("input_shape") or _input_shape(point))
    record = {k: point.get(k) for k in POINT_FIELDS}
    record["cross_apply"] = presets.reading(point)  # None: the framework's own defaults
    record["setting_id"] = identity.setting_id(point)  # shared by the point's repeats, on any machine (compare)
    record["lr_policy"] = point.get("lr_policy", {}).get("name")
    record["lr_policy_json"] = json.dumps(point.get("lr_policy", {}), sort_keys=True)
    record["input_json"] = json.dumps(point.get("input", {}), sort_keys=True)
    record["init"] = initialisers.describe(point.get("init"))  # the scheme the initial weights were drawn from
    record["validation_json"] = json.dumps(point.get("validation"), sort_keys=True) if point.get("validation") else None
    record.update(status=status, reason=reason, returncode=returncode)
    record["params"] = models.param_count(point["layers"], shape)
    record["flops_per_image_train"] = models.flops_per_image(point["layers"], shape)["train"]
    for key in ("train_time_s", "test_time_s", "interval_test_time_s", "augment_time_s", "accuracy", "test_loss",
                "final_loss", "epochs_trained", "images_trained", "throughput_img_s", "test_throughput_img_s",
                "train_samples", "test_samples", *base.PROCEDURE_FIELDS):
        record[key] = result.get(key)
    data = next((e for e in events if e["e"] == "data"), {})
    if record["validation_samples"] is None and data.get("validation_samples") is not None:
        record["validation_samples"] = data["validation_samples"]  # held out, though the point did not finish
    # `iterations_planned` is the length planned (from epochs where the point gives epochs); `iterations` the
    # length trained (fewer where early stopping ended it), the plan's where the point did not finish.
    record["iterations_planned"] = plan.get("total_iterations")
    record["iterations"] = result.get("iterations") or record["iterations_planned"]
    steps = [e for e in events if e["e"] == "step"]
    record["iterations_done"] = steps[-1]["iteration"] if steps else 0
    if status != "ok" and steps:
        record["final_loss"] = steps[-1]["loss"]
    diverged = next((e for e in events if e["e"] == "diverged"), None)
    record["diverged_at_iteration"] = diverged["iteration"] if diverged else None
    if record["throughput_img_s"] and record["flops_per_image_train"]:
        record["achieved_gflops"] = record["throughput_img_s"] * record["flops_per_image_train"] / 1e9
    for name, start, end in spans:
        if name in ("import", "data_load", "build", "compile"):
            record[f"{name}_time_s"] = end - start
    first_t = events[0]["t"] if events else t_end
    record["startup_time_s"] = max(0.0, first_t - t_launch)  # interpreter start until the trainer's first word
    record["wall_time_s"] = t_end - t_launch
    record.update(resource_summary(mon.samples, spans, gpu_idle))
    record["monitor_cpu_s"] = mon.own_cpu_s
    record["gpu_nvml_failures"] = mon.gpu_failures()  # the NVML calls that failed, where the GPU fields lack some
    # ---- Outside load (dlbench.hostload): others' CPU over the train phase, the load average when it began,
    # and whether others used more than contended_pct of a core. The monitor's and the runner's own are not others'.
    record.update(hostload.summary(mon.samples, [phase_of(s["t"], spans) == "train" for s in mon.samples],
                                   contended_pct))
    # ---- end of outside load
    record["framework_version"] = info.get("framework_version")
    record["framework_numpy_version"] = info.get("numpy_version")
    record["framework_python_version"] = info.get("python_version")
    record["cuda_version"] = info.get("cuda_version")  # as the framework reports its build; None: no CUDA
    record["cudnn_version"] = info.get("cudnn_version")
    record["blas"] = info.get("blas")
    record["build_json"] = json.dumps(info.get("build", {}), sort_keys=True)
    record["threads_requested"] = point["threads"]
    record["threads_in_effect"] = info.get("threads_in_effect")
    # Inter-op threads where the framework has such a pool (TensorFlow, PyTorch); None elsewhere.
    record["interop_threads_in_effect"] = info.get("interop_threads_in_effect")
    record["library_in_effect"] = info.get("library_in_effect")
    # The compile and precision axes: the point's value (its framework's natural one where it gives none; None
    # where the framework has no such switch), and what the framework says it ran.
    framework = registry.get(point["framework"])
    record["compile"] = framework.in_effect("compile", point)
    record["precision"] = framework.in_effect("precision", point)
    record["compile_in_effect"] = info.get("compile_in_effect")
    record["precision_in_effect"] = info.get("precision_in_effect")
    record["device_name"] = info.get("device_name")
    record["dataset_digest"] = next((e.get("digest") for e in events if e["e"] == "data"), None)
    record["time_limit_s"] = time_limit_s
    record["memory_limit_mb"] = memory_limit_mb
    record["memory_cap"] = memcap.kind() if memory_limit_mb else None
    # Which guard ended an oom point: the monitor's reading over the budget, or the hard cap.
    record["oom_by"] = "monitor" if mon.over_memory else "cap" if capped else None
    record["hang_limit_s"] = hang_s
    record["paused_s"] = round(sum(watch.pauses), 3) if watch is not None else 0.0
    record.update(machine.host())
    record.update(provenance.dlbench_build())
    if status != "ok":
        tb = next((e["text"] for e in events if e["e"] == "traceback"), "")
        record["log_tail"] = (tb + "\n" + log_tail)[-3000:]
    return record


def dataset_provenance(dataset_dir: Path) -> dict:
    """Where the prepared dataset came from (its meta.json): `dataset_source`, and `dataset_test_copy`, what a test
    copy is (config `data_test_copy`), None for the published data."""
    try:
        meta = json.loads((Path(dataset_dir) / "meta.json").read_text())
    except (OSError, ValueError):
        return {"dataset_source": None, "dataset_test_copy": None}
    return {"dataset_source": meta.get("source"), "dataset_test_copy": meta.get("test_copy")}


def merged_info(events: list[dict]) -> dict:
    """The trainer's `info` events as one: a later one adds to an earlier one (its `build` too)."""
    info: dict = {}
    for e in events:
        if e["e"] == "info":
            build = {**info.get("build", {}), **e.get("build", {})}
            info.update(e)
            info["build"] = build
    return info


def _input_shape(point: dict) -> tuple[int, int, int]:
    return inputs.model_input_shape(point)
