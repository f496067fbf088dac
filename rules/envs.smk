# One environment per framework: built on demand from envs/<framework>.txt and cached
# outside the clone (see dlbench/envs.py). Under --sdm conda, envs/<framework>.yaml is used instead.


rule framework_env:
    input:
        pins=f"{workflow.basedir}/envs/{{framework}}.txt",
    output:
        "resources/envs/{framework}.json",
    log:
        "logs/framework_env/{framework}.log",
    localrule: True
    params:
        # Digest of the pins and build recipe: a changed recipe is a new environment.
        key=lambda w: env_key(w.framework),
    shell:
        "PYTHONPATH={workflow.basedir:q} {PY:q} -m dlbench.envs build {wildcards.framework} --out {output:q} 2> {log:q}"
