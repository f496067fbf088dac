"""The workflow and the code as their tools want them: `snakemake --lint`, `snakefmt --check`, `ruff check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.paths import ROOT

BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_snakemake_lint_finds_nothing():
    proc = run(str(BIN / "snakemake"), "--lint")
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, proc.stdout[-3000:]


@pytest.mark.parametrize("cmd", [("snakefmt", "--check", "workflow"), ("ruff", "check", ".")])
def test_formatters_and_linters_are_clean(cmd):
    proc = run(str(BIN / cmd[0]), *cmd[1:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
