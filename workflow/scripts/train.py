"""Rule train: one point, its trainer in the framework's environment, the monitor outside it (dlbench.rules.jobs)."""

from pathlib import Path

from dlbench.rules import joblog, jobs, stale_locks
from dlbench.run import preemption
from dlbench.run.options import RunOptions

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> int:
    out = Path(sm.output.measurement).parent
    # attempt and retries are resources, not params: a changed --retries must not rerun finished points.
    options = RunOptions.of_job(sm.params.runner, env=jobs.environment(sm.input.env[0] if sm.input.env else None,
                                                                       sm.params.env),
                                attempt=int(sm.resources.dlbench_attempt), retries=int(sm.resources.dlbench_retries))
    # live_job: a killed Snakemake's next run sees this job is still measuring; settled: a preemption that SLURM
    # would not requeue ends the point as a failed record.
    with stale_locks.live_job(), preemption.settled(out):
        return jobs.train(sm.params.point, Path(sm.input.data).parent, out, options)


joblog.run(sm.log[0], main)
