"""File locks: one helper for every lock dlbench takes, and the node's measurement and heavy-work locks.

`flocked` is the one way dlbench holds a kernel lock (environment builds, the measurement lock,
Caffe's data preparation). The kernel drops an flock when its holder dies, so a lock is never
left behind by a killed process.

**Measurements and heavy work.** On one node, two kinds of job must never overlap: a point being
measured (`measuring`: the runner, and the GEMM peak) and dlbench's own heavy work (`heavy_work`:
environment builds with Caffe's compile, dataset and Caffe-data preparation, aggregation, charts,
findings). Within each kind, jobs may run together: two builds side by side, or GPU points on GPUs
of their own; a CPU point measures alone. Three flocked files beside the node's lock file
(`measurement.lock_file`, node-local) carry it:

- `<lock_file>` (the node lock): a CPU point holds it exclusively, a GPU point measuring per device
  shared, for the whole measurement.
- `<lock_file>.heavy`: every heavy job holds it shared for its whole run.
- `<lock_file>.gate`: held exclusively only while entering, never while working.

A measurement enters through the gate: it takes the gate, waits until it can take `.heavy`
exclusively (no heavy job runs) and lets it go at once, takes the node lock, and then leaves the
gate. A heavy job enters the same way the other way round: the gate, `.heavy` shared, then the node
lock exclusively for an instant (no measurement runs), then it leaves the gate and works. An entrant
takes its own side before it looks at the other, and looks while holding the gate, so no job of the
other kind can slip in between: the two kinds never overlap.

Deadlock-free: every process takes the locks in one order (a GPU's lock, the gate, `.heavy`, the
node lock) and, once inside, takes nothing more. A heavy job takes `.heavy` before any lock of its
own work (an environment's build lock), and a process already inside heavy work does not enter again
(nor do its children: DLBENCH_HEAVY_HELD); a measurement asked for there is refused, as it would
wait for itself. Starvation: whoever holds the gate is next of its kind, and no newcomer of either
kind gets in until it is through, so a stream of builds cannot keep a point out, nor a stream of GPU
points a build: the running jobs of the other kind finish and no new ones start.

`measurement.lock_timeout_s` bounds every wait of an entrant, for the gate, for heavy work and for the node
lock alike: a lock file lies where any local user can lock it, so one user's process, or one hung build, could
otherwise stop the node's points for good. A point that waits longer ends as `lock_timeout` (recorded, run
again: dlbench.record.statuses); heavy work that waits longer fails in one line. Both waits are in the record's
`lock_wait_s`, and heavy work that has waited a second says in one line what waits and for what. Every lock held
through a point's measurement (the node lock, its GPU's lock) is checked at its end for having been removed or
replaced meanwhile (`Slot.intact`); heavy work says so in its log. The node lock's folder is never made here: it
must exist (a mistyped `measurement.lock_file` is refused, not created).

Snakemake's own lock files, left by a killed run, are told apart from live ones by dlbench.rules.stale_locks.

Standard library only: adapters import it inside framework environments.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.2  # how often a GPU point waiting for a free GPU tries them all again
# measurement.lock_file's default (workflow/schemas/config.schema.yaml). Not in /tmp: SLURM's job_container/tmpfs
# gives each job a private /tmp and /dev/shm (its default Dirs), where the lock would be another file per job and
# two jobs on one node would measure together. /var/tmp is node-local, sticky and open to every user on every
# Linux (FHS); /run/lock would do as well, but on RHEL-family nodes only root may create files there. A site that
# makes /var/tmp private too names another node-local path; private_to_job() refuses where it can tell.
NODE_LOCK = "/var/tmp/dlbench-measure.lock"
NODE_LOCK_ENV = "DLBENCH_NODE_LOCK"  # the workflow's measurement.lock_file for its jobs; empty: not kept apart
LOCK_TIMEOUT_S = 1800.0  # measurement.lock_timeout_s's default: the longest wait for any of the node's locks
LOCK_TIMEOUT_ENV = "DLBENCH_LOCK_TIMEOUT_S"  # the workflow's measurement.lock_timeout_s, for its heavy jobs
LOCK_MODE = 0o644  # every user may open it to lock it (an flock needs only read access); only its owner may change it
HEAVY_HELD = "DLBENCH_HEAVY_HELD"  # set while a process does heavy work: its children are inside it too
MEASURING = "DLBENCH_MEASURING"  # set while a process measures: its trainer's own preparation is part of it
WAIT_NOTE_S = 1.0  # a heavy job that waits longer for a measurement says so, when it has waited that long and after


class LockTimeout(TimeoutError):
    """A lock that stayed taken for longer than the caller would wait; the message says which and how long."""


class LockUnusable(PermissionError):
    """A lock file this user cannot open (another user made it private, or it is not a plain file); the
    message names it and the setting that moves it."""


def _open_for_lock(path: Path) -> int:
    """A descriptor to flock `path` with, creating it LOCK_MODE.

    An flock needs no write access, so the file is opened read-only: a lock file that another user
    created (a node's measurement lock in /var/tmp, say) can still be locked by this one. Readable by every
    user, not 0600: users sharing a node must share its lock, or their points would measure together; not
    writable by them either, as nothing writes it and a writable file in a shared folder invites tampering.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, LOCK_MODE)
    except FileExistsError:
        try:  # not through a link: a link planted in /tmp would have us lock, and create, whatever it names
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:  # removed between the two opens: make it again
            return _open_for_lock(path)
        except OSError as exc:
            raise LockUnusable(f"cannot open the lock file {path} ({exc.strerror}): another user may have made it "
                               "private or a link; give this node's jobs another one (measurement.lock_file)") from exc
        return _plain_file(fd, path)
    try:
        os.fchmod(fd, LOCK_MODE)  # the umask took some bits: give them back, so every user's jobs can lock it
    except OSError:
        pass
    return fd


def _plain_file(fd: int, path: Path) -> int:
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted there would block or misbehave
        os.close(fd)
        raise LockUnusable(f"the lock file {path} is not a plain file; give this node's jobs another one "
                           "(measurement.lock_file)")
    return fd


@contextlib.contextmanager
def flocked(path: str | os.PathLike, *, shared: bool = False, wait: bool = True, timeout_s: float | None = None,
            make_folder: bool = True, waiting: Callable[[], None] | None = None):
    """Hold an flock on `path` (created if need be) for the block, exclusive unless `shared`; yields the seconds
    waited. With wait=False it takes the lock only if it is free now, else yields None at once; with
    timeout_s it waits at most that long, then raises LockTimeout. make_folder=False: the lock's folder must
    exist (a node lock's folder is the site's, never made here). waiting(): called at every try that finds the
    lock taken (every POLL_S), and once before a wait without a limit: the caller says, when it chooses, that it
    waits."""
    path = Path(path)
    if make_folder:
        path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    while True:
        fd = _open_for_lock(path)
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait or (timeout_s is not None and time.monotonic() - t0 >= timeout_s):
                    os.close(fd)
                    if not wait:
                        yield None
                        return
                    raise LockTimeout(f"{path} stayed locked for {timeout_s:.1f} s") from None
                if waiting is not None:
                    waiting()
                if timeout_s is None:  # no limit: the kernel wakes us (only where the caller bounds it otherwise)
                    fcntl.flock(fd, mode)
                    break
                time.sleep(POLL_S)
        if _same_file(fd, path):
            break
        # The path was removed (or replaced) while we waited: the lock held is on a file nobody else will open,
        # and a newcomer would lock the new one beside us. Lock what the path names now.
        os.close(fd)
    try:
        yield time.monotonic() - t0
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _same_file(fd: int, path: Path) -> bool:
    """Whether the locked descriptor is still the file the path names (same device and inode)."""
    held = os.fstat(fd)
    return _identity(path) == (held.st_dev, held.st_ino)


def _taken(path: str | os.PathLike) -> tuple[str, tuple[int, int] | None]:
    """A lock this process holds, and the file its path names now (right after it was taken: the file locked)."""
    return str(path), _identity(path)


def _still_held(held: Sequence[tuple[str, tuple[int, int] | None]]) -> list[str]:
    """The locks of `held` whose path no longer names the file locked (removed, or replaced by another)."""
    return [path for path, identity in held if _identity(path) != identity]


@dataclass(frozen=True)
class Slot:
    """What a point measures with: `exclusive` (alone on the node) or `per_device` (its own GPU, `device`)."""

    mode: str
    device: str | None
    wait_s: float
    held: tuple[tuple[str, tuple[int, int] | None], ...] = ()  # the locks held through it, as _taken took them

    def intact(self) -> bool:
        """Whether every lock held through the measurement (the node's, its GPU's) still names the file locked: if
        one was removed meanwhile, another point may have locked a new file of that name and measured beside
        this one."""
        return not _still_held(self.held)


def device_lock(node_lock: str | os.PathLike, device: str) -> Path:
    """The lock file of one GPU, beside the node's (`device`: an index or a UUID)."""
    return Path(f"{node_lock}.gpu-{re.sub(r'[^A-Za-z0-9._-]', '_', device)}")


