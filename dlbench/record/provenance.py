"""Which dlbench made a record: its version, and the commit and state of the checkout it ran from.

So that two result sets compared side by side (dlbench.present.comparison) can say whether the harness itself differed.
"""

from __future__ import annotations

import functools
import subprocess

from dlbench import __version__
from dlbench.paths import ROOT


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@functools.cache
def dlbench_build() -> dict:
    """dlbench_version; dlbench_commit and dlbench_dirty (tracked files changed since it) where the package runs
    from a git checkout, else None (an installed copy)."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"dlbench_version": __version__, "dlbench_commit": commit,
            "dlbench_dirty": None if status is None else bool(status)}
