"""Run the evidence study with Snakemake in a working directory of its own.

`--directory` keeps its results, datasets and Snakemake's records apart from the user's results/; the framework
environments are shared (cached outside the clone), so nothing is built twice. A second run in the same folder trains
only what a change of code, config or scale invalidated, as any run of the workflow does.
"""

from __future__ import annotations

import datetime
import hashlib
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
RUN_INFO = "evidence-run.json"  # how the folder's last finished run was made: the scale and cores the tables say
FAILED_INFO = "evidence-failed-run.json"  # how its last failed run was made: never what the tables are stamped with


class StudyFailed(RuntimeError):
    """Snakemake ended with an error: no runs table to render."""


def command(workdir: Path, configfile: Path, scale: float, cores: int) -> list[str]:
    cmd = [sys.executable, "-m", "snakemake", str(RUNS), "--cores", str(cores), "--configfile", str(configfile),
           "--directory", str(workdir)]
    # --config last: it takes every word after it, a target included.
    return cmd + (["--config", f"scale={scale:g}"] if scale != 1 else [])


def run(workdir: Path = WORKDIR, configfile: Path = CONFIG, scale: float = 1.0, cores: int = 2,
        timeout_s: float | None = None) -> dict:
    """Run the study; returns (and writes to workdir/RUN_INFO) the run's scale, cores, command and wall time, with
    the digest of the runs table it made. A run that failed writes FAILED_INFO instead: RUN_INFO goes on describing
    the runs table that is there, which a failed run leaves as the last finished one made it. Snakemake's output
    goes to this process's terminal: a full-length run takes hours."""
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
    if proc.returncode != 0 or not (workdir / RUNS).exists():
        atomic.write_json(workdir / FAILED_INFO, info)
        raise StudyFailed(f"snakemake exited with {proc.returncode} in {workdir} (its output is above; the logs are in "
                          f"{workdir / 'logs'})")
    return record_finished(workdir, info)


def record_finished(workdir: Path, info: dict) -> dict:
    """Write `info` of a run that finished as the folder's RUN_INFO, with the digest of the runs table it made
    (last_run checks the table is still that one); returns it."""
    info = {**info, "runs_sha256": _digest(Path(workdir) / RUNS)}
    atomic.write_json(Path(workdir) / RUN_INFO, info)
    (Path(workdir) / FAILED_INFO).unlink(missing_ok=True)
    return info


def _digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def last_run(workdir: Path = WORKDIR) -> dict:
    """The folder's last finished run (RUN_INFO), for rendering its tables again without running it: StudyFailed where
    the runs table there is not the one that run made (another run changed it since), or the info is of a run that
    failed (written by an older dlbench, which wrote it either way)."""
    path, runs = Path(workdir) / RUN_INFO, Path(workdir) / RUNS
    if not path.exists() or not runs.exists():
        raise StudyFailed(f"{workdir} holds no finished evidence run ({RUN_INFO} and {RUNS}); run the command without "
                          "--render-only first")
    info = json.loads(path.read_text())
    if info.get("returncode", 0) != 0:
        raise StudyFailed(f"{path} describes a run that failed (snakemake exited with {info['returncode']}), so the "
                          f"scale of {RUNS} is unknown; run the command without --render-only")
    if info.get("runs_sha256") not in (None, _digest(runs)):  # None: an older dlbench's info of a run that finished
        raise StudyFailed(f"{runs} is not the table the run of {path} made (another run changed it since), so its "
                          "scale is unknown; run the command without --render-only")
    return info
