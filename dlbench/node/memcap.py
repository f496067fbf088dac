"""A hard memory cap for the trainer, where the kernel allows one.

The monitor polls the trainer's resident memory and ends a point that passes its budget as
`oom`; that reading stays the record. Between two readings a fast allocation can overshoot
by far, and on a workstation nothing else stops it. So the trainer also starts under a cap:
- a cgroup v2 child group with memory.max = the budget, where this process's group is in
  the unified hierarchy and lets it make children (a delegated scope);
- else RLIMIT_DATA, which bounds the process's data segment and private mappings (its
  private mappings, not its resident memory: so it is set to the budget plus HEADROOM_MB; a
  LeNet trainer's data segment peaked at 305 MB for TensorFlow, 277 MB for PyTorch, 242 MB
  for Theano and 60 MB for Caffe, each at or below its resident peak).
An allocation past the cap fails in the trainer (MemoryError, std::bad_alloc) or the kernel
ends it (cgroup); the record then says `oom` with the cap named in `memory_cap`.
"""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path

HEADROOM_MB = 1024  # mappings a framework makes beyond its resident data (thread stacks, arenas)
# A job's processes beside its trainer: its own Snakemake (142 MB resident once imported, the study's parse on
# top) and the runner with its monitor (36 MB once imported), measured here 2026-12.
JOB_OVERHEAD_MB = 512
CGROUP_ROOT = Path("/sys/fs/cgroup")
# What a trainer's log says when an allocation failed under the cap.
FAILED_ALLOCATION = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory", "ran out of memory",
                     "OOM when allocating")


def _own_cgroup() -> Path | None:
    """This process's cgroup v2 folder, if it is one we may make children in (memory controller delegated)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = [ln.split("::", 1)[1] for ln in lines if ln.startswith("0::")]
    if not unified or len(lines) != 1:  # a v1 or hybrid hierarchy: no v2 memory controller for us
        return None
    folder = CGROUP_ROOT / unified[0].lstrip("/")
    try:
        controllers = (folder / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    return folder if "memory" in controllers and os.access(folder, os.W_OK) else None


def hard_cap_mb(budget_mb: float) -> float:
    """The most a trainer under a budget may map before a cap stops it: RLIMIT_DATA's (a cgroup's is the budget)."""
    return budget_mb + HEADROOM_MB


def job_mb(budget_mb: float) -> int:
    """What a cluster job of a point under this budget asks for: its trainer's hard cap and the job's own
    processes, so that the cluster's cgroup never ends a point that the runner's own guards let run."""
    return math.ceil(hard_cap_mb(budget_mb) + JOB_OVERHEAD_MB)


def kind() -> str:
    """Which cap a trainer started now gets: "cgroup" or "rlimit_data"."""
    return "cgroup" if _own_cgroup() is not None else "rlimit_data"


def apply_in_child(limit_mb: float) -> None:
    """In the trainer, before it execs: put it under the cap (never fails the start: at worst no cap)."""
    limit = int(limit_mb * 2**20)
    group = _own_cgroup()
    if group is not None:
        try:
            child = group / f"dlbench-{os.getpid()}"
            child.mkdir(exist_ok=True)
            (child / "memory.max").write_text(str(limit))
            (child / "memory.swap.max").write_text("0")
            (child / "cgroup.procs").write_text(str(os.getpid()))
            return
        except OSError:
            pass
    cap = int(hard_cap_mb(limit_mb) * 2**20)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    except (ValueError, OSError):
        pass


def ended_by_cap(pid: int, log_tail: str) -> bool:
    """After the trainer ended: whether the cap ended it (the cgroup's OOM kills, or an allocation that failed).

    Removes the trainer's cgroup child, if it had one.
    """
    group = _own_cgroup()
    child = group / f"dlbench-{pid}" if group is not None else None
    if child is not None and child.is_dir():
        try:
            events = dict(line.split() for line in (child / "memory.events").read_text().splitlines())
            killed = int(events.get("oom_kill", 0)) > 0
        except (OSError, ValueError):
            killed = False
        try:
            child.rmdir()
        except OSError:
            pass
        if killed:
            return True
    return any(s in log_tail for s in FAILED_ALLOCATION)
