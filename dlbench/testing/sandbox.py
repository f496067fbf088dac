"""A private copy of the workflow, for tests and benchmarks that run it (or edit its code) in a temp folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from dlbench.paths import ROOT as REPO

# What a run needs: the workflow (Snakefile, rules, scripts, conda files, schema, captions), the package, the
# default study, the pins and the profiles.
WORKFLOW_FILES = ["workflow", "dlbench", "config", "envs", "profiles"]
TINY_CONFIG = REPO / ".test" / "config" / "config.yaml"  # the small study the workflow tests run


@contextlib.contextmanager
def environment(settings: dict[str, str]):
    """os.environ with `settings` inside the block, as it was after it: what this process starts inherits them."""
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def tiny_study() -> dict:
    """The study of .test/config/config.yaml, as a dict the tests may vary."""
    return yaml.safe_load(TINY_CONFIG.read_text())


def copy_workflow(dest: str | Path, study: dict | None = None, config_name: str = "study.yaml") -> Path:
    """The workflow's files copied into dest, with `study` written as dest/config_name."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        else:
            shutil.copy(src, dest / name)
    if study is not None:
        (dest / config_name).write_text(yaml.safe_dump(study))
    return dest


def copy_run(src: str | Path, dest: str | Path) -> Path:
    """A copy of a workflow folder that has run (its results and Snakemake's records of them, times kept), for a test
    that changes code or config: Snakemake finds the copy as up to date as the original."""
    shutil.copytree(src, dest, symlinks=True)
    return Path(dest)


def snakemake(workdir: str | Path, *args: str, check: bool = True, cores: int = 2,
              timeout: float = 1200) -> subprocess.CompletedProcess:
    """Snakemake in workdir with the Python running this; check=True raises with the output's tail. Bounded: past
    `timeout` seconds it is killed and subprocess.TimeoutExpired raised (a hang fails the test that started it)."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), *args], cwd=workdir,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc
