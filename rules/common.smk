# The points table and the functions the rules call: the validated config expanded into one
# row per training job, the wildcard constraints, and every input, params and resource function.
import os
import sys

from snakemake_interface_executor_plugins.settings import DeploymentMethod


def _use_own_package():
    """This workflow's own dlbench package (beside rules/), for this process and for every job it starts.

    A copy of the workflow used as a module, or run with --directory elsewhere, still runs its own
    code; a workflow fetched from a remote (github(...)) uses the dlbench installed beside Snakemake.
    """
    here = workflow.current_basedir
    if isinstance(here, str) and os.path.isdir(os.path.join(here, "..", "dlbench")):
        root = os.path.dirname(os.path.abspath(here))
        sys.path.insert(0, root)
        # set for the jobs (they inherit this process's environment), not required of the user
        os.environ.update(
            PYTHONPATH=os.pathsep.join(
                p for p in (root, os.environ.get("PYTHONPATH")) if p
            )
        )


_use_own_package()

from dlbench import charts, cluster, config as dlconfig, envs, sweep  # noqa: E402
from dlbench.codedigest import adapter_digest, caffe_data_digest  # noqa: E402
from dlbench.datasets.catalog import INFO as DATASETS  # noqa: E402
from dlbench.frameworks import caffe_data, registry  # noqa: E402
from dlbench.paths import SCHEMA  # noqa: E402

# Under --sdm conda a job runs in its rule's conda environment (envs/*.yaml); otherwise the base
# environment runs every job and a training job's runner starts the framework's own Python.
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method

try:
    CFG = dlconfig.validate(config, schema_path=SCHEMA)
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

    _removed, _alive = locks.hold_and_clear_stale()
    if _removed:
        print(
            "dlbench: removed stale Snakemake locks left by a killed run",
            file=sys.stderr,
        )
    if _alive:
        print(
            "dlbench: a killed run's jobs are still running here ("
            + ", ".join(_alive)
            + "); Snakemake's locks stay until they end (or stop them)",
            file=sys.stderr,
        )

POINTS = {(p["framework"], p["dataset"], p["id"]): p for p in sweep.expand(CFG)}
MEMBERSHIP = sweep.membership(CFG)
TUNING = sweep.tuning(CFG)
# The environment of each point (dlbench.envs.point_env: a built one by its device, or a site's Python).
POINT_ENVS = {key: envs.point_env(CFG, p) for key, p in POINTS.items()}
# Each site interpreter a point uses, checked once now (before any job): its versions, or one line and stop.
SITE_ENVS = {}
for (framework, _, _), (env_name, python) in POINT_ENVS.items():
    if python and (env_name, python) not in SITE_ENVS:
        try:
            SITE_ENVS[(env_name, python)] = envs.site_env(framework, env_name, python)
        except envs.EnvError as exc:
            raise SystemExit(f"dlbench: {exc}")
# (dataset, input key) -> the `input` settings of the Caffe points whose HDF5 files share that folder.
CAFFE_INPUTS = {
    (p["dataset"], caffe_data.input_key(p["input"])): p["input"]
    for p in POINTS.values()
    if p["framework"] == "caffe"
}


wildcard_constraints:
    framework="|".join(registry.names()),
    env="|".join(registry.env_names()),
    dataset="|".join(DATASETS),
    point=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    input_key="[0-9a-f]{12}",


def run_dir(p):
    return f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}"


METRICS = [f"{run_dir(p)}/metrics.json" for p in POINTS.values()]
CHART_FILES = charts.chart_files("results/charts", CFG)
THREAD_COUNTS = sorted({p["threads"] for p in POINTS.values()})
# The node's measurement lock (dlbench.locks.measuring), which the runner and machine_peak hold while they measure.
MEASURE_LOCK = (
    CFG["measurement"]["lock_file"] if CFG["measurement"]["exclusive"] else None
)
MEASURE_SLOTS = 1 if CFG["measurement"]["exclusive"] else 0
# How every training job measures (dlbench.cli.train's keyword arguments): the same for every point.
RUNNER_OPTIONS = {
    "interval_s": CFG["monitor"]["interval_s"],
    "monitor": CFG["monitor"]["enabled"],
    "time_limit_s": CFG["limits"]["time_s"],
    "memory_limit_mb": CFG["limits"]["memory_mb"],
    "hang_s": CFG["limits"]["hang_s"],
    "measure_lock": MEASURE_LOCK,
    "gpu_per_device": CFG["measurement"]["gpu"] == "per_device",
    "lock_timeout_s": CFG["measurement"]["lock_timeout_s"],
}


