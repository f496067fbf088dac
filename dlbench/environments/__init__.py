"""The frameworks' environments, one concept: what each point runs in, from its pins to the interpreter its
trainer runs in.

    environment.py  the Environment: one frozen value per environment, passed whole from the rule to the runner
    choice.py       which environment each point of a study runs in, worked out once when the study is read
    pins.py         the pins and hash locks in envs/, and what an environment's name says
    versions.py     framework versions as an axis: a version's pins, written and locked
    lock.py         the hash locks: pip-compile for envs/, pip's resolver for a version
    key.py          an environment's cache key and its folder in the cache
    build.py        the build, in a temporary folder swapped into place whole
    steps.py        a build's child processes, each in its own process group and with a time limit
    check.py        that an environment works: it imports its trainer and trains one step
    site.py         site interpreters (`envs.site`): probed, not built
    conda.py        the conda files for `snakemake --sdm conda`, from the same pins
    command.py      `dlbench envs`
    errors.py       EnvError
"""
