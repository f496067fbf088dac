"""The Caffe binary: where it comes from, how it was built, what a child of it is given.

Where Caffe comes from: $DLBENCH_CAFFE (the binary), else the environment's own build
(sys.prefix/caffe/bin/caffe, envs/caffe/build.sh, with BUILD_INFO.json), else a conda
package's (sys.prefix/bin/caffe), else `caffe` on PATH. No pycaffe is needed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from dlbench.frameworks.base import Unavailable


def find_binary() -> Path:
    candidates = []
    if os.environ.get("DLBENCH_CAFFE"):
        candidates.append(Path(os.environ["DLBENCH_CAFFE"]))
    candidates += [Path(sys.prefix) / "caffe" / "bin" / "caffe", Path(sys.prefix) / "bin" / "caffe"]
    on_path = shutil.which("caffe")
    if on_path:
        candidates.append(Path(on_path))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise RuntimeError("no Caffe binary: build the Caffe environment (dlbench envs build caffe, which "
                       "runs envs/caffe/build.sh) or set DLBENCH_CAFFE to a `caffe` executable; looked at "
                       + ", ".join(map(str, candidates)))


def caffe_env(threads: int | None = None) -> dict[str, str]:
    """The child's environment: glog to stderr (not files in /tmp), OpenBLAS threads as the point asks."""
    env = dict(os.environ)
    env.update(GLOG_logtostderr="1", GLOG_minloglevel="0", GLOG_colorlogtostderr="0")
    if threads:
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return env


@functools.cache
def build_info(binary: str) -> dict:
    """BUILD_INFO.json beside the binary (envs/caffe/build.sh writes it), else what `caffe --version` says."""
    path = Path(binary).resolve().parent.parent / "BUILD_INFO.json"
    info = json.loads(path.read_text()) if path.exists() else {}
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, env=caffe_env())
        line = (proc.stdout + proc.stderr).strip().splitlines()
        version_line = next((ln for ln in line if "version" in ln), "")
    except (OSError, subprocess.SubprocessError):
        version_line = ""
    info["version_line"] = version_line or info.get("version_output", "")
    version = version_line.rsplit(" ", 1)[-1] if version_line else ""
    info["version"] = version or info.get("caffe_version") or "unknown"
    info["build_info_file"] = str(path) if path.exists() else None
    return info


def built_with_cuda(binary: str, info: dict) -> bool:
    """A CPU_ONLY build cannot run a GPU point: BUILD_INFO.json says which; else ask the binary."""
    if info.get("build_info_file"):
        flags = info.get("cmake_flags", [])
        return info.get("device") != "cpu" and "-DCPU_ONLY=ON" not in flags
    try:
        proc = subprocess.run([binary, "device_query", "--gpu=0"], capture_output=True, text=True, timeout=60,
                              env=caffe_env())
    except (OSError, subprocess.SubprocessError):
        return False
    return "CPU-only" not in proc.stdout + proc.stderr and proc.returncode == 0


def check_device(point: dict, binary: str, info: dict) -> None:
    if point["device"] == "gpu" and not built_with_cuda(binary, info):
        raise Unavailable(f"this Caffe ({binary}) is a CPU_ONLY build (no CUDA): a GPU point needs Caffe built with "
                          "CUDA (config envs.opt_in: [caffe-cuda], which runs envs/caffe/build.sh --cuda where nvcc "
                          "is; not yet run on a GPU)")


def openblas_threads_in_effect(threads: int) -> int:
    """OpenBLAS runs min(OPENBLAS_NUM_THREADS, CPUs it may use) threads."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(threads, cpus))
