"""The node's locks held or made private by others, SLURM jobs not yet started, marks cut short, a hung NVML,
signals and a trainer's leftovers: each fault injected for real (see dlbench/testing/faults_node.py)."""

import os

import pytest

from dlbench.testing import faults, faults_node

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs in a mount namespace of its own")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faults.Lab(tmp_path_factory.mktemp("faults-node"))


def test_a_gate_or_heavy_lock_held_by_another_process_ends_the_point_as_lock_timeout(lab):
    row = faults_node.gate_held(lab)
    for name in ("gate", "heavy"):
        case = row["cases"][name]
        assert case["status"] == "lock_timeout" and case["published"] and case["seconds"] < 10, row
    assert "measurement.lock_timeout_s" in row["cases"]["heavy_work"]["said"], row
    assert row["cases"]["heavy_work"]["seconds"] < 6, row


def test_partial_compare_the_runs_table_and_the_parse_probes_keep_off_a_measurement(lab):
    row = faults_node.heavy_beside_a_measurement(lab)
    for name in ("partial", "compare", "runs_table", "site_probe"):
        case = row["cases"][name]
        assert faults_node._refused_in_one_line(case), row
        assert faults_node.HEAVY_TIMEOUT_S <= case["seconds"] < 20, row  # it waited out the timeout, no longer
    for name in ("compare", "runs_table", "site_probe"):  # and said, while it waited, what it waits for
        assert faults_node.said_it_waits(row["cases"][name]), row["cases"][name]


@pytest.mark.long
def test_partial_waits_for_a_measurement_then_draws(lab):
    row = faults_node.partial_after_a_measurement(lab)
    assert row["survived"] and row["drawn"] == 2, row


@ROOT_ONLY
def test_a_lock_folder_private_to_the_slurm_job_is_refused_in_one_line(lab):
    row = faults_node.private_lock_folder(lab)
    assert row["survived"], row


def test_jobs_pending_in_slurm_keep_a_killed_runs_locks(lab):
    row = faults_node.pending_jobs(lab)
    assert row["survived"], row


def test_a_mark_cut_short_leaves_nothing_and_an_unreadable_one_counts_live(lab):
    row = faults_node.marks_cut_short(lab)
    assert row["survived"] and row["warned"], row


def test_every_lock_file_is_0644_and_checked_for_removal(lab):
    row = faults_node.lock_files_replaced(lab)
    assert row["survived"], row


def test_a_hung_nvml_is_never_asked_for_a_cpu_point_and_bounded_for_a_gpu_point(lab):
    row = faults_node.nvml_hangs(lab)
    assert row["survived"], row
    assert row["cases"]["gpu"]["seconds"] < 60, row  # NVML's 5 s, not its 300


def test_a_lone_sigcont_is_no_suspension(lab):
    row = faults_node.lone_sigcont(lab)
    assert row["survived"] and not row["paused_s"], row


def test_a_trainers_child_left_behind_is_ended_with_the_point(lab):
    row = faults_node.child_left_behind(lab)
    assert row["survived"], row


@pytest.mark.parametrize("scenario", [faults_node.cancel_sighup,
                                      pytest.param(faults_node.cancel_sigint, marks=pytest.mark.long)],
                         ids=["SIGHUP", "SIGINT"])
def test_sighup_and_sigint_cancel_a_job_as_sigterm_does(lab, scenario):
    row = scenario(lab)
    assert row["survived"], row


def test_a_killed_jobs_pid_taken_again_does_not_keep_its_stale_locks(lab):
    row = faults_node.pid_taken_again(lab)
    assert row["survived"], row
