"""Outside load on the record: others' CPU from /proc/stat, less the point's own tree and the runner's."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dlbench.node import hostload

TICKS = hostload.CLOCK_TICKS


def stat_text(user=0, nice=0, system=0, idle=0, iowait=0, irq=0, softirq=0, steal=0, guest=0, guest_nice=0) -> str:
    """/proc/stat as the kernel writes it, in clock ticks (the per-CPU lines after the first are not read)."""
    total = f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} {guest} {guest_nice}"
    return total + "\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345\nctxt 999\n"


def test_busy_time_is_everything_but_idle_iowait_and_the_guest_columns():
    text = stat_text(user=5 * TICKS, nice=1 * TICKS, system=2 * TICKS, idle=100 * TICKS, iowait=7 * TICKS,
                     irq=TICKS // 2, softirq=TICKS // 2, steal=TICKS, guest=3 * TICKS, guest_nice=TICKS)
    assert hostload.busy_s(text) == pytest.approx(5 + 1 + 2 + 0.5 + 0.5 + 1)
    assert hostload.busy_s("cpu  10 0 10 50\n") == pytest.approx(20 / TICKS)  # an old kernel's four columns


def test_a_file_that_is_not_proc_stat_is_refused():
    with pytest.raises(ValueError, match="not /proc/stat"):
        hostload.busy_s("MemTotal: 1 kB\n")


def reading(busy_ticks: int, tree_s: float, self_s: float) -> dict:
    return {"host_busy_s": hostload.busy_s(stat_text(user=busy_ticks)), "tree_cpu_s": tree_s, "self_cpu_s": self_s}


def test_others_are_the_machines_busy_time_less_the_tree_and_the_runner():
    # Over 2 s the machine was busy 3.5 core-seconds; the point's tree used 2.0 of them and the runner 0.3.
    last, now = reading(10 * TICKS, 4.0, 1.0), reading(10 * TICKS + int(3.5 * TICKS), 6.0, 1.3)
    assert hostload.others_pct(last, now, 2.0) == pytest.approx(100 * (3.5 - 2.0 - 0.3) / 2.0)
    # The kernel's counts round: a tree that seems to use more than the machine gives 0, never less.
    assert hostload.others_pct(last, reading(10 * TICKS + TICKS, 6.0, 1.3), 2.0) == 0.0
    assert hostload.others_pct({**last, "host_busy_s": None}, now, 2.0) is None  # no /proc/stat there


def sample(t: float, others: float | None, load: float = 1.0) -> dict:
    return {"t": t, "cpu_pct": 100.0, "host_cpu_other_pct": others, "host_load_1m": load}


def test_the_train_mean_weights_each_sample_by_the_time_it_covers_and_the_threshold_classifies():
    samples = [sample(0.0, 300.0, 0.5),  # before training: not counted
               sample(1.0, 10.0, 2.0),  # the first train sample covers 1 s
               sample(4.0, 50.0, 2.5),  # this one 3 s
               sample(5.0, 90.0, 3.0),  # 1 s
               sample(6.0, 500.0, 4.0)]  # after training: not counted
    in_train = [False, True, True, True, False]
    s = hostload.summary(samples, in_train, contended_pct=40.0)
    assert s["host_cpu_other_pct_mean"] == pytest.approx((10 * 1 + 50 * 3 + 90 * 1) / 5)
    assert s["host_load_start"] == 2.0 and s["contended"] is True and s["contended_pct"] == 40.0
    assert hostload.summary(samples, in_train, contended_pct=60.0)["contended"] is False
    # No train sample (a point that failed early): the whole run's samples stand in.
    assert hostload.summary(samples, [False] * 5, 25.0)["host_cpu_other_pct_mean"] == pytest.approx(
        (10 + 50 * 3 + 90 + 500) / 6)
    assert hostload.summary([], [], 25.0) == {"host_cpu_other_pct_mean": None, "host_load_start": None,
                                              "contended": None, "contended_pct": 25.0}


BURN = "import time\nwhile True:\n    pass\n"


def cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@pytest.fixture
def burner():
    """A real process outside the point's tree keeping one core busy; yields its pid."""
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    time.sleep(0.3)
    yield proc.pid
    proc.kill()
    proc.wait(timeout=600)


@pytest.mark.long
def test_a_burner_beside_a_real_point_marks_it_contended_with_about_the_burners_use(train, burner):
    cores = os.cpu_count()
    t0, c0 = time.monotonic(), cpu_s(burner)
    r = train("pytorch", iterations=300, threads=1)
    burner_pct = 100.0 * (cpu_s(burner) - c0) / (time.monotonic() - t0)
    assert r["status"] == "ok", r["reason"]
    # Others used at least what the burner did (the shared machine's other users come on top of it) ...
    assert r["host_cpu_other_pct_mean"] >= 0.75 * burner_pct, (r["host_cpu_other_pct_mean"], burner_pct)
    assert r["contended"] is True and r["contended_pct"] == hostload.CONTENDED_PCT
    # ... and never the point's own use: others and the point together fit in the machine's cores.
    assert r["host_cpu_other_pct_mean"] + r["cpu_util_mean_pct"] <= 100.0 * cores * 1.1, r["cpu_util_mean_pct"]
    assert r["host_load_start"] is not None and r["host_load_start"] >= 0.5
    assert r["quiet_wait_s"] == 0.0  # no waiting unless asked for
    header = (r["_out"] / "samples.csv").read_text().splitlines()[0].split(",")
    assert "host_cpu_other_pct" in header and "host_load_1m" in header


def test_the_quiet_wait_is_bounded_and_ends_at_once_on_a_threshold_the_machine_is_under(burner):
    """With a burner, others' use stays over 25% of a core: the wait lasts its bound. A threshold over every core
    of the machine is met at the first window."""
    waited = hostload.wait_quiet(25.0, 2.0, window_s=0.5)
    assert 2.0 <= waited < 3.5
    assert hostload.wait_quiet(100.0 * os.cpu_count() + 1, 10.0, window_s=0.5) < 1.5
