# dlbench: a comparative measurement study of deep learning frameworks.
#   snakemake --cores 8                                  the study in config/config.yaml
#   snakemake --cores 8 --configfile config/paper.yaml   the paper's study
#   snakemake --profile profiles/slurm                   on an HPC cluster
# The layout: rules/<stage>.smk (the rules; their functions in rules/common.smk), the job scripts
# in workflow/scripts/, all logic in the dlbench/ package, the config's schema in config/schema.yaml.
import os

from snakemake.utils import min_version

min_version("9.0")


# The default study, unless the command line names its own (--configfile replaces it,
# rather than deep-merging two studies' sweeps into one). Found beside this Snakefile,
# so that --directory elsewhere works.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.current_basedir, "config/config.yaml")


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/envs.smk"
include: "rules/train.smk"
include: "rules/aggregate.smk"
include: "rules/report.smk"
include: "rules/compare.smk"


rule all:
    default_target: True
    input:
        "results/runs.parquet",
        "results/curves.parquet",
        "results/samples.parquet",
        CHART_FILES,
        "results/findings.md",
        COMPARE_FILES,
