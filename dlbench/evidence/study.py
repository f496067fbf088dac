"""Run the evidence study with Snakemake in a working directory of its own.

`--directory` keeps its results, datasets and Snakemake's records apart from the user's results/; the framework
environments are shared (cached outside the clone), so nothing is built twice. A second run in the same folder trains
only what a change of code, config or scale invalidated, as any run of the workflow does.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from dlbench import atomic
from dlbench.paths import ROOT

CONFIG = ROOT / "config" / "evidence.yaml"
WORKDIR = ROOT / ".evidence"
RUNS = Path("results") / "runs.parquet"  # the one target: the tables need the runs, not the charts
# config/evidence.yaml's sub-studies: each is one table of the doc, between markers named after it.
OWN_DEFAULTS = "own_defaults"  # each framework's own defaults
FRAMEWORK_EFFECT = "framework_effect"  # one preset on several frameworks, several seeds
STUDIES = (OWN_DEFAULTS, FRAMEWORK_EFFECT)
RUN_INFO = "evidence-run.json"  # how the folder's last run was made: the scale and cores the tables say


class StudyFailed(RuntimeError):
    """Snakemake ended with an error: no runs table to render."""


def command(workdir: Path, configfile: Path, scale: float, cores: int) -> list[str]:
    cmd = [sys.executable, "-m", "snakemake", str(RUNS), "--cores", str(cores), "--configfile", str(configfile),
           "--directory", str(workdir)]
    # --config last: it takes every word after it, a target included.
    return cmd + (["--config", f"scale={scale:g}"] if scale != 1 else [])


def run(workdir: Path = WORKDIR, configfile: Path = CONFIG, scale: float = 1.0, cores: int = 2,
        timeout_s: float | None = None) -> dict:
    """Run the study; returns (and writes to workdir/RUN_INFO) the run's scale, cores, command and wall time.
    Snakemake's output goes to this process's terminal: a full-length run takes hours."""
    workdir, configfile = Path(workdir).resolve(), Path(configfile).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = command(workdir, configfile, scale, cores)
    started = datetime.datetime.now().astimezone()
    t0 = time.monotonic()
    # From the checkout: Snakemake finds workflow/Snakefile and profiles/default here, and works in `workdir`.
    proc = subprocess.run(cmd, cwd=ROOT, timeout=timeout_s)
    info = {"scale": scale, "cores": cores, "configfile": str(configfile), "command": cmd,
            "started": started.isoformat(timespec="seconds"), "wall_s": round(time.monotonic() - t0, 1),
            "returncode": proc.returncode}
    atomic.write_json(workdir / RUN_INFO, info)
    if proc.returncode != 0 or not (workdir / RUNS).exists():
        raise StudyFailed(f"snakemake exited with {proc.returncode} in {workdir} (its output is above; the logs are in "
                          f"{workdir / 'logs'})")
    return info


def last_run(workdir: Path = WORKDIR) -> dict:
    """The folder's last run (RUN_INFO), for rendering its tables again without running it."""
    path = Path(workdir) / RUN_INFO
    if not path.exists() or not (Path(workdir) / RUNS).exists():
        raise StudyFailed(f"{workdir} holds no finished evidence run ({RUN_INFO} and {RUNS}); run the command without "
                          "--render-only first")
    return json.loads(path.read_text())
