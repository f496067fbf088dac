"""Every fault ends as data and nothing is lost: each injected for real (see dlbench/testing/faults.py)."""

import pytest

from dlbench.testing import faults as faultmatrix


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faultmatrix.Lab(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
def test_divergence_stops_early_with_the_iteration_and_the_curve(lab):
    row = faultmatrix.diverged(lab)
    assert row["survived"] and not row["data_lost"]
    r = row["record"]
    assert r["status"] == "diverged" and 0 < r["diverged_at_iteration"] < 300
    assert row["curve_rows"] >= 1 and r["iterations_done"] == r["diverged_at_iteration"]


@pytest.mark.slow
def test_a_raising_trainer_is_an_error_with_the_exception_and_the_log(lab):
    row = faultmatrix.trainer_raises(lab)
    r = row["record"]
    assert r["status"] == "error" and "FileNotFoundError" in r["reason"]
    assert "Traceback" in r["log_tail"]


@pytest.mark.slow
def test_a_killed_trainer_is_recorded_as_killed(lab):
    row = faultmatrix.trainer_killed(lab)
    r = row["record"]
    assert r["status"] == "killed" and "SIGKILL" in r["reason"]
    assert r["iterations_done"] >= 0 and not row["data_lost"]


@pytest.mark.slow
def test_time_budget_ends_the_point_as_timeout_with_its_progress(lab):
    row = faultmatrix.time_budget(lab)
    r = row["record"]
    assert r["status"] == "timeout" and r["iterations_done"] > 0
    assert 15 <= r["wall_time_s"] < 25


@pytest.mark.slow
def test_memory_budget_is_enforced_and_the_peak_recorded(lab):
    row = faultmatrix.memory_budget(lab)
    r = row["record"]
    assert r["status"] == "oom" and r["rss_peak_mb"] > 150
    assert r["wall_time_s"] < 60


@pytest.mark.slow
def test_gpu_point_without_gpu(lab):
    row = faultmatrix.gpu_missing(lab)
    assert row["record"]["status"] == "unavailable" and "GPU" in row["record"]["reason"]


@pytest.mark.slow
def test_a_cancelled_job_leaves_an_attempt_no_result_and_no_orphan(lab):
    row = faultmatrix.job_cancelled(lab)
    assert row["exit_code"] != 0
    assert row["attempt_status"] == "cancelled"
    assert not row["orphan_trainer"] and not row["data_lost"] and row["survived"]


def test_a_corrupt_dataset_file_is_refused_naming_file_and_digests(lab):
    row = faultmatrix.corrupt_dataset(lab)
    assert row["survived"] and not row["data_lost"]
    assert ".gz" in row["message"] and "expected" in row["message"] and "found" in row["message"]


@pytest.mark.slow
def test_sigkill_of_the_whole_workflow_then_rerun_loses_nothing(lab):
    row = faultmatrix.workflow_killed(lab)
    assert row["finished_before_kill"] >= 1
    assert row["orphan_trainers"] == 0
    assert not row["finished_points_rerun"]
    assert row["rows_after"] == 4 and row["partial_dirs_left"] == 0
    assert row["survived"] and not row["data_lost"]
