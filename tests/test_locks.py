"""The measurement lock, taken by real processes: a CPU point alone, GPU points one per GPU and side by side."""

from __future__ import annotations

import itertools
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from dlbench.paths import ROOT

HOLD_S = 1.5
# One point's process: wait for its start time, take the lock as the runner does, hold it, say when.
POINT = f"""
import json, sys, time
from dlbench.locks import measuring
name, kind, lock, devices, per_device, start = sys.argv[1:]
time.sleep(max(0.0, float(start) - time.time()))
asked = time.time()
with measuring(lock, devices.split(",") if kind == "gpu" else None, per_device=per_device == "1") as slot:
    got = time.time()
    time.sleep({HOLD_S})
    done = time.time()
print(json.dumps(dict(name=name, kind=kind, device=slot.device, mode=slot.mode, wait_s=slot.wait_s,
                      asked=asked, got=got, done=done)))
"""


def run_points(tmp_path, points: list[tuple[str, str, float]], devices: str = "0,1", per_device: bool = True):
    """Start one process per (name, cpu|gpu, start offset in s) and return their reports by name."""
    t0 = time.time() + 1.0  # every process started before the first one asks
    lock = str(tmp_path / "measure.lock")
    procs = [subprocess.Popen([sys.executable, "-c", POINT, name, kind, lock, devices, "1" if per_device else "0",
                               str(t0 + offset)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
             for name, kind, offset in points]
    reports = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    return {r["name"]: r for r in reports}


def overlap(a: dict, b: dict) -> bool:
    return a["got"] < b["done"] and b["got"] < a["done"]


def test_two_gpus_serve_two_gpu_points_at_once_and_a_cpu_point_measures_alone(tmp_path):
    r = run_points(tmp_path, [("cpu1", "cpu", 0.0), ("gpu_a", "gpu", 0.3), ("gpu_b", "gpu", 0.3),
                              ("gpu_c", "gpu", 0.3), ("cpu2", "cpu", 0.6)])
    gpu = [r[n] for n in ("gpu_a", "gpu_b", "gpu_c")]
    # A CPU point overlaps nothing: it held the node alone.
    for name in ("cpu1", "cpu2"):
        assert r[name]["mode"] == "exclusive" and r[name]["device"] is None
        assert not any(overlap(r[name], other) for other in r.values() if other is not r[name]), r
    # The GPU points got the two fake GPUs; two of them measured side by side, on different GPUs.
    assert all(g["mode"] == "per_device" and g["device"] in ("0", "1") for g in gpu)
    pairs = list(itertools.combinations(gpu, 2))
    assert any(overlap(a, b) and a["device"] != b["device"] for a, b in pairs), r
    # Never two points on one GPU at a time: the third waited for a GPU to come free.
    assert not any(overlap(a, b) for a, b in pairs if a["device"] == b["device"]), r
    # Who waited, and for about how long: cpu1 not at all; every GPU point for cpu1's measurement at least.
    assert r["cpu1"]["wait_s"] < 0.3
    assert all(g["wait_s"] > HOLD_S - 0.3 - 0.2 for g in gpu)
    assert max(g["wait_s"] for g in gpu) > 2 * HOLD_S - 0.3 - 0.2  # the one that waited for a free GPU too


def test_gpu_points_measure_one_at_a_time_when_told_to(tmp_path):
    r = run_points(tmp_path, [("gpu_a", "gpu", 0.0), ("gpu_b", "gpu", 0.0)], per_device=False)
    assert not overlap(r["gpu_a"], r["gpu_b"])
    assert {r["gpu_a"]["mode"], r["gpu_b"]["mode"]} == {"exclusive"}
    assert r["gpu_a"]["device"] == r["gpu_b"]["device"] == "0"
    assert max(r["gpu_a"]["wait_s"], r["gpu_b"]["wait_s"]) > HOLD_S - 0.2


def test_a_free_gpu_is_taken_at_once_beside_a_busy_one(tmp_path):
    r = run_points(tmp_path, [("gpu_a", "gpu", 0.0), ("gpu_b", "gpu", 0.5)])
    assert overlap(r["gpu_a"], r["gpu_b"]) and r["gpu_a"]["device"] != r["gpu_b"]["device"]
    assert r["gpu_b"]["wait_s"] < 0.3


def test_a_lock_file_another_user_created_can_still_be_locked(tmp_path):
    """User A's lock file, 0644 in a shared folder: user B (here: nobody) locks it all the same."""
    shared = Path(tempfile.mkdtemp(prefix="dlbench-shared-", dir="/tmp"))  # like /tmp itself: every user's
    shared.chmod(0o1777)
    lock = shared / "measure.lock"
    lock.write_text("")
    lock.chmod(0o644)
    if os.getuid() != 0:
        pytest.skip("needs root, to act as a second user (nobody)")
    nobody = pwd.getpwnam("nobody").pw_uid
    # The system's Python, and a copy of the package that nobody may read: the checkout and its venv may lie
    # in folders only root can enter (root's home, a 0700 temporary clone).
    python = shutil.which("python3", path="/usr/bin:/bin")
    package = shared / "pkg" / "dlbench"
    shutil.copytree(ROOT / "dlbench", package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in [shared / "pkg", *(p for p in package.rglob("*") if p.is_dir()), package]:
        folder.chmod(0o755)
    script = f"from dlbench.locks import flocked\nwith flocked({str(lock)!r}) as waited: print('locked', waited)"
    proc = subprocess.run([python, "-c", script], cwd="/", capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(shared / "pkg"), "PATH": "/usr/bin:/bin"},
                          preexec_fn=lambda: os.setuid(nobody))
    shutil.rmtree(shared)
    assert proc.returncode == 0 and proc.stdout.startswith("locked"), proc.stderr[-800:]


def test_a_new_lock_file_is_lockable_by_every_user(tmp_path):
    from dlbench.locks import flocked

    lock = tmp_path / "new.lock"
    with flocked(lock):
        pass
    assert lock.stat().st_mode & 0o777 == 0o666


def test_a_point_that_waits_too_long_for_the_lock_is_a_recorded_timeout(tmp_path, digits_dir):
    """Another process holds the node's lock: the point gives up after lock_timeout_s and says so."""
    from dlbench import runner
    from dlbench.sweep import one_point

    lock = tmp_path / "measure.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom dlbench.locks import flocked\n"
                               f"with flocked({str(lock)!r}):\n    print('held', flush=True)\n    time.sleep(60)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        record = runner.run_point(one_point("pytorch", iterations=5), digits_dir, tmp_path / "out",
                                  measure_lock=str(lock), lock_timeout_s=2)
        took = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    assert record["status"] == "timeout" and "(lock)" in record["reason"]
    assert record["lock_wait_s"] == 2 and 2 <= took < 15
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["status"] == "timeout"
