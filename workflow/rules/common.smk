# The points table and the functions the rules call: the validated config expanded into one
# row per training job, the wildcard constraints, and every input, params and resource function.
import os
import re
import sys

from snakemake_interface_executor_plugins.settings import DeploymentMethod


def _use_own_package():
    """This workflow's own dlbench package (beside workflow/), for this process and for every job it starts.

    A copy of the workflow used as a module, or run with --directory elsewhere, still runs its own
    code; a workflow fetched from a remote (github(...)) uses the dlbench installed beside Snakemake.
    """
    # workflow/rules: a path, or a local or remote source file
    here = workflow.current_basedir
    if not isinstance(here, str):
        here = here.get_path_or_uri(secret_free=True)
    if os.path.isdir(os.path.join(here, "..", "..", "dlbench")):
        root = os.path.dirname(os.path.dirname(os.path.abspath(here)))
        sys.path.insert(0, root)
        # set for the jobs (they inherit this process's environment), not required of the user
        os.environ.update(
            PYTHONPATH=os.pathsep.join(
                p for p in (root, os.environ.get("PYTHONPATH")) if p
            )
        )


_use_own_package()

from dlbench import chartlist, cluster, config as dlconfig, envs, sweep  # noqa: E402
from dlbench import locks  # noqa: E402
from dlbench import records, selection, versions  # noqa: E402
from dlbench.codedigest import adapter_digest, caffe_data_digest  # noqa: E402
from dlbench.datasets.catalog import INFO as DATASETS  # noqa: E402
from dlbench.frameworks import caffe_data, registry  # noqa: E402
from dlbench.paths import PUBLISHED_CSV  # noqa: E402

# Under --sdm conda a job runs in its rule's conda environment (workflow/envs/*.yaml); otherwise the base
# environment runs every job and a training job's runner starts the framework's own Python.
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method

# The schema beside these rules (a local copy of it where the workflow is fetched from a remote, github(...)).
CONFIG_SCHEMA = workflow.source_path("../schemas/config.schema.yaml")
try:
    for (
        _file
    ) in (
        workflow.configfiles
    ):  # keys given twice, alias bombs: Snakemake's own reading lets them by
        dlconfig.read_file(_file)
    CFG = dlconfig.validate(config, schema_path=CONFIG_SCHEMA)
except dlconfig.ConfigError as exc:
    raise SystemExit(f"dlbench: config error: {exc}")

# A run killed outright leaves Snakemake's lock files; the next run clears them when it
# can prove (with a kernel lock, see dlbench/locks.py) that no other run is alive here.
if (
    workflow.is_main_process
    and not workflow.remote_exec
    and not workflow.subprocess_exec
):
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


def run_dir(p):
    return f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}"


def record_status(p):
    """The status of a point's existing record (None: none yet), for `select`/`exclude` by status."""
    return records.status_in(run_dir(p))


# The sweep, expanded once (cut down by the config's select and exclude): the points, and each one's
# sub-studies and place in a tuning grid.
PLAN = sweep.plan(CFG, record_status)
if PLAN.removed and workflow.is_main_process:
    print(
        selection.describe(PLAN.removed, PLAN.expanded, len(PLAN.points)),
        file=sys.stderr,
    )
# Points chosen by the status of their record have one, which Snakemake takes as done: Snakemake's own
# --forcerun runs them again (the records they replace stay in their attempts/).
if "status" in CFG.get("select", {}) and workflow.is_main_process:
    _RECORDED = sum(1 for p in PLAN.points if record_status(p))
    if _RECORDED and not {"--forcerun", "-R"} & set(sys.argv):
        print(
            f"dlbench: select.status: {_RECORDED} of the points kept have a record; add --forcerun train "
            "to run them again (the records stay in their attempts/)",
            file=sys.stderr,
        )
POINTS = {(p["framework"], p["dataset"], p["id"]): p for p in PLAN.points}
MEMBERSHIP = PLAN.membership
TUNING = PLAN.tuning
# The environment of each point (dlbench.envs.point_env: a built one by its device, or a site's Python).
POINT_ENVS = {key: envs.point_env(CFG, p) for key, p in POINTS.items()}
# An environment of a framework version the study lists (dlbench.versions): its pins written and, the first
# time, locked (the package index answers), before any job; a version that does not resolve stops the run here.
# A dry run asks no index: it names the versions the run will lock.
VERSION_ENVS = sorted(
    {
        env
        for env, site in POINT_ENVS.values()
        if not site and envs.split_version(env)[1]
    }
)
_UNLOCKED = []
for _env in VERSION_ENVS:
    try:
        if not versions.prepare(_env, lock=not workflow.output_settings.dryrun):
            _UNLOCKED.append(_env)
    except envs.EnvError as exc:
        raise SystemExit(f"dlbench: {exc}")
