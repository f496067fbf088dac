# The points table: the validated config expanded into one row per training job.
import json
import sys

from snakemake_interface_executor_plugins.settings import DeploymentMethod

sys.path.insert(0, workflow.basedir)

from dlbench import charts, cluster, config as dlconfig, sweep  # noqa: E402
from dlbench.frameworks import FRAMEWORKS  # noqa: E402
from dlbench.datasets.catalog import INFO as DATASETS  # noqa: E402
from dlbench.codedigest import adapter_digest  # noqa: E402
from dlbench.envs import env_key  # noqa: E402

# Jobs use the Python running Snakemake (the base environment), except training jobs
# under --sdm conda: their shell runs in the framework's conda environment, whose
# `python` runs the runner (the trainer then runs in that same environment).
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
PY = sys.executable
PY_TRAIN = "python" if USE_CONDA else sys.executable

try:
    CFG = dlconfig.validate(config)
except dlconfig.ConfigError as exc:
    raise SystemExit(f"dlbench: config error: {exc}")

# A run killed outright leaves Snakemake's lock files; the next run clears them when it
# can prove (with a kernel lock, see dlbench/locks.py) that no other run is alive here.
if workflow.is_main_process and not workflow.remote_exec and not workflow.subprocess_exec:
    from dlbench import locks

    if locks.hold_and_clear_stale():
        print("dlbench: removed stale Snakemake locks left by a killed run", file=sys.stderr)

POINTS = {(p["framework"], p["dataset"], p["id"]): p for p in sweep.expand(CFG)}
MEMBERSHIP = sweep.membership(CFG)


wildcard_constraints:
    framework="|".join(FRAMEWORKS),
    dataset="|".join(DATASETS),
    point=r"[A-Za-z0-9][A-Za-z0-9._-]*",


def point_of(wildcards):
    return POINTS[(wildcards.framework, wildcards.dataset, wildcards.point)]


def run_dir(p):
    return f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}"


METRICS = [f"{run_dir(p)}/metrics.json" for p in POINTS.values()]

_DAG_CHECKED = []


def dag_time_checks():
    """Checks that need the executor, which Snakemake knows only once it builds the DAG."""
    if _DAG_CHECKED or not workflow.is_main_process:
        return
    _DAG_CHECKED.append(True)
    if workflow.local_exec:  # threads above the cores would be capped without a word
        from dlbench.envinfo import usable_cores

        try:
            dlconfig.validate(config, local_cores=usable_cores())
        except dlconfig.ConfigError as exc:
            raise SystemExit(f"dlbench: config error: {exc}")
    if workflow.output_settings.dryrun:
        from dlbench import estimate

        print(estimate.describe(estimate.estimate(list(POINTS.values()), run_dir)), file=sys.stderr)
CHART_FILES = charts.chart_files("results/charts", CFG)
