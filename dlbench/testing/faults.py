"""The fault matrix: each fault injected for real, and what dlbench made of it.

Every scenario runs real training on the digits and returns a dict with `fault`,
`injected`, `survived`, `data_lost` and the evidence. The tests assert on these;
`bench/faults.py` prints them as a table. A scenario of the runner or the workflow
(`@on_small_trainer`) trains with the small trainer (dlbench.testing.small_trainer:
softmax regression in numpy, no framework to import); one of a framework's own
behaviour trains PyTorch (the cheapest real point).

    python -m dlbench.testing.faults [WORKDIR]
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

from dlbench.datasets import catalog, prepare
from dlbench.environments import build
from dlbench.frameworks import protocol
from dlbench.paths import ROOT as REPO
from dlbench.record import statuses, store
from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.study import sweep
from dlbench.testing import sandbox
from dlbench.testing import small_trainer as small

SMALL_TRAINER = "dlbench.testing.small_trainer"
STEP_S = 0.01  # the small trainer's step in the scenarios: a long point that leaves the CPU to others


def point(**sweep_values) -> dict:
    """A PyTorch point on the digits (Caffe's LeNet): the cheapest real training there is."""
    return sweep.one_point("pytorch", **sweep_values)


@contextlib.contextmanager
def small_trainer(step_s: float = STEP_S, allocate_mb_per_s: float = 0.0):
    """Within the block, the points this process starts, and those of the jobs and Snakemake runs it starts
    (they inherit its environment), run the small trainer (measure.TRAINER_VARIABLE), each step lasting step_s
    and allocating allocate_mb_per_s (dlbench.testing.small_trainer)."""
    with sandbox.environment({measure.TRAINER_VARIABLE: SMALL_TRAINER, small.STEP_S: f"{step_s:g}",
                              small.ALLOCATE_MB_PER_S: f"{allocate_mb_per_s:g}"}):
        yield


def on_small_trainer(step_s: float = STEP_S, allocate_mb_per_s: float = 0.0):
    """A scenario of the runner or the workflow, not of a framework: its points run the small trainer (see
    small_trainer), which starts in a fraction of a second where a framework's import takes seconds."""
    def wrap(scenario):
        @functools.wraps(scenario)
        def run(lab: Lab) -> dict:
            with small_trainer(step_s, allocate_mb_per_s):
                return scenario(lab)
        return run
    return wrap


class Lab:
    """A scratch folder with the digits prepared, the PyTorch environment and the small trainer at hand."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.digits = self.root / "datasets" / "digits"
        if not (self.digits / "meta.json").exists():
            prepare.prepare("digits", self.digits)
        self.python = self.python_of("pytorch")
        self.small_python = sys.executable  # the small trainer imports numpy and dlbench only
        self._startup_s: dict[str, float] = {}

    @staticmethod
    def python_of(framework: str) -> str:
        return str(build.build(framework) / "bin" / "python")

    def trainer_python(self) -> str:
        """The interpreter for the trainer the runner starts now: this one for the small trainer, else PyTorch's."""
        return self.small_python if measure.trainer_module() == SMALL_TRAINER else self.python

    def out(self, name: str) -> Path:
        return self.root / "runs" / name

    def startup_s(self) -> float:
        """Seconds a point takes here, now, from its launch to its training (the interpreter, the framework's
        import, the data, the model): silent phases, which a loaded machine stretches many times over.
        Measured once per lab and trainer (PyTorch, or the small trainer), on a point of one iteration."""
        trainer = measure.trainer_module()
        if trainer not in self._startup_s:
            name = "startup-small" if trainer == SMALL_TRAINER else "startup"
            r = runner.run_point(point(iterations=1), self.digits, self.out(name),
                                 RunOptions(python=self.trainer_python()))
            self._startup_s[trainer] = r["startup_time_s"] + sum(r.get(f"{phase}_time_s") or 0.0
                                                                 for phase in ("import", "data_load", "build",
                                                                               "compile"))
        return self._startup_s[trainer]

    def hang_s(self, at_least: float) -> float:
        """A hang limit that a point's own start does not reach on this machine now (twice its startup_s), and
        at least `at_least`: a scenario's trainer is ended as hung for the fault injected, not for a slow import."""
        return float(max(at_least, math.ceil(2 * self.startup_s())))


def _row(fault, injected, survived, data_lost, **evidence) -> dict:
    return {"fault": fault, "injected": injected, "survived": survived, "data_lost": data_lost, **evidence}


def _record_is_whole(out: Path) -> bool:
    try:
        json.loads((out / "metrics.json").read_text())
        return True
    except (OSError, json.JSONDecodeError):
        return False


@on_small_trainer(step_s=0)
def diverged(lab: Lab) -> dict:
    """The runner's record of a trainer that diverges (each framework's own divergence: tests/test_adapters.py)."""
    p = point(iterations=300, learning_rate=1000.0)
    r = runner.run_point(p, lab.digits, lab.out("diverged"), RunOptions(python=lab.trainer_python()))
    curve = (lab.out("diverged") / "curve.csv").read_text().splitlines()
    return _row("loss becomes NaN/inf", "learning rate 1000", r["status"] == "diverged",
                not _record_is_whole(lab.out("diverged")), status=r["status"],
                at_iteration=r["diverged_at_iteration"], curve_rows=len(curve) - 1, record=r)


@on_small_trainer()
def trainer_raises(lab: Lab) -> dict:
    p = point(iterations=50)
    r = runner.run_point(p, lab.root / "no-such-dataset", lab.out("raises"), RunOptions(python=lab.trainer_python()))
    return _row("trainer raises", "dataset folder missing", r["status"] == "error",
                not _record_is_whole(lab.out("raises")), status=r["status"], reason=r["reason"], record=r)


@on_small_trainer()
def trainer_killed(lab: Lab) -> dict:
    p = point(iterations=100000)
    out = lab.out("killed")
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(runner.run_point(p, lab.digits, out,
                                                                            RunOptions(python=lab.trainer_python()))))
    worker.start()
    trainer = _wait_for_training(out, reported_a_step=True)  # mid-training, with progress to keep
    os.kill(trainer, signal.SIGKILL)
    worker.join(timeout=600)
    return _row("trainer killed by a signal", "SIGKILL to the trainer mid-training", result["status"] == "killed",
                not _record_is_whole(out), status=result["status"], reason=result["reason"], record=result)


