"""A point's record, made from what happened: the trainer's events, the monitor's samples and the runner's facts.

Pure: `build_record` reads no clock, file, process or module state and asks no other module for a fact of the
point (its derived facts come with it: dlbench.study.point_facts), so a test feeds it events and samples made by
hand and checks every figure. What it is given is the raw measurement (dlbench.record.raw), read back by
dlbench.run.derive, which writes what it returns. The fields and their meaning are dlbench.record.fields's.
"""

from __future__ import annotations

import json

from dlbench.frameworks import base, protocol
from dlbench.node import hostload
from dlbench.record import statuses
from dlbench.record.fields import INFO
from dlbench.record.raw import Facts
from dlbench.run.monitor import GPU_SAMPLE_FIELDS
from dlbench.study.point_facts import PointFacts

CURVE_FIELDS = ("kind", "iteration", "epoch", "loss", "accuracy", "lr", "train_time_s", "test_time_s", "t")
# Record fields taken from the point itself (the rest of the point, the layer list, is summarised).
POINT_FIELDS = ("id", "framework", "dataset", "preset", "network", "optimizer", "momentum", "weight_decay",
                "learning_rate", "batch_size", "test_batch_size", "iterations", "epochs", "test_interval",
                "shuffle", "ema_decay", "device", "threads", "interop_threads", "library", "version", "repeat", "seed")
# Fields of the trainer's `result` event (dlbench.frameworks.base.result) that the record takes as they are.
RESULT_FIELDS = ("train_time_s", "test_time_s", "interval_test_time_s", "augment_time_s", "accuracy", "test_loss",
                 "final_loss", "epochs_trained", "images_trained", "throughput_img_s", "test_throughput_img_s",
                 "train_samples", "test_samples", *base.PROCEDURE_FIELDS)
TIMED_PHASES = protocol.PHASES[:4]  # import, data_load, build, compile: each one's length is `<phase>_time_s`


def build_record(point: dict, derived: PointFacts, events: list[dict], samples: list[dict], facts: Facts) -> dict:
    """The record of one attempt of `point` (its fields: dlbench.record.fields); `derived`: what the point implies
    (dlbench.study.point_facts.derive), computed once before the attempt."""
    status, reason = status_of(events, facts)
    if facts.unreaped:
        reason = (f"{reason}; the trainer (pid {facts.unreaped}) did not exit within {facts.kill_wait_s:g} s of "
                  "SIGKILL (stuck in the kernel) and was left behind")
    info = merged_info(events)
    result = protocol.first(events, protocol.RESULT)
    plan = protocol.first(events, protocol.PLAN)
    data = protocol.first(events, protocol.DATA)
    spans = phases(events)
    record = {k: point.get(k) for k in POINT_FIELDS}
    record.update(derived.fields())  # what the point implies: its reading, setting id, network size, ...
    record.update(status=status, reason=reason, returncode=facts.returncode)
    record.update({key: result.get(key) for key in RESULT_FIELDS})
    if record["validation_samples"] is None and data.get("validation_samples") is not None:
        record["validation_samples"] = data["validation_samples"]  # held out, though the point did not finish
    # `iterations_planned` is the length planned (from epochs where the point gives epochs); `iterations` the
    # length trained (fewer where early stopping ended it), the plan's where the point did not finish.
    record["iterations_planned"] = plan.get("total_iterations")
    record["iterations"] = result.get("iterations") or record["iterations_planned"]
    steps = [e for e in events if e["e"] == protocol.STEP]
    record["iterations_done"] = steps[-1]["iteration"] if steps else 0
    if status != "ok" and steps:
        record["final_loss"] = steps[-1]["loss"]
    diverged = protocol.first(events, protocol.DIVERGED)
    record["diverged_at_iteration"] = diverged.get("iteration")
    if record["throughput_img_s"] and record["flops_per_image_train"]:
        record["achieved_gflops"] = record["throughput_img_s"] * record["flops_per_image_train"] / 1e9
    for name, start, end in spans:
        if name in TIMED_PHASES:
            record[f"{name}_time_s"] = end - start
    first_t = events[0]["t"] if events else facts.t_end
    record["startup_time_s"] = max(0.0, first_t - facts.t_launch)  # interpreter start until the trainer's first word
    record["wall_time_s"] = facts.t_end - facts.t_launch
    record.update(resource_summary(samples, spans, facts.gpu_idle))
    record["monitor_cpu_s"] = facts.monitor_cpu_s
    record["gpu_nvml_failures"] = facts.gpu_nvml_failures  # the NVML calls that failed, where GPU fields lack some
    record["gpu_readings_stopped"] = facts.gpu_readings_stopped
    record["monitor_died"] = _monitor_died(facts)
    # Outside load (dlbench.node.hostload): others' CPU over the train phase, the load average when it began, and
    # whether others used more than contended_pct of a core. The monitor's and the runner's own are not others'.
    record.update(hostload.summary(samples, [phase_of(s["t"], spans) == "train" for s in samples],
                                   facts.contended_pct))
    record.update({f.name: _info_value(info, f.info) for f in _INFO_FIELDS})
    record["threads_requested"] = point["threads"]
    record["dataset_digest"] = data.get("digest")
    record["time_limit_s"] = facts.time_limit_s
    record["memory_limit_mb"] = facts.memory_limit_mb
    record["memory_cap"] = facts.memory_cap if facts.memory_limit_mb else None
    # Which guard ended an oom point: the monitor's reading over the budget, or the hard cap.
    record["oom_by"] = ("monitor" if facts.over_memory else "cap" if facts.capped
                        else "cgroup" if facts.oom_killed and status == "oom" else None)
    record["hang_limit_s"] = facts.hang_s
    record["paused_s"] = round(sum(facts.pauses), 3)
    record.update(facts.machine)
    if status != "ok":
        tb = next((e["text"] for e in events if e["e"] == protocol.TRACEBACK), "")
        record["log_tail"] = (tb + "\n" + facts.log_tail)[-3000:]
    record.update(facts.attempt)
    if facts.lock_intact is False and status not in ("cancelled", "preempted"):
        record["status"], record["reason"] = "lock_lost", (
            "the node's measurement lock file was removed while this point held it, so another point may have "
            "measured beside it; its times are not trusted")
    record["machine_failure"] = statuses.retried(record["status"])
    return record


