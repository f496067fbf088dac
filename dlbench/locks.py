"""Stale Snakemake locks after a killed run, told apart from live ones by a kernel lock.

Snakemake locks its working directory with plain files, which a SIGKILL or a power
loss leaves behind; the next run then refuses to start until `--unlock`. Every
dlbench run also holds an flock on .snakemake/dlbench.lock for its lifetime. The
kernel drops an flock when its holder dies, so if a new run can take it, no other
run is alive here and any Snakemake lock files are stale and safe to remove.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

_held = None  # the open lock file, kept for the life of this process


def hold_and_clear_stale(workdir: str | os.PathLike = ".") -> int:
    """Take this run's lock; if it was free, remove stale Snakemake locks. Returns how many were removed."""
    global _held
    if _held is not None:
        return 0
    meta = Path(workdir) / ".snakemake"
    meta.mkdir(exist_ok=True)
    fh = open(meta / "dlbench.lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another dlbench run is alive in this directory: its locks are real
        fh.close()
        return 0
    _held = fh
    removed = 0
    for lock in (meta / "locks").glob("*.lock") if (meta / "locks").is_dir() else []:
        lock.unlink(missing_ok=True)
        removed += 1
    return removed
