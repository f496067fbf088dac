"""The workflow end to end on a tiny config, and what a rerun reruns (read from dry runs)."""

import contextlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dlbench.paths import ROOT
from dlbench.testing.sandbox import TINY_CONFIG, copy_run, copy_workflow, snakemake, tiny_study

TINY = tiny_study()  # .test/config/config.yaml


def write_config(workdir: Path, cfg: dict) -> None:
    (workdir / "tiny.yaml").write_text(yaml.safe_dump(cfg))


@contextlib.contextmanager
def config_as(workdir: Path, cfg: dict):
    """The shared copy's config is `cfg` inside the block and the tiny study's again after it, whatever happened:
    a failed test leaves the next one the config it expects."""
    write_config(workdir, cfg)
    try:
        yield
    finally:
        write_config(workdir, TINY)


def planned_jobs(workdir: Path) -> list[tuple[str, dict]]:
    """(rule, wildcards) of every job a dry run would run."""
    out = snakemake(workdir, "-n", "--configfile", "tiny.yaml").stdout
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        wc = re.search(r"wildcards: (.*)", block)
        wildcards = dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}
        jobs.append((m.group(1), wildcards))
    return jobs


def test_the_test_config_plans_its_points_from_the_repository_into_another_folder(tmp_path):
    """.test/config/config.yaml, as the Snakemake catalog's workflows keep it: run from the checkout with
    --directory, the study's files go there (here: a dry run; the tests below run it in a copy)."""
    out = snakemake(ROOT, "-n", "--directory", str(tmp_path), "--configfile", str(TINY_CONFIG)).stdout
    study = tiny_study()
    points = len(study["frameworks"]) * len(study["sweep"]["learning_rate"])
    assert re.search(rf"^train\s+{points}$", out, re.M), out[-2000:]
    assert (tmp_path / ".snakemake").is_dir() and not (ROOT / ".test" / ".snakemake").exists()


@pytest.fixture(scope="module")
def workflow_copy(tiny_run_copy):
    """The session's tiny study, copied, so the tests may edit its code and config without touching the repository
    or the run the other modules read."""
    return tiny_run_copy


@pytest.mark.slow
def test_tiny_study_gives_parquet_and_charts(workflow_copy):
    runs = pd.read_parquet(workflow_copy / "results/runs.parquet")
    assert len(runs) == 4
    assert set(runs.framework) == {"pytorch", "tensorflow"}
    assert (runs.status == "ok").all(), runs[["run_id", "status", "reason"]]
    for column in ("train_time_s", "test_time_s", "accuracy", "final_loss", "throughput_img_s", "cpu_util_mean_pct",
                   "rss_peak_mb", "rss_mean_mb", "framework_version", "threads_requested", "threads_in_effect",
                   "cpu_model", "cpu_cores_logical", "seed", "batch_size", "learning_rate", "iterations"):
        assert column in runs.columns, column
        assert runs[column].notna().all(), column
    assert (runs.iterations == 30).all() and (runs.accuracy > 0.2).all()
    assert all(c == c.lower() for c in runs.columns)
    curves = pd.read_parquet(workflow_copy / "results/curves.parquet")
    assert set(curves.run_id) == set(runs.run_id)
    assert {"train", "test"} <= set(curves.kind)
    samples = pd.read_parquet(workflow_copy / "results/samples.parquet")
    assert set(samples.run_id) == set(runs.run_id)
    assert "train" in set(samples.phase) and samples.rss_mb.max() > 100
    charts = workflow_copy / "results/charts"
    for name in ("train_time_by_framework", "accuracy_by_framework", "cpu_timeline", "memory_timeline",
                 "accuracy_vs_learning_rate", "train_time_vs_learning_rate"):
        html = (charts / f"{name}.html").read_text()
        assert "vegaEmbed" in html and "cdn.jsdelivr" not in html  # self-contained: opens offline
        assert (charts / f"{name}.svg").read_text().lstrip().startswith("<svg")
    # one batch size, no GPU: those charts are not drawn, and the index says why
    index = json.loads((charts / "index.json").read_text())
    assert {"train_time_vs_batch_size", "gpu_timeline"} <= set(index["not_drawn"]), index
    assert not (charts / "train_time_vs_batch_size.svg").exists() and not (charts / "gpu_timeline.html").exists()


