"""Rule train: one point, its trainer in the framework's environment, the monitor outside it (dlbench.cli.train)."""

from pathlib import Path

from dlbench import cli
from dlbench.node import preemption
from dlbench.rules import joblog, stale_locks

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> int:
    out = Path(sm.output.metrics).parent
    # live_job: a killed Snakemake's next run sees this job is still measuring; settled: a preemption that SLURM
    # would not requeue ends the point as a failed record.
    with stale_locks.live_job(), preemption.settled(out):
        # attempt and retries are resources, not params: a changed --retries must not rerun finished points.
        return cli.train(sm.params.point, Path(sm.input.data).parent, out,
                         sm.input.env[0] if sm.input.env else None, env=sm.params.env, **sm.params.runner,
                         attempt=int(sm.resources.dlbench_attempt), retries=int(sm.resources.dlbench_retries))


joblog.run(sm.log[0], main)
