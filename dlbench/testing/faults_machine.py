"""The fault matrix, round three: failures of the machine, records that must be whole, shared nodes, pages.

Each scenario injects its fault for real (a held lock, SIGSTOP of the whole job, a frozen cgroup, a
full tmpfs, a lock file another user owns, a dataset changed on disk, another run's file in a record's
folder, a YAML bomb, markup in a failure reason) and returns a row like dlbench.testing.faults does.
Scenarios that need root (mount, cgroups, another user) say so in `skipped` where they cannot run. The
scenarios of the runner and the workflow train the small trainer (`@on_small_trainer`); a damaged framework
environment is PyTorch's.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, redirect_stderr
from pathlib import Path

import numpy as np

from dlbench.aggregate import collect
from dlbench.frameworks import protocol
from dlbench.node import locks
from dlbench.paths import ROOT as REPO
from dlbench.record import raw, store
from dlbench.record.statuses import DAMAGED, EXIT_RETRY
from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.study import config, sweep
from dlbench.testing.faults import Lab, _row, _wait_for_training, _workflow, on_small_trainer, point

FREEZER = Path("/sys/fs/cgroup/freezer")


def _skipped(fault: str, injected: str, why: str) -> dict:
    return _row(fault, injected, None, False, skipped=why)


def _job_command(lab: Lab, p: dict, out: Path, *extra: str, python: str | None = None) -> list[str]:
    """The training job's command line as Snakemake runs it (dlbench.cli train), its environment's JSON written."""
    env_json = out.parent / f"{out.name}-env.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    env_json.write_text(json.dumps({"env": "pytorch", "kind": "site", "python": python or lab.trainer_python()}))
    return [sys.executable, "-m", "dlbench.cli", "train", "--point", json.dumps(p), "--dataset-dir",
            str(lab.digits), f"--env={env_json}", "--out", str(out), *extra]


def _job(lab: Lab, p: dict, out: Path, *extra: str, env: dict | None = None, user: str | None = None,
         python: str | None = None) -> subprocess.Popen:
    """The training job as Snakemake starts it (dlbench.cli train), in a process of its own."""
    cmd = _job_command(lab, p, out, *extra, python=python)
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _statuses(out: Path) -> list[str]:
    return [json.loads(p.read_text())["status"] for p in store.attempts(out)]


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(fn()))
    worker.start()
    return worker, result


@on_small_trainer()
def lock_timeout_retried(lab: Lab) -> dict:
    """Another process holds the node's lock past lock_timeout_s: the job fails (no result), Snakemake runs it
    again, and once the lock is free the point measures; every attempt is kept."""
    lock = lab.root / "retry-measure.lock"
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"iterations": [40], "threads": [1]},
           "measurement": {"lock_file": str(lock), "lock_timeout_s": 2, "retries": 4}}
    wf, cmd = _workflow(lab, "lockretry", cfg)
    (p,) = sweep.expand(config.validate(dict(cfg)))
    out = wf / "results" / "runs" / "pytorch" / "digits" / p["id"]
    target = str(out.relative_to(wf) / raw.MEASUREMENT)  # the train rule's output
    # The point's inputs first: their preparation is heavy work, which waits for the lock held below to be free.
    subprocess.run(cmd[:3] + ["resources/datasets/digits/data.npz", "resources/envs/pytorch.json"] + cmd[3:], cwd=wf,
                   capture_output=True, text=True, check=True, timeout=600)
    release = threading.Event()

    def hold():
        with locks.flocked(lock):
            held.set()
            release.wait(600)

    held = threading.Event()
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(timeout=60)
    run = subprocess.Popen(cmd[:3] + [target] + cmd[3:], cwd=wf, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and _statuses(out).count("lock_timeout") < 2 and run.poll() is None:
        time.sleep(0.2)
    release.set()  # the other holder goes away: the next attempt gets the lock
    holder.join()
    stdout, stderr = run.communicate(timeout=600)
    statuses = _statuses(out)
    result = json.loads((out / store.RESULT).read_text()) if (out / store.RESULT).exists() else {}
    return _row("node's lock held past lock_timeout_s", "another process holds the lock through two attempts "
                "(lock_timeout_s = 2, retries = 4)",
                run.returncode == 0 and result.get("status") == "ok" and statuses[:2] == ["lock_timeout"] * 2
                and statuses[-1] == "ok", not result, attempts=statuses, result_status=result.get("status"),
                result_attempt=result.get("attempt"), exit_code=run.returncode,
                said=[ln for ln in stderr.splitlines() if "runs again" in ln][:1])


@on_small_trainer()
def job_suspended(lab: Lab) -> dict:
    """The whole job stopped and resumed (what `scontrol suspend` / `resume` does) for longer than hang_s: the
    point is not ended as hung, its times (which include the pause) are not published, and the job fails to
    run again."""
    p = point(iterations=100000)
    out = lab.out("suspended")
    hang = lab.hang_s(5)
    job = _job(lab, p, out, "--hang-limit", f"{hang:g}", "--time-limit", f"{2 * hang + 12:g}", "--attempt", "1",
               "--retries", "1")
    trainer = _wait_for_training(out)
    time.sleep(2)
    os.kill(job.pid, signal.SIGSTOP)
    os.killpg(trainer, signal.SIGSTOP)
    stopped = time.monotonic()
    time.sleep(hang + 4)
    os.killpg(trainer, signal.SIGCONT)
    os.kill(job.pid, signal.SIGCONT)
    paused = time.monotonic() - stopped
    _, stderr = job.communicate(timeout=180)
    kept = [json.loads(a.read_text()) for a in store.attempts(out)]
    last = kept[-1] if kept else {}
    return _row("job suspended and resumed", f"SIGSTOP to the job and its trainer for {paused:.0f} s, "
                f"limits.hang_s = {hang:g}", job.returncode == EXIT_RETRY and last.get("status") == "suspended"
                and not (out / store.RESULT).exists(), not kept, exit_code=job.returncode,
                attempt_status=last.get("status"), paused_s=last.get("paused_s"), stopped_s=round(paused, 1),
                reason=last.get("reason"))


@on_small_trainer()
def mtime_stepped(lab: Lab) -> dict:
    """The events file's time stamp set a day back over and over (what a clock step does to the difference
    between the clock and file mtimes): the watchdog reads neither, so a live point is not ended as hung."""
    p = point(iterations=100000)
    out = lab.out("mtime")
    hang = lab.hang_s(5)
    options = RunOptions(python=lab.trainer_python(), hang_s=hang, time_limit_s=hang + 20)
    worker, result = _in_thread(lambda: runner.run_point(p, lab.digits, out, options))
    _wait_for_training(out)
    end = time.monotonic() + 12
    while time.monotonic() < end:
        for partial in out.parent.glob(f".{out.name}.partial-*"):
            stamp = time.time() - 86400
            try:
                os.utime(partial / "events.jsonl", (stamp, stamp))
            except FileNotFoundError:
                pass
        time.sleep(0.05)
    worker.join(120)
    return _row("clock step larger than hang_s", "events file's mtime set 1 day back every 50 ms for 12 s, "
                f"hang_s = {hang:g}", result.get("status") == "timeout", not (out / store.RESULT).exists(),
                status=result.get("status"), wall_time_s=result.get("wall_time_s"), time_limit_s=hang + 20)


@on_small_trainer()
def realtime_signal(lab: Lab) -> dict:
    """A trainer killed by a real-time signal (no name in Python's enum): `killed`, naming it."""
    p = point(iterations=100000)
    out = lab.out("rtsig")
    worker, result = _in_thread(lambda: runner.run_point(p, lab.digits, out, RunOptions(python=lab.trainer_python())))
    trainer = _wait_for_training(out)
    os.kill(trainer, signal.SIGRTMIN + 5)
    worker.join(120)
    return _row("trainer killed by a real-time signal", "SIGRTMIN+5 to the trainer mid-training",
                result.get("status") == "killed" and "SIGRTMIN+5" in (result.get("reason") or ""),
                not (out / store.RESULT).exists(), status=result.get("status"), reason=result.get("reason"))


@on_small_trainer()
def harmless_oom_line(lab: Lab) -> dict:
    """An ok point whose log holds TensorFlow's allocator warning, with limits.memory_mb set: still ok."""
    site = lab.root / "oom-line-site"
    site.mkdir(exist_ok=True)
    line = ("W external/local_tsl/tsl/framework/bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of memory "
            "trying to allocate 2.1GiB with freed_by_count=0. The caller indicates that this is not a failure")
    (site / "sitecustomize.py").write_text(f"import sys\nsys.stderr.write({line!r} + '\\n')\n")
    out = lab.out("oomline")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    job = _job(lab, point(iterations=40), out, "--memory-limit", "3000", env=env)
    job.communicate(timeout=300)
    record = json.loads((out / store.RESULT).read_text()) if (out / store.RESULT).exists() else {}
    logged = "ran out of memory" in (out / "trainer.log").read_text() if (out / "trainer.log").exists() else False
    return _row("'out of memory' in an ok point's log", "TensorFlow's allocator warning printed by the trainer, "
                "limits.memory_mb = 3000", record.get("status") == "ok" and logged, not record,
                status=record.get("status"), line_in_log=logged, memory_cap=record.get("memory_cap"))


@contextmanager
def _frozen_cgroup(name: str):
    group = FREEZER / name
    group.mkdir(exist_ok=True)
    try:
        yield group
    finally:
        (group / "freezer.state").write_text("THAWED")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (group / "cgroup.procs").read_text().strip():
            time.sleep(0.1)
        try:
            group.rmdir()
        except OSError:
            pass


@on_small_trainer()
def trainer_unkillable(lab: Lab) -> dict:
    """A trainer stuck in the kernel (its cgroup frozen: SIGKILL stays pending) goes silent: it is ended as hung
    after a bounded wait, named as left behind, and the node's lock is free for the next point."""
    if os.geteuid() != 0 or not FREEZER.is_dir():
        return _skipped("trainer stuck in the kernel", "frozen cgroup", "needs root and the cgroup v1 freezer")
    p = point(iterations=100000)
    out = lab.out("unkillable")
    lock = lab.root / "unkillable.lock"
    saved, measure.KILL_WAIT_S = measure.KILL_WAIT_S, 5.0
    try:
        with _frozen_cgroup(f"dlbench-fault-{os.getpid()}") as group:
            hang = lab.hang_s(4)
            options = RunOptions(python=lab.trainer_python(), hang_s=hang, measure_lock=str(lock))
            worker, result = _in_thread(lambda: runner.run_point(p, lab.digits, out, options))
            trainer = _wait_for_training(out)
            (group / "cgroup.procs").write_text(str(trainer))
            (group / "freezer.state").write_text("FROZEN")
            frozen = time.monotonic()
            worker.join(120)
            took = time.monotonic() - frozen
            state = Path(f"/proc/{trainer}/status").read_text().split("State:")[1].split()[0] \
                if Path(f"/proc/{trainer}/status").exists() else "gone"
            with locks.flocked(lock, wait=False) as free:
                lock_free = free is not None
    finally:
        measure.KILL_WAIT_S = saved
    return _row("trainer stuck in the kernel", f"its cgroup frozen (state D, SIGKILL pending), hang_s = {hang:g}, "
                "kill wait 5 s", result.get("status") == "hung" and "left behind" in (result.get("reason") or "")
                and lock_free, not (out / store.RESULT).exists(), status=result.get("status"),
                ended_after_s=round(took, 1), hang_s=hang, trainer_state_after=state, lock_free=lock_free)


@contextmanager
def _small_tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True, timeout=60)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, timeout=60)