# The time estimate of a dry run: how long the points without a result will take.
if workflow.output_settings.dryrun and workflow.is_main_process:
    from dlbench import estimate

    print(
        estimate.describe(estimate.estimate(list(POINTS.values()), run_dir)),
        file=sys.stderr,
    )


onstart:
    # Locally, Snakemake caps a job's threads at --cores without a word: refuse such a point before
    # any job runs (known only now: the executor is chosen after the Snakefile is read).
    if workflow.local_exec:
        from dlbench.machine import usable_cores

        try:
            dlconfig.validate(
                config, local_cores=usable_cores(), schema_path=SCHEMA
            )
        except dlconfig.ConfigError as exc:
            raise SystemExit(f"dlbench: config error: {exc}")


# ---- input, params and resource functions of the rules (called when the DAG is built) ----


def point_of(wildcards):
    return POINTS[(wildcards.framework, wildcards.dataset, wildcards.point)]


def local_copy(wildcards):
    """The user's own copy of a dataset (config `data:`), or nothing: download it."""
    return CFG["data"].get(wildcards.dataset, "")


def point_env_of(wildcards):
    """(environment name, site interpreter or None) of the point."""
    return POINT_ENVS[(wildcards.framework, wildcards.dataset, wildcards.point)]


def framework_env_file(wildcards):
    """The description of the point's built environment; none for a site one or under --sdm conda."""
    env_name, site = point_env_of(wildcards)
    return [] if USE_CONDA or site else [f"resources/envs/{env_name}.json"]


def point_env_params(wildcards):
    """The point's environment as its job sees it; a site one with its versions, so that another site build
    of the framework reruns the framework's points (a built one reruns through its description's file).
    """
    env_name, site = point_env_of(wildcards)
    if site:
        return SITE_ENVS[(env_name, site)]
    return {
        "env": env_name,
        "kind": "conda" if USE_CONDA else "built",
        "key": envs.env_key(env_name),
    }


def env_pins(wildcards):
    return str(envs.pins_file(wildcards.env))


def env_recipe_key(wildcards):
    """A digest of the pins and build recipe: a changed recipe is a new environment."""
    return envs.env_key(wildcards.env)


def point_conda_file(wildcards):
    """The point's environment's conda file; a site point's job (only the runner) runs in the base one."""
    env_name, site = point_env_of(wildcards)
    return "../envs/base.yaml" if site else f"../envs/{env_name}.yaml"


def caffe_data_files(wildcards):
    """The HDF5 files a Caffe point's train job reads (those of its input handling); nothing for the others."""
    if wildcards.framework != "caffe":
        return []
    key = caffe_data.input_key(point_of(wildcards)["input"])
    return [
        f"resources/caffe/{wildcards.dataset}/{key}/{name}" for name in caffe_data.FILES
    ]


def caffe_input_settings(wildcards):
    return CAFFE_INPUTS[(wildcards.dataset, wildcards.input_key)]


def peak_bf16_env(wildcards):
    """The PyTorch environment, where the study has bf16 points: it measures the bfloat16 peak (numpy has none)."""
    if USE_CONDA or not any(p.get("precision") == "bf16" for p in POINTS.values()):
        return []
    return ["resources/envs/pytorch.json"]


def point_params(wildcards):
    return point_of(wildcards)


def point_code(wildcards):
    """Changing a framework's adapter (or the shared trainer code) reruns its points only."""
    return adapter_digest(wildcards.framework)


def point_threads(wildcards):
    return point_of(wildcards)["threads"]


def point_gpus(wildcards):
    return 1 if point_of(wildcards)["device"] == "gpu" else 0


def point_measure_slots(wildcards):
    """A CPU point takes the machine's one measurement slot; a GPU point measuring per device takes none (the
    runner's lock gives it a GPU of its own and keeps CPU points apart, see dlbench/locks.py).
    """
    if point_gpus(wildcards) and CFG["measurement"]["gpu"] == "per_device":
        return 0
    return MEASURE_SLOTS


def point_gpu_model(wildcards):
    if not point_gpus(wildcards):
        return ""
    return CFG["cluster"].get("gpu_model") or ""


def point_mem_mb(wildcards):
    return cluster.mem_mb(CFG, point_of(wildcards))


def point_partition(wildcards):
    return cluster.partition(CFG, point_of(wildcards)) or ""


_MEASURED = []


def point_runtime(wildcards, attempt):
    """Minutes a cluster job asks for, from finished points' throughput (read once; see dlbench/cluster.py)."""
    if not _MEASURED:
        from dlbench import estimate

        _MEASURED.append(estimate.measured_points(list(POINTS.values()), run_dir)[0])
    return cluster.runtime_min(CFG, point_of(wildcards), _MEASURED[0], attempt)
