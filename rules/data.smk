# Datasets, prepared once into the framework-neutral store every point reads.


rule prepare_dataset:
    output:
        data="resources/datasets/{dataset}/data.npz",
        meta="resources/datasets/{dataset}/meta.json",
    log:
        "logs/prepare_dataset/{dataset}.log",
    localrule: True
    params:
        local=lambda w: CFG["data"].get(w.dataset, ""),
    shell:
        "PYTHONPATH={workflow.basedir:q} {PY:q} -m dlbench.cli prepare {wildcards.dataset}"
        " --out resources/datasets/{wildcards.dataset} --local={params.local:q} 2> {log:q}"
