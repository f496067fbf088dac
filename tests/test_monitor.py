"""The monitor sees real CPU use and real memory of a process tree, from outside it."""

import glob
import subprocess
import sys
import time

import pytest

from dlbench.run.monitor import Monitor

# Busy for {s} seconds of its own CPU time, however loaded the machine is: what it used is known exactly.
BUSY = "import time\nwhile time.process_time() < {s}: pass\n"
ALLOC = ("import time\nblock = bytearray({mb} * 2**20)\nfor i in range(0, len(block), 4096): block[i] = 1\n"
         "time.sleep({s})\n")


def run_monitored(code: str, interval: float = 0.05, **kw) -> Monitor:
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    mon = Monitor(proc.pid, interval, **kw).start()
    proc.wait(timeout=600)
    time.sleep(interval * 2)
    mon.stop()
    return mon


def cpu_seen(mon: Monitor) -> float:
    """CPU seconds the monitor's curve accounts for: its per-cent readings integrated over time."""
    return sum(b["cpu_pct"] / 100 * (b["t"] - a["t"]) for a, b in zip(mon.samples, mon.samples[1:]))


def test_sees_one_busy_core():
    # Judged by the CPU the process is known to have used, not by 100 % of a core, which only a quiet
    # machine gives: on a loaded one the process gets a share, and the curve must show that share.
    mon = run_monitored(BUSY.format(s=1.5))
    assert len(mon.samples) > 10
    assert 1.5 * 0.9 < cpu_seen(mon) < 1.5 * 1.1 + 0.15  # plus the interpreter's start and exit
    assert max(s["cpu_pct"] for s in mon.samples) < 160  # one thread: never much over one core


def test_sees_a_child_process_too():
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BUSY.format(s=1.2)!r}])"
    mon = run_monitored(code)
    assert max(s["processes"] for s in mon.samples) == 2
    assert cpu_seen(mon) > 1.2 * 0.9  # the busy grandchild's CPU is counted


def test_counts_short_lived_children_without_spikes():
    # Like Theano's compiler runs: children that live a fraction of a second, one after another.
    child = BUSY.format(s=0.3)
    code = f"import subprocess, sys\nfor _ in range(5): subprocess.run([sys.executable, '-c', {child!r}])"
    mon = run_monitored(code)
    assert cpu_seen(mon) > 0.8 * 5 * 0.3  # their CPU is in the curve, found before they ended
    assert max(s["cpu_pct"] for s in mon.samples) < 160  # one busy process at a time (10 ms CPU ticks aside)


def test_sees_memory_of_a_known_block():
    mon = run_monitored(ALLOC.format(mb=300, s=0.6))
    peak = max(s["rss_mb"] for s in mon.samples)
    assert 300 <= peak < 300 * 1.05 + 30


def test_enforces_a_memory_budget():
    mon = run_monitored(ALLOC.format(mb=400, s=5), memory_limit_mb=200)
    assert mon.over_memory
    assert mon.samples[-1]["t"] - mon.samples[0]["t"] < 4  # killed, not slept through


def test_the_gpu_sampled_is_the_one_the_job_was_pinned_to():
    from dlbench.run.monitor import nvml_index

    assert nvml_index(None) == 0
    assert nvml_index("3") == 3 and nvml_index("2,5", 1) == 5
    assert nvml_index("GPU-8a1b2c3d-0000") == "GPU-8a1b2c3d-0000"


@pytest.mark.gpu
@pytest.mark.skipif(not glob.glob("/dev/nvidia[0-9]*"), reason="no NVIDIA GPU on this machine")
def test_nvml_readings_of_a_real_gpu():
    from dlbench.run.monitor import open_gpu

    gpu = open_gpu(0)
    reading = gpu.read()
    assert reading["gpu_mem_mb"] > 0 and 0 <= reading["gpu_util_pct"] <= 100 and reading["gpu_power_w"] > 0
