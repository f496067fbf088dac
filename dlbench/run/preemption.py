"""A preempted SLURM job that SLURM would not requeue: its point ends as a failed record.

A job being preempted requeues itself (dlbench.node.slurm_job). Where SLURM refuses (the job was submitted with
--no-requeue, the cluster has JobRequeue=0), the job still ends PREEMPTED, which Snakemake's SLURM plugin counts
as running for ever. So the attempt the runner kept (status `preempted`, scontrol's words in its reason) is
published as the point's record, made from its raw measurement with its tables: the point is a failed point, and
the workflow's next run keeps it (dlbench.record.incomplete) rather than wait for a job that never comes back.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dlbench.node import slurm_job
from dlbench.record import store
from dlbench.run import derive


@contextlib.contextmanager
def settled(out_dir: str | Path) -> Iterator[None]:
    """Around a training job: where it ends by a preemption that SLURM refused to requeue, publish its kept
    attempt as the point's failed record, and say so."""
    try:
        yield
    except SystemExit:
        refused = slurm_job.requeue_refused()
        if refused:
            record = publish_last_attempt(Path(out_dir))
            print(f"dlbench: preempted, and SLURM refused to requeue the job ({refused}): the point is recorded as "
                  f"{record['status']} so that the sweep goes on; Snakemake's SLURM plugin waits on a PREEMPTED job "
                  "for ever, so stop the workflow and run it again (the point's record stands)", file=sys.stderr)
        raise


def publish_last_attempt(out_dir: Path) -> dict:
    """The point's newest kept attempt (a job ended mid-point) as its record, made again from its raw measurement
    with its tables. Kept once: the attempt the runner kept is the one published."""
    attempt = store.attempts(out_dir)[-1].parent
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}.settle-") as work:
        for file in store.RUN_FILES:
            if (attempt / file).exists():
                shutil.copy(attempt / file, Path(work) / file)
        made = derive.record_of(work)
        store.publish(out_dir, work, made.record, made.tables, attempt.name, raw_files=made.raw_files)
    return made.record
