# One environment per framework and device kind (pytorch, pytorch-cuda, ...), built on demand from envs/<env>.txt
# and cached outside the clone (dlbench/environments/build.py); its description, resources/envs/<env>.json, is what
# the points that run in it wait for. Under --sdm conda, workflow/envs/<env>.yaml (generated from the same pins) is
# used instead; a site environment (config envs.site) is probed, not built (dlbench/environments/site.py).


rule framework_env:
    input:
        pins=env_pins,
    output:
        "resources/envs/{env}.json",
    log:
        "logs/framework_env/{env}.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        key=env_recipe_key,
    script:
        "../scripts/framework_env.py"
