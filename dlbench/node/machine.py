"""What the machine is: recorded with every point so a figure can be traced to its hardware."""

from __future__ import annotations

import functools
import glob
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


# CPU flags of native bfloat16 arithmetic (/proc/cpuinfo): AMX tiles, and AVX-512's BF16 dot products.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.cache
def cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def bf16_native() -> str | None:
    """The CPU's native bfloat16 instructions, comma-separated (amx_bf16, avx512_bf16), or None: it has none."""
    found = [f for f in BF16_FLAGS if f in cpu_flags()]
    return ", ".join(found) or None


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, as SLURM and containers set it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gpus() -> list[dict]:
    """The GPUs NVML finds (index, name, uuid, memory_mb, driver); none where NVML is missing, fails or hangs."""
    return list(_inventory()[0])


def gpu_state() -> str | None:
    """None where NVML answered (GPUs or none); a line saying the GPU state is unknown where it did not in time."""
    return _inventory()[1]


@functools.cache
def _inventory() -> tuple[tuple[dict, ...], str | None]:
    """NVML's GPUs, read once and at most NVML_TIMEOUT_S: a hung driver must not hold a job, which may hold the
    node's measurement lock. A call that timed out is not made again (it would hang beside the first)."""
    from dlbench.node.deadline import NVML_TIMEOUT_S, bounded, unanswered

    try:
        return tuple(bounded(_nvml_gpus, NVML_TIMEOUT_S)), None
    except TimeoutError:
        return (), unanswered()


def _nvml_gpus() -> list[dict]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    found = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        name = pynvml.nvmlDeviceGetName(h)
        uuid = pynvml.nvmlDeviceGetUUID(h)
        found.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                      "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                      "memory_mb": pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**20,
                      "driver": pynvml.nvmlSystemGetDriverVersion()})
    return found


def gpu_devices() -> list[str]:
    """The GPUs a GPU point may be pinned to, as CUDA_VISIBLE_DEVICES entries.

    $DLBENCH_GPU_DEVICES (a comma list: GPUs set aside for dlbench, or fake ones for tests), else this
    job's own CUDA_VISIBLE_DEVICES (a scheduler's allocation), else every GPU NVML finds. An index NVML
    knows becomes that GPU's UUID, which CUDA and NVML both read the same way whatever their device order.
    """
    given = os.environ.get("DLBENCH_GPU_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES") or ""
    entries = [e.strip() for e in given.split(",") if e.strip()] or [str(g["index"]) for g in gpus()]
    uuids = {str(g["index"]): g["uuid"] for g in gpus()}
    return [uuids.get(e, e) for e in entries]


# Where Linux exposes CPU frequency policy (cpufreq): the governor of each CPU, and turbo/boost one of two ways.
SYS_CPU = "/sys/devices/system/cpu"


def _read_sys(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def cpu_governor(root: str = SYS_CPU) -> str | None:
    """The CPUs' frequency governor (`performance`, `powersave`, ...; several comma-separated where they differ),
    or None where the machine exposes none (many VMs)."""
    found = sorted({g for path in glob.glob(os.path.join(root, "cpu[0-9]*", "cpufreq", "scaling_governor"))
                    if (g := _read_sys(path))})
    return ", ".join(found) or None


def cpu_boost(root: str = SYS_CPU) -> bool | None:
    """Whether turbo/boost is on: cpufreq's `boost` (acpi-cpufreq, amd-pstate) or intel_pstate's `no_turbo`
    (inverted); None where neither is exposed."""
    boost = _read_sys(os.path.join(root, "cpufreq", "boost"))
    if boost in ("0", "1"):
        return boost == "1"
    no_turbo = _read_sys(os.path.join(root, "intel_pstate", "no_turbo"))
    if no_turbo in ("0", "1"):
        return no_turbo == "0"
    return None


def host(gpu: bool = True) -> dict:
    """The machine's facts for a record; gpu False (a CPU point): NVML is not asked, the GPU fields are None."""
    g = gpus() if gpu else []
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_bf16": bf16_native(),
        "cpu_cores_logical": psutil.cpu_count(logical=True),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "cpu_cores_usable": usable_cores(),
        "cpu_governor": cpu_governor(),
        "cpu_boost": cpu_boost(),
        "memory_total_mb": round(psutil.virtual_memory().total / 2**20),
        "os": f"{platform.system()} {platform.release()}",
        "python_runner": platform.python_version(),
        "gpu_model": g[0]["name"] if g else None,
        "gpu_count": len(g) if gpu else None,
        "gpu_driver": g[0]["driver"] if g else None,
        "gpu_state": gpu_state() if gpu else None,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }
