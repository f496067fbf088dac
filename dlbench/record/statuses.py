"""Which statuses are the point's own results and which are failures of the machine it ran on.

A result (the point diverged, ran out of its own memory or time budget, hung, raised in its own
code, was killed, cannot run on this kind of machine) is data: it is published as the point's
record and stays. A failure of the machine (the node's lock stayed taken, could not be opened or
was removed while held; the GPU vanished for a while; the framework's environment is damaged; the
disk filled; the prepared dataset changed since its preparation, which the retry prepares again; the job
was suspended or preempted mid-measurement) says nothing about the point: its attempt is
kept with the reason, the job fails with EXIT_RETRY, and Snakemake runs it again
(`measurement.retries`). Only the last allowed attempt publishes such a status as the record, so
that the study's tables are drawn from what finished.

Standard library only: the runner and the dry run read it.
"""

from __future__ import annotations

import errno
import signal

RESULTS = ("ok", "diverged", "oom", "timeout", "hung", "error", "killed", "unavailable")
RETRIED = ("lock_timeout", "lock_unusable", "lock_lost", "gpu_lost", "env_damaged", "disk_full", "data_changed",
           "suspended", "preempted", "node_lost")
# The aggregation's word for a record whose files disagree with it (never a run's): a failed row of the tables.
DAMAGED = "damaged"
EXIT_RETRY = 75  # EX_TEMPFAIL: "try again later"


class MachineFailure(RuntimeError):
    """A failure of the machine, not of the point: `status` one of RETRIED, the message its reason."""

    def __init__(self, status: str, reason: str):
        assert status in RETRIED, status
        super().__init__(reason)
        self.status = status


def retried(status: str | None) -> bool:
    return status in RETRIED


def disk_full(exc: BaseException) -> bool:
    """Whether an OSError says the file system is out of space or quota."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def signal_name(number: int) -> str:
    """A signal's name, the real-time ones (SIGRTMIN..SIGRTMAX, which have no enum member) included."""
    try:
        return signal.Signals(number).name
    except ValueError:
        low, high = signal.SIGRTMIN, signal.SIGRTMAX
        if low <= number <= high:
            return "SIGRTMIN" if number == low else f"SIGRTMIN+{number - low}"
        return f"signal {number}"