if _UNLOCKED and workflow.is_main_process:
    print(
        "dlbench: not locked yet, locked by the run before any job (it asks the package index): "
        + ", ".join(_UNLOCKED),
        file=sys.stderr,
    )
# The digest of each built environment's pins and recipe, read once (not once per point).
ENV_KEYS = {
    env_name: "not locked yet" if env_name in _UNLOCKED else envs.env_key(env_name)
    for env_name, site in set(POINT_ENVS.values())
    if not site
}
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
    env="|".join(re.escape(env) for env in [*registry.env_names(), *VERSION_ENVS]),
    dataset="|".join(DATASETS),
    point=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    input_key="[0-9a-f]{12}",


METRICS = [f"{run_dir(p)}/metrics.json" for p in POINTS.values()]
CHART_FILES = chartlist.chart_files("results/charts", CFG)
THREAD_COUNTS = sorted({p["threads"] for p in POINTS.values()})
# The node's measurement lock (dlbench.locks.measuring), which the runner and machine_peak hold while they measure.
MEASURE_LOCK = (
    CFG["measurement"]["lock_file"] if CFG["measurement"]["exclusive"] else None
)
MEASURE_SLOTS = 1 if CFG["measurement"]["exclusive"] else 0
# The same lock for the heavy jobs (builds, data preparation, aggregation, charts), which read it from their
# environment (dlbench.locks.node_lock), so that they keep out of any measurement on their node.
os.environ[locks.NODE_LOCK_ENV] = MEASURE_LOCK or ""
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
    "contended_pct": CFG["measurement"]["contended_pct"],
    "quiet_wait_s": CFG["measurement"]["quiet_wait_s"],
}


# Finished points, read once for the dry run's time estimate and the cluster's time requests (a sample
# of each kind: the estimate needs medians, not every record; see dlbench/estimate.py).
_FINISHED = []


def finished():
    if not _FINISHED:
        from dlbench import estimate

        _FINISHED.append(estimate.finished(list(POINTS.values()), run_dir))
    return _FINISHED[0]


# While the study runs: a line per finished point, with the time left (dlbench/progress.py).
if (
    not workflow.output_settings.dryrun
    and workflow.is_main_process
    and not workflow.remote_exec
    and not workflow.subprocess_exec
):
    from dlbench import progress

    progress.attach(POINTS, run_dir, finished())


# The time estimate of a dry run: how long the points without a result will take.
if workflow.output_settings.dryrun and workflow.is_main_process:
    from dlbench import estimate

    print(
        estimate.describe(
            estimate.estimate(list(POINTS.values()), run_dir, finished())
        ),
        file=sys.stderr,
    )


onstart:
    # Locally, Snakemake caps a job's threads at --cores without a word: refuse such a point before
    # any job runs (known only now: the executor is chosen after the Snakefile is read).
    if workflow.local_exec:
        from dlbench.machine import usable_cores

        try:
            dlconfig.validate(
                config, local_cores=usable_cores(), schema_path=CONFIG_SCHEMA
            )
        except dlconfig.ConfigError as exc:
            raise SystemExit(f"dlbench: config error: {exc}")


# ---- input, params and resource functions of the rules (called when the DAG is built) ----


def point_of(wildcards):
    return POINTS[(wildcards.framework, wildcards.dataset, wildcards.point)]


def local_copy(wildcards):
    """The user's own copy of a dataset (config `data:`), or nothing: download it."""
    return CFG["data"].get(wildcards.dataset, "")


def test_copy(wildcards):
    """What a test copy of a dataset is (config `data_test_copy:`), or nothing: a copy checked by its digest."""
    return CFG["data_test_copy"].get(wildcards.dataset, "")


def per_point(value_of):
    """What the train rule gets for value_of(point). A plain value when every point has the same one
    (Snakemake then applies no function per job: at 20,000 points each function costs seconds), else a
    function of a job's wildcards that looks its point's value up in a table made here, once.
    """
    values = {key: value_of(p) for key, p in POINTS.items()}
    distinct = {repr(v) for v in values.values()}
    if len(distinct) == 1:
        return next(iter(values.values()))

    def of_point(wildcards):
        return values[(wildcards.framework, wildcards.dataset, wildcards.point)]

    return of_point