def status_of(events: list[dict], facts: Facts) -> tuple[str, str | None]:
    """The point's status and its reason, from what happened: how the runner ended it, a stop of the job, the
    memory guards, else what the trainer said, else how it died (its exit code or signal)."""
    last = next((e for e in reversed(events) if e["e"] == protocol.STATUS), None)
    returncode = facts.returncode
    if facts.ended == "cancelled":
        return "cancelled", ("the job was cancelled (SIGTERM or SIGINT) before the point finished; "
                             "it runs again next time")
    if facts.ended == "preempted":
        if facts.requeue_refused:
            return "preempted", (f"SLURM preempted the job before the point finished and refused to requeue it "
                                 f"(scontrol: {facts.requeue_refused}); the point ends as failed so that the sweep "
                                 "goes on")
        return "preempted", "SLURM preempted the job before the point finished; the job requeued itself"
    if facts.pauses:
        return "suspended", (f"the job was stopped for {sum(facts.pauses):.0f} s while the point measured "
                             f"(SIGSTOP and SIGCONT, as a suspended SLURM job is): its times include the pause")
    if facts.ended == "timeout":
        return "timeout", "the point exceeded its time budget"
    if facts.ended == "hung":
        tail = "; ".join(_describe_event(e) for e in events[-3:]) or "none"
        return "hung", f"no event from the trainer for {facts.hang_s:g} s (limits.hang_s); its last events: {tail}"
    if facts.over_memory:
        return "oom", "the point exceeded its memory budget (the monitor read its resident memory over it)"
    if facts.capped:
        return "oom", ("the point exceeded its memory budget (an allocation failed under the hard cap before the "
                       "monitor's next reading)")
    if last is not None:
        return last["status"], last.get("reason")
    if returncode is not None and returncode < 0:
        if facts.oom_killed:  # the SIGKILL was the kernel's: the point outgrew its memory cgroup (a job's limit)
            return "oom", facts.oom_killed
        return "killed", f"the trainer was killed by {statuses.signal_name(-returncode)}"
    if returncode == protocol.EXIT["disk_full"]:
        return "disk_full", "the trainer could not write its events: no space left on the device"
    if returncode is not None and not any(e["e"] == protocol.PROCESS_START for e in events):
        return "env_damaged", (f"the trainer exited with code {returncode} before it could start (its interpreter "
                               "or the dlbench package cannot be loaded in the framework's environment)")
    return "error", f"the trainer exited with code {returncode} before reporting a status"


def _describe_event(e: dict) -> str:
    detail = e.get("name") or e.get("iteration") or e.get("status") or ""
    return f"{e['e']} {detail}".strip()


# ------------------------------------------------------------------------------------------ the trainer's word

_INFO_FIELDS = tuple(INFO.values())  # the record's fields the `info` event fills


def _info_value(info: dict, key: str):
    return json.dumps(info.get("build", {}), sort_keys=True) if key == "build" else info.get(key)


def merged_info(events: list[dict]) -> dict:
    """The trainer's `info` events as one: a later one adds to an earlier one (its `build` too)."""
    info: dict = {}
    for e in events:
        if e["e"] == protocol.INFO:
            build = {**info.get("build", {}), **e.get("build", {})}
            info.update(e)
            info["build"] = build
    return info


# ------------------------------------------------------------------------------------------ phases and tables

def phases(events: list[dict]) -> list[tuple[str, float, float]]:
    """(name, start, end) of every phase the trainer marked, on the monotonic clock."""
    open_at: dict[str, float] = {}
    out = []
    for e in events:
        if e["e"] == protocol.PHASE_START:
            open_at[e["name"]] = e["t"]
        elif e["e"] == protocol.PHASE_END and e["name"] in open_at:
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


def _monitor_died(facts: Facts) -> str | None:
    if facts.monitor_died is None:
        return None
    at, error = facts.monitor_died
    return f"{at - facts.t_launch:.1f} s after launch ({error}); no samples after it, the memory budget unwatched"


def curve_rows(events: list[dict], t0: float) -> list[dict]:
    """Train and test rows of the learning curve; `t` in seconds since launch, as in the samples."""
    rows = []
    for e in events:
        if e["e"] in (protocol.STEP, protocol.TEST):
            row = {"kind": "train" if e["e"] == protocol.STEP else "test", **{k: e.get(k) for k in CURVE_FIELDS[1:]}}
            row["t"] = round(e["t"] - t0, 4)
            rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------ the monitor's samples

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
