"""The environment cache knows what it holds: its key names the interpreter and Caffe's Debian packages, and
set-up's check (`build ENV --check`) moves a cached environment that no longer trains aside and builds it again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench import atomic
from dlbench.environments import build, check, command, key, pins, steps
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry
from dlbench.paths import ENVS

CAFFE_ENVS = ["caffe", "caffe-cuda", "caffe-mkl"]


def all_keys() -> dict[str, str]:
    return {env: key.env_key(env) for env in registry.env_names()}


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(env for env in before if before[env] != after[env])


# ---------------------------------------------------------------------------------------------- the key


def test_the_key_follows_the_interpreter_version_and_real_path_only(tmp_path, monkeypatch):
    before = all_keys()
    assert all_keys() == before  # nothing changed: nothing moves
    version, real = key.interpreter()
    assert real == os.path.realpath(real) and version.count(".") == 2  # 3.11.7, not 3.11

    # another clone's .venv: another sys.executable, the same base interpreter behind it
    clone = tmp_path / "clone" / ".venv" / "bin"
    clone.mkdir(parents=True)
    (clone / "python").symlink_to(real)
    monkeypatch.setattr(sys, "executable", str(clone / "python"))
    monkeypatch.setattr(sys, "_base_executable", str(clone / "python"), raising=False)
    assert all_keys() == before

    # another patch release of Python: every environment is another one
    monkeypatch.setattr(key.platform, "python_version", lambda: version + "1")
    assert changed(before, all_keys()) == sorted(before)
    monkeypatch.undo()
    assert all_keys() == before

    # another interpreter of the same version (another installation, its own real path)
    other = tmp_path / "other" / "python3.11"
    other.parent.mkdir()
    other.write_text("")
    monkeypatch.setattr(sys, "_base_executable", str(other), raising=False)
    assert key.interpreter() == (version, str(other))
    assert changed(before, all_keys()) == sorted(before)


def test_the_key_follows_the_installed_versions_of_caffes_debian_packages(monkeypatch):
    listed = key.debian_packages("caffe")
    assert "libprotobuf-dev" in listed and "cmake" in listed
    assert key.debian_packages("caffe-mkl") == listed and key.debian_packages("pytorch") == []
    installed = {name: "1.0-1" for name in listed}
    monkeypatch.setattr(key, "debian_versions", lambda names: {n: installed.get(n, "absent") for n in names})
    before = all_keys()
    assert all_keys() == before
    installed["libprotobuf-dev"] = "1.0-2"  # an upgrade of one library Caffe links
    upgraded = all_keys()
    assert changed(before, upgraded) == CAFFE_ENVS
    del installed["libgflags-dev"]  # removed: "absent", another key again
    assert changed(upgraded, all_keys()) == CAFFE_ENVS
    installed.update({"libprotobuf-dev": "1.0-1", "libgflags-dev": "1.0-1"})
    assert all_keys() == before


def test_debian_versions_asks_dpkg_once_per_process(monkeypatch):
    if shutil.which("dpkg-query") is None:
        pytest.skip("no dpkg-query on this machine (not Debian)")
    calls = []
    real_run = subprocess.run

    def counting(cmd, *args, **kw):
        if cmd and cmd[0] == "dpkg-query":
            calls.append(cmd)
        return real_run(cmd, *args, **kw)

    monkeypatch.setattr(key.subprocess, "run", counting)
    key.debian_versions.cache_clear()
    try:
        assert all_keys() == all_keys()
        assert len(calls) == 1 and set(key.debian_packages("caffe")) <= set(calls[0])
        got = key.debian_versions(("dpkg", "no-such-package-dlbench"))  # a new question: one more call
        assert got["no-such-package-dlbench"] == "absent"
        want = real_run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True).stdout
        assert got["dpkg"] == want and want
        assert len(calls) == 2
    finally:
        key.debian_versions.cache_clear()


# ---------------------------------------------------------------------------------------------- the check


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache, a node lock of its own, and a copy of envs/ that dlbench.environments reads (a test may
    touch it)."""
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DLBENCH_NODE_LOCK", str(tmp_path / "node.lock"))
    shutil.copytree(ENVS, tmp_path / "repo" / "envs")
    monkeypatch.setattr(pins, "ENVS", tmp_path / "repo" / "envs")  # where the pins, locks and recipes are read
    return tmp_path / "cache" / "envs"