def _fill(folder: Path, leave_bytes: int) -> None:
    """Fill the file system of folder up to leave_bytes of free space."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(folder / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave_bytes))


@on_small_trainer()
def disk_full(lab: Lab) -> dict:
    """The disk fills while a point trains and its record is written: the job fails to run again, the point
    published before keeps its whole record, no half record is left, and a table written over an earlier one
    leaves the earlier one intact."""
    if os.geteuid() != 0:
        return _skipped("disk full (ENOSPC)", "small tmpfs", "needs root to mount a tmpfs")
    with _small_tmpfs(lab.root / "tmpfs", "2m") as disk:
        before = disk / "runs" / "before"
        first = _job(lab, point(iterations=40), before)
        first.communicate(timeout=300)
        tables = disk / "runs.parquet"
        runs, _, _ = collect.collect([before / store.RESULT])
        collect.write_parquet(runs, tables)
        _fill(disk, 12 * 1024)
        out = disk / "runs" / "full"
        job = _job(lab, point(iterations=300), out, "--attempt", "1", "--retries", "1")
        _, stderr = job.communicate(timeout=300)
        try:
            collect.write_parquet(pd_frame_of(runs, 200), tables)
            table_error = None
        except OSError as exc:
            table_error = exc.strerror
        kept_whole = store.disagreement(before / store.RESULT, store.read(before / store.RESULT)) is None
        rows_kept = len(collect.collect([before / store.RESULT])[0])
        import pandas as pd

        table_rows = len(pd.read_parquet(tables))
        partials = list(out.parent.glob(f".{out.name}.partial-*"))
        said = [ln for ln in stderr.splitlines() if "disk_full" in ln][:1]
        published = (out / store.RESULT).exists()
    return _row("disk full (ENOSPC)", "a 2 MB tmpfs filled to 12 KB free while a point trains; then a table "
                "written over an earlier one", job.returncode == EXIT_RETRY and not published and not partials
                and kept_whole and table_error is not None and table_rows == 1,
                not kept_whole or rows_kept != 1 or table_rows != 1, exit_code=job.returncode, said=said,
                earlier_record_whole=kept_whole, partial_left=len(partials), table_write=table_error,
                earlier_table_rows=table_rows)


def pd_frame_of(runs, copies: int):
    """The runs table repeated: a table larger than the space left."""
    import pandas as pd

    return pd.concat([runs] * copies, ignore_index=True)


def lock_squatted(lab: Lab) -> dict:
    """The node's lock file pre-created 0600 by another user: one line, a kept attempt, the job to run again;
    no traceback."""
    if os.geteuid() != 0:
        return _skipped("lock file owned by another user", "0600 lock", "needs root to act as two users")
    shared = Path(tempfile.mkdtemp(prefix="dlbench-squat-", dir="/tmp"))
    try:
        shared.chmod(0o777)
        lock = shared / "measure.lock"
        lock.write_text("")
        lock.chmod(0o600)  # root's, private: user nobody cannot open it
        out = shared / "runs" / "squatted"
        out.parent.mkdir(parents=True)
        out.parent.chmod(0o777)
        job = _job(lab, point(iterations=10), out, "--measure-lock", str(lock), "--attempt", "1", "--retries", "1",
                   user="65534", python=sys.executable)
        _, stderr = job.communicate(timeout=120)
        statuses = _statuses(out)
        return _row("lock file owned by another user", "measurement lock pre-created 0600 by root, the job run as "
                    "nobody", job.returncode == EXIT_RETRY and statuses == ["lock_unusable"]
                    and "Traceback" not in stderr, False, exit_code=job.returncode, attempts=statuses,
                    said=[ln for ln in stderr.splitlines() if "lock_file" in ln][:1])
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@on_small_trainer()
def lock_deleted(lab: Lab) -> dict:
    """The node's lock file deleted while a point holds it, and a second point measuring meanwhile: the holder's
    record says its lock was lost (a failure of the machine, run again), not a result."""
    lock = lab.root / "deleted.lock"
    out = lab.out("lockdeleted")
    options = RunOptions(python=lab.trainer_python(), measure_lock=str(lock), time_limit_s=10, retries=1)
    worker, result = _in_thread(lambda: runner.run_point(point(iterations=100000), lab.digits, out, options))
    _wait_for_training(out)
    lock.unlink()
    beside = runner.run_point(point(iterations=20), lab.digits, lab.out("lockbeside"),
                              RunOptions(python=lab.trainer_python(), measure_lock=str(lock), lock_timeout_s=5))
    worker.join(120)
    return _row("lock file deleted while held", "unlink of the held lock file, a second point started",
                result.get("status") == "lock_lost" and not (out / store.RESULT).exists(), False,
                status=result.get("status"), second_point=beside["status"], attempts=_statuses(out))


@on_small_trainer()
def dataset_changed(lab: Lab) -> dict:
    """The prepared data changed after preparation (one pixel): the trainer refuses what it read, a failure of the
    machine (the job's retry prepares it again: tests/test_faults_inputs.py)."""
    folder = lab.root / "datasets" / "digits-changed"
    shutil.copytree(lab.digits, folder, dirs_exist_ok=True)
    with np.load(folder / "data.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["train_x"][0, 0, 0, 0] ^= 1
    with open(folder / "data.npz", "wb") as fh:
        np.savez(fh, **arrays)
    r = runner.run_point(point(iterations=10), folder, lab.out("changed"), RunOptions(python=lab.trainer_python()))
    return _row("dataset changed after preparation", "one pixel of data.npz flipped, meta.json kept",
                r["status"] == "data_changed" and "changed since" in (r["reason"] or ""), False, status=r["status"],
                reason=r["reason"])


@on_small_trainer()
def files_disagree(lab: Lab) -> dict:
    """Another run's curve.csv in a record's folder (two runners publishing into one): the aggregation names the
    record and the fix, and keeps the point as a failed row (`damaged`); nothing is moved or lost."""
    a, b = lab.out("agree-a"), lab.out("agree-b")
    runner.run_point(point(iterations=30, learning_rate=0.01), lab.digits, a, RunOptions(python=lab.trainer_python()))
    runner.run_point(point(iterations=60, learning_rate=0.02), lab.digits, b, RunOptions(python=lab.trainer_python()))
    shutil.copy(b / "curve.csv", a / "curve.csv")
    before = sorted(str(p.relative_to(a)) for p in a.rglob("*"))
    said = io.StringIO()
    with redirect_stderr(said):
        runs, curves, _ = collect.collect([a / store.RESULT, b / store.RESULT])
    named = [ln for ln in said.getvalue().splitlines() if str(a) in ln and "--forcerun" in ln]
    row = runs.set_index("run_id").loc[json.loads((a / store.RESULT).read_text())["id"]]
    untouched = sorted(str(p.relative_to(a)) for p in a.rglob("*")) == before
    return _row("a record's files disagree", "another run's curve.csv copied into a published record's folder",
                len(runs) == 2 and row["status"] == DAMAGED and bool(named) and untouched,
                not untouched, rows=len(runs), status=row["status"], reason=row["reason"], said=named[:1],
                curve_runs=sorted(set(curves["run_id"])), untouched=untouched)


@on_small_trainer(step_s=0.05)
def unpublished_kept(lab: Lab) -> dict:
    """The runner killed after its trainer finished and before it published: the next run of the point keeps
    that folder under attempts/ rather than deleting it."""
    out = lab.out("unpublished")
    job = _job(lab, point(iterations=40), out)
    _wait_for_training(out)
    os.kill(job.pid, signal.SIGSTOP)  # the trainer, in a session of its own, finishes meanwhile
    deadline = time.monotonic() + 300
    partial = None
    while time.monotonic() < deadline and partial is None:
        for folder in out.parent.glob(f".{out.name}.partial-*"):
            if any(e["e"] == "status" for e in protocol.read(folder / "events.jsonl")):
                partial = folder
        time.sleep(0.2)
    os.kill(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)
    runner.run_point(point(iterations=10), lab.digits, out, RunOptions(python=lab.trainer_python()))
    kept = [f for f in (out / store.ATTEMPTS).glob("*-unpublished")]
    finished = bool(kept) and any(e["e"] == "status" and e["status"] == "ok"
                                  for e in protocol.read(kept[0] / "events.jsonl"))
    return _row("runner killed between training and publishing", "SIGSTOP to the runner until its trainer "
                "finished, then SIGKILL; the point run again", finished, not finished,
                kept=[f.name for f in kept])


def env_damaged(lab: Lab) -> dict:
    """The framework's interpreter gone, or its environment without the framework: a failure of the machine,
    kept as an attempt, nothing published before the last attempt. On PyTorch: what is damaged is its
    environment (this Python lacks torch)."""
    gone = runner.run_point(point(iterations=10), lab.digits, lab.out("envgone"),
                            RunOptions(python=str(lab.root / "no-such-env" / "bin" / "python"), retries=1))
    bare = runner.run_point(point(iterations=10), lab.digits, lab.out("envbare"),
                            RunOptions(python=sys.executable, retries=1))
    published = [(lab.out(n) / store.RESULT).exists() for n in ("envgone", "envbare")]
    return _row("framework environment damaged", "interpreter removed; an interpreter without the framework",
                gone["status"] == bare["status"] == "env_damaged" and not any(published), False,
                statuses=[gone["status"], bare["status"]], reasons=[gone["reason"][:80], bare["reason"][:80]])


def _killed_while_training(lab: Lab, out: Path, attempt: int, retries: int) -> None:
    """One attempt of the job SIGKILLed once its trainer trains (its node dying: no record, only the mark)."""
    job = _job(lab, point(iterations=100000), out, "--attempt", str(attempt), "--retries", str(retries))
    _wait_for_training(out)
    job.kill()  # the runner; its trainer dies with it (PR_SET_PDEATHSIG)
    job.communicate(timeout=60)


@on_small_trainer()
def job_died(lab: Lab) -> dict:
    """The whole job SIGKILLed under a point (its node dying: no record, no status, only the attempt's mark):
    twice of three attempts, then the last allowed attempt publishes `node_lost` without training; on the last
    allowed attempt itself (measurement.retries 0), then the one attempt the rule allows beyond it does; that
    attempt after a last one that ended otherwise fails at once, publishing nothing. The tables are drawn."""
    out = lab.out("jobdied")
    for attempt in (1, 2):
        _killed_while_training(lab, out, attempt, retries=2)
    marks = len(list((out / store.ATTEMPTS).glob(f"{store.STARTED}*")))
    last = _job(lab, point(iterations=100000), out, "--attempt", "3", "--retries", "2")
    last.communicate(timeout=120)
    record = store.read(out / store.RESULT) if (out / store.RESULT).exists() else {}
    left = len(list((out / store.ATTEMPTS).glob(f"{store.STARTED}*")))
    # measurement.retries 0: the only allowed attempt dies; Snakemake's next one (attempt 2) publishes node_lost.
    only = lab.out("jobdied-last")
    _killed_while_training(lab, only, 1, retries=0)
    after = _job(lab, point(iterations=100000), only, "--attempt", "2", "--retries", "0")
    after.communicate(timeout=120)
    after_record = store.read(only / store.RESULT) if (only / store.RESULT).exists() else {}
    # The attempt after the last, where the last ended otherwise (no mark of a lost attempt): nothing to publish.
    clean = lab.out("jobdied-none")
    nothing = _job(lab, point(iterations=100000), clean, "--attempt", "2", "--retries", "0")
    _, said = nothing.communicate(timeout=120)
    return _row("job dies with its node past the retries", "SIGKILL to the job under attempts 1 and 2 of 3; "
                "under the only attempt (retries 0)", last.returncode == 0 and record.get("status") == "node_lost"
                and record.get("lost_attempts") == 2 and left == 0 and after.returncode == 0
                and after_record.get("status") == "node_lost" and nothing.returncode == 1
                and not (clean / store.RESULT).exists(), not record or not after_record, marks_before=marks,
                status=record.get("status"), lost_attempts=record.get("lost_attempts"), marks_after=left,
                after_last_exit=after.returncode, after_last_status=after_record.get("status"),
                after_last_lost=after_record.get("lost_attempts"), after_nothing_exit=nothing.returncode,
                after_nothing_said=[ln for ln in said.splitlines() if "only publishes node_lost" in ln][:1],
                after_nothing_published=(clean / store.RESULT).exists())


BOMB = "\n".join([f"l0: &l0 [{', '.join(['x'] * 10)}]"] +
                 [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)])


def config_hazards(lab: Lab) -> dict:
    """A duplicate key, nested aliases that expand to 10^9 values, a sweep of a million points: each refused by
    `snakemake -n` in one line within seconds."""
    base = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"], "sweep": {"threads": [1]}}
    wf, cmd = _workflow(lab, "hazards", base)
    million = ("datasets: [digits]\nframeworks: [pytorch]\npreset: [caffe]\nsweep:\n"
               f"  learning_rate: [{', '.join(f'0.{i:04d}1' for i in range(1000))}]\n"
               f"  batch_size: [{', '.join(str(i) for i in range(1, 1001))}]\n")
    cases = {"duplicate key": "datasets: [digits]\nframeworks: [pytorch]\nframeworks: [tensorflow]\n",
             "nested aliases": BOMB + "\ndatasets: [digits]\nframeworks: [pytorch]\n",
             "a million points": million}
    seen = {}
    for name, text in cases.items():
        (wf / "hazard.yaml").write_text(text)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile",
                               "hazard.yaml"], cwd=wf, capture_output=True, text=True, timeout=600)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "dlbench: config error" in ln]
        seen[name] = {"exit": proc.returncode, "seconds": round(time.monotonic() - t0, 1), "line": lines[:1]}
    return _row("config hazards", "a duplicate key; 8 levels of nested aliases (10^9 values); 1,000 x 1,000 sweep",
                all(v["exit"] != 0 and len(v["line"]) == 1 for v in seen.values()), False, cases=seen)