@pytest.mark.slow
def test_a_finished_run_has_nothing_to_do(workflow_copy):
    """workflow_copy is the session's run copied to another folder: a moved checkout has nothing to do either (the
    inputs Snakemake records are relative to the working directory, dlbench.paths.as_workflow_input)."""
    assert planned_jobs(workflow_copy) == []


@pytest.mark.slow
def test_changing_a_parameter_reruns_those_points_and_the_aggregation(workflow_copy):
    with config_as(workflow_copy, {**TINY, "sweep": {**TINY["sweep"], "learning_rate": [0.01, 0.03]}}):
        jobs = planned_jobs(workflow_copy)
    trains = [wc for rule, wc in jobs if rule == "train"]
    assert len(trains) == 2 and all("lr0.03" in wc["point"] for wc in trains)
    assert {rule for rule, _ in jobs} == {"train", "records", "aggregate", "summary", "charts", "findings",
                                          "tables_csv", "page", "all"}


@pytest.mark.slow
def test_adding_a_point_runs_only_the_new_one(workflow_copy):
    with config_as(workflow_copy, {**TINY, "frameworks": ["pytorch", "tensorflow"],
                                   "sweep": {**TINY["sweep"], "learning_rate": [0.01, 0.02, 0.04]}}):
        trains = [wc for rule, wc in planned_jobs(workflow_copy) if rule == "train"]
    assert len(trains) == 2 and all("lr0.04" in wc["point"] for wc in trains)


@pytest.mark.slow
def test_changing_one_adapter_reruns_that_frameworks_points_only(workflow_copy):
    adapter = workflow_copy / "dlbench/frameworks/tensorflow.py"
    original = adapter.read_text()
    adapter.write_text(original + "\nSTEP_NAME = 'step'  # a changed adapter\n")
    try:
        trains = [wc for rule, wc in planned_jobs(workflow_copy) if rule == "train"]
    finally:
        adapter.write_text(original)
    assert len(trains) == 2 and {wc["framework"] for wc in trains} == {"tensorflow"}


@pytest.mark.slow
def test_a_change_in_shared_trainer_code_reruns_the_points_that_import_it_and_charts_code_none(workflow_copy):
    """spec/initial_weights.py draws every framework's initial weights: a change there reruns every point (the old
    hand list of trainer files missed it). present/charts/draw.py is no training job's code: it reruns none."""
    def trains_after_editing(rel: str) -> list[dict]:
        path = workflow_copy / "dlbench" / rel
        original = path.read_text()
        path.write_text(original + "\nCHANGED = 1\n")
        try:
            return [wc for rule, wc in planned_jobs(workflow_copy) if rule == "train"]
        finally:
            path.write_text(original)

    assert trains_after_editing("present/charts/draw.py") == []
    trains = trains_after_editing("spec/initial_weights.py")
    assert len(trains) == 4 and {wc["framework"] for wc in trains} == {"pytorch", "tensorflow"}
    assert planned_jobs(workflow_copy) == []  # the original file back: nothing to do again


def planned_after(workdir: Path, rel: str, old: str, new: str) -> Counter:
    """The jobs a dry run plans, by rule, with one edit of a file of the workflow's dlbench (then undone)."""
    path = workdir / "dlbench" / rel
    original = path.read_text()
    assert original.count(old) == 1, (rel, old)
    path.write_text(original.replace(old, new))
    try:
        return Counter(rule for rule, _ in planned_jobs(workdir) if rule in ("train", "records"))
    finally:
        path.write_text(original)


