"""What the workflow's rules are given: the study read once, when Snakemake reads the Snakefile.

workflow/rules/common.smk is wiring only: it hands Snakemake's `config` and a `Reader` (which Snakemake
reads the Snakefile, and what for) to `Study`, and names for the rules what the study holds. What is
worked out depends on the reader:
  - the main Snakemake (a run, a dry run, --report, --lint, or the one that submits to a cluster) does
    everything once and says what it found: it clears the stale Snakemake locks of a killed run, reads
    the finished records where the config selects by status, locks the environments of framework
    versions, probes each site interpreter, prints the dry run's time estimate or attaches the
    progress line; a dry run plans every job's first attempt, so that the train rule's attempt and cluster
    time are plain values there (Snakemake reads a function-valued resource's signature twice per job);
  - a job's own Snakemake (a SLURM job's `--mode remote`, or `--mode subprocess`) does only what its
    job's DAG needs, and prints nothing: it reads no record (a selection by status keeps every point
    there, its job's among them), locks nothing, and probes no interpreter (the main process's probes
    reach its jobs through their environment: dlbench.environments.site).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.datasets import prepare
from dlbench.datasets.catalog import INFO as DATASETS
from dlbench.environments import choice, pins, site
from dlbench.environments.environment import DESCRIPTION, SITE
from dlbench.environments.errors import EnvError
from dlbench.environments.key import env_key
from dlbench.frameworks import caffe_data, registry
from dlbench.node import locks
from dlbench.paths import as_workflow_input
from dlbench.record import incomplete, raw, store
from dlbench.rules import cluster_request, stale_locks, yte_guard
from dlbench.rules.code_digest import record_digest, training_digest
from dlbench.run import earlier_layout
from dlbench.study import config as dlconfig
from dlbench.study import selection, sweep

POINT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
BASE_CONDA = "../envs/base.yaml"


def job_function(func: Callable) -> Callable:
    """func as Snakemake calls it for each job, its signature read once here rather than at every call: Snakemake
    takes a function's parameters from this attribute where it is set (its own ioutils set it). At 20,000 jobs,
    reading three functions' signatures per job costs seconds."""
    try:
        from snakemake.common import FUNC_OVERWRITE_PARAMS_ATTR
    except ImportError:  # no Snakemake here: nothing calls it per job
        return func
    params = inspect.signature(func).parameters

    def call(*args, **kwargs):
        return func(*args, **kwargs)

    functools.update_wrapper(call, func)
    setattr(call, FUNC_OVERWRITE_PARAMS_ATTR, params)
    return call


class StudyError(SystemExit):
    """A config or environment that stops the run before any job, as one line."""


def own_package(root: str, environ=os.environ) -> None:
    """Make this checkout's dlbench (at root) the one every job imports: the jobs inherit this process's
    environment, so that a user need not set PYTHONPATH."""
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, environ.get("PYTHONPATH")) if p)


def study_file(configfiles, overrides) -> str:
    """The config file a study ran as it is, where one was given and --config changed nothing in it (the findings
    quote its calibration, dlbench.present.calibrated); "" otherwise. Relative to the working directory where it
    lies inside it: the findings rule's param, which must not change when a finished workflow is moved."""
    files = [Path(f).resolve() for f in configfiles]
    if len(set(files)) != 1 or overrides:
        return ""
    try:
        return str(files[-1].relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(files[-1])


def read_config(config: dict, configfiles, schema: str) -> dict:
    """The validated config, or StudyError. Each file is read strictly too (keys given twice, alias bombs:
    Snakemake's own reading lets them by)."""
    try:
        for path in configfiles:
            problem = yte_guard.template_problem(path, dlconfig.read_file(path))
            if problem:
                # Snakemake renders a yte template (and runs its code) before the Snakefile is read: the workflow
                # profile refuses it before that (yte_guard); here only where that profile was not read
                raise dlconfig.ConfigError(problem)
        return dlconfig.validate(config, schema_path=schema)
    except dlconfig.ConfigError as exc:
        raise StudyError(exc.said()) from None


def check_local_cores(cfg: dict, cores: int) -> None:
    """Locally Snakemake caps a job's threads at --cores without a word: refuse such a point (StudyError)."""
    try:
        dlconfig.check_local_cores(cfg, cores)
    except dlconfig.ConfigError as exc:
        raise StudyError(exc.said()) from None


@dataclass(frozen=True)
class Reader:
    """Which Snakemake reads the Snakefile, and what for."""

    main: bool = True  # the main process (not a job's own Snakemake)
    dryrun: bool = False
    use_conda: bool = False  # --sdm conda: each job runs in its rule's conda environment
    forcerun: bool = field(default_factory=lambda: bool({"--forcerun", "-R"} & set(sys.argv)))


def run_dir(p: dict) -> str:
    return f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}"


