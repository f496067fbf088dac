"""Round four's faults, injected for real (dlbench/testing/faults_cluster.py): SLURM's controller failing or
refusing (fake squeue and scontrol on PATH: the outside world), the node's memory cgroup, partial beside a
measurement."""

import pytest

from dlbench.testing import faults, faults_cluster


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faults.Lab(tmp_path_factory.mktemp("faults-cluster"))


def test_a_failing_squeue_keeps_the_marks_and_the_locks_and_says_so(tmp_path):
    row = faults_cluster.squeue_fails(tmp_path)
    assert row["survived"] and not row["data_lost"], row
    assert row["mark_kept"] and row["lock_kept"] and row["removed"] == 0 and row["said"], row


def test_a_refused_requeue_ends_the_point_as_a_failed_record_with_scontrols_words(lab):
    row = faults_cluster.requeue_refused(lab)
    assert row["status"] == "preempted" and "presently disabled" in row["reason"], row
    assert row["whole"] and row["attempts"] == ["preempted"] and row["said"], row
    assert row["exit_code"] != 0, row  # the job still ends as SLURM's preemption ended it


def test_a_jobs_memory_request_covers_the_runners_own_cap():
    """SLURM's cgroup must not end a point before the runner's guards would (1.5 x the budget did, below 2 GB)."""
    from dlbench.node import memcap
    from dlbench.rules import cluster_request

    for budget in (150, 1000, 2000, 16000):
        asked = cluster_request.mem_mb({"limits": {"memory_mb": budget}})
        assert asked >= memcap.hard_cap_mb(budget) + memcap.JOB_OVERHEAD_MB, (budget, asked)


def test_a_trainer_oom_killed_by_its_jobs_memory_cgroup_is_recorded_oom(lab):
    row = faults_cluster.cgroup_oom_kill(lab)
    if row.get("skipped"):
        pytest.skip(row["skipped"])
    assert row["status"] == "oom" and row["oom_by"] == "cgroup" and row["returncode"] == -9, row
    assert f"limit of {faults_cluster.CGROUP_LIMIT_MB} MB" in row["reason"] and row["oom_kills"] >= 1, row
    assert not row["cgroup_left"], row


def test_cgroup_v2s_count_and_limit_are_read_as_v1s(tmp_path):
    """cgroup v2 (memory.events, memory.max; a job's limit on an ancestor) cannot be had on this v1 machine: its
    files as the kernel writes them."""
    from dlbench.node import oomkill

    job = tmp_path / "job_42"
    step = job / "step_0"
    step.mkdir(parents=True)
    (job / "memory.max").write_text("209715200\n")
    (step / "memory.max").write_text("max\n")
    (step / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\n")
    start = oomkill.Baseline(step, oomkill.oom_kills(step))
    assert start.kills == 0 and oomkill.killed_since(start) is None
    (step / "memory.events").write_text("low 0\nhigh 0\nmax 40\noom 2\noom_kill 1\n")
    assert oomkill.limit(step) == (job, 200 * 2**20)
    assert f"limit of 200 MB (set on {job})" in oomkill.killed_since(start)
