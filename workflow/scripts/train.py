"""Rule train: one point, its trainer in the framework's environment, the monitor outside it (dlbench.cli.train)."""

from pathlib import Path

from dlbench import cli, joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: cli.train(sm.params.point, Path(sm.input.data).parent, Path(sm.output.metrics).parent,
                                        sm.input.env[0] if sm.input.env else None, env=sm.params.env,
                                        **sm.params.runner))
