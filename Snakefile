# dlbench: a comparative measurement study of deep learning frameworks.
#   snakemake --cores 8                              the study in config/config.yaml
#   snakemake --cores 8 --configfile config/paper.yaml   the paper's study
#   snakemake --profile profiles/slurm               on an HPC cluster
from snakemake.utils import min_version

min_version("9.0")


# The default study, unless the command line names its own (--configfile replaces it,
# rather than deep-merging two studies' sweeps into one).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/envs.smk"
include: "rules/caffe.smk"
include: "rules/train.smk"
include: "rules/aggregate.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        "results/runs.parquet",
        "results/curves.parquet",
        "results/samples.parquet",
        CHART_FILES,
        "results/findings.md",