@pytest.mark.long
def test_each_one_line_change_plans_exactly_what_it_invalidates(workflow_copy):
    """On the finished tiny study (two frameworks, two points each): a comment in the runner or the measurement, a
    record field's description, a chart colour plan nothing; a statement in how a record is made the record rule
    (one job, every record) and no training; a statement in one adapter that framework's points; in the initial
    weights every point. tests/test_code_digest.py checks the same on the digests alone."""
    assert planned_after(workflow_copy, "run/runner.py", "\nimport shutil\n", "\n# why\nimport shutil\n") == {}
    assert planned_after(workflow_copy, "run/measure.py", "\nimport glob\n", "\n# why\nimport glob\n") == {}
    assert planned_after(workflow_copy, "record/fields.py", '"the framework that trained it"',
                         '"the framework it ran in"') == {}
    assert planned_after(workflow_copy, "frameworks/registry.py", 'color="#ee4c2c"', 'color="#ee4c2d"') == {}
    assert planned_after(workflow_copy, "run/build_record.py", 'record["threads_requested"] = point["threads"]',
                         'record["threads_requested"] = int(point["threads"])') == {"records": 1}
    assert planned_after(workflow_copy, "frameworks/tensorflow.py", "\nimport numpy as np\n",
                         "\nimport numpy as np\n\nSTEP_NAME = 'step'\n") == {"train": 2, "records": 1}
    assert planned_after(workflow_copy, "spec/initial_weights.py", "            j += 1\n    return out\n",
                         "            j += 1\n    out = list(out)\n    return out\n") == {"train": 4, "records": 1}
    assert planned_jobs(workflow_copy) == []


def mtimes(root: Path, name: str) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in (root / "results/runs").rglob(name)
            if "attempts" not in p.parts}


@pytest.mark.long
def test_a_change_to_how_records_are_made_rebuilds_every_record_and_trains_nothing(tiny_run, tmp_path):
    """A statement in run/build_record.py: the record rule makes every record again from its raw measurement, the
    tables show it, and no point is measured again (their measurements and attempts stay as they were)."""
    wf = copy_run(tiny_run, tmp_path / "wf")
    measured, attempts = mtimes(wf, "measurement.json"), sorted((wf / "results/runs").rglob("attempts/*"))
    build = wf / "dlbench/run/build_record.py"
    build.write_text(build.read_text().replace('record["threads_requested"] = point["threads"]',
                                               'record["threads_requested"] = 10 * point["threads"]'))
    proc = snakemake(wf, "results/runs.parquet", "--configfile", "tiny.yaml")
    out = proc.stdout + proc.stderr
    assert "rule train" not in out and "rule records" in out
    runs = pd.read_parquet(wf / "results/runs.parquet")
    assert len(runs) == 4 and (runs.threads_requested == 10).all()
    assert mtimes(wf, "measurement.json") == measured and sorted((wf / "results/runs").rglob("attempts/*")) == attempts
    assert "4 made again from their raw measurement (4 came out changed)" in (wf / "logs/records.log").read_text()


@pytest.mark.long
def test_results_of_an_earlier_layout_are_kept_not_trained_again(tiny_run, tmp_path):
    """A results/ an earlier dlbench left (each point's record the train rule's output, no raw measurement apart,
    Snakemake's metadata for the record only, the train script changed by the upgrade): the first dry run adopts
    every point (one line), plans no training and the record rule once; that run makes every record again the same,
    field for field, and gives the adopted train jobs Snakemake's metadata: nothing is left to train or make, and
    a changed adapter reruns its framework's adopted points, as any others."""
    from dlbench.record import incomplete

    wf = copy_run(tiny_run, tmp_path / "wf")
    before = {}
    for metrics in (wf / "results/runs").rglob("metrics.json"):
        if "attempts" in metrics.parts:
            continue
        record = json.loads(metrics.read_text())
        before[metrics] = record
        (metrics.parent / "measurement.json").unlink()
        (metrics.parent / "monitor.jsonl").unlink()
        record["files"].pop("monitor.jsonl")
        metrics.write_text(json.dumps(record))
    metadata = wf / ".snakemake" / "metadata"
    for mark in metadata.rglob("*"):
        if mark.is_file() and (incomplete._output_of(mark, metadata) or "").endswith(("measurement.json",
                                                                                      "records.json")):
            mark.unlink()
    (wf / "results/records.json").unlink()
    (wf / "workflow/scripts/train.py").touch()
    proc = snakemake(wf, "-n", "--configfile", "tiny.yaml")
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "recorded by an earlier dlbench" in line]
    assert len(said) == 1 and said[0].startswith("dlbench: 4 points"), said
    jobs = Counter(rule for rule, _ in planned_jobs(wf))
    assert jobs["train"] == 0 and jobs["records"] == 1, jobs
    proc = snakemake(wf, "results/runs.parquet", "--configfile", "tiny.yaml")
    assert "rule train" not in proc.stdout + proc.stderr and "rule records" in proc.stdout + proc.stderr
    for metrics, old in before.items():
        new = json.loads(metrics.read_text())
        assert set(new) == set(old), set(new) ^ set(old)
        for key, value in old.items():
            if key == "files":
                continue
            # field for field; a time read back on the events' clock to a nanosecond, and others' CPU, weighted by
            # the samples' times, to 0.1 %: the earlier samples.csv kept those times to 0.1 ms
            if isinstance(value, float):
                value = pytest.approx(value, rel=1e-3 if key == "host_cpu_other_pct_mean" else 1e-9)
            assert new[key] == value, key
    assert len(pd.read_parquet(wf / "results/runs.parquet")) == 4
    assert not (wf / "results/runs/.adopted-without-metadata.json").exists()
    assert not [rule for rule, _ in planned_jobs(wf) if rule in ("train", "records", "aggregate")]
    # Snakemake's metadata given at that run: a changed adapter reruns the adopted points of its framework
    assert planned_after(wf, "frameworks/tensorflow.py", "\nimport numpy as np\n",
                         "\nimport numpy as np\n\nSTEP_NAME = 'step'\n") == {"train": 2, "records": 1}


