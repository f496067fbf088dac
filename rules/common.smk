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
if (
    workflow.is_main_process
    and not workflow.remote_exec
    and not workflow.subprocess_exec
):
    from dlbench import locks

    if locks.hold_and_clear_stale():
        print(
            "dlbench: removed stale Snakemake locks left by a killed run",
            file=sys.stderr,
        )

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

        print(
            estimate.describe(estimate.estimate(list(POINTS.values()), run_dir)),
            file=sys.stderr,
        )


CHART_FILES = charts.chart_files("results/charts", CFG)


# Input, resource and environment functions of the rules (called when the DAG is built).


def env_input(wildcards):
    dag_time_checks()
    return [] if USE_CONDA else [f"resources/envs/{wildcards.framework}.json"]


def conda_env(wildcards):
    return f"../envs/{wildcards.framework}.yaml"


_MEASURED = []


def measured():
    """Finished points' throughput, read once, to size cluster jobs (see dlbench/cluster.py)."""
    if not _MEASURED:
        from dlbench import estimate

        _MEASURED.append(estimate.measured_points(list(POINTS.values()), run_dir)[0])
    return _MEASURED[0]


def runtime_of(wildcards, attempt):
    return cluster.runtime_min(CFG, point_of(wildcards), measured(), attempt)


def caffe_data_dir(dataset, key):
    return f"resources/caffe/{dataset}/{key}"


def caffe_data_input(wildcards):
    """The HDF5 files a train job needs: those of its point's input handling (Caffe points only)."""
    if wildcards.framework != "caffe":
        return []
    p = point_of(wildcards)
    folder = caffe_data_dir(wildcards.dataset, _caffe_data.input_key(p["input"]))
    return [f"{folder}/{name}" for name in CAFFE_DATA_FILES]


def caffe_env_input(wildcards):
    return [] if USE_CONDA else ["resources/envs/caffe.json"]


def caffe_data_code():
    import hashlib

    h = hashlib.sha256()
    for rel in (
        "frameworks/caffe_data.py",
        "frameworks/base.py",
        "inputs.py",
        "datasets/store.py",
    ):
        h.update(open(f"{workflow.basedir}/dlbench/{rel}", "rb").read())
    return h.hexdigest()[:16]
