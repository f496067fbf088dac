"""Whether the kernel's OOM killer ended a trainer in its memory cgroup: a cluster job's memory limit.

SLURM (task/cgroup) puts a job in a memory cgroup limited to what it asked for; past it, the kernel kills a
process of the group with SIGKILL, which alone reads as a trainer `killed` by somebody. The cgroup counts its OOM
kills (`oom_kill N`: cgroup v1's memory.oom_control, v2's memory.events, its descendants' included). The runner
reads the trainer's count when it starts it (`baseline`) and again after a SIGKILL (`killed_since`): a count
that grew meanwhile makes the point `oom`, its reason naming the group's limit.

Standard library only: the runner imports it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Per memory hierarchy (cgroup v1's memory controller, v2's unified one): the file that holds a group's count of OOM
# kills, and the one that holds its limit.
COUNTS = {"memory": "memory.oom_control", "unified": "memory.events"}
LIMITS = {"memory": "memory.limit_in_bytes", "unified": "memory.max"}
NO_LIMIT = 2**62  # cgroup v1 writes "no limit" as the largest page-aligned long: anything above this is none


@dataclass(frozen=True)
class Baseline:
    """A trainer's memory cgroup, and its count of OOM kills when the trainer started."""

    folder: Path
    kills: int


def _mounts(mountinfo: str = "/proc/self/mountinfo") -> dict[str, tuple[str, Path]]:
    """The memory cgroup hierarchies mounted here: "memory" (v1) and "unified" (v2), each as (the hierarchy's
    path at the mount's root, the mount point)."""
    found: dict[str, tuple[str, Path]] = {}
    with open(mountinfo) as fh:
        for line in fh:
            fields, _, tail = line.partition(" - ")
            root, point = fields.split()[3:5]
            fstype, _, options = (tail.split() + ["", "", ""])[:3]
            if fstype == "cgroup" and "memory" in options.split(","):
                found.setdefault("memory", (root, Path(point)))
            elif fstype == "cgroup2":
                found.setdefault("unified", (root, Path(point)))
    return found


def memory_cgroup(pid: int) -> Path | None:
    """The folder of the memory cgroup `pid` is in (/proc/<pid>/cgroup): v1's memory controller where there is
    one, else v2's group where it counts OOM kills; None where neither can be read."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        mounts = _mounts()
    except OSError:
        return None
    groups = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            groups["memory"] = path
        elif not controllers:
            groups["unified"] = path
    for kind in ("memory", "unified"):
        if kind in groups and kind in mounts:
            root, point = mounts[kind]
            inside = os.path.relpath(groups[kind], root)
            folder = point if inside == "." else point / inside
            if not inside.startswith("..") and (folder / COUNTS[kind]).is_file():
                return folder
    return None


def oom_kills(folder: Path) -> int | None:
    """The group's count of OOM kills (`oom_kill N`); None where it cannot be read (an older kernel has none)."""
    for name in COUNTS.values():
        try:
            lines = (folder / name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None


def limit(folder: Path) -> tuple[Path, int] | None:
    """The tightest memory limit on the group (its own or an ancestor's, as SLURM limits the job above its
    steps' groups): (the group that sets it, bytes); None where none is set."""
    tightest = None
    for group in (folder, *folder.parents):  # up to the hierarchy's root (its mount point: no limit file there)
        texts = [(group / name).read_text().strip() for name in LIMITS.values() if (group / name).is_file()]
        if not texts:
            break
        if texts[0].isdigit() and int(texts[0]) < NO_LIMIT and (tightest is None or int(texts[0]) < tightest[1]):
            tightest = (group, int(texts[0]))
    return tightest


def baseline(pid: int) -> Baseline | None:
    """The trainer's cgroup and its OOM kills so far, read as it starts; None where they cannot be read (never an
    error: a point is not failed for a file of the kernel's)."""
    try:
        folder = memory_cgroup(pid)
        kills = oom_kills(folder) if folder is not None else None
    except (OSError, ValueError):
        return None
    return None if kills is None else Baseline(folder, kills)


def killed_since(start: Baseline | None) -> str | None:
    """The reason of an `oom` point where the trainer's cgroup counted an OOM kill since `start`, else None."""
    if start is None:
        return None
    try:
        kills = oom_kills(start.folder)
        if kills is None or kills <= start.kills:
            return None
        limited = limit(start.folder)
    except (OSError, ValueError):
        return None
    counted = f"its cgroup {start.folder} counted {kills - start.kills} OOM kill(s) during the point"
    if limited is None:  # the machine itself ran out (the global OOM killer counts in the victim's group too)
        return f"the kernel's OOM killer ended the trainer (SIGKILL) with no cgroup limit set: {counted}"
    return (f"the point exceeded its memory cgroup's limit of {limited[1] / 2**20:.0f} MB (set on {limited[0]}): "
            f"the kernel's OOM killer ended the trainer (SIGKILL), {counted} (a cluster job's request: cluster.mem_mb, "
            "or what covers limits.memory_mb where that is set)")
