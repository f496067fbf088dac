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
from dlbench.run.options import RunOptions

HOLD_S = 1.5
# One point's process: wait for its start time, take the lock as the runner does, hold it, say when.
POINT = f"""
import json, sys, time
from dlbench.node.locks import measuring
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
    t0 = time.time() + 3.0  # every process started before the first one asks (Python starts slowly under load)
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
    # cpu2 asks once two GPU points measure (cpu1 holds the node 1.5 s): a CPU point already queued at the gate
    # would be served before GPU points that reach the gate after it (no kind starves the other), which is the
    # gate's order, not the flock wake-up order this test is about.
    r = run_points(tmp_path, [("cpu1", "cpu", 0.0), ("gpu_a", "gpu", 0.3), ("gpu_b", "gpu", 0.3),
                              ("gpu_c", "gpu", 0.3), ("cpu2", "cpu", 2.4)])
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
    script = f"from dlbench.node.locks import flocked\nwith flocked({str(lock)!r}) as waited: print('locked', waited)"
    proc = subprocess.run([python, "-c", script], cwd="/", capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(shared / "pkg"), "PATH": "/usr/bin:/bin"},
                          preexec_fn=lambda: os.setuid(nobody))
    shutil.rmtree(shared)
    assert proc.returncode == 0 and proc.stdout.startswith("locked"), proc.stderr[-800:]


def test_a_new_lock_file_is_lockable_by_every_user(tmp_path):
    from dlbench.node.locks import flocked

    lock = tmp_path / "new.lock"
    with flocked(lock):
        pass
    assert lock.stat().st_mode & 0o777 == 0o644  # every user may lock it (read access), only its owner change it


def test_a_point_that_waits_too_long_for_the_lock_is_retried_and_only_the_last_attempt_publishes(tmp_path,
                                                                                                  digits_dir):
    """Another process holds the node's lock: the point gives up after lock_timeout_s, a failure of the machine.
    Before the last attempt only the attempt is kept (no result, so the job runs again); the last publishes it."""
    from dlbench.record import store
    from dlbench.run import runner
    from dlbench.study.sweep import one_point

    lock = tmp_path / "measure.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom dlbench.node.locks import flocked\n"
                               f"with flocked({str(lock)!r}):\n    print('held', flush=True)\n    time.sleep(60)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    out = tmp_path / "out"
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        first = runner.run_point(one_point("pytorch", iterations=5), digits_dir, out,
                                 RunOptions(measure_lock=str(lock), lock_timeout_s=2, retries=1))
        took = time.monotonic() - t0
        assert not (out / "metrics.json").exists() and len(store.attempts(out)) == 1
        last = runner.run_point(one_point("pytorch", iterations=5), digits_dir, out,
                                RunOptions(measure_lock=str(lock), lock_timeout_s=2, attempt=3, retries=2))
    finally:
        holder.kill()
        holder.wait(timeout=600)
    assert first["status"] == "lock_timeout" and first["machine_failure"] and "measurement lock" in first["reason"]
    assert first["lock_wait_s"] == 2 and 2 <= took < 15
    published = json.loads((out / "metrics.json").read_text())
    assert published["status"] == "lock_timeout" and published["attempt"] == 3 and last["machine_failure"]
    assert [json.loads(p.read_text())["status"] for p in store.attempts(out)] == ["lock_timeout"] * 2


# ---- heavy work (builds, data preparation, aggregation, charts) against measurements

HEAVY_S = 3.0
# One heavy job's process, like an environment build: the heavy side of the node held, then a compiler
# run again and again for HEAVY_S seconds (real CPU load), then when it held it, on the monotonic clock.
HEAVY = """
import json, os, subprocess, sys, tempfile, time
from dlbench.node.locks import heavy_work
name, lock, start, hold_s = sys.argv[1:]
time.sleep(max(0.0, float(start) - time.time()))
src = os.path.join(tempfile.mkdtemp(), "unit.c")
with open(src, "w") as fh:
    fh.writelines(f"double f{i}(double x) {{ return x * {i}.5 + {i}; }}\\n" for i in range(400))
asked = time.monotonic()
with heavy_work(lock, name) as waited:
    got = time.monotonic()
    compiles = 0
    while time.monotonic() - got < float(hold_s):
        subprocess.run(["cc", "-O2", "-c", src, "-o", src + ".o"], check=True)
        compiles += 1
    done = time.monotonic()