def gate_lock(node_lock: str | os.PathLike) -> Path:
    """The lock a job holds only while it enters, measurement or heavy work (see the module's docstring)."""
    return Path(f"{node_lock}.gate")


def heavy_lock(node_lock: str | os.PathLike) -> Path:
    """The lock every heavy job holds shared while it works."""
    return Path(f"{node_lock}.heavy")


def node_lock() -> str | None:
    """The node lock heavy work keeps apart from: the workflow's (set for its jobs), else the default.

    None where the workflow measures without keeping points apart (measurement.exclusive: false).
    """
    return os.environ.get(NODE_LOCK_ENV, NODE_LOCK) or None


def _heavy_inside(node_lock: str | os.PathLike) -> bool:
    """Whether this process (or the process that started it) is inside heavy work on this node lock."""
    return os.environ.get(HEAVY_HELD) == str(node_lock)


@contextlib.contextmanager
def _marked(name: str, value: str):
    """os.environ[name] = value for the block (the processes started in it inherit it), then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def lock_timeout() -> float:
    """The longest wait for the node's locks: the workflow's measurement.lock_timeout_s, else its default."""
    value = os.environ.get(LOCK_TIMEOUT_ENV)
    try:
        return float(value) if value else LOCK_TIMEOUT_S
    except ValueError:
        raise ValueError(f"{LOCK_TIMEOUT_ENV}={value!r} is not a number of seconds; unset it") from None


def private_to_job(lock: str | os.PathLike) -> str | None:
    """Why the lock's folder is this SLURM job's own (a line to refuse with), or None: it is the node's, or that
    cannot be told. A job-private mount (SLURM's job_container/tmpfs) is another folder than the same path as
    the node's first process sees it (/proc/1/root, readable by root only on many nodes: there this says
    nothing)."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    folder = Path(lock).absolute().parent
    try:
        mine = os.stat(folder)
        node = os.stat(f"/proc/1/root{folder}")
    except FileNotFoundError:  # the node has no such folder: it exists in this job's mounts only
        mine = node = None
    except OSError:
        return None
    if mine is not None and (mine.st_dev, mine.st_ino) == (node.st_dev, node.st_ino):
        return None
    return (f"the lock file {lock} lies in {folder}, which is private to this SLURM job (job_container/tmpfs): "
            "other jobs on this node lock another file and would measure beside it; set measurement.lock_file "
            "to a node-local path every job sees")


def _refuse_private(node_lock: str | os.PathLike) -> None:
    """LockUnusable where the node lock's folder is missing (it is never made: a mistyped measurement.lock_file
    would otherwise create folders anywhere) or private to this SLURM job."""
    folder = Path(node_lock).absolute().parent
    if not folder.is_dir():
        raise LockUnusable(f"the folder {folder} of the lock file {node_lock} does not exist on this node, and dlbench "
                           "does not make it; create it, or set measurement.lock_file to a file in a node-local "
                           "folder that exists")
    why = private_to_job(node_lock)
    if why:
        raise LockUnusable(why)


def _waiting_line(what: str, whom: str, node_lock: str | os.PathLike, timeout_s: float) -> Callable[[], None]:
    """What says, once the wait for the node's locks (the gate, .heavy, the node lock together) has lasted
    WAIT_NOTE_S, what waits and for what, in one line on stderr; once, however many locks it waits for. A wait
    shorter than that (a point just leaving) is not worth a line."""
    since, said = time.monotonic(), []

    def say() -> None:
        if not said and time.monotonic() - since >= WAIT_NOTE_S:
            said.append(True)
            print(f"dlbench: {what} waits for {whom} to end (the node's lock {node_lock}; at most {timeout_s:g} s, "
                  "measurement.lock_timeout_s)", file=sys.stderr, flush=True)
    return say


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


@contextlib.contextmanager
def _measurement_entry(node_lock: str | os.PathLike, *, shared: bool, deadline: float,
                       waiting: Callable[[], None] | None = None):
    """Through the gate: no heavy work runs, then the node lock (shared for a GPU point); yields the node lock held.

    Every wait ends by the deadline (LockTimeout): the gate and .heavy too, as any local user can hold them.
    """
    if _heavy_inside(node_lock):
        raise RuntimeError(f"a measurement was asked for inside heavy work on {node_lock}: it would wait for itself")
    with contextlib.ExitStack() as held:
        with flocked(gate_lock(node_lock), timeout_s=_left(deadline), make_folder=False, waiting=waiting):
            with flocked(heavy_lock(node_lock), timeout_s=_left(deadline), make_folder=False, waiting=waiting):
                pass  # no heavy job runs now, and none gets in while this process holds the gate
            held.enter_context(flocked(node_lock, shared=shared, timeout_s=_left(deadline), make_folder=False,
                                       waiting=waiting))
        with _marked(MEASURING, str(node_lock)):
            yield