def framework_env_file(p):
    """The description of the point's built environment; none for a site one or under --sdm conda."""
    env_name, site = POINT_ENVS[(p["framework"], p["dataset"], p["id"])]
    return [] if USE_CONDA or site else [f"resources/envs/{env_name}.json"]


def point_env_params(p):
    """The point's environment as its job sees it; a site one with its versions, so that another site build
    of the framework reruns the framework's points (a built one reruns through its description's file).
    """
    env_name, site = POINT_ENVS[(p["framework"], p["dataset"], p["id"])]
    if site:
        return SITE_ENVS[(env_name, site)]
    return {
        "env": env_name,
        "kind": "conda" if USE_CONDA else "built",
        "key": ENV_KEYS[env_name],
    }


def env_pins(wildcards):
    return str(envs.pins_file(wildcards.env))


def env_recipe_key(wildcards):
    """A digest of the pins and build recipe: a changed recipe is a new environment (one a dry run has not
    locked yet has no key)."""
    return ENV_KEYS.get(wildcards.env) or envs.env_key(wildcards.env)


def point_conda_file(p):
    """The point's environment's conda file; a site point's job (only the runner) runs in the base one."""
    env_name, site = POINT_ENVS[(p["framework"], p["dataset"], p["id"])]
    return "../envs/base.yaml" if site else f"../envs/{env_name}.yaml"


def caffe_data_files(p):
    """The HDF5 files a Caffe point's train job reads (those of its input handling); nothing for the others."""
    if p["framework"] != "caffe":
        return []
    key = caffe_data.input_key(p["input"])
    return [f"resources/caffe/{p['dataset']}/{key}/{name}" for name in caffe_data.FILES]


def caffe_input_settings(wildcards):
    return CAFFE_INPUTS[(wildcards.dataset, wildcards.input_key)]


def peak_bf16_env(wildcards):
    """The PyTorch environment, where the study has bf16 CPU points: it measures the bfloat16 peak (numpy has
    none). The peaks are CPU yardsticks: GPU points are not taken against them."""
    if USE_CONDA or not any(
        p.get("precision") == "bf16" and p["device"] == "cpu" for p in POINTS.values()
    ):
        return []
    return ["resources/envs/pytorch.json"]


def point_params(wildcards):
    return point_of(wildcards)


def point_gpus(p):
    return 1 if p["device"] == "gpu" else 0


def point_measure_slots(p):
    """A CPU point takes the machine's one measurement slot; a GPU point measuring per device takes none (the
    runner's lock gives it a GPU of its own and keeps CPU points apart, see dlbench/locks.py).
    """
    if point_gpus(p) and CFG["measurement"]["gpu"] == "per_device":
        return 0
    return MEASURE_SLOTS


def point_gpu_model(p):
    if not point_gpus(p):
        return ""
    return CFG["cluster"].get("gpu_model") or ""


# The train rule's per-job values, each a plain value where every point has the same (see per_point).
TRAIN_INPUT = {
    "env": per_point(framework_env_file),
    "caffe_data": per_point(caffe_data_files),
}
TRAIN_THREADS = per_point(lambda p: p["threads"])
TRAIN_RESOURCES = {
    "dlbench_measure": per_point(point_measure_slots),
    "gpu": per_point(point_gpus),
    "gpu_model": per_point(point_gpu_model),
    "mem_mb": per_point(lambda p: cluster.mem_mb(CFG, p)),
    "slurm_partition": per_point(lambda p: cluster.partition(CFG, p) or ""),
}
TRAIN_CODE = per_point(lambda p: adapter_digest(p["framework"]))
TRAIN_ENV = per_point(point_env_params)
# Without --sdm conda no job runs in a conda environment (Snakemake ignores the directive, yet evaluates a
# function there for every job): the rule names the base environment, which its job's own process runs in.
TRAIN_CONDA = per_point(point_conda_file) if USE_CONDA else "../envs/base.yaml"
_RUNTIME = {}


def point_runtime(wildcards, attempt):
    """Minutes a cluster job asks for: its first attempt's (from finished points, worked out once for all
    points when first asked), times the attempt, so that a point that timed out gets more time.
    """
    if not _RUNTIME:
        _RUNTIME.update(cluster.runtime_table(CFG, list(POINTS.values()), finished()))
    return _RUNTIME[wildcards.point] * attempt
