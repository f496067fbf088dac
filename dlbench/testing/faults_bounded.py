"""The fault matrix, round five: work asked for beside a measurement (a probe, the peak, the calibration, the
summary), waits and child processes that hang (the bfloat16 peak, the preparation locks, a download, pip, a command
run as heavy work), and a cancel on a full disk.

Each scenario injects its fault for real (another process flocks the node's lock or a preparation's lock, an
interpreter that never answers, a local server that trickles a byte at a time or never answers, a tmpfs whose
inodes run out) and returns a row like dlbench.testing.faults does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from dlbench.datasets import prepare as datasets
from dlbench.datasets import wheels
from dlbench.frameworks import caffe_data
from dlbench.node import locks, peak, procs
from dlbench.paths import ROOT as REPO
from dlbench.record import store
from dlbench.testing import sandbox
from dlbench.testing.faults import Lab, _row, _wait_for_training, _workflow, on_small_trainer, point
from dlbench.testing.faults_machine import _job, _skipped, _small_tmpfs
from dlbench.testing.faults_node import _hold, _release

WAIT_S = 2  # measurement.lock_timeout_s of these scenarios: every refused wait ends after it


def _env(**extra: str) -> dict:
    """This process's environment with the checkout first on PYTHONPATH, and `extra`."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
            **extra}


def _run(args: list[str], cwd: Path, env: dict) -> dict:
    """A dlbench command in a process of its own: exit, stderr's lines, seconds."""
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return {"exit": run.returncode, "said": run.stderr.strip().splitlines(), "stdout": run.stdout.strip()[-300:],
            "seconds": round(time.monotonic() - t0, 1)}


def _refused(case: dict, prefix: str) -> bool:
    """Exit 1 and, besides the line that said what it waits for, exactly one line (`prefix`...) naming the setting."""
    waits = [ln for ln in case["said"] if " waits for " in ln]
    others = [ln for ln in case["said"] if " waits for " not in ln]
    return (case["exit"] == 1 and len(waits) == 1 and len(others) == 1 and others[0].startswith(prefix)
            and "measurement.lock_timeout_s" in others[0])


def _released_after(holder: subprocess.Popen, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, _release, (holder,))
    timer.start()
    return timer


@on_small_trainer(step_s=0.01)
def probe_beside_a_measurement(lab: Lab) -> dict:
    """`dlbench plan --probe` while a point measures (another process holds the node's lock): preparing the data is
    heavy work, refused in one line after lock_timeout_s, nothing made; with the data there, the probe waits
    for the lock and ends `lock_timeout`, training nothing; the lock let go after 3 s, the probe trains."""
    work = lab.root / "probe"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    lock = work / "measure.lock"
    (work / "study.yaml").write_text(yaml.safe_dump({
        "datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
        "sweep": {"iterations": [30], "threads": [1]},
        "measurement": {"lock_file": str(lock), "lock_timeout_s": WAIT_S}}))
    command = ["-m", "dlbench.plan.command", "study.yaml", "--probe", "--iterations", "10"]
    probes = work / "results" / "probes"
    seen = {}
    holder = _hold(lock)
    try:
        seen["no data yet"] = _run(command, work, _env())
        seen["no data yet"]["prepared"] = (work / "resources").exists()
        shutil.copytree(lab.digits, work / "resources" / "datasets" / "digits")
        seen["held"] = _run(command, work, _env())
        (record,) = [json.loads(p.read_text()) for p in probes.glob(f"*/{store.RESULT}")] or [{}]
        seen["held"].update(status=record.get("status"), lock_wait_s=record.get("lock_wait_s"),
                            trained=record.get("iterations_done"))
        shutil.rmtree(probes)
        (work / "study.yaml").write_text((work / "study.yaml").read_text().replace(
            f"lock_timeout_s: {WAIT_S}", "lock_timeout_s: 60"))
        timer = _released_after(holder, 3.0)  # after the command's start: its probe is waiting by then
        seen["let go"] = _run(command, work, _env())
        timer.join(timeout=60)
        (record,) = [json.loads(p.read_text()) for p in probes.glob(f"*/{store.RESULT}")] or [{}]
        seen["let go"].update(status=record.get("status"), lock_wait_s=record.get("lock_wait_s"))
    finally:
        _release(holder)
    survived = (_refused(seen["no data yet"], "dlbench plan: preparing digits for a probe waited")
                and not seen["no data yet"]["prepared"] and seen["held"]["status"] == "lock_timeout"
                and not seen["held"]["trained"] and seen["let go"]["status"] == "ok"
                and seen["let go"]["lock_wait_s"] > 0.1)
    return _row("a probe beside a measurement", f"a process flocks the node's lock; lock_timeout_s = {WAIT_S}; then "
                "lets it go after 3 s", survived, False, cases=seen)