def _is_trainer(cmdline: list[str] | None) -> bool:
    """Whether a command line is a trainer's: dlbench.frameworks.trainer, or the small trainer."""
    return bool(cmdline) and any(module in cmdline for module in (measure.TRAINER, SMALL_TRAINER))


def _trainers_in(folder: Path) -> list[psutil.Process]:
    """The trainers alive whose command line names a path under folder (a workflow's copy)."""
    return [p for p in psutil.process_iter(["cmdline"]) if _is_trainer(p.info["cmdline"])
            and str(folder) in " ".join(p.info["cmdline"] or [])]


def _wait_for_training(out: Path, timeout: float = 300, reported_a_step: bool = False) -> int:
    """The trainer's pid, once it has started its training phase (and, with reported_a_step, reported a step)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for partial in out.parent.glob(f".{out.name}.partial-*"):
            events = protocol.read(partial / "events.jsonl")
            if any(e["e"] == "step" if reported_a_step else (e["e"] == "phase_start" and e["name"] == "train")
                   for e in events):
                for proc in psutil.process_iter(["pid", "cmdline"]):
                    cmd = proc.info["cmdline"] or []
                    if _is_trainer(cmd) and str(partial / "point.json") in cmd:
                        return proc.info["pid"]
        time.sleep(0.1)
    raise TimeoutError(f"no trainer started training for {out}")


@on_small_trainer()
def time_budget(lab: Lab) -> dict:
    """A long point over its time budget, which leaves it time to train (its startup here, twice over)."""
    p = point(iterations=100000)
    limit = max(6.0, lab.hang_s(0) + 4)
    r = runner.run_point(p, lab.digits, lab.out("timeout"), RunOptions(python=lab.trainer_python(), time_limit_s=limit))
    return _row("time budget exceeded", f"limits.time_s = {limit:g} on a long point", r["status"] == "timeout",
                not _record_is_whole(lab.out("timeout")), status=r["status"], progress=r["iterations_done"],
                wall_time_s=r["wall_time_s"], time_limit_s=limit, record=r)


@on_small_trainer(allocate_mb_per_s=200)
def memory_budget(lab: Lab) -> dict:
    p = point(iterations=100000)
    r = runner.run_point(p, lab.digits, lab.out("oom"),
                         RunOptions(python=lab.trainer_python(), memory_limit_mb=150, interval_s=0.05))
    return _row("memory budget exceeded", "limits.memory_mb = 150, the trainer growing by 200 MB/s",
                r["status"] == "oom",
                not _record_is_whole(lab.out("oom")), status=r["status"], rss_peak_mb=r["rss_peak_mb"], record=r)


def gpu_missing(lab: Lab) -> dict:
    """On PyTorch: where a GPU is, the framework's own word that it sees none (here none starts)."""
    p = point(iterations=10, device="gpu")
    r = runner.run_point(p, lab.digits, lab.out("gpu"), RunOptions(python=lab.python))
    return _row("GPU point where no GPU is", "device: gpu on this machine", r["status"] == "unavailable",
                not _record_is_whole(lab.out("gpu")), status=r["status"], reason=r["reason"], record=r)


