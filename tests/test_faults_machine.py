"""Failures of the machine are retried, records are whole or absent, shared nodes and pages are safe: each fault
injected for real (see dlbench/testing/faults_machine.py)."""

import os

import pytest

from dlbench.record.statuses import signal_name
from dlbench.run.options import RunOptions
from dlbench.testing import faults, faults_machine

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs, freezes a cgroup or acts as another user")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faults.Lab(tmp_path_factory.mktemp("faults-machine"))


def test_realtime_signals_have_names():
    import signal

    assert signal_name(signal.SIGRTMIN) == "SIGRTMIN" and signal_name(signal.SIGRTMIN + 3) == "SIGRTMIN+3"
    assert signal_name(9) == "SIGKILL" and signal_name(200) == "signal 200"


@pytest.mark.slow
def test_a_lock_held_past_its_timeout_fails_the_job_and_the_retry_measures(lab):
    row = faults_machine.lock_timeout_retried(lab)
    assert row["survived"] and not row["data_lost"], row
    assert row["attempts"][:2] == ["lock_timeout", "lock_timeout"] and row["attempts"][-1] == "ok"
    assert row["result_attempt"] == len(row["attempts"])


@pytest.mark.long
def test_a_suspended_job_is_not_hung_and_its_times_are_not_published(lab):
    row = faults_machine.job_suspended(lab)
    assert row["exit_code"] == 75 and row["attempt_status"] == "suspended", row
    assert row["paused_s"] >= row["stopped_s"] - 2.5, row  # the watch wakes every 2 s: it sees all but that


@pytest.mark.long
def test_a_stepped_file_clock_does_not_end_a_live_point(lab):
    row = faults_machine.mtime_stepped(lab)
    assert row["status"] == "timeout" and row["wall_time_s"] >= row["time_limit_s"], row


@pytest.mark.long
def test_a_realtime_signal_ends_the_point_as_killed_naming_it(lab):
    row = faults_machine.realtime_signal(lab)
    assert row["status"] == "killed" and "SIGRTMIN+5" in row["reason"], row


@pytest.mark.long
def test_an_allocator_warning_in_an_ok_points_log_is_not_oom(lab):
    row = faults_machine.harmless_oom_line(lab)
    assert row["line_in_log"] and row["status"] == "ok", row


@pytest.mark.long
@ROOT_ONLY
def test_a_trainer_stuck_in_the_kernel_ends_hung_and_frees_the_lock(lab):
    row = faults_machine.trainer_unkillable(lab)
    assert row["status"] == "hung" and row["lock_free"], row
    assert row["ended_after_s"] < row["hang_s"] + 40  # the hang, the watch, SIGTERM's 5 s, the kill wait's 5 s


@pytest.mark.slow
@ROOT_ONLY
def test_a_full_disk_fails_the_job_and_loses_nothing_earlier(lab):
    row = faults_machine.disk_full(lab)
    assert row["exit_code"] == 75 and row["said"], row
    assert row["earlier_record_whole"] and row["partial_left"] == 0 and row["earlier_table_rows"] == 1
    assert row["table_write"] is not None


@pytest.mark.slow
@ROOT_ONLY
def test_a_lock_file_another_user_made_private_is_one_line_and_a_retry(lab):
    row = faults_machine.lock_squatted(lab)
    assert row["exit_code"] == 75 and row["attempts"] == ["lock_unusable"] and row["said"], row


@pytest.mark.long
def test_a_lock_file_deleted_while_held_marks_the_holder_lock_lost(lab):
    row = faults_machine.lock_deleted(lab)
    assert row["status"] == "lock_lost" and row["attempts"] == ["lock_lost"], row


@pytest.mark.slow
def test_data_changed_since_preparation_is_refused(lab):
    row = faults_machine.dataset_changed(lab)
    assert row["status"] == "data_changed" and "changed since" in row["reason"], row


@pytest.mark.long
def test_a_record_whose_files_disagree_is_a_failed_row_and_stays_where_it_is(lab):
    row = faults_machine.files_disagree(lab)
    assert row["survived"] and not row["data_lost"], row
    assert row["status"] == "damaged" and "curve.csv" in row["reason"] and "--forcerun" in row["reason"], row
    assert len(row["curve_runs"]) == 1, row  # the damaged record's curve is left out, the other's drawn


