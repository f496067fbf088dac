"""Round four, what a point is built from: its environment's build, its prepared dataset, the JSON of its record,
the monitor beside it, pip's resolver and the dry run. Each fault injected for real (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench import atomic, envs
from dlbench.paths import ENVS, ROOT
from dlbench.procs import alive

# ---------------------------------------------------------------------------------------------- environment builds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache and a node lock of its own; builds that are real processes but tiny (build_steps)."""
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DLBENCH_NODE_LOCK", str(tmp_path / "node.lock"))
    monkeypatch.setattr(envs, "probe", lambda framework, python: {"framework_version": "1.0"})
    return tmp_path / "cache" / "envs"


def _wait_for(path: Path, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def _gone(pid: int, timeout_s: float = 5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_a_failed_build_ends_the_children_of_its_step(cache, tmp_path, monkeypatch):
    child = tmp_path / "child.pid"
    # A step that starts a child (a compiler, a pip worker) and fails without it: before, the child ran on.
    monkeypatch.setattr(envs, "build_steps",
                        lambda env, tmp: [["bash", "-c", f"sleep 300 & echo $! > {child}; exit 3"]])
    with pytest.raises(envs.EnvError, match="exit 3"):
        envs.build("pytorch")
    pid = int(_wait_for(child))
    assert _gone(pid), f"the build step's child {pid} outlived the failed build"
    assert not list(cache.glob("*.building-*"))


def test_an_interrupted_build_ends_its_step_and_leaves_no_folder(cache, tmp_path):
    child, started = tmp_path / "child.pid", tmp_path / "step.pid"
    script = (f"from dlbench import envs\n"
              f"envs.probe = lambda framework, python: {{}}\n"
              f"envs.build_steps = lambda env, tmp: [['bash', '-c', 'echo $$ > {started}; sleep 300 & "
              f"echo $! > {child}; wait']]\n"
              f"raise SystemExit(envs.main(['build', 'pytorch']))\n")
    builder = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                               stderr=subprocess.PIPE, text=True)
    try:
        step, grandchild = int(_wait_for(started)), int(_wait_for(child))
        builder.send_signal(signal.SIGTERM)  # what Snakemake or scancel sends a cancelled job
        _, err = builder.communicate(timeout=30)
    finally:
        builder.kill()
        builder.wait(timeout=10)
    assert builder.returncode == 128 + signal.SIGTERM, err
    assert _gone(step) and _gone(grandchild), "the interrupted build's step or its child is still running"
    assert not list(cache.glob("*.building-*"))


def test_the_build_log_is_never_written_through_a_planted_link(cache, tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    log = envs.env_dir("pytorch").with_name(envs.env_dir("pytorch").name + ".build.log")
    log.parent.mkdir(parents=True)
    log.symlink_to(victim)  # another user of a shared cache points the log at a file of ours
    monkeypatch.setattr(envs, "build_steps", lambda env, tmp: [["bash", "-c", "echo step output; exit 1"]])
    with pytest.raises(envs.EnvError):
        envs.build("pytorch")
    assert victim.read_text() == "precious\n"
    assert not log.is_symlink() and "step output" in log.read_text()


def _fake_venv(env: str, tmp: Path) -> list[list[str]]:
    return [["bash", "-c", f"mkdir -p {tmp}/bin && ln -s {sys.executable} {tmp}/bin/python"]]


def test_a_rebuild_swaps_the_new_environment_in_and_keeps_the_old_one_for_its_points(cache, tmp_path, monkeypatch):
    final = envs.env_dir("pytorch")
    (final / "bin").mkdir(parents=True)
    (final / "old-marker").write_text("old\n")
    atomic.write_text(final / "READY", "ok\n")
    (final / "ENV_INFO.json").write_text('{"env": "pyto')  # torn: READY alone no longer makes it whole
    assert not envs.ready(final)
    stop, misses = tmp_path / "stop", tmp_path / "misses"
    # A point running from the old environment: its working folder inside it, and its interpreter's path read
    # all along (a rebuild that deletes first leaves a moment with no bin/ at all).
    watcher = subprocess.Popen(
        [sys.executable, "-c", f"import os, time\nmissed = 0\nwhile not os.path.exists({str(stop)!r}):\n"
         f"    missed += not os.path.isdir({str(final / 'bin')!r})\nopen({str(misses)!r}, 'w').write(str(missed))\n"
         f"print(os.path.exists('old-marker'))\n"], cwd=final, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        monkeypatch.setattr(envs, "build_steps", _fake_venv)
        assert envs.build("pytorch") == final and envs.ready(final)
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
    monkeypatch.setattr(envs, "build_steps", _fake_venv)
    final = envs.build("pytorch")
    assert envs.ready(final)
    info = json.loads((final / "ENV_INFO.json").read_text())
    (final / "ENV_INFO.json").write_text(json.dumps({**info, "key": "0123456789ab"}))  # copied from another key
    assert not envs.ready(final)
    (final / "ENV_INFO.json").unlink()
    assert not envs.ready(final)
    assert envs.build("pytorch") == final and envs.ready(final)
    assert len(list(final.parent.glob(f"{final.name}.replaced-*"))) == 1


def test_build_steps_are_the_real_ones():
    steps = envs.build_steps("pytorch", Path("/x/tmp"))
    assert steps[0][1:] == ["-m", "venv", "/x/tmp"] and "--require-hashes" in steps[1]
    assert str(ENVS / "pytorch.lock") in steps[1]
    assert [s[0] for s in envs.build_steps("caffe", Path("/x/tmp"))][-1] == "bash"