@on_small_trainer()
def job_cancelled(lab: Lab) -> dict:
    """SIGTERM to the job (what scancel and Ctrl-C send): no result, an attempt record, no orphans."""
    p = point(iterations=100000)
    out = lab.out("cancelled")
    env_json = lab.root / "cancelled-env.json"
    env_json.write_text(json.dumps({"env": "pytorch", "kind": "site", "python": lab.trainer_python()}))
    job = subprocess.Popen([sys.executable, "-m", "dlbench.cli", "train", "--point", json.dumps(p),
                            "--dataset-dir", str(lab.digits), f"--env={env_json}", "--out", str(out)], cwd=REPO)
    trainer = _wait_for_training(out)
    job.send_signal(signal.SIGTERM)
    code = job.wait(timeout=60)
    time.sleep(0.5)
    attempts = store.attempts(out)
    attempt = json.loads(attempts[-1].read_text()) if attempts else {}
    orphan = psutil.pid_exists(trainer) and psutil.Process(trainer).status() != psutil.STATUS_ZOMBIE
    partial_left = list(out.parent.glob(f".{out.name}.partial-*"))
    published = (out / "metrics.json").exists()
    # Snakemake's retry of the cancelled job (attempt 2) trains nothing; the workflow's next run (attempt 1) does.
    train = [sys.executable, "-m", "dlbench.cli", "train", "--dataset-dir", str(lab.digits), f"--env={env_json}",
             "--out", str(out)]
    retry = subprocess.run([*train, "--point", json.dumps(p), "--attempt", "2", "--retries", "2"], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    kept_after_retry = len(store.attempts(out))
    rerun = subprocess.run([*train, "--point", json.dumps(point(iterations=5)), "--attempt", "1", "--retries", "2"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    rerun_status = json.loads((out / "metrics.json").read_text())["status"] if rerun.returncode == 0 else None
    return _row("job cancelled (SIGTERM)", "SIGTERM to the job mid-training, then Snakemake's retry and a new run",
                code != 0 and attempt.get("status") == "cancelled" and not orphan and not partial_left
                and retry.returncode != 0 and kept_after_retry == len(attempts) and rerun_status == "ok",
                published, exit_code=code, attempt_status=attempt.get("status"),
                progress=attempt.get("iterations_done"), orphan_trainer=orphan, retry_exit_code=retry.returncode,
                retry_said=retry.stderr.strip().splitlines()[-1:], kept_after_retry=kept_after_retry,
                kept_before_retry=len(attempts), rerun_status=rerun_status)


def corrupt_dataset(lab: Lab) -> dict:
    """A published file with one flipped byte: refused with both digests, nothing prepared."""
    src = catalog.system_copy("fashion_mnist")
    folder = lab.root / "corrupt-fashion"
    folder.mkdir(exist_ok=True)
    if src is not None:
        for f in src.glob("*.gz"):
            shutil.copy(f, folder / f.name)
        import gzip

        target = folder / "t10k-labels-idx1-ubyte.gz"
        raw = bytearray(gzip.open(target).read())
        raw[100] ^= 0xFF
        with gzip.open(target, "wb") as fh:
            fh.write(bytes(raw))
    else:  # no system copy: the same check on MNIST's published digest
        from dlbench.datasets import idx

        for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                     "t10k-labels-idx1-ubyte"):
            idx.write(folder / f"{name}.gz", [[1]], compress=True)
    name = "fashion_mnist" if src is not None else "mnist"
    out = lab.root / "prepared-corrupt"
    try:
        prepare.prepare(name, out, local=str(folder))
        message = None
    except prepare.DatasetError as exc:
        message = str(exc)
    left = list(out.glob("*")) if out.exists() else []
    return _row("dataset file corrupt", "one flipped byte in a dataset file",
                message is not None and "expected" in message and "found" in message, bool(left),
                message=message, files_left=[p.name for p in left])


@on_small_trainer(step_s=0.02)
def workflow_killed(lab: Lab) -> dict:
    """SIGKILL to the whole snakemake process group mid-sweep, then the next invocation."""
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"learning_rate": [0.01, 0.02, 0.03, 0.04], "iterations": [150], "threads": [1]}}
    wf, cmd = _workflow(lab, "workflow", cfg)
    sm = subprocess.Popen(cmd, cwd=wf, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = wf / "results" / "runs"
    deadline = time.monotonic() + 600  # a bound on the wait, not a speed: a loaded machine takes minutes
    while time.monotonic() < deadline and len(list(runs.rglob("metrics.json"))) < 1:
        time.sleep(0.2)
    time.sleep(1.0)  # kill while the next point trains
    os.killpg(sm.pid, signal.SIGKILL)
    sm.wait(timeout=60)
    time.sleep(0.5)
    finished = {p: p.stat().st_mtime_ns for p in runs.rglob("metrics.json")}
    orphans = [p.pid for p in _trainers_in(wf)]
    again = subprocess.run(cmd, cwd=wf, capture_output=True, text=True, timeout=600)
    import pandas as pd

    table = pd.read_parquet(wf / "results" / "runs.parquet") if again.returncode == 0 else None
    untouched = all(p.stat().st_mtime_ns == m for p, m in finished.items())
    partials = list(runs.rglob(".*.partial-*"))
    complete = table is not None and len(table) == 4 and (table.status == "ok").all()
    return _row("whole snakemake SIGKILLed mid-sweep", "SIGKILL to snakemake's process group",
                complete and untouched and not partials, not untouched or table is None or len(table) != 4,
                finished_before_kill=len(finished), finished_points_rerun=not untouched,
                orphan_trainers=len(orphans), partial_dirs_left=len(partials), rows_after=None if table is None
                else len(table))


def _workflow(lab: Lab, name: str, cfg: dict) -> tuple[Path, list[str]]:
    """A fresh copy of the workflow in the lab with `cfg` as its study, and the command that runs it. Its
    measurement lock is its own unless cfg names one: the default is node-wide, and another measurement on this
    machine (anyone's) would hold the scenario's points for as long as it lasts."""
    wf = lab.root / name
    shutil.rmtree(wf, ignore_errors=True)
    measurement = {"lock_file": str(lab.root / f"{name}.lock"), **cfg.get("measurement", {})}
    sandbox.copy_workflow(wf, {**cfg, "measurement": measurement})
    return wf, [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "study.yaml"]


@on_small_trainer(step_s=0.05)
def rerun_fails(lab: Lab) -> dict:
    """A finished point runs again (--forcerun) and this time fails: its good measurement must survive."""
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"iterations": [60], "threads": [1]}}
    wf, cmd = _workflow(lab, "rerun", cfg)
    first = subprocess.run(cmd, cwd=wf, capture_output=True, text=True, timeout=600)
    failing = {**yaml.safe_load((wf / "study.yaml").read_text()), "limits": {"time_s": 1}}  # 60 steps take 3 s
    (wf / "study.yaml").write_text(json.dumps(failing))
    second = subprocess.run(cmd + ["--forcerun", "train"], cwd=wf, capture_output=True, text=True, timeout=600)
    (run,) = [p.parent for p in (wf / "results" / "runs").rglob(store.RESULT) if "attempts" not in p.parts]
    kept = [json.loads(p.read_text()) for p in store.attempts(run)]
    kept_statuses = [r["status"] for r in kept]
    import pandas as pd

    table = pd.read_parquet(wf / "results" / "runs.parquet") if second.returncode == 0 else None
    ok_kept = next((p.parent for p, r in zip(store.attempts(run), kept) if r["status"] == "ok"), None)
    return _row("a finished point rerun, and the rerun fails", "--forcerun with a 1 s time budget",
                first.returncode == 0 and kept_statuses == ["ok", "timeout"] and table is not None
                and int(table["attempts"].iloc[0]) == 2,
                ok_kept is None or not (ok_kept / "curve.csv").exists(), attempts=kept_statuses,
                result_status=json.loads((run / store.RESULT).read_text())["status"],
                aggregated_attempts=None if table is None else int(table["attempts"].iloc[0]))