@pytest.mark.long
def test_a_finished_but_unpublished_training_is_kept_by_the_next_run(lab):
    row = faults_machine.unpublished_kept(lab)
    assert row["survived"] and len(row["kept"]) == 1, row


@pytest.mark.long
def test_a_job_that_dies_with_its_node_past_the_retries_ends_as_node_lost(lab):
    row = faults_machine.job_died(lab)
    assert row["marks_before"] == 2 and row["status"] == "node_lost" and row["lost_attempts"] == 2, row
    assert row["marks_after"] == 0
    # the last allowed attempt died: the one attempt beyond it publishes node_lost, so the tables are drawn
    assert row["after_last_exit"] == 0 and row["after_last_status"] == "node_lost" and row["after_last_lost"] == 1
    # the last allowed attempt ended otherwise: the attempt beyond it fails at once, in one line
    assert row["after_nothing_exit"] == 1 and row["after_nothing_said"] and not row["after_nothing_published"]


@pytest.mark.slow
def test_a_damaged_environment_is_a_machine_failure(lab):
    row = faults_machine.env_damaged(lab)
    assert row["statuses"] == ["env_damaged", "env_damaged"], row


@pytest.mark.long
def test_config_hazards_are_refused_in_one_line_within_seconds(lab):
    row = faults_machine.config_hazards(lab)
    for name, case in row["cases"].items():
        assert case["exit"] != 0 and len(case["line"]) == 1, (name, case)
        assert case["seconds"] < 60, (name, case)


def test_markup_in_a_failure_reason_stays_data_in_the_pages(lab):
    row = faults_machine.markup_in_reason(lab)
    assert row["raw_in_pages"] == [] and row["escaped_copies"] > 0, row
    assert "&lt;/script>&lt;script>document.title=" in row["failure_table"], row["failure_table"]
    assert row["survived"]


def _mark_of_a_dead_run(out, host: str, job: str | None = None) -> None:
    """The mark an attempt leaves when its job dies with its node: a process of `host` that is gone."""
    import json
    import subprocess

    from dlbench.record import store

    gone = subprocess.Popen(["true"])
    gone.wait(timeout=600)
    (out / store.ATTEMPTS).mkdir(parents=True, exist_ok=True)
    (out / store.ATTEMPTS / f"{store.STARTED}{host}-{gone.pid}.json").write_text(
        json.dumps({"host": host, "pid": gone.pid, "slurm_job_id": job}))


def test_the_attempt_after_the_last_publishes_node_lost_only_where_the_last_died(tmp_path):
    import socket

    from dlbench.record import store
    from dlbench.run import runner
    from dlbench.study import sweep

    p, out = sweep.one_point("pytorch", iterations=10), tmp_path / "point"
    # the last allowed attempt ended otherwise (no mark left): nothing to publish, nothing trained
    assert runner.run_point(p, tmp_path / "data", out, RunOptions(attempt=2)) is None
    assert not (out / store.RESULT).exists()
    _mark_of_a_dead_run(out, socket.gethostname())
    r = runner.run_point(p, tmp_path / "data", out, RunOptions(attempt=2))
    assert r["status"] == "node_lost" and r["lost_attempts"] == 1 and r["machine_failure"], r
    assert store.read(out / store.RESULT)["status"] == "node_lost" and r["iterations_done"] == 0
    assert not list((out / store.ATTEMPTS).glob(f"{store.STARTED}*"))  # history once a record stands


def test_slurms_own_requeues_count_as_runs_and_their_dead_runs_as_lost(tmp_path, monkeypatch):
    from dlbench.node import slurm_job
    from dlbench.record import store
    from dlbench.run import runner
    from dlbench.study import sweep

    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    monkeypatch.setattr(slurm_job, "running", lambda job: True)  # SLURM's word on job 77: it runs (this very run)
    assert runner.tries(1) == 3
    p, out = sweep.one_point("pytorch", iterations=10), tmp_path / "point"
    # two earlier runs of this same job died with their node, on another host: SLURM runs one at a time
    for _ in range(2):
        _mark_of_a_dead_run(out, "another-node", job="77")
    r = runner.run_point(p, tmp_path / "data", out, RunOptions(attempt=1))
    assert r["status"] == "node_lost" and r["lost_attempts"] == 2 and r["slurm_restart_count"] == 2, r
    assert store.read(out / store.RESULT)["slurm_job_id"] == "77"
