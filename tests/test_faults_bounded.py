"""Work asked for beside a measurement, waits and child processes that hang, a cancel on a full disk: each fault
injected for real (see dlbench/testing/faults_bounded.py)."""

import os

import pytest

from dlbench.testing import faults as faultmatrix
from dlbench.testing import faults_bounded as bounded


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faultmatrix.Lab(tmp_path_factory.mktemp("faults-bounded"))


def test_a_probe_waits_for_the_nodes_lock_and_prepares_its_data_as_heavy_work(lab):
    row = bounded.probe_beside_a_measurement(lab)
    assert row["survived"], row
    assert row["cases"]["no data yet"]["seconds"] < bounded.WAIT_S + 15, row  # its wait, and the command's start


def test_the_peak_and_the_calibration_keep_off_a_measurement(lab):
    row = bounded.commands_beside_a_measurement(lab)
    assert row["survived"], row


@pytest.mark.long
def test_the_summary_rule_is_heavy_work(lab):
    row = bounded.summary_beside_a_measurement(lab)
    assert row["survived"], row


def test_every_wait_and_child_that_hangs_ends_within_its_limit(lab):
    row = bounded.waits_that_hang(lab)
    assert row["survived"], row


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
def test_a_cancel_on_a_full_disk_keeps_its_exit_status_and_says_why_no_attempt_was_kept(lab):
    row = bounded.cancel_on_a_full_disk(lab)
    assert row["survived"], row
