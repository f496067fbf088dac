# Datasets, prepared once into the framework-neutral store every point reads, and Caffe's input.


rule prepare_dataset:
    output:
        data="resources/datasets/{dataset}/data.npz",
        meta="resources/datasets/{dataset}/meta.json",
    log:
        "logs/prepare_dataset/{dataset}.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        folder="resources/datasets/{dataset}",
        local=local_copy,
        test_copy=test_copy,
    script:
        "../scripts/prepare_dataset.py"


# Caffe's input, prepared once per (dataset, input handling): HDF5 files written already
# transformed (Caffe's HDF5Data layer takes no transform_param and cannot augment) and the
# list files that layer reads. Every Caffe point with the same `input` settings shares one
# folder (dlbench/frameworks/caffe_data.py), which the adapter derives from the dataset's.
rule caffe_data:
    input:
        data="resources/datasets/{dataset}/data.npz",
        meta="resources/datasets/{dataset}/meta.json",
    output:
        train="resources/caffe/{dataset}/{input_key}/train.h5",
        test="resources/caffe/{dataset}/{input_key}/test.h5",
        train_list="resources/caffe/{dataset}/{input_key}/train.txt",
        test_list="resources/caffe/{dataset}/{input_key}/test.txt",
        meta="resources/caffe/{dataset}/{input_key}/meta.json",
    log:
        "logs/caffe_data/{dataset}/{input_key}.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        input=caffe_input_settings,
        # A changed preparation (its code) writes the data again.
        code=caffe_data_digest(),
    script:
        "../scripts/caffe_data.py"