print(json.dumps(dict(name=name, asked=asked, got=got, done=done, waited=waited, compiles=compiles)))
"""


def start_heavy(tmp_path, name: str, lock: Path, delay_s: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HEAVY, name, str(lock), str(time.time() + delay_s), str(HEAVY_S)],
                            cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def heavy_report(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


def train_span(out: Path) -> tuple[float, float]:
    """The point's train phase, on the monotonic clock, from its events."""
    from dlbench.frameworks import protocol
    from dlbench.run import build_record

    (span,) = [(start, end) for name, start, end in build_record.phases(protocol.read(out / "events.jsonl"))
               if name == "train"]
    return span


def apart(span: tuple[float, float], job: dict) -> bool:
    return span[1] <= job["got"] or job["done"] <= span[0]


@pytest.mark.long
def test_a_point_started_with_two_builds_trains_after_both_and_the_builds_run_together(tmp_path, env_python,
                                                                                      digits_dir):
    """Two build-like heavy jobs (a compiler, again and again) and a real point, started together: the builds
    overlap each other, the point's training overlaps neither, and its record says it waited for them."""
    from dlbench.run import runner
    from dlbench.study.sweep import one_point

    lock = tmp_path / "measure.lock"
    python = env_python("pytorch")
    builds = [start_heavy(tmp_path, f"build{i}", lock) for i in (1, 2)]
    time.sleep(0.8)  # both are inside (the compilers run) before the point asks
    record = runner.run_point(one_point("pytorch", iterations=150, threads=1), digits_dir, tmp_path / "point",
                              RunOptions(python=python, measure_lock=str(lock)))
    b1, b2 = (heavy_report(p) for p in builds)
    span = train_span(tmp_path / "point")
    assert record["status"] == "ok", record["reason"]
    assert b1["got"] < b2["done"] and b2["got"] < b1["done"], (b1, b2)  # two heavy jobs side by side
    assert b1["compiles"] > 0 and b2["compiles"] > 0
    assert apart(span, b1) and apart(span, b2), (span, b1, b2)
    assert span[0] >= max(b1["done"], b2["done"])  # it came after them, having waited
    assert record["lock_wait_s"] > HEAVY_S - 1.5, record["lock_wait_s"]