@on_small_trainer()
def bad_record(lab: Lab) -> dict:
    """A metrics.json that is not a record (invalid UTF-8 in one, another cut to its first 72 bytes): the dry run
    names it, the aggregation keeps both points as `damaged` rows naming the fix, and the fix (`--forcerun records`)
    makes both records again from their raw measurements, training nothing."""
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"iterations": [30], "learning_rate": [0.01, 0.02, 0.03], "threads": [1]}}
    wf, cmd = _workflow(lab, "badrecord", cfg)
    subprocess.run(cmd, cwd=wf, capture_output=True, text=True, check=True, timeout=600)
    results = sorted(p for p in (wf / "results" / "runs").rglob(store.RESULT) if "attempts" not in p.parts)
    results[0].write_bytes(b"\xff\xfe not a record")
    results[1].write_bytes(results[1].read_bytes()[:72])
    dry = subprocess.run(cmd + ["-n"], cwd=wf, capture_output=True, text=True, timeout=600)
    again = subprocess.run(cmd + ["--forcerun", "aggregate"], cwd=wf, capture_output=True, text=True, timeout=600)
    log = (wf / "logs" / "aggregate.log").read_text() if (wf / "logs" / "aggregate.log").exists() else ""
    import pandas as pd

    runs = pd.read_parquet(wf / "results" / "runs.parquet") if again.returncode == 0 else None
    damaged = {} if runs is None else dict(zip(runs.run_id, runs.status))
    bad_ids = [p.parent.name for p in results[:2]]
    named = [ln for ln in (dry.stderr + log).splitlines() if str(results[0]) in ln or "not UTF-8" in ln]
    # the fix the row names: the records made again from the points' raw measurements, no point trained
    fixed = subprocess.run(cmd + ["--forcerun", "records"], cwd=wf, capture_output=True, text=True, timeout=600)
    made_again = (fixed.returncode == 0 and "rule train" not in fixed.stdout
                  and all(store.read(p)["status"] == "ok" for p in results[:2]))
    survived = (dry.returncode == 0 and again.returncode == 0 and len(damaged) == 3 and len(named) >= 2
                and all(damaged.get(i) == statuses.DAMAGED for i in bad_ids) and made_again)
    return _row("a result file that is not a record", "invalid UTF-8 in one metrics.json, another cut to 72 bytes",
                survived, runs is None or len(runs) != 3, rows_after=None if runs is None else len(runs),
                statuses={i: damaged.get(i) for i in bad_ids}, reasons=[] if runs is None else
                list(runs.loc[runs.run_id.isin(bad_ids), "reason"]), made_again=made_again, lines=named[:2])


