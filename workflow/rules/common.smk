# Wiring: the study (dlbench/rules/context.py) read once from the validated config, and the names the rules take
# from it. What is worked out, and by which Snakemake (the main one or a job's own), is said there.
import gc
import os
import sys

from snakemake_interface_executor_plugins.settings import DeploymentMethod

# This workflow's own dlbench (beside workflow/), for this process and every job it starts: a copy used as a
# module, or run with --directory elsewhere, runs its own code; one fetched from a remote (github(...)) uses
# the dlbench installed beside Snakemake. current_basedir (workflow/rules) is a path or a source file.
_HERE = workflow.current_basedir
_HERE = _HERE if isinstance(_HERE, str) else _HERE.get_path_or_uri(secret_free=True)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(_HERE)))
_OWN = os.path.isdir(os.path.join(_ROOT, "dlbench"))
if _OWN:
    sys.path.insert(0, _ROOT)
from dlbench.present.charts import catalog  # noqa: E402
from dlbench.rules import context  # noqa: E402
from dlbench.rules.code_digest import caffe_data_digest  # noqa: E402
from dlbench.rules.code_digest import charts_digest, findings_digest  # noqa: E402
from dlbench.paths import PUBLISHED_CSV, as_workflow_input  # noqa: E402

if _OWN:
    context.own_package(_ROOT)

# The schema beside these rules (a local copy of it where the workflow is fetched from a remote, github(...)).
CONFIG_SCHEMA = workflow.source_path("../schemas/config.schema.yaml")
CFG = context.read_config(config, workflow.configfiles, CONFIG_SCHEMA)
# The config file the study ran unchanged by --config: its findings quote the calibration of its shape.
STUDY_FILE = context.study_file(workflow.configfiles, workflow.config_settings.config)
# Under --sdm conda a job runs in its rule's conda environment (workflow/envs/*.yaml); otherwise the base
# environment runs every job and a training job's runner starts the framework's own Python.
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
STUDY = context.Study(
    CFG,
    context.Reader(
        main=workflow.is_main_process,
        dryrun=workflow.output_settings.dryrun,
        use_conda=USE_CONDA,
    ),
)
STUDY.export()
STUDY.announce()


WILDCARDS = STUDY.wildcard_constraints()


wildcard_constraints:
    framework=WILDCARDS["framework"],
    env=WILDCARDS["env"],
    dataset=WILDCARDS["dataset"],
    point=WILDCARDS["point"],
    input_key=WILDCARDS["input_key"],


onstart:
    # Locally, Snakemake caps a job's threads at --cores without a word: refuse such a point before any job
    # runs (known only now: the executor is chosen after the Snakefile is read).
    if workflow.local_exec:
        from dlbench.node.machine import usable_cores

        context.check_local_cores(CFG, usable_cores())
    # Points adopted from an earlier layout: their train jobs recorded as finished, so that a later change reruns them.
    from dlbench.rules import adopted

    adopted.record(workflow)


POINTS = STUDY.points
MEMBERSHIP = STUDY.membership
TUNING = STUDY.tuning
METRICS = STUDY.metrics
MEASUREMENTS = STUDY.measurements
RECORD_CODE = STUDY.record_code
CHARTS_DIR = "results/charts"  # the charts the study has data for, and their index
THREAD_COUNTS = STUDY.thread_counts
MEASURE_LOCK = STUDY.measure_lock
MEASURE_SLOTS = STUDY.measure_slots
RUNNER_OPTIONS = STUDY.runner_options
# The train rule's per-job values, each a plain value where every point has the same (Study.per_point).
TRAIN = STUDY.train_values()
# The rules' functions of a job's wildcards.
local_copy = STUDY.local_copy
test_copy = STUDY.test_copy
env_pins = STUDY.env_pins
env_recipe_key = STUDY.env_recipe_key
caffe_input_settings = STUDY.caffe_input_settings
peak_bf16_env = STUDY.peak_bf16_env
# What the study holds lives as long as Snakemake does: kept out of the garbage collector's full passes, which
# would walk every point's parameters again and again while Snakemake builds the DAG (seconds at 20,000 points).
gc.freeze()
