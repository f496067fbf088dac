"""Rule framework_env: build (or find in the cache) one environment, pytorch or pytorch-cuda
(dlbench.environments.build)."""

from dlbench.environments import build
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: build.provide(sm.wildcards.env, sm.output[0]))