@pytest.mark.long
def test_a_build_started_while_a_point_trains_waits_until_the_point_is_done(tmp_path, env_python, digits_dir):
    """The point runs as a training job does (python -m dlbench.cli train); a build asked for mid-training waits."""
    from dlbench.study.sweep import one_point

    lock = tmp_path / "measure.lock"
    env_json = tmp_path / "env.json"
    env_json.write_text(json.dumps({"env": "pytorch", "kind": "site", "python": env_python("pytorch")}))
    out = tmp_path / "point"
    point = subprocess.Popen([sys.executable, "-m", "dlbench.cli", "train", "--point",
                              json.dumps(one_point("pytorch", iterations=200, threads=1)), "--dataset-dir",
                              str(digits_dir), "--env", str(env_json), "--out", str(out), "--measure-lock", str(lock)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and point.poll() is None:  # its events, in its unfinished folder: it trains
        events = list(tmp_path.glob(".point.partial-*/events.jsonl"))
        if events and '"name": "train"' in events[0].read_text():
            break
        time.sleep(0.05)
    build = start_heavy(tmp_path, "build", lock)
    report = heavy_report(build)
    stdout, stderr = point.communicate(timeout=300)
    span = train_span(out)
    assert json.loads(stdout.splitlines()[-1])["status"] == "ok", stderr[-2000:]
    assert apart(span, report) and report["got"] >= span[1], (span, report)
    assert report["waited"] > 0.2  # it asked while the point trained


def test_heavy_work_inside_heavy_work_takes_nothing_more_and_a_measurement_there_is_refused(tmp_path):
    """Nested heavy work would wait behind a point queued at the gate for its own outer hold: it must pass."""
    from dlbench.node.locks import heavy_work, measuring

    lock = tmp_path / "measure.lock"
    with heavy_work(lock) as outer:
        with heavy_work(lock) as inner:
            assert outer < 1 and inner == 0.0
        with pytest.raises(RuntimeError, match="inside heavy work"):
            with measuring(str(lock), None, per_device=False):
                pass
    with measuring(str(lock), None, per_device=False) as slot:  # once out of it, a measurement goes ahead
        assert slot.mode == "exclusive"


def test_no_lock_file_means_heavy_work_waits_for_nothing(tmp_path):
    from dlbench.node.locks import heavy_work, node_lock

    with heavy_work(None) as waited:
        assert waited == 0.0
    os.environ["DLBENCH_NODE_LOCK"] = ""
    try:
        assert node_lock() is None  # the workflow with measurement.exclusive: false
    finally:
        del os.environ["DLBENCH_NODE_LOCK"]
    assert node_lock() == "/var/tmp/dlbench-measure.lock"


def test_the_default_node_lock_is_the_schemas():
    import yaml

    from dlbench.node.locks import NODE_LOCK
    from dlbench.paths import SCHEMA

    schema = yaml.safe_load(SCHEMA.read_text())
    assert schema["properties"]["measurement"]["properties"]["lock_file"]["default"] == NODE_LOCK


HOLDER = """
import sys, time
from dlbench.node.locks import measuring
with measuring(sys.argv[1], None, per_device=False):
    print(time.monotonic(), flush=True)
    time.sleep(float(sys.argv[2]))
    print(time.monotonic(), flush=True)
"""


@pytest.mark.parametrize("job", ["dataset", "caffe_data"])
def test_data_preparation_waits_for_a_measurement_on_its_node(tmp_path, digits_dir, job, monkeypatch):
    """The workflow's data jobs call these functions: each keeps out of a measurement that holds the node,
    and starts at once inside a measurement (a point's trainer preparing its own input)."""
    from dlbench.frameworks import caffe_data
    from dlbench.rules import jobs

    lock = tmp_path / "measure.lock"
    monkeypatch.setenv("DLBENCH_NODE_LOCK", str(lock))
    prepare = {"dataset": lambda out: jobs.prepare("digits", str(out)),
               "caffe_data": lambda out: caffe_data.prepare(digits_dir, {}, out)}[job]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "2.5"], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    began = float(holder.stdout.readline())
    prepare(tmp_path / "waited")
    after = time.monotonic()
    ended = float(holder.stdout.readline())
    holder.wait(timeout=600)
    assert after > ended > began, (began, ended, after)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "5"], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    holder.stdout.readline()
    monkeypatch.setenv("DLBENCH_MEASURING", str(lock))  # as the point's trainer inherits it
    t0 = time.monotonic()
    prepare(tmp_path / "inside")
    took = time.monotonic() - t0
    holder.kill()
    holder.wait(timeout=600)
    assert took < 4.5, took


def test_heavy_work_started_by_hand_waits_for_the_measurement_and_its_commands_run_inside_it(tmp_path):
    """`python -m dlbench.node.heavy -- COMMAND` (how a Caffe build is run by hand, README): while a point holds the
    node lock the command does not start, and the processes it starts are inside heavy work."""
    lock = tmp_path / "node.lock"
    env = {**os.environ, "DLBENCH_NODE_LOCK": str(lock)}
    for name in ("DLBENCH_HEAVY_HELD", "DLBENCH_MEASURING"):
        env.pop(name, None)
    point = subprocess.Popen([sys.executable, "-c", POINT, "p", "cpu", str(lock), "", "0", str(time.time())],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the point holds the node lock for HOLD_S
    started = subprocess.run([sys.executable, "-m", "dlbench.node.heavy", "--what", "a build", "--", sys.executable,
                              "-c", "import time; print(time.time())"], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    held = json.loads(point.communicate(timeout=60)[0])
    assert started.returncode == 0, started.stderr
    assert float(started.stdout) >= held["done"]  # the command began only once the point let go
    inside = subprocess.run([sys.executable, "-m", "dlbench.node.heavy", "--", sys.executable, "-c",
                             "import os; print(os.environ['DLBENCH_HEAVY_HELD'])"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert inside.returncode == 0 and inside.stdout.strip() == str(lock)
    failing = subprocess.run([sys.executable, "-m", "dlbench.node.heavy", "--", "false"], env=env, cwd=ROOT,
                             timeout=60)
    assert failing.returncode == 1  # the command's own status
