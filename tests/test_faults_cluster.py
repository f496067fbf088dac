"""Round four's faults, injected for real (dlbench/testing/faults_cluster.py): SLURM's controller failing or
refusing (fake squeue and scontrol on PATH: the outside world), the node's memory cgroup, partial beside a
measurement."""

from dlbench.testing import faults_cluster as cluster


def test_a_failing_squeue_keeps_the_marks_and_the_locks_and_says_so(tmp_path):
    row = cluster.squeue_fails(tmp_path)
    assert row["survived"] and not row["data_lost"], row
    assert row["mark_kept"] and row["lock_kept"] and row["removed"] == 0 and row["said"], row
