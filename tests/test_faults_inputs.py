"""Round four, what a point is built from: its environment's build, its prepared dataset, the JSON of its record,
the monitor beside it, pip's resolver and the dry run. Each fault injected for real (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench import atomic
from dlbench.environments import build, check, command, key, steps
from dlbench.environments.errors import EnvError
from dlbench.node.procs import alive
from dlbench.paths import ENVS, ROOT
from dlbench.run.options import RunOptions

# ---------------------------------------------------------------------------------------------- environment builds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache and a node lock of its own; builds that are real processes but tiny (build_steps)."""
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DLBENCH_NODE_LOCK", str(tmp_path / "node.lock"))
    monkeypatch.setattr(check, "probe", lambda framework, python: {"framework_version": "1.0"})
    return tmp_path / "cache" / "envs"


def _wait_for(path: Path, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def _started(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat's 22nd field); None once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _gone(pid: int, timeout_s: float = 5, started: int | None = None) -> bool:
    """Whether the process ended within timeout_s. `started` (its start time, read while it ran): a process that
    took its pid since is not it (CI starts many processes: the pids of a 32768-pid machine come round again)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid) or (started is not None and _started(pid) not in (None, started)):
            return True
        time.sleep(0.02)
    return False


def test_a_failed_build_ends_the_children_of_its_step(cache, tmp_path, monkeypatch):
    child = tmp_path / "child.pid"
    # A step that starts a child (a compiler, a pip worker) and fails without it: before, the child ran on.
    monkeypatch.setattr(build, "build_steps",
                        lambda env, tmp: [("recipe", ["bash", "-c", f"sleep 300 & echo $! > {child}; exit 3"])])
    with pytest.raises(EnvError, match="exit 3"):
        build.build("pytorch")
    pid = int(_wait_for(child))
    assert _gone(pid), f"the build step's child {pid} outlived the failed build"
    assert not list(cache.glob("*.building-*"))


def test_an_interrupted_build_ends_its_step_and_leaves_no_folder(cache, tmp_path):
    child, started = tmp_path / "child.pid", tmp_path / "step.pid"
    script = (f"from dlbench.environments import build, check, command\n"
              f"check.probe = lambda framework, python: {{}}\n"
              f"build.build_steps = lambda env, tmp: [('recipe', ['bash', '-c', 'echo $$ > {started}; sleep 300 & "
              f"echo $! > {child}; wait'])]\n"
              f"raise SystemExit(command.main(['build', 'pytorch']))\n")
    builder = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                               stderr=subprocess.PIPE, text=True)
    try:
        step, grandchild = int(_wait_for(started)), int(_wait_for(child))
        births = {pid: _started(pid) for pid in (step, grandchild)}
        builder.send_signal(signal.SIGTERM)  # what Snakemake or scancel sends a cancelled job
        _, err = builder.communicate(timeout=30)
    finally:
        builder.kill()
        builder.wait(timeout=10)
    assert builder.returncode == 128 + signal.SIGTERM, err
    assert _gone(step, started=births[step]) and _gone(grandchild, started=births[grandchild]), \
        "the interrupted build's step or its child is still running"
    assert not list(cache.glob("*.building-*"))


def test_the_build_log_is_never_written_through_a_planted_link(cache, tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    log = key.env_dir("pytorch").with_name(key.env_dir("pytorch").name + ".build.log")
    log.parent.mkdir(parents=True)
    log.symlink_to(victim)  # another user of a shared cache points the log at a file of ours
    monkeypatch.setattr(build, "build_steps", lambda env, tmp: [("recipe", ["bash", "-c", "echo step output; exit 1"])])
    with pytest.raises(EnvError):
        build.build("pytorch")
    assert victim.read_text() == "precious\n"
    assert not log.is_symlink() and "step output" in log.read_text()


def _fake_venv(env: str, tmp: Path) -> list[tuple[str, list[str]]]:
    return [("venv", ["bash", "-c", f"mkdir -p {tmp}/bin && ln -s {sys.executable} {tmp}/bin/python"])]


def test_a_rebuild_swaps_the_new_environment_in_and_keeps_the_old_one_for_its_points(cache, tmp_path, monkeypatch):
    final = key.env_dir("pytorch")
    (final / "bin").mkdir(parents=True)
    (final / "old-marker").write_text("old\n")
    atomic.write_text(final / "READY", "ok\n")
    (final / "ENV_INFO.json").write_text('{"env": "pyto')  # torn: READY alone no longer makes it whole
    assert not build.ready(final)
    stop, misses = tmp_path / "stop", tmp_path / "misses"
    # A point running from the old environment: its working folder inside it, and its interpreter's path read
    # all along (a rebuild that deletes first leaves a moment with no bin/ at all).
    watcher = subprocess.Popen(
        [sys.executable, "-c", f"import os, time\nmissed = 0\nwhile not os.path.exists({str(stop)!r}):\n"
         f"    missed += not os.path.isdir({str(final / 'bin')!r})\nopen({str(misses)!r}, 'w').write(str(missed))\n"
         f"print(os.path.exists('old-marker'))\n"], cwd=final, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        monkeypatch.setattr(build, "build_steps", _fake_venv)
        assert build.build("pytorch") == final and build.ready(final)
        time.sleep(0.1)
        cwd = os.readlink(f"/proc/{watcher.pid}/cwd")
        stop.write_text("")
        out, _ = watcher.communicate(timeout=20)
    finally:
        watcher.kill()
        watcher.wait(timeout=10)
    (aside,) = cache.glob(f"{final.name}.replaced-*")
    assert (aside / "old-marker").read_text() == "old\n" and not (final / "old-marker").exists()
    assert cwd == str(aside) and out.strip() == "True"  # the point's folder was renamed, never deleted
    assert misses.read_text() == "0"


def test_a_ready_environment_whose_info_is_missing_or_foreign_is_not_whole(cache, monkeypatch):
    monkeypatch.setattr(build, "build_steps", _fake_venv)
    final = build.build("pytorch")
    assert build.ready(final)
    info = json.loads((final / "ENV_INFO.json").read_text())
    (final / "ENV_INFO.json").write_text(json.dumps({**info, "key": "0123456789ab"}))  # copied from another key
    assert not build.ready(final)
    (final / "ENV_INFO.json").unlink()
    assert not build.ready(final)
    assert build.build("pytorch") == final and build.ready(final)
    assert len(list(final.parent.glob(f"{final.name}.replaced-*"))) == 1


def test_build_steps_are_the_real_ones():
    steps = dict(build.build_steps("pytorch", Path("/x/tmp")))
    assert list(steps) == ["venv", "install"]  # each with its own time limit (dlbench.environments.steps)
    assert steps["venv"][1:] == ["-m", "venv", "/x/tmp"] and "--require-hashes" in steps["install"]
    assert str(ENVS / "pytorch.lock") in steps["install"]
    assert [kind for kind, _ in build.build_steps("caffe", Path("/x/tmp"))] == ["venv", "install", "recipe"]
    assert build.build_steps("caffe", Path("/x/tmp"))[-1][1][:2] == ["bash", str(ENVS / "caffe" / "build.sh")]


def test_a_hung_build_step_is_ended_at_its_limit_in_one_line(cache, tmp_path, monkeypatch, capsys):
    child = tmp_path / "child.pid"
    monkeypatch.setenv(steps.LIMIT_ENV, "1")
    # A step that never ends (a download that stopped answering), with a child of its own.
    monkeypatch.setattr(build, "build_steps",
                        lambda env, tmp: [("recipe", ["bash", "-c", f"sleep 300 & echo $! > {child}; wait"])])
    started = time.monotonic()
    assert command.main(["build", "pytorch"]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "ran past its limit of 1 s and was ended" in err[0] and "sleep 300" in err[0]
    assert ".build.log" in err[0] and f"{steps.LIMIT_ENV}=SECONDS" in err[0]
    assert _gone(int(_wait_for(child))), "the hung step's child outlived it"
    assert not list(cache.glob("*.building-*")) and not key.env_dir("pytorch").exists()


def test_a_build_waits_for_another_builder_no_longer_than_a_whole_build_may_take(cache, monkeypatch, capsys):
    monkeypatch.setenv(steps.LIMIT_ENV, "0.5")  # a whole build: its four kinds of step, 0.5 s each
    final = key.env_dir("pytorch")
    lock = final.with_name(final.name + ".lock")
    lock.parent.mkdir(parents=True)
    # Another builder of the same environment, hung while it holds the build lock.
    holder = subprocess.Popen([sys.executable, "-c", f"import fcntl, os, time\nfd = os.open({str(lock)!r}, "
                               "os.O_RDONLY | os.O_CREAT)\nfcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\n"
                               "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        assert command.main(["build", "pytorch"]) == 2
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert steps.build_limit() == 2.0 and 2.0 <= waited < 20
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(lock) in err[0] and "it hangs" in err[0] and f"{steps.LIMIT_ENV}=SECONDS" in err[0]
    assert not final.exists()



# ---------------------------------------------------------------------------------------------- records' JSON


def _refuse(constant: str):
    raise ValueError(f"{constant} is not JSON")


def strict_json(path: Path) -> list:
    """Each JSON document of a .json or .jsonl file, read as a strict parser would (no NaN, no Infinity)."""
    lines = [path.read_text()] if path.suffix == ".json" else path.read_text().splitlines()
    return [json.loads(line, parse_constant=_refuse) for line in lines]


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    from dlbench.datasets import prepare

    folder = tmp_path_factory.mktemp("data") / "digits"
    prepare.prepare("digits", folder)
    return folder


def test_write_json_writes_null_for_what_is_not_finite(tmp_path):
    import numpy as np

    atomic.write_json(tmp_path / "r.json", {"a": float("nan"), "b": [float("inf"), 1.5], "c": np.float32("-inf"),
                                            "d": 3})
    assert strict_json(tmp_path / "r.json") == [{"a": None, "b": [None, 1.5], "c": None, "d": 3}]
    assert atomic.not_finite({"loss": float("inf"), "x": 1.0, "n": 2}) == {"loss": "inf"}


def test_every_json_a_diverged_point_leaves_is_strict_json_and_keeps_its_loss(digits, tmp_path):
    from dlbench.frameworks import protocol
    from dlbench.run import runner
    from dlbench.testing.faults import point, small_trainer

    out = tmp_path / "out"
    with small_trainer(step_s=0):  # at this learning rate the small trainer's loss is inf at its second step
        record = runner.run_point(point(iterations=30, learning_rate=1e6), digits, out)
    assert record["status"] == "diverged" and "inf" in record["reason"]
    written = [*out.rglob("*.json"), *out.rglob("*.jsonl")]
    assert len(written) >= 5  # the record, its attempt's, the point's and the events
    for path in written:
        strict_json(path)  # before: "final_loss": Infinity, and the events' "loss": Infinity
    assert strict_json(out / "metrics.json")[0]["final_loss"] is None
    assert protocol.read(out / "events.jsonl")[-2]["loss"] == float("inf")  # named, read back
    assert (out / "curve.csv").read_text().splitlines()[-1].split(",")[3] == "inf"


# ---------------------------------------------------------------------------------------------- the monitor


def test_a_monitor_that_dies_is_recorded_with_when_and_its_samples_stop_there(digits, tmp_path, monkeypatch):
    from dlbench.node import hostload
    from dlbench.run import runner
    from dlbench.testing.faults import point, small_trainer

    real, calls = hostload.reading, []

    def failing_reading():
        calls.append(time.monotonic())
        if len(calls) == 6:  # a sampler that raises mid-training (a /proc read the kernel refused, a bug)
            raise RuntimeError("a reading failed")
        return real()

    monkeypatch.setattr(hostload, "reading", failing_reading)
    with small_trainer(step_s=0.02):
        record = runner.run_point(point(iterations=100), digits, tmp_path / "out", RunOptions(interval_s=0.05))
    died_at = calls[5]
    assert record["status"] == "ok", record
    assert record["monitor_died"].endswith("(RuntimeError: a reading failed); no samples after it, the memory "
                                           "budget unwatched"), record["monitor_died"]
    assert 0 < float(record["monitor_died"].split(" s after")[0]) < record["wall_time_s"]
    samples = (tmp_path / "out" / "samples.csv").read_text().splitlines()[1:]
    assert 0 < record["samples"] == len(samples) <= 5 and len(calls) == 6  # nothing read after its death
    assert record["wall_time_s"] > died_at - calls[0] + 0.5  # the trainer went on well past it
    assert strict_json(tmp_path / "out" / "metrics.json")[0]["monitor_died"] == record["monitor_died"]


# ---------------------------------------------------------------------------------------------- a dataset changed


def _train_job(folder: Path, out: Path, attempt: int, tmp_path: Path) -> subprocess.CompletedProcess:
    """One attempt of the train job, as the workflow's retry runs it (dlbench.cli train), on the small trainer."""
    from dlbench.run.measure import TRAINER_VARIABLE
    from dlbench.testing.faults import SMALL_TRAINER, point

    env = dict(os.environ, PYTHONPATH=str(ROOT), DLBENCH_NODE_LOCK=str(tmp_path / "node.lock"),
               **{TRAINER_VARIABLE: SMALL_TRAINER})
    return subprocess.run([sys.executable, "-m", "dlbench.cli", "train", "--point", json.dumps(point(iterations=10)),
                           "--dataset-dir", str(folder), "--out", str(out), "--attempt", str(attempt),
                           "--retries", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _rewritten_with_a_pixel_flipped(path: Path) -> None:
    import numpy as np

    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["train_x"][0, 0, 0, 0] ^= 1
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _bit_flipped_in_place(path: Path) -> None:
    """One bit of the stored bytes flipped, in the middle of the first array, the file's times kept: the zip's CRC
    no longer matches (what a disk or a copy does; the archive cannot be read)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x10
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _truncated(path: Path) -> None:
    stat = path.stat()
    path.write_bytes(path.read_bytes()[: stat.st_size // 2])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("damage", [_rewritten_with_a_pixel_flipped, _bit_flipped_in_place, _truncated],
                         ids=["rewritten", "bit-flipped-in-place", "truncated"])
def test_a_dataset_changed_after_preparation_is_retried_and_prepared_again(digits, tmp_path, damage):
    from dlbench.datasets import store

    folder = tmp_path / "datasets" / "digits"
    shutil.copytree(digits, folder)
    prepared = (folder / "meta.json").stat().st_mtime_ns
    damage(folder / "data.npz")  # after preparation, meta.json kept
    out = tmp_path / "run"

    first = _train_job(folder, out, 1, tmp_path)
    assert first.returncode == 75, first.stderr  # a failure of the machine: the job fails so that it runs again
    assert "data_changed" in first.stderr and "changed since" in first.stderr
    assert not (out / "metrics.json").exists()

    second = _train_job(folder, out, 2, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "prepared again, as before" in second.stderr
    record = json.loads((out / "metrics.json").read_text())
    assert record["status"] == "ok" and record["attempt"] == 2, record
    _, meta = store.load(folder)  # whole again, the digest it was prepared with
    assert record["dataset_digest"] == meta["digest"]
    # its old times back: Snakemake reruns nothing that read it
    assert (folder / "data.npz").stat().st_mtime_ns == (folder / "meta.json").stat().st_mtime_ns == prepared


# ---------------------------------------------------------------------------------------------- pip's resolver


def _sdist(folder: Path, marker: Path) -> None:
    """markerpkg 1.0 as source only: its setup.py, run, writes the marker (what a hostile package would do)."""
    import tarfile

    src = folder / "markerpkg-1.0"
    src.mkdir(parents=True)
    (src / "setup.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                  "from setuptools import setup\nsetup(name='markerpkg', version='1.0')\n")
    (src / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: markerpkg\nVersion: 1.0\n")
    with tarfile.open(folder / "markerpkg-1.0.tar.gz", "w:gz") as tar:
        tar.add(src, arcname=src.name)
    shutil.rmtree(src)


def test_the_version_resolver_takes_wheels_only_and_never_runs_a_setup_py(tmp_path):
    from dlbench.environments import lock

    index, marker = tmp_path / "index", tmp_path / "setup-py-ran"
    _sdist(index, marker)
    pins = tmp_path / "pins.txt"
    pins.write_text("markerpkg==1.0\n")
    cmd = lock.resolve_command(pins, tmp_path / "report.json")
    assert cmd[cmd.index("--only-binary") + 1] == ":all:"
    offline = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(index), PIP_DISABLE_PIP_VERSION_CHECK="1")
    refused = subprocess.run(cmd, env=offline, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "markerpkg" in refused.stderr and not marker.exists()
    # The same resolver without --only-binary: the package's own code runs while pip reads its metadata.
    at = cmd.index("--only-binary")
    before = subprocess.run([*cmd[:at], *cmd[at + 2:], "--no-build-isolation"], env=offline, capture_output=True,
                            text=True, timeout=120)
    assert marker.exists(), before.stderr


# ---------------------------------------------------------------------------------------------- the test cluster


def test_slurm_down_names_only_the_step_daemons_of_its_own_cluster(tmp_path):
    """Two processes called slurmstepd, each with a step socket: one in this cluster's spool folder, one in another
    SLURM's. slurm-testbed/stepds.sh (what slurm-down.sh kills) names the first only; before, it killed every one."""
    fake = tmp_path / "bin" / "slurmstepd"  # a script's process is called by the script's name
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport socket, sys, time\ns = socket.socket(socket.AF_UNIX)\n"
                    "s.bind(sys.argv[1]); s.listen()\nprint('ready', flush=True)\ntime.sleep(60)\n")
    fake.chmod(0o755)
    ours, theirs = tmp_path / "state" / "slurmd", tmp_path / "other" / "slurmd"
    ours.mkdir(parents=True)
    theirs.mkdir(parents=True)
    procs = [subprocess.Popen([str(fake), str(folder / "node_42.0")], stdout=subprocess.PIPE, text=True)
             for folder in (ours, theirs)]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        listed = subprocess.run(["bash", str(ROOT / "slurm-testbed" / "stepds.sh"), str(tmp_path / "state")],
                                capture_output=True, text=True, timeout=30)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [str(procs[0].pid)]


def test_the_benchmarks_work_in_the_users_own_folder_not_a_fixed_name_in_tmp(tmp_path):
    env = dict(os.environ, DLBENCH_CACHE=str(tmp_path / "cache"), PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'bench'}")
    env.pop("DLBENCH_BENCH_DIR", None)
    got = subprocess.run([sys.executable, "-c", "import _common; print(_common.WORK)"], cwd=ROOT / "bench", env=env,
                         capture_output=True, text=True, timeout=60)
    assert got.stdout.strip() == str(tmp_path / "cache" / "bench"), got.stderr
