"""How a point is run: one frozen object, built once where the job's arguments are read and passed whole.

The study's measurement settings (the config's monitor, limits and measurement sections: dlbench.rules.context's
Study.runner_options, whose keys are this object's field names), the job's attempt and the framework
environment it runs in. The runner reads them; nothing passes them on one by one.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from dlbench.node import hostload, slurm_job

HANG_S = 1800.0  # a point silent this long is ended as hung (limits.hang_s)


@dataclass(frozen=True)
class RunOptions:
    """Everything about running one point that is not the point itself."""

    interval_s: float = 0.2  # the monitor's sampling interval
    monitor: bool = True  # sample the trainer's process tree (off: only where a memory budget needs it)
    time_limit_s: float | None = None  # the point's time budget (None: none)
    memory_limit_mb: float | None = None  # its memory budget (None: none)
    hang_s: float | None = HANG_S  # seconds without an event before the point ends as hung (0 or None: never)
    measure_lock: str | None = None  # the node-local file held while measuring (None: no lock)
    gpu_per_device: bool = True  # GPU points measure side by side, one per GPU (else one at a time)
    lock_timeout_s: float | None = None  # longest wait for the node's locks (None: dlbench.node.locks.lock_timeout)
    contended_pct: float = hostload.CONTENDED_PCT  # others' share of a core over which a point counts as contended
    quiet_wait_s: float = 0.0  # wait up to this long for others to quieten before the trainer starts (0: do not)
    attempt: int = 1  # Snakemake's count of this job's attempts, from 1
    retries: int = 0  # reruns the study allows (measurement.retries)
    python: str | None = None  # the framework environment's interpreter (None: this one)
    env: Mapping = field(default_factory=dict)  # the environment's description for the record: env, kind, key

    @classmethod
    def of_job(cls, study: Mapping, *, env: Mapping | None = None, attempt: int = 1, retries: int = 0) -> RunOptions:
        """A training job's options: the study's settings (Study.runner_options; a None leaves the setting to the
        default here), the environment's description (its `python`, the interpreter) and the job's attempt and
        the retries allowed."""
        given = {k: v for k, v in study.items() if v is not None}
        unknown = set(given) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"RunOptions has no {', '.join(sorted(unknown))}")
        env = dict(env or {})
        return cls(**given, attempt=attempt, retries=retries, env=env, python=env.get("python"))

    @property
    def interpreter(self) -> str:
        return self.python or sys.executable

    @property
    def final(self) -> bool:
        """Whether this is the last run allowed: a failure of the machine is then published as the record, not
        only kept as an attempt (the job failing so that it runs again). SLURM's own requeues of the job count."""
        return tries(self.attempt) > self.retries

    @property
    def after_last(self) -> bool:
        """The attempt after the last allowed one: it trains nothing, and only publishes `node_lost` where that
        one died with its node (dlbench.run.runner.run_point)."""
        return self.attempt > self.retries + 1


def tries(attempt: int) -> int:
    """How many times this point's job has run, this run included: Snakemake's attempts, and the runs of this
    SLURM job that SLURM itself requeued (a node failure, a preemption, `scontrol requeue`), which Snakemake
    never sees as failed."""
    return attempt + slurm_job.restart_count()
