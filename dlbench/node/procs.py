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


def owner_tag() -> str:
    """`<host>-<pid>`: what names a folder this process works in, so that others can tell if it is gone."""
    return f"{socket.gethostname()}-{os.getpid()}"


def remove_dead_leftovers(parent: Path, prefix: str, keep=None) -> list[Path]:
    """Remove the folders `<prefix><host>-<pid>` in parent whose process, of this host, is gone.

    A folder of another host, or of a live process, is left alone: its owner may still be working
    (a killed Snakemake leaves its jobs running; a cache may be shared by the nodes of a cluster).
    keep(folder): called first for each dead one; True where it moved the folder somewhere to keep.
    """
    host, removed = socket.gethostname(), []
    for folder in parent.glob(f"{prefix}*"):
        name, _, pid = folder.name[len(prefix):].rpartition("-")
        if name == host and pid.isdigit() and not alive(int(pid)):
            if keep is not None and keep(folder):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