# A point's measurement on the node, as the runner holds it, until its stdin closes; prints when it let go.
HOLD_MEASUREMENT = """
import sys, time
from dlbench.node.locks import measuring
with measuring(sys.argv[1], None, per_device=False):
    print("held", flush=True)
    sys.stdin.readline()
    released = time.time()
print(released, flush=True)
"""


@pytest.mark.slow
def opened_by_others(path: Path, but: set[int]) -> bool:
    """Whether a process other than `but` has `path` open (its /proc/<pid>/fd)."""
    target = str(path)
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        if int(fd_dir.parent.name) in but:
            continue
        try:
            if any(os.readlink(fd) == target for fd in fd_dir.iterdir()):
                return True
        except OSError:  # a process gone, or not ours to read
            continue
    return False


def test_the_aggregation_waits_for_a_measurement_on_its_node(workflow_copy, tmp_path):
    """Through Snakemake: with a measurement holding the config's lock file, the aggregation job (heavy work) starts
    only once the measurement ends, and its log says how long it waited."""
    import time

    lock = tmp_path / "node.lock"
    with config_as(workflow_copy, {**TINY, "measurement": {"lock_file": str(lock)}}):
        holder = subprocess.Popen([sys.executable, "-c", HOLD_MEASUREMENT, str(lock)], cwd=ROOT, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            # mtime only: the new lock file is a runner option, which would rerun the points as a changed parameter.
            run = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "tiny.yaml",
                                    "--rerun-triggers", "mtime", "--forcerun", "aggregate"], cwd=workflow_copy,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            # The aggregation waits on the lock (a bounded wait: it polls the flock, holding the file open), so
            # a process other than the holder with the lock file open is the aggregation waiting.
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and run.poll() is None:
                if opened_by_others(lock, {holder.pid}):
                    break
                time.sleep(0.2)
            time.sleep(2.0)  # it stays waiting while the measurement goes on
            assert run.poll() is None
            holder.stdin.close()
            released = float(holder.stdout.readline())
            out = run.communicate(timeout=600)[0]
        finally:
            holder.kill()
            holder.wait(timeout=600)
    assert run.returncode == 0, out[-3000:]
    assert "rule train" not in out and "rule aggregate" in out
    assert (workflow_copy / "results/runs.parquet").stat().st_mtime >= released
    log = (workflow_copy / "logs/aggregate.log").read_text()
    waited = re.findall(r"dlbench: the aggregation waited ([0-9.]+) s", log)
    assert waited and float(waited[-1]) >= 2.0, (log, out[-3000:])


@pytest.mark.slow
def test_a_bad_config_stops_before_any_job_with_one_line(workflow_copy):
    with config_as(workflow_copy, {**TINY, "sweep": {**TINY["sweep"], "batchsize": [3]}}):
        proc = snakemake(workflow_copy, "--configfile", "tiny.yaml", check=False)
    assert proc.returncode != 0
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if "dlbench: config error" in line]
    assert len(lines) == 1 and "'batchsize'" in lines[0] and "batch_size" in lines[0]
    assert "rule train" not in proc.stdout