def _key(p: dict) -> tuple[str, str, str]:
    return p["framework"], p["dataset"], p["id"]


class Study:
    """The points of a validated config and every value and function the rules take from them."""

    def __init__(self, cfg: dict, reader: Reader | None = None, *, say: Callable[[str], None] | None = None):
        reader = reader or Reader()
        self.cfg, self.reader = cfg, reader
        self._say = say or (lambda line: print(line, file=sys.stderr))
        self._statuses: dict[tuple, str | None] = {}
        self._model = None
        self._runtime: dict[str, int] = {}
        if reader.main:
            self._clear_stale_locks()
        self._plan()
        if reader.main:
            self._adopt_earlier_layout()
        self._check_datasets()
        measurement = cfg["measurement"]
        # The node's measurement lock (dlbench.node.locks.measuring), which the runner and machine_peak hold.
        self.measure_lock = measurement["lock_file"] if measurement["exclusive"] else None
        self._environments()
        self.caffe_inputs = {(p["dataset"], caffe_data.input_key(p["input"])): p["input"]
                             for p in self.points.values() if registry.get(p["framework"]).prepared_input}
        self.metrics = [f"{run_dir(p)}/{store.RESULT}" for p in self.points.values()]
        # The train rule's output, each point's raw measurement; the record rule's input.
        self.measurements = [f"{run_dir(p)}/{raw.MEASUREMENT}" for p in self.points.values()]
        self.record_code = record_digest()  # how a record is made: where it changes, the record rule makes them again
        self.thread_counts = sorted({p["threads"] for p in self.points.values()})
        self.measure_slots = 1 if measurement["exclusive"] else 0
        # How every training job measures (dlbench.run.options.RunOptions's fields): the same for every point.
        self.runner_options = {
            "interval_s": cfg["monitor"]["interval_s"], "monitor": cfg["monitor"]["enabled"],
            "time_limit_s": cfg["limits"]["time_s"], "memory_limit_mb": cfg["limits"]["memory_mb"],
            "hang_s": cfg["limits"]["hang_s"], "measure_lock": self.measure_lock,
            "gpu_per_device": measurement["gpu"] == "per_device", "lock_timeout_s": measurement["lock_timeout_s"],
            "contended_pct": measurement["contended_pct"], "quiet_wait_s": measurement["quiet_wait_s"],
        }

    # ------------------------------------------------------------------------------------------ reading

    def _say_main(self, line: str) -> None:
        if self.reader.main:
            self._say(line)

    def _clear_stale_locks(self) -> None:
        """A run killed outright leaves Snakemake's lock files; clear them where a kernel lock proves that no
        other run is alive here (dlbench/rules/stale_locks.py). Once its jobs have ended, keep the points they finished
        (dlbench.record.incomplete)."""
        removed, alive = stale_locks.hold_and_clear_stale()
        if removed:
            self._say("dlbench: removed stale Snakemake locks left by a killed run")
        if alive:
            self._say(f"dlbench: a killed run's jobs are still running here ({', '.join(alive)}); Snakemake's "
                      "locks stay until they end (or stop them)")
            return
        kept = incomplete.keep_finished()  # a running job's outputs are absent: only finished ones are kept
        if kept:
            self._say(f"dlbench: {len(kept)} points finished by the jobs of a killed run are kept, not measured "
                      f"again (Snakemake's incomplete marks removed): {', '.join(kept[:3])}"
                      + (", ..." if len(kept) > 3 else ""))

    def _adopt_earlier_layout(self) -> None:
        """Points an earlier dlbench recorded, given their raw measurement apart from the record, so that they are not
        trained again (dlbench.run.earlier_layout); in a dry run too, which would otherwise plan them all again."""
        adopted = earlier_layout.adopt_all(run_dir(p) for p in self.points.values())
        if adopted:
            self._say(earlier_layout.said(adopted))
            # their prepared inputs too: the digest's new form is no change to the code that wrote them
            by_folder = {run_dir(p): p for p in self.points.values()}
            earlier_layout.forget_preparations(sorted({f for folder in adopted if folder in by_folder
                                                       for f in self.prepared_files(by_folder[folder])}))

    def record_status(self, p: dict) -> str | None:
        """The status of a point's existing record (None: none yet), read once per point."""
        key = _key(p)
        if key not in self._statuses:
            self._statuses[key] = store.status_in(run_dir(p))
        return self._statuses[key]

    def _plan(self) -> None:
        """The sweep, expanded once and cut down by the config's select and exclude."""
        cfg = self.cfg
        by_status = "status" in cfg.get("select", {}) or "status" in cfg.get("exclude", {})
        if by_status and not self.reader.main:  # a job's own Snakemake reads no record: it keeps every point
            cfg = {**cfg, **{k: {n: v for n, v in cfg.get(k, {}).items() if n != "status"}
                             for k in ("select", "exclude") if k in cfg}}
        plan = sweep.plan(cfg, self.record_status if by_status else None)
        if plan.removed:
            self._say_main(selection.describe(plan.removed, plan.expanded, len(plan.points)))
        # Points chosen by the status of their record have one, which Snakemake takes as done: its own
        # --forcerun runs them again (the records they replace stay in their attempts/).
        if "status" in cfg.get("select", {}) and self.reader.main and not self.reader.forcerun:
            recorded = sum(1 for p in plan.points if self.record_status(p))
            if recorded:
                self._say(f"dlbench: select.status: {recorded} of the points kept have a record; add --forcerun "
                          "train to run them again (the records stay in their attempts/)")
        self.points = {_key(p): p for p in plan.points}
        self.membership, self.tuning = plan.membership, plan.tuning

    def _check_datasets(self) -> None:
        """A dataset not prepared yet whose file setup downloads (mnist_5k's wheel) is missing or not the pinned
        one stops the run here, as one line naming the fix, rather than in its first job (main process)."""
        if not self.reader.main:
            return
        for name in sorted({p["dataset"] for p in self.points.values()}):
            if os.path.exists(f"resources/datasets/{name}/meta.json"):  # prepared: the rule's output exists
                continue
            problem = prepare.source_problem(name, self.cfg["data"].get(name), self.cfg["data_test_copy"].get(name))
            if problem:
                raise StudyError(f"dlbench: dataset {name}: {problem}")

    def _environments(self) -> None:
        """Each point's Environment (dlbench.environments.choice), worked out once: the framework versions'
        environments locked and the site interpreters probed by the main process, before any job; where one
        does not resolve or does not work, one line and stop."""
        try:
            chosen = choice.choose(self.cfg, self.points, main=self.reader.main, dryrun=self.reader.dryrun,
                                   use_conda=self.reader.use_conda, say=self._say, heavy=self._heavy)
        except EnvError as exc:
            raise StudyError(f"dlbench: {exc}") from None
        self.environments, self.version_envs, self.env_keys = chosen.of_point, chosen.version_envs, chosen.keys

    @contextlib.contextmanager
    def _heavy(self, what: str):
        """Heavy work of the main process while it reads the Snakefile (a site interpreter importing its framework,
        pip's resolver): never beside a measurement on this node, waiting at most measurement.lock_timeout_s
        (then StudyError, one line). Safe from deadlock: it is taken and let go within this parse, before
        Snakemake starts any job of this run, so none of this run's points can wait for it while it waits for
        them; and a job's own Snakemake probes nothing (above), so no job takes it from inside a measurement."""
        try:
            with locks.heavy_work(self.measure_lock, what, timeout_s=self.cfg["measurement"]["lock_timeout_s"]):
                yield
        except (locks.LockTimeout, locks.LockUnusable) as exc:
            raise StudyError(f"dlbench: {exc}") from None

    def export(self, environ=os.environ) -> None:
        """What the jobs read from the environment they inherit: the node's measurement lock, which the heavy
        jobs (builds, data preparation, aggregation, charts) keep out of (dlbench.node.locks.node_lock), the longest
        wait for it (dlbench.node.locks.lock_timeout), and the site interpreters the main process probed."""
        environ[locks.NODE_LOCK_ENV] = self.measure_lock or ""
        environ[locks.LOCK_TIMEOUT_ENV] = f"{self.runner_options['lock_timeout_s']:g}"  # heavy jobs wait no longer
        sites = {(env.name, env.python): env for env in self.environments.values() if env.kind == SITE}
        if self.reader.main and sites:
            environ[site.SITE_ENVS_VAR] = site.handed_on(sites.values())

    def model(self):
        """The time model of the finished points, read once (main process) for the dry run's estimate, the
        progress line and the cluster's time requests: a sample of each kind (dlbench/plan/estimate.py)."""
        if self._model is None:
            from dlbench.plan import estimate

            done = estimate.finished(list(self.points.values()), run_dir)
            self._model = done, estimate.model_of(done)
        return self._model

    def announce(self) -> None:
        """The main process only: a dry run's time estimate, else the progress line a run prints per point."""
        if not self.reader.main:
            return
        from dlbench.plan import estimate

        done, model = self.model()
        if self.reader.dryrun:
            self._say(estimate.describe(estimate.estimate(list(self.points.values()), run_dir, done, model=model)))
        else:
            from dlbench.rules import progress

            progress.attach(self.points, run_dir, done, model=model)

    # ------------------------------------------------------------------------------------------ wiring

    def wildcard_constraints(self) -> dict[str, str]:
        return {"framework": "|".join(registry.names()),
                "env": "|".join(re.escape(env) for env in [*registry.env_names(), *self.version_envs]),
                "dataset": "|".join(DATASETS), "point": POINT_PATTERN, "input_key": "[0-9a-f]{12}"}

    def per_point(self, value_of: Callable[[dict], object]):
        """What the train rule gets for value_of(point). A plain value when every point has the same one
        (Snakemake then applies no function per job: at 20,000 points each function costs seconds), else a
        function of a job's wildcards that looks its point's value up in a table made here, once.
        """
        values = {key: value_of(p) for key, p in self.points.items()}
        distinct = {repr(v) for v in values.values()}
        if len(distinct) == 1:
            return next(iter(values.values()))

        def of_point(wildcards):
            return values[(wildcards.framework, wildcards.dataset, wildcards.point)]

        return job_function(of_point)

    def train_values(self) -> dict[str, object]:
        """The train rule's per-job values, each a plain value where every point has the same (per_point)."""
        conda, dry = self.reader.use_conda, self.reader.dryrun
        return {
            "env_file": self.per_point(self.env_file), "prepared_input": self.per_point(self.prepared_files),
            "threads": self.per_point(lambda p: p["threads"]),
            "measure": self.per_point(self.measure_slots_of), "gpu": self.per_point(gpus),
            "gpu_model": self.per_point(self.gpu_model),
            "mem_mb": cluster_request.mem_mb(self.cfg),
            "partition": self.per_point(lambda p: cluster_request.partition(self.cfg, p) or ""),
            "account": cluster_request.setting(self.cfg, "account") or "",
            "slurm_extra": cluster_request.slurm_extra(self.cfg),
            "code": self.per_point(lambda p: training_digest(p["framework"])), "env": self.per_point(self.env_params),
            # Without --sdm conda no job runs in a conda environment (Snakemake ignores the directive, yet
            # evaluates a function there for every job): the base environment, which the job's process runs in.
            # A dry run names none: Snakemake would work out every job's params to expand it, and use nothing.
            "conda": self.per_point(self.conda_file) if conda else (None if dry else BASE_CONDA),
            "retries": self.cfg["measurement"]["retries"],
            # Which attempt this is: a resource, so that neither it nor a changed --retries reruns a point. A dry
            # run plans every job's first attempt, so there both are plain values (a function-valued resource
            # costs Snakemake two signature reads per job).
            "attempt": 1 if dry else job_function(lambda wildcards, attempt: attempt),
            "runtime": self.per_point(self.first_runtime) if dry else job_function(self.point_runtime),
            "point": job_function(self.point_of),
        }

    # per point -----------------------------------------------------------------------------------

    def env_file(self, p: dict) -> list[str]:
        """What the point's job waits for: its environment's build (none for a site one, or under --sdm conda)."""
        built = self.environments[_key(p)].description_file
        return [built] if built else []

    def env_params(self, p: dict) -> dict:
        """The point's Environment, as the job makes it again (Environment.of_params): its name and key, or a site
        one's interpreter and versions, so that another site build of the framework reruns its points."""
        return self.environments[_key(p)].params()

    def conda_file(self, p: dict) -> str:
        """The point's environment's conda file; a site point's job (only the runner) runs in the base one."""
        env = self.environments[_key(p)]
        return BASE_CONDA if env.kind == SITE else f"../envs/{env.name}.yaml"

    def prepared_files(self, p: dict) -> list[str]:
        """The files a point's train job reads that the workflow prepares for its framework (Caffe's HDF5
        files, for its input handling); nothing for the others."""
        if not registry.get(p["framework"]).prepared_input:
            return []
        key = caffe_data.input_key(p["input"])
        return [f"resources/caffe/{p['dataset']}/{key}/{name}" for name in caffe_data.FILES]

    def measure_slots_of(self, p: dict) -> int:
        """A CPU point takes the machine's one measurement slot; a GPU point measuring per device takes none (the
        runner's lock gives it a GPU of its own and keeps CPU points apart, see dlbench/node/locks.py)."""
        if gpus(p) and self.cfg["measurement"]["gpu"] == "per_device":
            return 0
        return self.measure_slots

    def gpu_model(self, p: dict) -> str:
        return (self.cfg["cluster"].get("gpu_model") or "") if gpus(p) else ""

    # functions of a job's wildcards ----------------------------------------------------------------

    def point_of(self, wildcards) -> dict:
        return self.points[(wildcards.framework, wildcards.dataset, wildcards.point)]

    def local_copy(self, wildcards) -> str:
        """The user's own copy of a dataset (config `data:`), or nothing: download it."""
        return self.cfg["data"].get(wildcards.dataset, "")

    def test_copy(self, wildcards) -> str:
        """What a test copy of a dataset is (config `data_test_copy:`), or nothing: a copy checked by its digest."""
        return self.cfg["data_test_copy"].get(wildcards.dataset, "")

    def env_pins(self, wildcards) -> str:
        return as_workflow_input(pins.pins_file(wildcards.env))  # a moved checkout rebuilds and reruns nothing

    def env_recipe_key(self, wildcards) -> str:
        """A digest of the pins and build recipe: a changed recipe is a new environment (one a dry run has not
        locked yet has no key)."""
        return self.env_keys.get(wildcards.env) or env_key(wildcards.env)

    def caffe_input_settings(self, wildcards) -> dict:
        return self.caffe_inputs[(wildcards.dataset, wildcards.input_key)]

    def peak_bf16_env(self, wildcards) -> list[str]:
        """The environment that measures the bfloat16 GEMM peak (registry: bf16_peak), where the study has bf16
        CPU points (numpy has none). The peaks are CPU yardsticks: GPU points are not taken against them."""
        if self.reader.use_conda or not any(p.get("precision") == "bf16" and p["device"] == "cpu"
                                        for p in self.points.values()):
            return []
        return [DESCRIPTION.format(env=registry.bf16_peak_framework().name)]

    def point_runtime(self, wildcards, attempt: int) -> int:
        """Minutes a cluster job asks for: its first attempt's (first_runtime), times the attempt, so that a point
        that timed out gets more time. A job's own Snakemake asks for nothing (its job was submitted already): the
        configured default, without reading any record."""
        if not self.reader.main:
            return cluster_request.runtime_min(self.cfg, None, attempt)
        return self.first_runtime(self.point_of(wildcards)) * attempt

    def first_runtime(self, p: dict) -> int:
        """Minutes the point's job asks for at its first attempt, from the finished points (the table worked out
        once for all points when first asked)."""
        if not self._runtime:
            done, model = self.model()
            self._runtime = cluster_request.runtime_table(self.cfg, list(self.points.values()), done, model)
        return self._runtime[p["id"]]


def gpus(p: dict) -> int:
    return 1 if p["device"] == "gpu" else 0
