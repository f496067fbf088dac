"""Child processes that never outlive their job: started to die with their parent, ended as a group.

Standard library only: the Caffe adapter uses it inside its framework environment.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child, before exec: be killed if the parent dies (a node failure must not leave orphans)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group that `pid` leads (the trainer is started in a session of its own, so its
    group id is its pid): every member, also once the leader itself has exited."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def alive(pid: int) -> bool:
    """Whether a process of this host with that pid runs (another user's counts; a zombie, dead and not yet
    reaped by whoever inherited it, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


# A process's start time in /proc/<pid>/stat is in clock ticks since boot; the boot time in /proc/stat is whole
# seconds. A process that started this long after a file was last written cannot have written it.
START_SLACK_S = 2.0


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])  # field 22: starttime (fields after the name)
    except (OSError, IndexError, ValueError):
        return None


def identity(pid: int) -> list | None:
    """[boot id, start time in clock ticks] of a process of this host: with its pid, what names it for good (a pid
    taken again by another process has another start, a reboot another boot id); None where /proc cannot say."""
    boot, ticks = _boot_id(), _start_ticks(pid)
    return None if boot is None or ticks is None else [boot, ticks]


def started_at(pid: int) -> float | None:
    """The wall-clock time (seconds since the epoch) at which a process of this host started; None where unknown."""
    ticks = _start_ticks(pid)
    try:
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return None if ticks is None else btime + ticks / os.sysconf("SC_CLK_TCK")


def alive_as(pid: int, recorded: list | None = None, written_at: float | None = None) -> bool:
    """Whether the process that a mark or a folder names (by pid, written at `written_at`, with its `identity`
    where it was recorded) still runs, and is not another process that took its pid since.

    With `recorded`: the pid's identity now must be it. Without (a mark of an older dlbench, or one written where
    /proc could not be read): a process that started after `written_at` is another. Where neither can be read,
    a live pid counts as the one named (a measurement run twice costs more than a lock kept)."""
    if not alive(pid):
        return False
    if recorded:
        now = identity(pid)
        return now is None or list(now) == list(recorded)
    if written_at is not None:
        start = started_at(pid)
        return start is None or start <= written_at + START_SLACK_S
    return True


def owner_tag() -> str:
    """`<host>-<pid>`: what names a folder this process works in, so that others can tell if it is gone."""
    return f"{socket.gethostname()}-{os.getpid()}"


def remove_dead_leftovers(parent: Path, prefix: str, keep=None) -> list[Path]:
    """Remove the folders `<prefix><host>-<pid>` in parent whose process, of this host, is gone.

    A folder of another host, or of a live process, is left alone: its owner may still be working
    (a killed Snakemake leaves its jobs running; a cache may be shared by the nodes of a cluster). A process that
    took the owner's pid after the folder was last written is not its owner (alive_as).
    keep(folder): called first for each dead one; True where it moved the folder somewhere to keep.
    """
    host, removed = socket.gethostname(), []
    for folder in parent.glob(f"{prefix}*"):
        name, _, pid = folder.name[len(prefix):].rpartition("-")
        if name == host and pid.isdigit() and not alive_as(int(pid), written_at=mtime(folder)):
            if keep is not None and keep(folder):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def mtime(path: Path) -> float | None:
    """A file's last write (seconds since the epoch), or None where it is gone."""
    try:
        return path.stat().st_mtime
    except OSError:
        return None
