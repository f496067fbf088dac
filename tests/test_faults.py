"""Every fault ends as data and nothing is lost: each injected for real (see dlbench/testing/faults.py)."""

import re

import pytest

from dlbench.frameworks import protocol
from dlbench.node import memcap
from dlbench.testing import faults


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return faults.Lab(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
def test_divergence_stops_early_with_the_iteration_and_the_curve(lab):
    row = faults.diverged(lab)
    assert row["survived"] and not row["data_lost"]
    r = row["record"]
    assert r["status"] == "diverged" and 0 < r["diverged_at_iteration"] < 300
    assert row["curve_rows"] >= 1 and r["iterations_done"] == r["diverged_at_iteration"]


@pytest.mark.slow
def test_a_raising_trainer_is_an_error_with_the_exception_and_the_log(lab):
    row = faults.trainer_raises(lab)
    r = row["record"]
    assert r["status"] == "error" and "FileNotFoundError" in r["reason"]
    assert "Traceback" in r["log_tail"]


@pytest.mark.slow
def test_a_killed_trainer_is_recorded_as_killed(lab):
    row = faults.trainer_killed(lab)
    r = row["record"]
    assert r["status"] == "killed" and "SIGKILL" in r["reason"]
    assert not row["data_lost"]
    # Killed mid-training, after its first report of a step: its record keeps how far it got. The phases before
    # training ended (their times are in the record), training had started and not ended (the events kept beside
    # the record), and the iterations done are the last the trainer reported.
    events = protocol.read(lab.out("killed") / "events.jsonl")
    names = [(e["e"], e.get("name")) for e in events]
    assert ("phase_start", "train") in names and ("phase_end", "train") not in names, names[-5:]
    assert r["data_load_time_s"] > 0 and r["build_time_s"] > 0
    steps = [e["iteration"] for e in events if e["e"] == "step"]
    assert steps and 0 < r["iterations_done"] == steps[-1] < 100000, (steps[-3:], r["iterations_done"])


@pytest.mark.slow
def test_time_budget_ends_the_point_as_timeout_with_its_progress(lab):
    row = faults.time_budget(lab)
    r = row["record"]
    assert r["status"] == "timeout" and r["iterations_done"] > 0, r["reason"]
    assert row["time_limit_s"] <= r["wall_time_s"] < row["time_limit_s"] + 10


@pytest.mark.slow
def test_memory_budget_is_enforced_and_the_peak_recorded(lab):
    row = faults.memory_budget(lab)
    r = row["record"]
    assert r["status"] == "oom" and r["rss_peak_mb"] > 150
    assert r["wall_time_s"] < 60


@pytest.mark.slow
def test_gpu_point_without_gpu(lab):
    row = faults.gpu_missing(lab)
    assert row["record"]["status"] == "unavailable" and "GPU" in row["record"]["reason"]


@pytest.mark.long
def test_a_cancelled_job_leaves_an_attempt_no_result_and_no_orphan(lab):
    row = faults.job_cancelled(lab)
    assert row["exit_code"] != 0
    assert row["attempt_status"] == "cancelled"
    assert not row["orphan_trainer"] and not row["data_lost"] and row["survived"]
    # Snakemake's retry of a cancelled job does not undo the cancel; the workflow's next run trains the point.
    assert row["retry_exit_code"] == 1 and "cancelled" in row["retry_said"][0]
    assert row["kept_after_retry"] == row["kept_before_retry"] == 1
    assert row["rerun_status"] == "ok"


def test_a_corrupt_dataset_file_is_refused_naming_file_and_digests(lab):
    row = faults.corrupt_dataset(lab)
    assert row["survived"] and not row["data_lost"]
    assert ".gz" in row["message"] and "expected" in row["message"] and "found" in row["message"]


@pytest.mark.long
def test_sigkill_of_the_whole_workflow_then_rerun_loses_nothing(lab):
    row = faults.workflow_killed(lab)
    assert row["finished_before_kill"] >= 1
    assert row["orphan_trainers"] == 0
    assert not row["finished_points_rerun"]
    assert row["rows_after"] == 4 and row["partial_dirs_left"] == 0
    assert row["survived"] and not row["data_lost"]


@pytest.mark.slow
def test_a_rerun_that_fails_keeps_the_earlier_good_measurement(lab):
    row = faults.rerun_fails(lab)
    assert row["attempts"] == ["ok", "timeout"] and row["result_status"] == "timeout"
    assert row["aggregated_attempts"] == 2
    assert row["survived"] and not row["data_lost"]


@pytest.mark.slow
def test_a_result_that_is_not_a_record_is_a_damaged_row_until_made_again(lab):
    row = faults.bad_record(lab)
    assert row["rows_after"] == 3, row  # no point dropped from the tables
    assert set(row["statuses"].values()) == {"damaged"}, row
    assert all("cannot be read" in r and "--forcerun" in r for r in row["reasons"]), row["reasons"]
    assert row["made_again"], row
    assert row["survived"] and not row["data_lost"]


@pytest.mark.slow
def test_a_hung_trainer_is_ended_as_hung_with_its_last_events(lab):
    row = faults.trainer_hangs(lab)
    r = row["record"]
    assert r["status"] == "hung" and f"no event from the trainer for {row['hang_s']:g} s" in r["reason"], r["reason"]
    assert "step" in r["reason"] or "phase_start" in r["reason"]  # its last events are named
    assert row["ended_after_s"] < row["hang_s"] + 26 and r["iterations_done"] > 0


@pytest.mark.slow
def test_a_fast_allocation_past_the_budget_is_stopped_by_the_hard_cap(lab):
    row = faults.memory_overshoot(lab)
    r = row["record"]
    assert r["status"] == "oom" and r["oom_by"] == "cap", (r["status"], r.get("reason"), r.get("log_tail"))
    assert r["memory_cap"] in ("cgroup", "rlimit_data")
    # It never got far past the cap. The monitor looks every 30 s and the point is over sooner: it reads nothing, and
    # the record has no resident peak (where it has one, it is under the cap); what the trainer held when its
    # allocation failed, its log says.
    assert r["rss_peak_mb"] is None or 0 < r["rss_peak_mb"] < 200 + memcap.HEADROOM_MB, r["rss_peak_mb"]
    if r["memory_cap"] == "rlimit_data":  # an allocation failed: the small trainer says what it held then
        held = re.findall(r"MemoryError: .* \(holding (\d+) MB\)", r["log_tail"])
        assert held, r["log_tail"][-1000:]
        # past the 200 MB budget (the monitor never saw it) and stopped within the cap's 1024 MB of headroom
        assert 200 < int(held[-1]) <= 200 + memcap.HEADROOM_MB, held


def test_kill_tree_ends_the_group_also_when_its_leader_has_exited():
    import os
    import subprocess
    import sys
    import time

    from dlbench.node.procs import kill_tree

    # A leader in a session of its own starts a child in its group, prints the child's pid and exits.
    leader = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; "
                               "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
                               "print(c.pid, flush=True)"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child = int(leader.stdout.readline())
    leader.wait(timeout=600)
    assert os.path.exists(f"/proc/{child}")
    kill_tree(leader.pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") and \
            open(f"/proc/{child}/stat").read().split()[2] != "Z":
        time.sleep(0.05)
    alive = os.path.exists(f"/proc/{child}") and open(f"/proc/{child}/stat").read().split()[2] != "Z"
    assert not alive, "the leader's child outlived kill_tree"


@pytest.mark.long
def test_only_snakemake_killed_its_live_job_is_not_run_twice_and_nothing_is_lost(lab):
    row = faults.snakemake_main_killed(lab)
    assert row["second_run_exit"] != 0 and row["said"], row
    assert row["partial_kept"] and row["trainers_alive"] == 1
    assert row["third_run_exit"] == 0 and row["attempts"] == ["ok"], row  # measured once, not again
    assert row["kept_said"], row
    assert row["survived"] and not row["data_lost"]


def test_a_cancel_stands_for_retries_unless_slurm_ended_the_job_otherwise(tmp_path):
    """Somebody's cancel stands (no retry trains); an attempt begun since, or a SLURM job that accounting
    does not say was CANCELLED (its time limit: TIMEOUT, retried with more time), lets the retry run."""
    from dlbench.record import store
    from dlbench.run import runner

    def cancelled(out, **facts):
        record = {**{k: None for k in store.REQUIRED}, "status": "cancelled", **facts}
        store.keep_attempt(out, record, out, store.attempt_name(1.0e9))

    local = tmp_path / "local"
    cancelled(local, slurm_job_id=None)  # SIGTERM to a job off SLURM
    assert store.cancelled_last(local)["status"] == "cancelled" and runner.cancel_stands(local)
    store.mark_started(local, attempt=2)  # an attempt begun after it (its mark newer than the kept record)
    assert store.cancelled_last(local) is None and not runner.cancel_stands(local)

    unknown = tmp_path / "unknown"
    cancelled(unknown, slurm_job_id="2147000000")  # no such job in SLURM's accounting (or no SLURM here)
    assert store.cancelled_last(unknown) is not None and not runner.cancel_stands(unknown)

    ok = tmp_path / "ok"
    cancelled(ok, slurm_job_id=None)
    store.keep_attempt(ok, {**{k: None for k in store.REQUIRED}, "status": "ok"}, ok,
                         store.attempt_name(2.0e9))
    assert store.cancelled_last(ok) is None  # the newest attempt is what counts
