"""File locks: one helper for every lock dlbench takes, and stale Snakemake locks told apart from live ones.

`flocked` is the one way dlbench holds a kernel lock (environment builds, the measurement lock,
Caffe's data preparation). The kernel drops an flock when its holder dies, so a lock is never
left behind by a killed process.

Snakemake locks its working directory with plain files, which a SIGKILL or a power loss leaves
behind; the next run then refuses to start until `--unlock`. Every dlbench run also holds an
flock on .snakemake/dlbench.lock for its lifetime. If a new run can take it, no other run is
alive here and any Snakemake lock files are stale and safe to remove.

Standard library only: adapters import it inside framework environments.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

_held = None  # this run's open lock file, kept for the life of the process


@contextlib.contextmanager
def flocked(path: str | os.PathLike):
    """Hold an exclusive flock on `path` (created if need be) for the block; yields the seconds waited."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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