PAYLOAD = "</script><script>document.title='injected'</script><img src=x onerror=alert(1)>"


def markup_in_reason(lab: Lab) -> dict:
    """A failure reason holding `</script>` and HTML: the chart pages keep it inside their data (escaped), and
    findings.md shows it as text. On hand-made records (dlbench.testing.study): escaping is what is tested, so
    nothing is trained for it."""
    from dlbench.present import findings
    from dlbench.present.charts import draw
    from dlbench.testing import study

    runs = study.with_preset_points(study.make_runs())  # the per-framework charts draw each preset's own point
    failed = runs.index[runs["status"] != "ok"]
    runs.loc[failed, "reason"] = PAYLOAD
    curves, samples = study.make_curves(runs), study.make_samples(runs)
    pages = lab.root / "markup-charts"
    raw, escaped = [], 0
    for name in ("accuracy_by_framework", "status_by_framework", "train_time_vs_batch_size"):
        draw.save(draw.draw(name, runs, curves, samples), pages / name)
        html = (pages / f"{name}.html").read_text()
        raw += [name] if "<script>document.title" in html or "<img src=x" in html else []
        escaped += html.count("\\u003c/script\\u003e")
    table = findings.md_table(findings.failures(runs), {"status": "status", "example_reason": "reason"})
    return _row("markup in a failure reason", "reason set to </script><script>... in hand-made failed records; "
                "three chart pages and the findings' failure table", not raw and escaped > 0
                and "&lt;/script>" in table and "</script>" not in table, False, raw_in_pages=raw,
                escaped_copies=escaped, failure_table=table)


SCENARIOS = [lock_timeout_retried, job_suspended, mtime_stepped, realtime_signal, harmless_oom_line,
             trainer_unkillable, disk_full, lock_squatted, lock_deleted, dataset_changed, files_disagree,
             unpublished_kept, job_died, env_damaged, config_hazards, markup_in_reason]
