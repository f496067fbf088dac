"""The SLURM profile on a real one-node SLURM (slurm-testbed/slurm-up.sh): jobs, resources, cancellation."""

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from dlbench.record import store
from dlbench.study import config, sweep
from dlbench.testing import faults, faults_slurm
from dlbench.testing.faults_slurm import cluster_up, slurm_snakemake
from dlbench.testing.sandbox import copy_workflow, tiny_study

# The tiny study (.test/config/config.yaml) on the cluster: the points of the session's local run (tiny_run).
STUDY = {**tiny_study(), "cluster": {"partition": "debug", "account": "dlbench", "mem_mb": 2000}}


pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not cluster_up(),
                                 reason="no SLURM cluster is up (start it with slurm-testbed/slurm-up.sh)")]


def sacct(since: str) -> pd.DataFrame:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", since, "--format",
                          "JobID,JobName,State,AllocCPUS,ReqMem,Partition,Account"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    rows = [line.split("|") for line in out.strip().splitlines() if line]
    return pd.DataFrame(rows, columns=["job", "name", "state", "cpus", "mem", "partition", "account"])


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 2))
    wf = copy_workflow(tmp_path_factory.mktemp("slurm") / "wf", STUDY)
    t0 = time.monotonic()
    proc = slurm_snakemake(wf)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    return wf, sacct(started), time.monotonic() - t0


def test_every_training_point_ran_as_a_slurm_job_with_its_resources(slurm_run):
    wf, jobs, _ = slurm_run
    runs = pd.read_parquet(wf / "results/runs.parquet")
    assert len(runs) == 4 and (runs.status == "ok").all()
    assert runs.slurm_job_id.notna().all()
    ids = set(runs.slurm_job_id.astype(str))
    assert len(ids) == 4  # one allocation per point
    mine = jobs[jobs.job.isin(ids)]
    assert len(mine) == 4 and (mine.state == "COMPLETED").all()
    assert (mine.cpus == "1").all()  # cpus_per_task = the point's threads
    assert (mine.partition == "debug").all() and (mine.account == "dlbench").all()
    assert mine["mem"].str.startswith("2000M").all()


def test_results_aggregate_exactly_as_a_local_run(slurm_run, tiny_run):
    """The tiny study run locally (the session's) and through SLURM (STUDY: the same points, the cluster's keys)."""
    wf, _, _ = slurm_run
    local = tiny_run
    on_slurm = pd.read_parquet(wf / "results/runs.parquet").set_index("run_id").sort_index()
    here = pd.read_parquet(local / "results/runs.parquet").set_index("run_id").sort_index()
    assert list(on_slurm.index) == list(here.index)
    assert set(on_slurm.columns) == set(here.columns)
    expected_ids = {p["id"] for p in sweep.expand(config.validate(STUDY))}
    assert set(on_slurm.index) == expected_ids
    for column in ("framework", "learning_rate", "batch_size", "iterations", "threads_in_effect", "status", "params"):
        assert on_slurm[column].tolist() == here[column].tolist(), column
    # the same seeds and settings train the same model: PyTorch on one thread is deterministic
    torch_rows = on_slurm.framework == "pytorch"
    assert on_slurm[torch_rows].accuracy.tolist() == here[torch_rows].accuracy.tolist()


@pytest.fixture
def no_jobs_left():
    """Whatever happens, leave the test cluster empty for the next test."""
    yield
    subprocess.run(["scancel", "--user", str(os.getuid())], check=False, timeout=600)


def test_a_cancelled_job_is_recorded_and_runs_again_next_time(tmp_path, no_jobs_left):
    # No reruns for the machine's failures: the one attempt the rule allows past them is Snakemake's retry of
    # the cancelled job, which must train nothing (tests/test_faults.py holds it to that at the default count).
    long_study = {**STUDY, "frameworks": ["pytorch"], "measurement": {"retries": 0},
                  "sweep": {**STUDY["sweep"], "learning_rate": [0.01], "iterations": [200000]}}
    wf = copy_workflow(tmp_path / "wf", long_study)
    proc = slurm_snakemake(wf)
    (point,) = sweep.expand(config.validate(long_study))
    run = wf / "results/runs/pytorch/digits" / point["id"]
    deadline = time.monotonic() + 300
    job_id = None
    while time.monotonic() < deadline and job_id is None:
        partials = list(run.parent.glob(f".{run.name}.partial-*"))
        if partials and any('"train"' in line for p in partials if (p / "events.jsonl").exists()
                            for line in (p / "events.jsonl").read_text().splitlines()):
            queue = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True,
                                   timeout=60).stdout.split()
            job_id = queue[0] if queue else None
        time.sleep(0.5)
    assert job_id, "the point never started training on the cluster"
    subprocess.run(["scancel", job_id], check=True, timeout=600)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert not (run / "metrics.json").exists()
    attempts = store.attempts(run)
    assert attempts, out[-3000:]
    assert len(attempts) == 1, attempts  # the retry kept no attempt: it trained nothing
    attempt = json.loads(attempts[0].read_text())
    assert attempt["status"] == "cancelled" and attempt["slurm_job_id"] == job_id
    assert "the attempt before it was cancelled" in out, out[-3000:]
    states = sacct("now-1hours")
    assert states[states.job == job_id].state.iloc[0].startswith("CANCELLED")
    dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm",
                          "--configfile", "study.yaml"], cwd=wf, capture_output=True, text=True, timeout=600)
    assert point["id"] in dry.stdout  # the next invocation runs it again


