"""Load from outside a point: how much of the machine's CPU others used while it trained.

The monitor reads the whole machine's busy CPU time (/proc/stat's first line) with each sample; others'
use is that, less the point's own process tree and the runner's own process (its monitor thread
included, whose CPU is also recorded as monitor_cpu_s). In per cent of one core, like cpu_pct, so 100
is one core kept busy by someone else. A point is `contended` when others used more than
measurement.contended_pct of a core on average over its train phase.

Standard library only, and a sample costs one small read of /proc/stat.
"""

from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CONTENDED_PCT = 25.0  # measurement.contended_pct's default (workflow/schemas/config.schema.yaml)
QUIET_WINDOW_S = 1.0  # the window over which the opt-in quiet wait measures others' use


def busy_s(stat_text: str) -> float:
    """CPU seconds the whole machine has been busy, from /proc/stat's text: every column of its `cpu` line but
    idle and iowait (waiting, not working), and guest and guest_nice (already counted in user and nice).
    Steal (time a hypervisor gave another machine) counts as busy: it is load from outside too."""
    first = stat_text.split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        raise ValueError(f"not /proc/stat: its first line is {stat_text[:40]!r}")
    ticks = [int(v) for v in first[1:]] + [0] * 10
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def read_busy_s() -> float | None:
    """The machine's busy CPU seconds now (None where there is no /proc/stat)."""
    try:
        with open("/proc/stat") as fh:
            return busy_s(fh.read(4096))
    except (OSError, ValueError):
        return None


def self_cpu_s() -> float:
    """CPU seconds of this process itself (all its threads; not its children, which the tree counts)."""
    t = os.times()
    return t.user + t.system


def load_1m() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def reading() -> dict:
    """What one sample notes of the machine: its busy CPU, this (the runner's) process's, the load average."""
    return {"host_busy_s": read_busy_s(), "self_cpu_s": self_cpu_s(), "host_load_1m": load_1m()}


def others_pct(last: dict, now: dict, dt_s: float) -> float | None:
    """Per cent of one core that others used between two readings: the machine's busy time less the tree's
    (`tree_cpu_s`) and the runner's own (`self_cpu_s`). Never below 0 (the kernel's tick counts round)."""
    if last.get("host_busy_s") is None or now.get("host_busy_s") is None or dt_s <= 0:
        return None
    others = ((now["host_busy_s"] - last["host_busy_s"]) - (now["tree_cpu_s"] - last["tree_cpu_s"])
              - (now["self_cpu_s"] - last["self_cpu_s"]))
    return max(0.0, 100.0 * others / dt_s)


def summary(samples: list[dict], in_train: list[bool], contended_pct: float = CONTENDED_PCT) -> dict:
    """The record's outside-load fields from the monitor's samples (`in_train`: which were taken training).

    host_cpu_other_pct_mean: others' use over the train phase, each sample weighted by the time it covers;
    host_load_start: the 1-minute load average at the first sample of training; contended: the mean over
    contended_pct. Without train samples (a point that failed before) the whole run's samples stand in.
    """
    rows = [(s, samples[i - 1]["t"] if i else None) for i, s in enumerate(samples) if in_train[i]]
    if not rows:
        rows = [(s, samples[i - 1]["t"] if i else None) for i, s in enumerate(samples)]
    weighted = [(s["host_cpu_other_pct"], s["t"] - prev) for s, prev in rows
                if prev is not None and s.get("host_cpu_other_pct") is not None and s["t"] > prev]
    span = sum(dt for _, dt in weighted)
    mean = sum(pct * dt for pct, dt in weighted) / span if span > 0 else None
    return {"host_cpu_other_pct_mean": mean,
            "host_load_start": rows[0][0].get("host_load_1m") if rows else None,
            "contended": None if mean is None else mean > contended_pct,
            "contended_pct": contended_pct}


def wait_quiet(threshold_pct: float, max_s: float, window_s: float = QUIET_WINDOW_S) -> float:
    """Wait (at most max_s) until the machine's whole busy CPU over a window is under threshold_pct of a core.

    Opt-in (measurement.quiet_wait_s), called before the trainer starts, when nothing of the point runs yet:
    all the machine's use is others'. Returns the seconds waited; past max_s the point runs anyway (and its
    record says how contended it was).
    """
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_s:
        last, w0 = {**reading(), "tree_cpu_s": 0.0}, time.monotonic()
        time.sleep(min(window_s, max(0.05, max_s - (w0 - t0))))
        others = others_pct(last, {**reading(), "tree_cpu_s": 0.0}, time.monotonic() - w0)
        if others is None or others < threshold_pct:
            break
    return time.monotonic() - t0
