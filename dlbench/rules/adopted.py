"""Snakemake's metadata for the train jobs of points adopted from an earlier layout, and for the preparation of
their inputs (dlbench.run.earlier_layout).

Snakemake compares a job's params, the code digest of what it runs among them, only where it has metadata for
the job's output; an adopted point's measurement.json has none, so a later change to its framework's adapter
would not run it again. Before the first jobs of the run after its adoption (the workflow's `onstart`, which a dry
run does not reach), each such job is recorded as Snakemake records a job that has just finished
(Persistence.finished: its params, input and code as they are now): the adopted measurement stands for what the
job would measure now, which is what adopting it says. Where Snakemake's internals are not what this expects (a
later Snakemake), one line says so and the points stay as they are, compared by time only.
"""

from __future__ import annotations

import os

from dlbench.run import earlier_layout


def record(workflow, pending: str | os.PathLike = earlier_layout.PENDING, say=print) -> int:
    """Give each pending adopted point's train job its metadata; how many were given. The note is removed after."""
    wanted = set(earlier_layout.pending_metadata(pending))
    if not wanted:
        return 0
    given = 0
    try:
        for job in workflow.dag.jobs:
            outputs = [str(f) for f in job.output]
            if any(f in wanted for f in outputs) and not workflow.persistence.has_metadata(job):
                workflow.async_run(workflow.persistence.finished(job))
                given += 1
    except (AttributeError, TypeError) as exc:
        say(f"dlbench: the points adopted from an earlier layout keep no Snakemake metadata ({type(exc).__name__}: "
            f"{exc}): a change to their framework's code does not run them again; --forcerun train does")
    os.remove(pending)
    return given