@on_small_trainer()
def trainer_hangs(lab: Lab) -> dict:
    """The trainer stops making progress (SIGSTOP mid-training): the watchdog ends it as hung."""
    p = point(iterations=100000)
    out = lab.out("hung")
    hang = lab.hang_s(4)
    result: dict = {}
    options = RunOptions(python=lab.trainer_python(), hang_s=hang)
    worker = threading.Thread(target=lambda: result.update(runner.run_point(p, lab.digits, out, options)))
    worker.start()
    trainer = _wait_for_training(out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(  # some progress first, so that the record shows it
            e["e"] == "step" for partial in out.parent.glob(f".{out.name}.partial-*")
            for e in protocol.read(partial / "events.jsonl")):
        time.sleep(0.2)
    stopped = time.monotonic()
    os.kill(trainer, signal.SIGSTOP)
    worker.join(timeout=120)
    return _row("trainer hangs", f"SIGSTOP to the trainer, limits.hang_s = {hang:g}", result.get("status") == "hung",
                not _record_is_whole(out), status=result.get("status"), reason=result.get("reason"),
                ended_after_s=round(time.monotonic() - stopped, 1), hang_s=hang, record=result)


@on_small_trainer(allocate_mb_per_s=20000)
def memory_overshoot(lab: Lab) -> dict:
    """A point allocates far past its budget faster than the monitor looks: the hard cap stops it."""
    p = point(iterations=100000)
    out = lab.out("overshoot")
    r = runner.run_point(p, lab.digits, out,
                         RunOptions(python=lab.trainer_python(), memory_limit_mb=200, interval_s=30.0))
    return _row("memory overshoots between two readings", "a trainer growing by 20 GB/s, memory_mb 200, monitor at "
                "30 s",
                r["status"] == "oom" and r["oom_by"] == "cap", not _record_is_whole(out), status=r["status"],
                oom_by=r["oom_by"], memory_cap=r["memory_cap"], record=r)


@on_small_trainer(step_s=0.002)
def snakemake_main_killed(lab: Lab) -> dict:
    """Only Snakemake's main process killed (the OOM killer, a lost login): its job goes on measuring.

    The next invocation must neither clear the locks nor run that point a second time beside the
    live one, nor remove its unfinished folder; once the orphan job ends, a run completes the study.
    """
    cfg = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
           "sweep": {"iterations": [2500], "threads": [1]}}
    wf, cmd = _workflow(lab, "mainkilled", cfg)
    sm = subprocess.Popen(cmd, cwd=wf, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = wf / "results" / "runs"
    deadline = time.monotonic() + 300
    partials: list[Path] = []
    while time.monotonic() < deadline:
        partials = list(runs.rglob(".*.partial-*"))
        if any(e["e"] == "phase_start" and e["name"] == "train"
               for p in partials for e in protocol.read(p / "events.jsonl")):
            break
        time.sleep(0.2)
    os.kill(sm.pid, signal.SIGKILL)  # the main process only: its job lives on
    sm.wait(timeout=60)
    # The orphan job's trainer held (SIGSTOP) while the next invocation runs, so that the job is live then however
    # long a loaded machine takes to start Snakemake; let go once counted.
    held = _trainers_in(wf)
    for trainer in held:
        trainer.suspend()
    second = subprocess.run(cmd, cwd=wf, capture_output=True, text=True, timeout=600)
    kept = all(p.exists() for p in partials)
    trainers = _trainers_in(wf)
    for trainer in held:
        trainer.resume()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and any(p.exists() for p in partials):  # the orphan job finishes
        time.sleep(0.5)
    third = subprocess.run(cmd, cwd=wf, capture_output=True, text=True, timeout=600)
    kept_attempts = [json.loads(p.read_text())["status"] for p in runs.rglob(f"attempts/*/{store.RESULT}")]
    said = [ln for ln in second.stderr.splitlines() if "still running here" in ln]
    kept_said = [ln for ln in third.stderr.splitlines() if "finished by the jobs of a killed run" in ln]
    # Measured once: the orphan's record is the point's, the next run trains nothing.
    return _row("only Snakemake's main process killed", "SIGKILL to snakemake alone mid-training (its job's trainer "
                "held by SIGSTOP while the next invocation runs)",
                second.returncode != 0 and bool(said) and kept and len(trainers) == 1 and third.returncode == 0
                and kept_attempts == ["ok"], not kept or "ok" not in kept_attempts,
                second_run_exit=second.returncode, said=said[:1], partial_kept=kept, trainers_alive=len(trainers),
                third_run_exit=third.returncode, attempts=kept_attempts, kept_said=kept_said[:1])


SCENARIOS = [diverged, trainer_raises, trainer_killed, time_budget, memory_budget, gpu_missing, job_cancelled,
             corrupt_dataset, workflow_killed, rerun_fails, bad_record, trainer_hangs, memory_overshoot,
             snakemake_main_killed]


def table(rows: list[dict]) -> str:
    """The matrix as Markdown: fault, how injected, survived, data lost, seconds."""
    lines = ["| fault | injected | survived | data lost | seconds |", "|---|---|---|---|---|"]
    for r in rows:
        survived = "skipped: " + r["skipped"] if r.get("skipped") else "yes" if r["survived"] else "NO"
        lines.append(f"| {r['fault']} | {r['injected']} | {survived} | {'YES' if r['data_lost'] else 'none'} | "
                     f"{r['seconds']} |")
    return "\n".join(lines)


def main(argv: list[str], scenarios=None) -> int:
    """Run the scenarios (all of this module's where none are given) in WORKDIR; the table on stdout."""
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="dlbench-faults-"))
    lab = Lab(root)
    rows = []
    for scenario in scenarios or SCENARIOS:
        started = time.monotonic()
        row = scenario(lab)
        row.pop("record", None)
        row["seconds"] = round(time.monotonic() - started, 1)
        rows.append(row)
        print(json.dumps(row, default=str), file=sys.stderr)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}\n\n{table(rows)}")
    return 0 if all((r["survived"] or r.get("skipped")) and not r["data_lost"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