def commands_beside_a_measurement(lab: Lab) -> dict:
    """`dlbench peak` and `dlbench calibrate` while a point measures: each waits lock_timeout_s, says so while it
    waits, then fails in one line having written nothing; the lock let go after 3 s, the peak measures."""
    work = lab.root / "beside"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    lock = work / "measure.lock"
    env = _env(**{locks.NODE_LOCK_ENV: str(lock), locks.LOCK_TIMEOUT_ENV: str(WAIT_S)})
    peak_cmd = ["-m", "dlbench.node.peak", "--threads", "1", "--n", "256", "--out", str(work / "peak.json")]
    seen = {}
    holder = _hold(lock)
    try:
        seen["peak"] = _run(peak_cmd, REPO, env)
        seen["peak"]["written"] = (work / "peak.json").exists()
        seen["calibrate"] = _run(["-m", "dlbench.analysis.calibrate", "--quick", "--json", str(work / "c.json")],
                                 REPO, env)
        seen["calibrate"]["written"] = (work / "c.json").exists()
        timer = _released_after(holder, 3.0)  # after the command's start: it is waiting by then
        seen["peak, let go"] = _run(peak_cmd, REPO, {**env, locks.LOCK_TIMEOUT_ENV: "60"})
        timer.join(timeout=60)
        seen["peak, let go"]["written"] = (work / "peak.json").exists()
    finally:
        _release(holder)
    survived = (_refused(seen["peak"], "dlbench peak: ") and not seen["peak"]["written"]
                and _refused(seen["calibrate"], "dlbench calibrate: ") and not seen["calibrate"]["written"]
                and not seen["calibrate"]["stdout"] and seen["peak, let go"]["exit"] == 0
                and seen["peak, let go"]["written"] and any(" waits for " in ln for ln in seen["peak, let go"]["said"]))
    return _row("the peak and the calibration beside a measurement", f"a process flocks the node's lock; "
                f"lock_timeout_s = {WAIT_S}; then lets it go after 3 s", survived, False, cases=seen)


@on_small_trainer(step_s=0.01)
def summary_beside_a_measurement(lab: Lab) -> dict:
    """The summary rule, asked for again while a point measures: heavy work like the other tables, it waits
    lock_timeout_s, says so, and fails in one line; once the lock is free it writes the summary."""
    lock = lab.root / "summary-measure.lock"
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"iterations": [20], "threads": [1]},
           "measurement": {"lock_file": str(lock), "lock_timeout_s": WAIT_S}}
    wf, cmd = _workflow(lab, "summary", cfg)
    target = "results/summary.parquet"
    cmd = [*cmd[:3], target, *cmd[3:]]  # the target before --configfile, which takes every word after it
    first = subprocess.run(cmd, cwd=wf, capture_output=True, text=True, timeout=600)
    holder = _hold(lock)
    try:
        held = subprocess.run([*cmd, "--forcerun", "summary"], cwd=wf, capture_output=True, text=True, timeout=600)
        log = (wf / "logs" / "summary.log").read_text() if (wf / "logs" / "summary.log").exists() else ""
    finally:
        _release(holder)
    free = subprocess.run([*cmd, "--forcerun", "summary"], cwd=wf, capture_output=True, text=True, timeout=600)
    said = [ln for ln in log.splitlines() if ln.startswith("dlbench: ")]
    waits = [ln for ln in said if "the summary waits for the measurement on this node to end" in ln]
    refused = [ln for ln in said if "the summary waited" in ln and "measurement.lock_timeout_s" in ln]
    return _row("the summary beside a measurement", f"a process flocks the node's lock; lock_timeout_s = {WAIT_S}",
                first.returncode == 0 and held.returncode != 0 and len(waits) == 1 and len(refused) == 1
                and free.returncode == 0 and (wf / target).exists(), False, first=first.returncode,
                held=held.returncode, said=said, free=free.returncode)


# An interpreter that never answers: it notes its pid, then sleeps (as a PyTorch whose import hangs).
HANGING_PYTHON = "#!/bin/sh\necho $$ > \"$(dirname \"$0\")/pid\"\nexec sleep 300\n"


