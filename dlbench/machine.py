"""What the machine is: recorded with every point so a figure can be traced to its hardware."""

from __future__ import annotations

import functools
import os
import platform
import socket

import psutil


@functools.cache
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, as SLURM and containers set it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@functools.cache
def gpus() -> list[dict]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    found = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        name = pynvml.nvmlDeviceGetName(h)
        found.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                      "memory_mb": pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**20,
                      "driver": pynvml.nvmlSystemGetDriverVersion()})
    return found


def host() -> dict:
    g = gpus()
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_cores_logical": psutil.cpu_count(logical=True),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "cpu_cores_usable": usable_cores(),
        "memory_total_mb": round(psutil.virtual_memory().total / 2**20),
        "os": f"{platform.system()} {platform.release()}",
        "python_runner": platform.python_version(),
        "gpu_model": g[0]["name"] if g else None,
        "gpu_count": len(g),
        "gpu_driver": g[0]["driver"] if g else None,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }
