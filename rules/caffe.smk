# Caffe's input, prepared once per (dataset, input handling): HDF5 files written already
# transformed (Caffe's HDF5Data layer takes no transform_param and cannot augment) and the
# list files that layer reads. Every Caffe point with the same `input` settings shares one
# folder, resources/caffe/<dataset>/<input_key>/ (see dlbench/frameworks/caffe_data.py);
# the adapter derives the same folder from the dataset's, so the train rule only needs the
# files as input.
from dlbench.frameworks import caffe_data as _caffe_data  # noqa: E402

# (dataset, input_key) -> the `input` settings of the Caffe points that use that folder.
CAFFE_INPUTS = {
    (p["dataset"], _caffe_data.input_key(p["input"])): p["input"]
    for p in POINTS.values()
    if p["framework"] == "caffe"
}
CAFFE_DATA_FILES = ("train.h5", "test.h5", "train.txt", "test.txt", "meta.json")


# Under --sdm conda the job's shell runs in envs/caffe.yaml, whose `python` is Caffe's;
# otherwise the base Python starts the module, which runs itself again with the Python
# that resources/envs/caffe.json names (--env).
CAFFE_DATA_PY = "python" if USE_CONDA else sys.executable


rule caffe_data:
    input:
        data="resources/datasets/{dataset}/data.npz",
        meta="resources/datasets/{dataset}/meta.json",
        env=caffe_env_input,
    output:
        train="resources/caffe/{dataset}/{input_key}/train.h5",
        test="resources/caffe/{dataset}/{input_key}/test.h5",
        train_list="resources/caffe/{dataset}/{input_key}/train.txt",
        test_list="resources/caffe/{dataset}/{input_key}/test.txt",
        meta="resources/caffe/{dataset}/{input_key}/meta.json",
    log:
        "logs/caffe_data/{dataset}/{input_key}.log",
    wildcard_constraints:
        input_key="[0-9a-f]{12}",
    localrule: True
    conda:
        "../envs/caffe.yaml"
    params:
        input=lambda w: json.dumps(
            CAFFE_INPUTS[(w.dataset, w.input_key)], sort_keys=True
        ),
        env=lambda w, input: f"--env {input.env[0]}" if input.env else "",
        # A changed preparation (these files) writes the data again.
        code=lambda w: caffe_data_code(),
    shell:
        "PYTHONPATH={workflow.basedir:q} {CAFFE_DATA_PY:q} -m dlbench.frameworks.caffe_data"
        " --dataset-dir resources/datasets/{wildcards.dataset} --input {params.input:q}"
        " --out resources/caffe/{wildcards.dataset}/{wildcards.input_key} {params.env} 2> {log:q}"