class FakeEnvs:
    """_build_into and check_env stand-ins: a build is a small folder numbered by its build; a check fails
    where the folder holds a file BROKEN."""

    def __init__(self, monkeypatch):
        self.builds, self.checks = 0, []
        monkeypatch.setattr(build, "_build_into", self.build_into)
        monkeypatch.setattr(check, "check_env", self.check)

    def build_into(self, env, tmp, log_path):
        self.builds += 1
        tmp.mkdir(parents=True)
        log_path.write_text("built\n")
        (tmp / "build").write_text(str(self.builds))
        atomic.write_json(tmp / "ENV_INFO.json", {"env": env, "key": key.env_key(env), "packages": []})
        atomic.write_text(tmp / "READY", "ok\n")

    def check(self, env, folder, timeout_s=0):
        self.checks.append(Path(folder))
        if (Path(folder) / "BROKEN").exists():
            raise EnvError(f"{folder}/bin/python cannot run the pytorch trainer (No module named 'torch')")
        return {"framework_version": "2.13.0"}


def stamp_at(folder: Path, **fields) -> None:
    stamp = json.loads((folder / check.CHECKED).read_text())
    (folder / check.CHECKED).write_text(json.dumps({**stamp, **fields}))


def test_only_a_check_asked_for_runs_and_a_fresh_stamp_is_not_checked_again(cache, monkeypatch):
    fake = FakeEnvs(monkeypatch)
    now, old = time.time(), time.time() - 3600
    for path in key.recipe_files("pytorch"):
        os.utime(path, (old, old))
    folder = build.build("pytorch")
    assert folder == cache / f"pytorch-{key.env_key('pytorch')}" and fake.builds == 1
    (folder / "BROKEN").write_text("")
    assert build.build("pytorch") == folder and fake.checks == []  # the workflow's and the tests' build(): no check
    (folder / "BROKEN").unlink()

    assert command.main(["build", "pytorch", "--check"]) == 0  # set-up's
    assert fake.checks == [folder] and fake.builds == 1
    stamp = json.loads((folder / check.CHECKED).read_text())
    assert stamp["key"] == key.env_key("pytorch") and stamp["versions"] == {"framework_version": "2.13.0"}
    assert stamp["checked_at"] >= now
    stamp_at(folder, checked_at=now - 60)  # checked a minute ago, its inputs are an hour old
    assert build.build("pytorch", check_first=True) == folder and len(fake.checks) == 1  # not again

    os.utime(pins.pins_file("pytorch"), (now - 10, now - 10))  # a key input touched since (same bytes, same key)
    assert key.env_key("pytorch") == stamp["key"]
    assert build.build("pytorch", check_first=True) == folder and fake.checks == [folder, folder]
    assert json.loads((folder / check.CHECKED).read_text())["checked_at"] >= now

    stamp_at(folder, checked_at=now - 60)
    os.utime(pins.pins_file("pytorch"), (old, old))
    assert build.build("pytorch", check_first=True) == folder and len(fake.checks) == 2
    # a package removed from (or added to) its site-packages since: the next check runs
    site = folder / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    os.utime(site, (now - 10, now - 10))
    assert build.build("pytorch", check_first=True) == folder and len(fake.checks) == 3 and fake.builds == 1
    stamp_at(folder, key="0123456789ab")  # another key's stamp (a copied folder) is no stamp
    assert build.build("pytorch", check_first=True) == folder and len(fake.checks) == 4
    (folder / check.CHECKED).write_text("{")  # nor is a torn one
    assert build.build("pytorch", check_first=True) == folder and len(fake.checks) == 5
    assert build.build("pytorch", check_first=True) == folder and len(fake.checks) == 5 and fake.builds == 1


def test_a_cached_environment_that_fails_its_check_is_moved_aside_and_rebuilt(cache, monkeypatch, capsys):
    fake = FakeEnvs(monkeypatch)
    folder = build.build("pytorch")
    (folder / "BROKEN").write_text("")
    capsys.readouterr()
    assert build.build("pytorch", check_first=True) == folder
    assert fake.builds == 2 and (folder / "build").read_text() == "2" and not (folder / "BROKEN").exists()
    assert fake.checks == [folder, folder]  # the old one failed, the new one passed
    assert (folder / check.CHECKED).exists() and (folder / "READY").exists()
    (aside,) = cache.glob(f"{folder.name}.broken-*")  # renamed, not deleted: a point may run from it
    assert (aside / "BROKEN").exists() and (aside / "build").read_text() == "1"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "rebuilding the pytorch environment" in err[0] and "No module named 'torch'" in err[0]
    assert aside.name in err[0]
    assert build.build("pytorch", check_first=True) == folder and fake.builds == 2 and len(fake.checks) == 2


