"""The record of one point, field by field: metrics.json, and one row of results/runs.parquet.

The one home of what a record holds: every field's name (its unit in the name: `_s` seconds, `_mb` MiB,
`_pct` percent of one core or of the device, `_w` watts, `_j` joules, `_img_s` images per second), its type,
who writes it and what it means. dlbench.run.build_record makes the record from it, dlbench.aggregate.collect orders the
Parquet columns by it, an adapter's info() is checked against it (`check_info`), and docs/record.md is written
from it (dlbench.docgen.record_fields, run by `dlbench docs`; a test compares the two).

Standard library only: the trainer imports it in every framework's environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from dlbench.rerun import NO_RERUN

# A name's ending and the unit it says (the longest ending first: `_img_s` before `_s`).
UNITS = (("_img_s", "images/s"), ("_pct", "%"), ("_mb", "MiB"), ("_s", "s"), ("_w", "W"), ("_j", "J"))
TYPE_NAMES = {str: "text", int: "integer", float: "number", bool: "yes/no", dict: "object"}


@dataclass(frozen=True)
class Field:
    name: str
    type: type  # str, int, float (an int is a float too) or bool; None is always allowed
    # Words for people (docs/record.md): changing them reruns nothing (dlbench.rerun).
    description: str = field(metadata=NO_RERUN)
    where: str = field(default="", metadata=NO_RERUN)  # where the field is present; empty: in every record
    info: str | None = None  # the key of the trainer's `info` event that fills it (Adapter.info)

    @property
    def unit(self) -> str:
        return next((unit for end, unit in UNITS if self.name.endswith(end)), "")


@dataclass(frozen=True)
class Section:
    title: str = field(metadata=NO_RERUN)
    source: str = field(metadata=NO_RERUN)  # who writes these fields
    fields: tuple[Field, ...] = ()


_f = Field  # short, for the table below


GPU = "GPU points"
FAILED = "points that did not end ok"
SECTIONS = (
    Section("The point", "the point's parameters (dlbench.study.sweep)", (
        _f("id", str, "the point's id: a readable slug and a digest of its parameters, the same on every machine "
           "(`run_id` in the tables)"),
        _f("framework", str, "the framework that trained it"),
        _f("dataset", str, "the dataset it trained on"),
        _f("preset", str, "whose defaults it took (`own`: its framework's)"),
        _f("network", str, "the network of the preset (dlbench/spec/networks.py)"),
        _f("optimizer", str, "sgd, adam, ..."),
        _f("momentum", float, "the optimizer's momentum"),
        _f("weight_decay", float, "L2 weight decay"),
        _f("learning_rate", float, "the base learning rate"),
        _f("batch_size", int, "training images per step"),
        _f("test_batch_size", int, "images per test batch"),
        _f("iterations", int, "iterations trained (fewer than planned where early stopping ended it; the plan's "
           "where the point did not finish)"),
        _f("epochs", float, "the configured length in epochs, where the point gives epochs"),
        _f("test_interval", int, "iterations between two tests (none: once per epoch)"),
        _f("shuffle", bool, "whether each epoch takes a new order of the training images"),
        _f("ema_decay", float, "the decay of the weights' moving average, where the point keeps one"),
        _f("device", str, "cpu or gpu"),
        _f("threads", int, "threads the point asks for"),
        _f("interop_threads", int, "inter-op threads the point asks for (TensorFlow, PyTorch)"),
        _f("library", str, "the compute library it asks for (`default`, `mkl`, ...)"),
        _f("version", str, "the framework version it asks for, where the study sweeps versions"),
        _f("repeat", int, "the repeat's number"),
        _f("seed", int, "the random seed: the config's seed plus the repeat"),
        _f("cross_apply", str, "how another framework's preset was applied (`settings`, `preset`; none: its own)"),
        _f("setting_id", str, "shared by the repeats of one setting, on any machine"),
        _f("lr_policy", str, "the learning-rate policy's name"),
        _f("lr_policy_json", str, "the learning-rate policy, whole (JSON)"),
        _f("input_json", str, "the input handling: crop, mirror, scaling (JSON)"),
        _f("init", str, "the scheme the initial weights were drawn from"),
        _f("validation_json", str, "the validation hold-out and early stopping (JSON)", "points that validate"),
        _f("compile", str, "eager or compiled (the framework's natural one where the point gives none; none: "
           "the framework has no such switch)"),
        _f("precision", str, "fp32 or bf16 (as `compile`)"),
        _f("memory_format", str, "contiguous or channels_last: the layout asked of the network's weights (as "
           "`compile`; PyTorch alone has the switch)"),
        _f("threads_requested", int, "the point's threads, as the trainer was given them"),
    )),
    Section("The outcome", "the trainer's events, read by the runner", (
        _f("status", str, "ok, or how it failed (diverged, oom, timeout, hung, error, killed, unavailable, ...)"),
        _f("reason", str, "why it failed, in one line", FAILED),
        _f("returncode", int, "the trainer's exit code (negative: the signal that ended it)"),
        _f("log_tail", str, "the trainer's traceback and the end of its log", FAILED),
        _f("diverged_at_iteration", int, "the iteration whose loss was not finite", "diverged points"),
        _f("iterations_planned", int, "the length planned, in iterations (from epochs where the point gives them)"),
        _f("iterations_done", int, "the last iteration the trainer reported"),
        _f("accuracy", float, "test accuracy on the whole test split, a fraction"),
        _f("test_loss", float, "mean loss on the test split"),
        _f("final_loss", float, "the last training loss reported"),
        _f("epochs_trained", float, "iterations trained over the iterations of one epoch"),
        _f("images_trained", int, "iterations trained times the batch size"),
        _f("train_samples", int, "training images"),
        _f("test_samples", int, "test images"),
        _f("validation_samples", int, "images held out of training for validation (0: none)"),
        _f("best_validation_iteration", int, "the iteration whose weights were tested (early stopping)"),
        _f("best_validation_accuracy", float, "the best validation accuracy, a fraction"),
        _f("stopped_early_at", int, "the last iteration trained, where the patience ran out before the plan"),
        _f("accuracy_at_best", float, "test accuracy of the best-validation weights"),
        _f("ema", str, "`applied (decay d)`, or `not applied: why`, where the point asks for a moving average"),
        _f("params", int, "trainable parameters of the network"),
        _f("flops_per_image_train", float, "FLOPs of one training image: forward and backward"),
        _f("achieved_gflops", float, "training throughput times FLOPs per image, in GFLOP/s",
           "points with a throughput"),
    )),
    Section("Times", "the trainer's clocks and phases (monotonic, GPU work synchronised)", (
        _f("train_time_s", float, "training time, its interval tests and augmentation left out"),
        _f("test_time_s", float, "the final test on the whole test split"),
        _f("interval_test_time_s", float, "the tests (and validations) during training"),
        _f("augment_time_s", float, "drawing new augmented views of the training images"),
        _f("throughput_img_s", float, "images trained per second of training time"),
        _f("test_throughput_img_s", float, "test images per second of the final test"),
        _f("import_time_s", float, "importing the framework", "where the trainer marked the phase"),
        _f("data_load_time_s", float, "reading the data, after its input handling", "where the trainer marked it"),
        _f("build_time_s", float, "building the network and its optimizer", "where the trainer marked it"),
        _f("compile_time_s", float, "tracing, compiling or warming up (not training)", "where the trainer marked it"),
        _f("startup_time_s", float, "from the interpreter's start to the trainer's first word"),
        _f("wall_time_s", float, "from the trainer's start to its end, as the runner saw it"),
        _f("paused_s", float, "how long the job was stopped (SIGSTOP) while the point ran"),
    )),
    Section("Resources", "the monitor, outside the trainer, over its whole process tree", (
        _f("cpu_util_mean_pct", float, "CPU use over training, percent of one core"),
        _f("cpu_util_peak_pct", float, "the highest CPU use read"),
        _f("rss_peak_mb", float, "the highest resident memory read"),
        _f("rss_mean_mb", float, "resident memory over training"),
        _f("threads_peak", int, "the most threads read"),
        _f("samples", int, "readings taken"),
        _f("monitor_cpu_s", float, "CPU time the monitor itself took"),
        _f("monitor_died", str, "when and why the monitor stopped sampling before the trainer ended, where it did"),
        _f("monitor_interval_s", float, "seconds between two readings (none: the monitor was off)"),
        _f("gpu_util_mean_pct", float, "GPU use over training", GPU),
        _f("gpu_mem_peak_mb", float, "the device's highest memory in use", GPU),
        _f("gpu_mem_idle_mb", float, "the device's memory in use before the trainer started", GPU),
        _f("gpu_mem_peak_above_idle_mb", float, "what the point added to the idle memory", GPU),
        _f("gpu_power_mean_w", float, "the device's power over training", GPU),
        _f("gpu_power_idle_w", float, "the device's power before the trainer started", GPU),
        _f("gpu_energy_train_j", float, "the device's energy over the train phase", GPU),
        _f("gpu_energy_train_above_idle_j", float, "that energy less the idle power over the phase", GPU),
        _f("gpu_energy_source", str, "`counter` (NVML's energy counter) or `power x time`", GPU),
        _f("gpu_nvml_failures", str, "the NVML calls that failed, where the GPU fields lack some"),
        _f("gpu_readings_stopped", str, "why the GPU readings stopped, where they did"),
        _f("gpu_device", str, "the GPU the point was pinned to (CUDA_VISIBLE_DEVICES)", GPU),
    )),
    Section("Outside load", "the monitor's readings of the rest of the machine (dlbench.node.hostload)", (
        _f("host_cpu_other_pct_mean", float, "others' CPU use over training, percent of one core"),
        _f("host_load_start", float, "the 1-minute load average when training began"),
        _f("contended", bool, "whether others used more than `contended_pct` of a core"),
        _f("contended_pct", float, "the threshold `contended` is judged by"),
        _f("quiet_wait_s", float, "how long the point waited for others to quieten before it started"),
    )),
    Section("The framework and its environment", "the trainer's `info` event (Adapter.info) and the runner", (
        _f("framework_version", str, "the framework's version, as it reports it", info="framework_version"),
        _f("framework_numpy_version", str, "numpy's version in the framework's environment", info="numpy_version"),
        _f("framework_python_version", str, "Python's version there", info="python_version"),
        _f("cuda_version", str, "the CUDA the framework was built with (none: no CUDA)", info="cuda_version"),
        _f("cudnn_version", str, "the cuDNN the framework was built with", info="cudnn_version"),
        _f("blas", str, "the BLAS the framework uses, as it reports it", info="blas"),
        _f("build_json", str, "the framework's build: BLAS, oneDNN, CUDA, ... (JSON)", info="build"),
        _f("threads_in_effect", int, "the threads the framework says it runs", info="threads_in_effect"),
        _f("interop_threads_in_effect", int, "its inter-op threads, where it has such a pool",
           info="interop_threads_in_effect"),
        _f("library_in_effect", str, "the compute library in effect, read from the process",
           info="library_in_effect"),
        _f("compile_in_effect", str, "what the framework compiled, as it reports it", info="compile_in_effect"),
        _f("precision_in_effect", str, "the dtypes it computed and kept weights in", info="precision_in_effect"),
        _f("memory_format_in_effect", str, "the layout its 4-d weights were in when training began, read from them "
           "(contiguous where it has none)", "PyTorch points", info="memory_format_in_effect"),
        _f("device_name", str, "the device it trained on, as it names it", info="device_name"),
        _f("env_name", str, "the environment it ran in"),
        _f("env_kind", str, "cpu, cuda, site or current"),
        _f("env_key", str, "the digest of the environment's pins"),
        _f("env_python", str, "the environment's interpreter"),
        _f("dataset_digest", str, "the digest of the data the trainer read"),
        _f("dataset_dir", str, "the prepared dataset's folder"),
        _f("dataset_source", str, "where the prepared dataset came from (its meta.json)"),
        _f("dataset_test_copy", str, "what a test copy of the dataset is (none: the published data)"),
    )),
    Section("Limits", "the config's limits, and which one ended the point", (
        _f("time_limit_s", float, "the point's time budget"),
        _f("memory_limit_mb", float, "the point's memory budget"),
        _f("memory_cap", str, "the hard cap under the budget (cgroup, rlimit)", "points with a memory budget"),
        _f("oom_by", str, "which guard ended an oom point: `monitor`, `cap` or `cgroup` (its memory cgroup's OOM "
           "killer: a cluster job's limit)"),
        _f("hang_limit_s", float, "silence after which the point is ended as hung"),
    )),
    Section("The machine", "the runner (dlbench.node.machine, dlbench.record.provenance)", (
        _f("host", str, "the host's name"),
        _f("cpu_model", str, "the CPU's model"),
        _f("cpu_bf16", str, "the CPU's native bfloat16 instructions (none: it has none)"),
        _f("cpu_cores_logical", int, "logical cores"),
        _f("cpu_cores_physical", int, "physical cores"),
        _f("cpu_cores_usable", int, "cores this process may run on (its affinity)"),
        _f("cpu_governor", str, "the CPUs' frequency governor"),
        _f("cpu_boost", bool, "whether turbo/boost is on"),
        _f("memory_total_mb", int, "the machine's memory"),
        _f("os", str, "the operating system and kernel"),
        _f("python_runner", str, "the runner's Python"),
        _f("gpu_model", str, "the first GPU's model"),
        _f("gpu_count", int, "GPUs visible (none for a CPU point: NVML is not asked)"),
        _f("gpu_driver", str, "the NVIDIA driver"),
        _f("gpu_state", str, "`unknown: ...` where NVML did not answer in time (a hung driver): the GPU fields are "
           "missing for that reason"),
        _f("slurm_job_id", str, "the SLURM job, where one ran the point"),
        _f("dlbench_version", str, "dlbench's version"),
        _f("dlbench_commit", str, "the commit of the checkout it ran from"),
        _f("dlbench_dirty", bool, "whether tracked files had changed since that commit"),
    )),
    Section("The attempt", "the runner and dlbench.record.store", (
        _f("started_at", str, "when the attempt started (local time, ISO 8601)"),
        _f("lock_mode", str, "how the node's measurement lock was held", "points that took it"),
        _f("lock_wait_s", float, "how long the point waited for the lock"),
        _f("attempt", int, "Snakemake's count of this job's attempts"),
        _f("machine_failure", bool, "whether the status is a failure of the machine (dlbench.record.statuses)"),
        _f("lost_attempts", int, "earlier attempts that ended without a word"),
        _f("slurm_restart_count", int, "how many times SLURM requeued the job"),
        _f("republished_after_requeue", int, "a result this job had already made, published again after a requeue",
           "republished records"),
        _f("attempt_id", str, "the attempt's own id, which its files' facts name"),
        _f("files", dict, "each file's digest, size and rows (metrics.json only: checked, then dropped from the "
           "tables)"),
    )),
    Section("The study", "the aggregation (results/runs.parquet only)", (
        _f("attempts", int, "finished attempts of the point, this one included"),
        _f("studies", str, "the sub-studies the point belongs to, comma-separated"),
        _f("tuning_grid", str, "the tuning grid the point is a cell of", "points of a tuning grid"),
        _f("tuning_is_default", bool, "whether the cell is the grid's defaults", "points of a tuning grid"),
        _f("peak_gflops_fp32", float, "the machine's float32 GEMM peak at the point's threads", "CPU points"),
        _f("peak_gflops_bf16", float, "its bfloat16 GEMM peak", "CPU points of a study with bf16 points"),
        _f("peak_gflops", float, "the peak of the point's own precision", "CPU points"),
        _f("peak_fraction", float, "achieved over that peak", "CPU points"),
        _f("peak_fraction_fp32", float, "achieved over the float32 peak", "CPU points"),
    )),
)

FIELDS: dict[str, Field] = {f.name: f for s in SECTIONS for f in s.fields}
# What the runner's record holds; the study's section is the aggregation's.
RECORD = tuple(name for s in SECTIONS if s.title != "The study" for name in (f.name for f in s.fields))
NOT_COLUMNS = ("files",)  # fields of metrics.json only
RENAMED = {"id": "run_id"}  # a record field's column name in the tables
COLUMNS = tuple(RENAMED.get(name, name) for name in FIELDS if name not in NOT_COLUMNS)
INFO: dict[str, Field] = {f.info: f for f in FIELDS.values() if f.info}
# The keys of the trainer's `info` event beyond the record's: which framework speaks, for its log.
INFO_EXTRA = {"framework": str}

# What an adapter's info() returns: the framework's word on itself, each key a field of the record.
Info = TypedDict("Info", {**{key: Any for key in INFO}, **{key: Any for key in INFO_EXTRA}}, total=False)


class InfoError(TypeError):
    """An `info` event whose key or value the record has no place for; the message names it."""


def check_info(info: dict) -> dict:
    """`info` as it is, or InfoError naming a key the record does not know (a misspelt one would be an empty
    column) or a value of the wrong type."""
    for key, value in info.items():
        kind = INFO[key].type if key in INFO else INFO_EXTRA.get(key)
        if kind is None:
            raise InfoError(f"info key {key!r} is no field of the record; the keys: "
                            f"{', '.join(sorted([*INFO, *INFO_EXTRA]))} (dlbench/record/fields.py)")
        if key == "build":  # an object, which the record keeps as JSON text (build_json)
            kind = dict
        if value is not None and not _is(value, kind):
            raise InfoError(f"info key {key!r} is {type(value).__name__} {value!r}, the record wants "
                            f"{TYPE_NAMES[kind]} (dlbench/record/fields.py)")
    return info


def _is(value, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def problems(record: dict) -> list[str]:
    """What in a record the schema does not allow: an unknown field, or a value of the wrong type."""
    out = []
    for key, value in record.items():
        field = FIELDS.get(key)
        if field is None:
            out.append(f"{key}: no field of the record")
        elif value is not None and not _is(value, field.type):
            out.append(f"{key}: {type(value).__name__} {value!r}, not {TYPE_NAMES[field.type]}")
    return out


def ordered_columns(present) -> list[str]:
    """Columns of the runs table in the schema's order; columns the schema does not know (a field of older
    records) after them, as they came."""
    present = list(present)
    known = [c for c in COLUMNS if c in present]
    return known + [c for c in present if c not in set(known)]
