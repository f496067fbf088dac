"""bench/gpu_device.sh, the GPU check: where no GPU is, it refuses in one line before doing anything."""

from __future__ import annotations

import glob
import shutil
import subprocess
import time

import pytest

from dlbench.paths import ROOT

SCRIPT = ROOT / "bench" / "gpu_device.sh"


@pytest.mark.skipif(bool(glob.glob("/dev/nvidia[0-9]*")) or bool(shutil.which("nvidia-smi")),
                    reason="this machine may have an NVIDIA GPU: the script would run the check")
def test_without_a_gpu_it_refuses_in_one_line_before_anything_else(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    started = time.monotonic()
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "OUT": str(out), "TMPDIR": str(tmp_path),
                               "PYTHON": "/nonexistent/python"})
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_device.sh: no NVIDIA GPU on this machine"), proc.stderr
    assert "--rehearse" in lines[0]  # and what to do instead
    # nothing was done: no Python started (PYTHON does not exist), no folder made, nothing written
    assert list(out.iterdir()) == [] and [p.name for p in tmp_path.iterdir()] == ["out"]
    assert time.monotonic() - started < 5


def test_an_unknown_argument_is_refused_in_one_line(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "--gpu"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "usage:" in proc.stderr