@pytest.mark.long
def test_runs_with_its_working_directory_elsewhere(workflow_copy, tmp_path):
    one = {**TINY, "frameworks": ["pytorch"], "sweep": {**TINY["sweep"], "learning_rate": [0.01]}}
    with config_as(workflow_copy, one):
        snakemake(workflow_copy, "--configfile", "tiny.yaml", "--directory", str(tmp_path), "results/runs.parquet")
    runs = pd.read_parquet(tmp_path / "results/runs.parquet")
    assert len(runs) == 1 and runs.status.iloc[0] == "ok", runs.iloc[0].get("log_tail")
    # everything went to the other directory, also the run's own files the trainer wrote
    assert (tmp_path / "results/runs/pytorch/digits" / runs.run_id.iloc[0] / "curve.csv").stat().st_size > 0
    assert (tmp_path / "resources/datasets/digits/data.npz").exists()


MODULE_USER = '''configfile: "study.yaml"


module dlbench:
    snakefile:
        "dlbench/workflow/Snakefile"
    config:
        config


use rule * from dlbench as dlbench_*
'''


@pytest.mark.long
def test_runs_as_a_snakemake_module_of_another_workflow(tmp_path):
    """Another workflow includes dlbench as a module (a local path), with its own config and working directory."""
    copy_workflow(tmp_path / "dlbench")
    one = {**TINY, "frameworks": ["pytorch"], "sweep": {**TINY["sweep"], "learning_rate": [0.01]}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(one))
    (tmp_path / "Snakefile").write_text(MODULE_USER)
    jobs = snakemake(tmp_path, "-n").stdout
    assert "rule dlbench_train:" in jobs and "rule dlbench_all:" in jobs
    snakemake(tmp_path)
    runs = pd.read_parquet(tmp_path / "results/runs.parquet")
    assert len(runs) == 1 and runs.status.iloc[0] == "ok", runs.iloc[0].get("log_tail")
    assert (tmp_path / "results/findings.md").read_text().startswith("# Findings")
    assert (tmp_path / "logs/aggregate.log").exists()  # every rule logs, also under a module's names


CONDA_FILES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.iocontainers import Wildcards
from snakemake.settings.types import (ConfigSettings, DeploymentMethod, DeploymentSettings, OutputSettings,
                                      ResourceSettings, StorageSettings, WorkflowSettings)

methods = {DeploymentMethod.CONDA} if sys.argv[1] == "conda" else set()
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1), storage_settings=StorageSettings(),
                            config_settings=ConfigSettings(configfiles=[Path("two.yaml")]),
                            deployment_settings=DeploymentSettings(deployment_method=methods),
                            workflow_settings=WorkflowSettings(), snakefile=Path("workflow/Snakefile"))._workflow
    conda = workflow.get_rule("train").conda_env
    files = {}
    for key in workflow.globals["POINTS"]:
        wildcards = Wildcards(fromdict=dict(zip(("framework", "dataset", "point"), key)))
        device = workflow.globals["POINTS"][key]["device"]
        files[f"{key[0]} {device}"] = conda(wildcards) if callable(conda) else conda
print(json.dumps(files))
"""


def test_under_sdm_conda_each_point_runs_in_its_environments_conda_file(tmp_path):
    """The workflow parsed as `snakemake --sdm conda` parses it (no conda needed until the DAG is built)."""
    two = {"datasets": ["digits"], "frameworks": ["pytorch", "caffe"], "preset": ["caffe"],
           "sweep": {"iterations": [30], "threads": [1], "device": ["cpu", "gpu"]}}
    root = copy_workflow(tmp_path, two, "two.yaml")
    files = {}
    for method in ("conda", "none"):
        proc = subprocess.run([sys.executable, "-c", CONDA_FILES, method], cwd=root, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        files[method] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert files["conda"] == {"pytorch cpu": "../envs/pytorch.yaml", "pytorch gpu": "../envs/pytorch-cuda.yaml",
                              "caffe cpu": "../envs/caffe.yaml", "caffe gpu": "../envs/caffe.yaml"}
    # without --sdm conda no job runs in a conda environment: the rule names the base one, for every point
    assert set(files["none"].values()) == {"../envs/base.yaml"}