# Job groups as profiles/slurm/config.yaml documents them: 2 points per allocation, one after the other.
GROUPED = ("--groups", "train=measure", "--group-components", "measure=2")
# What two runs of the same points measure differently (times, resources, when and where), and the SLURM fields.
MEASURED = ("_time_s", "_pct", "_mb", "_img_s", "_gflops", "_w", "_j")
DIFFERS = {"slurm_job_id", "started_at", "lock_wait_s", "wall_time_s", "samples", "threads_peak", "monitor_cpu_s",
           "achieved_gflops", "peak_fraction", "peak_fraction_fp32", "peak_gflops_fp32", "peak_gflops_bf16",
           "dataset_dir", "log_tail", "attempts",  # the peaks: each run's machine_peak rule measures its own
           "attempt_id",  # each attempt's own
           "host_cpu_other_pct_mean", "host_load_start", "contended"}  # the machine's outside load, then


@pytest.fixture(scope="module")
def grouped_run(tmp_path_factory):
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 2))
    wf = copy_workflow(tmp_path_factory.mktemp("slurm-grouped") / "wf", STUDY)
    proc = slurm_snakemake(wf, *GROUPED)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    return wf, sacct(started)


@pytest.mark.long
def test_job_groups_pack_points_into_fewer_jobs_each_measured_alone(slurm_run, grouped_run):
    wf, jobs = grouped_run
    runs = pd.read_parquet(wf / "results/runs.parquet")
    assert len(runs) == 4 and (runs.status == "ok").all()
    ids = set(runs.slurm_job_id.astype(str))
    assert len(ids) == 2  # 4 points, 2 per allocation
    mine = jobs[jobs.job.isin(ids)]
    assert len(mine) == 2 and (mine.state == "COMPLETED").all()
    assert (mine.cpus == "1").all()  # one point's CPUs: the points of a group run one after the other
    # Alone on the node: within an allocation, a point's measurement (from started_at, taken once it holds
    # the node's lock, for wall_time_s) starts after the previous one ended; started_at is to the second.
    start = (pd.to_datetime(runs.started_at) - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
    runs = runs.assign(start=start, end=start + runs.wall_time_s)
    for _, job in runs.sort_values("start").groupby("slurm_job_id"):
        assert (job.start.iloc[1:].to_numpy() >= job.end.iloc[:-1].to_numpy() - 1.0).all(), job[["start", "end"]]
    assert (runs.lock_mode == "exclusive").all()
    # Every record as a one-job-per-point run leaves it, but for what a run measures and the SLURM fields.
    alone = pd.read_parquet(slurm_run[0] / "results/runs.parquet").set_index("run_id").sort_index()
    grouped = runs.drop(columns=["start", "end"]).set_index("run_id").sort_index()
    assert list(grouped.index) == list(alone.index) and set(grouped.columns) == set(alone.columns)
    same = [c for c in alone.columns if c not in DIFFERS and not c.endswith(MEASURED)
            and c not in ("accuracy", "test_loss", "final_loss")]
    assert len(same) > 40
    pd.testing.assert_frame_equal(grouped[same], alone[same], check_like=True)
    torch_rows = alone.framework == "pytorch"  # deterministic on one thread: the same model
    assert grouped[torch_rows].accuracy.tolist() == alone[torch_rows].accuracy.tolist()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faults.Lab(tmp_path_factory.mktemp("slurm-faults"))


@pytest.mark.long
def test_a_suspended_job_is_retried_not_hung(lab, no_jobs_left):
    row = faults_slurm.suspended(lab)
    assert row["attempts"] == ["suspended", "ok"] and row["paused_s"] >= row["stopped_s"] - 4, row
    assert row["survived"] and not row["data_lost"]


@pytest.mark.long
def test_a_preempted_job_requeues_itself_and_is_measured_on_its_next_run(lab, no_jobs_left):
    row = faults_slurm.preempted(lab)
    assert row["attempts"] == ["preempted", "ok"] and row["restart_count"] == 1, row
    assert row["survived"]


@pytest.mark.long
def test_a_requeued_job_group_does_not_measure_a_finished_point_twice(lab, no_jobs_left):
    row = faults_slurm.requeued_group(lab)
    assert not row.get("skipped"), row
    assert row["first_point_attempts"] == ["ok"] and row["republished"] == 1, row
    assert row["survived"]


@pytest.mark.long
def test_a_node_failure_past_the_retries_ends_as_node_lost_and_the_tables_are_drawn(lab, no_jobs_left):
    row = faults_slurm.node_died(lab)
    # SLURM ends each killed run NODE_FAIL and requeues the job (JobRequeue=1, its default): one job, three runs.
    assert len({job for job, _ in row["killed_jobs"]}) == 1, row
    assert row["history"][:2] == ["NODE_FAIL", "NODE_FAIL"] and row["history"][-1] == "COMPLETED", row
    assert row["result_status"] == "node_lost" and row["lost_attempts"] == 2 and row["restart_count"] == 2, row
    assert row["tables_drawn"] and row["exit_code"] == 0, row
