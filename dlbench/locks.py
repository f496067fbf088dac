"""File locks: one helper for every lock dlbench takes, and stale Snakemake locks told apart from live ones.

`flocked` is the one way dlbench holds a kernel lock (environment builds, the measurement lock,
Caffe's data preparation). The kernel drops an flock when its holder dies, so a lock is never
left behind by a killed process.

`measuring` is the node's measurement lock built on it: a CPU point measures alone; a GPU point
holds one GPU of its own and shares the node with GPU points on the other GPUs.

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
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

_held = None  # this run's open lock file, kept for the life of the process
POLL_S = 0.2  # how often a GPU point waiting for a free GPU tries them all again


@contextlib.contextmanager
def flocked(path: str | os.PathLike, *, shared: bool = False, wait: bool = True):
    """Hold an flock on `path` (created if need be) for the block, exclusive unless `shared`; yields the seconds
    waited. With wait=False it takes the lock only if it is free now, else yields None at once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield None
            return
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Slot:
    """What a point measures with: `exclusive` (alone on the node) or `per_device` (its own GPU, `device`)."""

    mode: str
    device: str | None
    wait_s: float


def device_lock(node_lock: str | os.PathLike, device: str) -> Path:
    """The lock file of one GPU, beside the node's (`device`: an index or a UUID)."""
    return Path(f"{node_lock}.gpu-{re.sub(r'[^A-Za-z0-9._-]', '_', device)}")


@contextlib.contextmanager
def measuring(node_lock: str | os.PathLike, devices: Sequence[str] | None, *, per_device: bool) -> Iterator[Slot]:
    """Hold the node's measurement lock for one point.

    A CPU point (devices None), or any point when per_device is False: the node lock exclusively, so it
    measures alone; a GPU point then takes the first device. A GPU point with per_device: the lock of
    the first free device (tried every POLL_S), then the node lock shared, so GPU points on other devices
    measure beside it and a CPU point waits for all of them.
    """
    t0 = time.monotonic()
    if not devices or not per_device:
        with flocked(node_lock):
            yield Slot("exclusive", devices[0] if devices else None, time.monotonic() - t0)
        return
    while True:
        for device in devices:
            with flocked(device_lock(node_lock, device), wait=False) as got:
                if got is None:
                    continue
                with flocked(node_lock, shared=True):
                    yield Slot("per_device", device, time.monotonic() - t0)
                return
        time.sleep(POLL_S)


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