@contextlib.contextmanager
def measuring(node_lock: str | os.PathLike, devices: Sequence[str] | None, *, per_device: bool,
              timeout_s: float | None = None, what: str | None = None) -> Iterator[Slot]:
    """Hold the node's measurement lock for one point, with no heavy work running (see the module's docstring).

    A CPU point (devices None), or any point when per_device is False: the node lock exclusively, so it
    measures alone; a GPU point then takes the first device. A GPU point with per_device: the lock of
    the first free device (tried every POLL_S), then the node lock shared, so GPU points on other devices
    measure beside it and a CPU point waits for all of them. Past timeout_s (None: lock_timeout()) of waiting,
    for a GPU, the gate, heavy work or other measurements: LockTimeout. A lock folder private to this SLURM
    job: LockUnusable. what: said in one line on stderr once the wait has lasted WAIT_NOTE_S (a command run by hand);
    None: not said (a point's wait is in its record's lock_wait_s).
    """
    t0 = time.monotonic()
    timeout_s = lock_timeout() if timeout_s is None else timeout_s
    deadline = t0 + timeout_s
    _refuse_private(node_lock)
    waiting = _waiting_line(what, "the other measurement or heavy work on this node", node_lock, timeout_s) \
        if what else None
    if not devices or not per_device:
        with _measurement_entry(node_lock, shared=False, deadline=deadline, waiting=waiting):
            yield Slot("exclusive", devices[0] if devices else None, time.monotonic() - t0, (_taken(node_lock),))
        return
    while True:
        for device in devices:
            with flocked(device_lock(node_lock, device), wait=False, make_folder=False) as got:
                if got is None:
                    continue
                held = (_taken(device_lock(node_lock, device)),)
                with _measurement_entry(node_lock, shared=True, deadline=deadline, waiting=waiting):
                    yield Slot("per_device", device, time.monotonic() - t0, held + (_taken(node_lock),))
                return
        if time.monotonic() >= deadline:
            raise LockTimeout(f"no GPU of {', '.join(devices)} came free within {timeout_s:g} s")
        time.sleep(POLL_S)


@contextlib.contextmanager
def heavy_work(node_lock: str | os.PathLike | None, what: str = "heavy work",
               timeout_s: float | None = None) -> Iterator[float]:
    """Hold the heavy-work side of the node for the block: no measurement runs beside it (see the module's
    docstring); other heavy jobs may. Yields the seconds waited for measurements to end.

    node_lock None: measurements are not kept apart (measurement.exclusive: false), nothing is taken.
    Inside heavy work already (this process or its parent): nothing more is taken. Inside a measurement
    (a point's trainer preparing its own input): nothing is taken, the work is part of that point.
    Past timeout_s (None: lock_timeout()) of waiting: LockTimeout, its message one line naming the setting.
    """
    if node_lock is None or _heavy_inside(node_lock) or os.environ.get(MEASURING) == str(node_lock):
        yield 0.0
        return
    t0 = time.monotonic()
    timeout_s = lock_timeout() if timeout_s is None else timeout_s
    deadline = t0 + timeout_s
    _refuse_private(node_lock)
    say = _waiting_line(what, "the measurement on this node", node_lock, timeout_s)
    with contextlib.ExitStack() as held:
        try:
            with flocked(gate_lock(node_lock), timeout_s=_left(deadline), make_folder=False, waiting=say):
                held.enter_context(flocked(heavy_lock(node_lock), shared=True, timeout_s=_left(deadline),
                                           make_folder=False, waiting=say))
                with flocked(node_lock, timeout_s=_left(deadline), make_folder=False, waiting=say):
                    pass  # no measurement runs now, and none gets in while this process holds the gate
        except LockTimeout as exc:
            raise LockTimeout(f"{what} waited {timeout_s:g} s (measurement.lock_timeout_s) for the node's locks, "
                              f"and another process held them the whole time ({exc})") from None
        waited = time.monotonic() - t0
        if waited > WAIT_NOTE_S:
            print(f"dlbench: {what} waited {waited:.1f} s for the measurement on this node to end", file=sys.stderr)
        kept = (_taken(heavy_lock(node_lock)),)
        with _marked(HEAVY_HELD, str(node_lock)):
            yield waited
        for path in _still_held(kept):
            print(f"dlbench: {what}: the lock file {path} was removed or replaced while it was held; a point may "
                  "have measured beside this work", file=sys.stderr)
