# One environment per framework: built on demand from envs/<framework>.txt and cached
# outside the clone (dlbench/envs.py). Under --sdm conda, envs/<framework>.yaml is used instead.


rule framework_env:
    input:
        pins=framework_pins,
    output:
        "resources/envs/{framework}.json",
    log:
        "logs/framework_env/{framework}.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        key=framework_env_key,
    script:
        "../workflow/scripts/framework_env.py"
