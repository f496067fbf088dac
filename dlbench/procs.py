"""Child processes that never outlive their job: started to die with their parent, ended as a group.

Standard library only: the Caffe adapter uses it inside its framework environment.
"""

from __future__ import annotations

import ctypes
import os
import signal

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