class _Trickle(BaseHTTPRequestHandler):
    """A server that announces 100 kB and sends one byte every 50 ms (a stalled mirror that never quite stops)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    def log_message(self, *args):
        pass


def _silent_server() -> tuple[socket.socket, threading.Thread]:
    """A socket that accepts connections and never answers them (a package index that hangs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return server, thread


def _timed(fn) -> dict:
    t0 = time.monotonic()
    try:
        fn()
        said = None
    except Exception as exc:  # noqa: BLE001 - what each bounded wait raises is the row's evidence
        said = f"{type(exc).__name__}: {exc}"
    return {"said": said, "seconds": round(time.monotonic() - t0, 1)}


def waits_that_hang(lab: Lab) -> dict:
    """Each wait and child process that could hang, made to hang for real, ends within its limit with one line: the
    bfloat16 peak's interpreter (its process gone), a preparation's and Caffe data's folder locks held by another
    process, a download that trickles, pip asking an index that never answers, a command run as heavy work."""
    work = lab.root / "hangs"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    seen = {}

    python = work / "python"
    python.write_text(HANGING_PYTHON)
    python.chmod(0o755)
    seen["bf16 peak"] = _timed(lambda: peak.bf16_in(str(python), [1], 256, timeout_s=WAIT_S))
    seen["bf16 peak"]["child_gone"] = not procs.alive(int((work / "pid").read_text()))

    digits = work / "datasets" / "digits"
    shutil.copytree(lab.digits, digits)
    out = caffe_data.data_dir(digits, {})
    out.parent.mkdir(parents=True)
    with sandbox.environment({locks.LOCK_TIMEOUT_ENV: str(WAIT_S), locks.NODE_LOCK_ENV: str(work / "node.lock")}):
        holder = _hold(digits.with_name(".digits.prepare.lock"))
        try:
            seen["prepare again"] = _timed(lambda: datasets.prepare_again(digits))
        finally:
            _release(holder)
        holder = _hold(out.parent / f".{out.name}.lock")
        try:
            seen["caffe data"] = _timed(lambda: caffe_data.prepare(digits, {}, out))
            seen["caffe data"]["written"] = out.exists()
        finally:
            _release(holder)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/file"
        seen["download"] = _timed(lambda: datasets._fetch(url, work / "download", 10**6, timeout_s=WAIT_S))
    finally:
        server.shutdown()

    index, _ = _silent_server()
    saved = wheels.PIP_TIMEOUT_S
    wheels.PIP_TIMEOUT_S = WAIT_S + 1
    try:
        with sandbox.environment({"PIP_INDEX_URL": f"http://127.0.0.1:{index.getsockname()[1]}/simple",
                                  "PIP_DISABLE_PIP_VERSION_CHECK": "1"}):
            seen["pip download"] = _timed(lambda: wheels.fetch(wheels.names()[0], work / "wheels"))
    finally:
        wheels.PIP_TIMEOUT_S = saved
        index.close()

    heavy = _run(["-m", "dlbench.node.heavy", "--timeout", str(WAIT_S), "--", "sh", "-c",
                  f"sleep 300 & echo $! > {work / 'sleep.pid'}; wait"], REPO,
                 _env(**{locks.NODE_LOCK_ENV: str(work / "node.lock")}))
    heavy["child_gone"] = not procs.alive(int((work / "sleep.pid").read_text()))
    seen["dlbench heavy"] = heavy

    bounded = all(case["seconds"] < WAIT_S + 8 for case in seen.values())
    survived = (bounded and "within 2 s" in (seen["bf16 peak"]["said"] or "") and seen["bf16 peak"]["child_gone"]
                and (seen["prepare again"]["said"] or "").startswith("LockTimeout")
                and (seen["caffe data"]["said"] or "").startswith("LockTimeout") and not seen["caffe data"]["written"]
                and "did not finish within" in (seen["download"]["said"] or "")
                and (seen["pip download"]["said"] or "").startswith("WheelError")
                and heavy["exit"] == 124 and heavy["child_gone"])
    return _row("waits and child processes that hang", "an interpreter that sleeps, folder locks held by another "
                "process, a server trickling a byte per 50 ms, an index that never answers, `sleep 300` as heavy "
                f"work; each limit {WAIT_S} s", survived, False, cases=seen)


def _exhaust_inodes(folder: Path) -> int:
    """Create empty files in folder until its file system has no inode left (ENOSPC); how many."""
    n = 0
    while True:
        try:
            (folder / f"inode-{n}").touch()
        except OSError:
            return n
        n += 1


@on_small_trainer()
def cancel_on_a_full_disk(lab: Lab) -> dict:
    """SIGTERM to a training job whose disk is full (no inode left, as ENOSPC): its attempt cannot be kept, which
    is said in one line; the job still exits 143 (the cancel's status, not a traceback's), the trainer gone, no
    half-kept attempt and no partial folder left."""
    if os.geteuid() != 0:
        return _skipped("cancel on a full disk", "a tmpfs out of inodes", "needs root to mount a tmpfs")
    with _small_tmpfs(lab.root / "tmpfs-inodes", "16m,nr_inodes=64") as disk:
        out = disk / "runs" / "cancelled"
        job = _job(lab, point(iterations=100000), out)
        trainer = _wait_for_training(out)
        filled = _exhaust_inodes(disk)
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=120)
        time.sleep(0.5)
        said = [ln for ln in stderr.splitlines() if "could not be kept" in ln]
        attempts = list((out / store.ATTEMPTS).glob("*")) if (out / store.ATTEMPTS).exists() else []
        partials = list(out.parent.glob(f".{out.name}.partial-*"))
        trainer_gone = not procs.alive(trainer)
    return _row("cancel on a full disk", "SIGTERM to a training job on a tmpfs with no inode left",
                job.returncode == 143 and len(said) == 1 and "Traceback" not in stderr and trainer_gone
                and not attempts and not partials, False, exit_code=job.returncode, said=said,
                inodes_filled=filled, trainer_gone=trainer_gone, attempts_left=len(attempts),
                partial_left=len(partials))


SCENARIOS = [probe_beside_a_measurement, commands_beside_a_measurement, summary_beside_a_measurement,
             waits_that_hang, cancel_on_a_full_disk]