def test_a_fresh_build_that_fails_its_check_is_refused(cache, monkeypatch, capsys):
    fake = FakeEnvs(monkeypatch)

    def broken_build(env, tmp, log_path):
        FakeEnvs.build_into(fake, env, tmp, log_path)
        (tmp / "BROKEN").write_text("")

    monkeypatch.setattr(build, "_build_into", broken_build)
    assert command.main(["build", "pytorch", "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "just built, fails its check" in err[0] and "No module named 'torch'" in err[0]
    assert not key.env_dir("pytorch").exists() and len(list(cache.glob("pytorch-*.broken-*"))) == 1


def test_ready_and_env_info_are_written_atomically_and_fsynced(cache, monkeypatch, tmp_path):
    """_build_into itself, its commands faked: READY and ENV_INFO.json go through a temporary file, fsynced,
    and ENV_INFO.json says what the key was made of."""
    synced = []
    real_fsync = atomic.fsync_file
    monkeypatch.setattr(atomic, "fsync_file", lambda p: (synced.append(Path(p).name), real_fsync(p)))

    def fake_run(cmd, log, kind, **kw):
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
            (Path(cmd[3]) / "bin" / "python").symlink_to(sys.executable)

    monkeypatch.setattr(steps, "run", fake_run)
    monkeypatch.setattr(check, "probe", lambda framework, python: {"framework_version": "1.0"})
    monkeypatch.setattr(key, "debian_versions", lambda names: {n: "9.9" for n in names})
    out = tmp_path / "built"
    build._build_into("caffe", out, tmp_path / "build.log")
    assert (out / "READY").read_text() == "ok\n"
    info = json.loads((out / "ENV_INFO.json").read_text())
    assert info["key"] == key.env_key("caffe") and info["python"] == key.interpreter()[0]
    assert info["interpreter"] == key.interpreter()[1]
    assert info["debian_packages"]["libprotobuf-dev"] == "9.9"
    assert [n.split(".")[1] for n in synced] == ["ENV_INFO", "READY"]  # .READY.<random>.tmp, in that order
    assert sorted(p.name for p in out.iterdir()) == ["ENV_INFO.json", "READY", "bin"]  # no temporary left


def fake_python(path: Path, script: str) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text(f"#!/bin/sh\n{script}\n")
    (path / "bin" / "python").chmod(0o755)
    return path


def test_the_real_check_fails_where_the_framework_does_not_import(tmp_path):
    env = fake_python(tmp_path / "env", f'exec {sys.executable} "$@"')  # the base environment: no torch
    with pytest.raises(EnvError, match="cannot run the pytorch trainer.*No module named 'torch'"):
        check.check_env("pytorch", env)


def test_the_real_check_trains_a_step_not_only_imports(tmp_path):
    """An interpreter whose probe answers but whose trainer cannot train fails the check."""
    probe = json.dumps({"framework_version": "2.13.0"})
    env = fake_python(tmp_path / "env", f"if [ \"$3\" = --probe ]; then echo '{probe}'; exit 0; fi\n"
                                        f'exec {sys.executable} "$@"')
    assert check.probe("pytorch", env / "bin" / "python") == {"framework_version": "2.13.0"}
    with pytest.raises(EnvError, match=r"did not train one pytorch iteration \(exit 6, status env_damaged"):
        check.check_env("pytorch", env)


@pytest.mark.slow
def test_the_check_of_the_real_pytorch_environment_and_of_a_copy_without_torch(env_python, tmp_path):
    real = Path(env_python("pytorch")).parent.parent
    versions = check.check_env("pytorch", real)
    assert versions["framework_version"].startswith("2.13.0")
    # a copy (its packages linked, not copied: the same files) that lacks torch's package folder
    copy = tmp_path / "pytorch-copy"
    shutil.copytree(real, copy, symlinks=True,
                    ignore=lambda d, names: names if Path(d).name == "site-packages" else [])
    site = next(real.glob("lib/python3.*/site-packages"))
    for entry in site.iterdir():
        if entry.name != "torch":
            (copy / site.relative_to(real) / entry.name).symlink_to(entry)
    assert (site / "torch").is_dir() and not (copy / site.relative_to(real) / "torch").exists()
    with pytest.raises(EnvError, match="No module named 'torch'"):
        check.check_env("pytorch", copy)
