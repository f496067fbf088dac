"""Faults of the cluster's controller and of the node's memory, injected for real (round four).

SLURM's commands are the outside world here: a fake `squeue` or `scontrol` on PATH answers as a controller
that fails or refuses would, and the code under test runs unchanged in a process of its own. The memory rows
use the kernel's own cgroup OOM killer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dlbench import locks
from dlbench.paths import ROOT as REPO
from dlbench.testing.faults import _row


def _on_path(folder: Path, name: str, script: str) -> dict:
    """The environment of a process whose PATH finds `name` as the shell script given first."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(script)
    (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


# squeue as it answers when the controller does not (slurmctld down, a network partition).
FAILING_SQUEUE = """#!/bin/sh
echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2
exit 1
"""
CLEAR = "import json, sys\nfrom dlbench import locks\nprint(json.dumps(locks.hold_and_clear_stale(sys.argv[1])))"


def squeue_fails(root: Path) -> dict:
    """squeue exits 1 while a new run looks at a killed run's job, marked live with its SLURM job id: unknown is not
    gone, so the mark and Snakemake's locks stay, and the run says so."""
    env = _on_path(root / "failing-squeue", "squeue", FAILING_SQUEUE)
    work = root / "squeue-fails"
    lock = work / ".snakemake" / "locks" / "0.input.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    mark = work / ".snakemake" / locks.LIVE_JOBS / "another-node-77"
    mark.parent.mkdir(parents=True)
    mark.write_text(json.dumps({"host": "another-node", "pid": 77, "slurm_job_id": "4242"}))
    run = subprocess.run([sys.executable, "-c", CLEAR, str(work)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    removed, alive = json.loads(run.stdout) if run.returncode == 0 else (None, run.stderr[-300:])
    said = [ln for ln in run.stderr.splitlines() if "squeue failed" in ln]
    return _row("squeue fails", "a squeue on PATH that exits 1 (no controller) while a killed run's job is marked",
                removed == 0 and bool(alive) and lock.exists() and mark.exists() and bool(said), not mark.exists(),
                removed=removed, alive=alive, lock_kept=lock.exists(), mark_kept=mark.exists(), said=said[:1])
