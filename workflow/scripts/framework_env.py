"""Rule framework_env: build (or find in the cache) one environment, pytorch or pytorch-cuda (dlbench.envs)."""

from dlbench import envs, joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: envs.provide(sm.wildcards.env, sm.output[0]))
