"""Samples a process tree from outside it: CPU %, resident memory, threads, and the GPU via NVML.

Runs as a thread of the runner, never inside the trainer. Timestamps are
time.monotonic(), the same clock the trainer stamps its phases with, so samples
and phases line up. It can also enforce a memory budget: over it, the tree is killed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field

import psutil

SAMPLE_FIELDS = ("t", "cpu_pct", "rss_mb", "threads", "processes",
                 "gpu_util_pct", "gpu_mem_mb", "gpu_power_w", "gpu_energy_j")


class _Gpu:
    """NVML readings of one device; absent (None) where NVML or the device is not there."""

    def __init__(self, device: int | str):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = (pynvml.nvmlDeviceGetHandleByIndex(device) if isinstance(device, int)
                       else pynvml.nvmlDeviceGetHandleByUUID(device))
        try:
            self.energy0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)  # mJ
        except pynvml.NVMLError:
            self.energy0 = None

    def read(self) -> dict:
        n, h = self.nvml, self.handle
        out = {"gpu_util_pct": n.nvmlDeviceGetUtilizationRates(h).gpu,
               "gpu_mem_mb": n.nvmlDeviceGetMemoryInfo(h).used / 2**20,
               "gpu_power_w": n.nvmlDeviceGetPowerUsage(h) / 1000.0}
        if self.energy0 is not None:
            out["gpu_energy_j"] = (n.nvmlDeviceGetTotalEnergyConsumption(h) - self.energy0) / 1000.0
        return out


def nvml_index(visible: str | None, ordinal: int = 0) -> int | str:
    """The NVML device behind CUDA ordinal `ordinal`, given CUDA_VISIBLE_DEVICES (indices or UUIDs).

    NVML numbers the node's GPUs physically; a job pinned to GPU 3 sees it as CUDA device 0.
    """
    if not visible:
        return ordinal
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    entry = entries[ordinal] if ordinal < len(entries) else entries[0]
    return int(entry) if entry.isdigit() else entry


def open_gpu(index: int) -> _Gpu | None:
    try:
        return _Gpu(nvml_index(os.environ.get("CUDA_VISIBLE_DEVICES"), index))
    except Exception:
        return None


@dataclass
class Monitor:
    pid: int
    interval_s: float = 0.2
    gpu_index: int | None = None
    memory_limit_mb: float | None = None
    samples: list[dict] = field(default_factory=list)
    over_memory: bool = False
    own_cpu_s: float = 0.0

    def __post_init__(self):
        self._stop = threading.Event()
        self._procs: dict[int, psutil.Process] = {}
        self._tree_pids: set[int] = set()  # the root and the descendants found so far
        self._seen_pids: set[int] = set()  # every process of the machine at the last reading
        self._cpu_seen: dict[int, float] = {}
        self._gpu = open_gpu(self.gpu_index) if self.gpu_index is not None else None
        self._thread = threading.Thread(target=self._loop, name="dlbench-monitor", daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (a monitor that never started has nothing to stop)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _tree(self) -> list[psutil.Process]:
        """The root and its descendants; Process objects are kept, so create_time identity is checked once.

        psutil's children() reads the stat file of every process on the machine at every reading
        (about 1 ms for 90 processes, 10 ms and more on a busy node). Here only the processes that
        appeared since the last reading are read, and the tree is kept in between.
        """
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            self._procs[self.pid] = root
            pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        except psutil.Error:
            return []
        except OSError:  # no /proc to list: ask psutil for the whole tree
            try:
                kids = root.children(recursive=True)
            except psutil.Error:
                return []
            return [root] + [self._procs.setdefault(k.pid, k) for k in kids]
        if self.pid not in pids:
            return []
        for gone in self._tree_pids - pids:  # the ones that ended (their CPU stays in _cpu_seen)
            self._procs.pop(gone, None)
        self._tree_pids &= pids
        self._tree_pids.add(self.pid)
        new = {pid: _ppid(pid) for pid in pids - self._seen_pids}
        self._seen_pids = pids
        grew = True
        while grew:  # a child and its own child may both be new
            grew = False
            for pid, ppid in list(new.items()):
                if ppid in self._tree_pids:
                    self._tree_pids.add(pid)
                    del new[pid]
                    grew = True
        tree = [root]
        for pid in sorted(self._tree_pids - {self.pid}):
            proc = self._procs.get(pid)
            if proc is None:
                try:
                    proc = self._procs[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
            tree.append(proc)
        return tree

    def _read(self) -> dict | None:
        """One reading of the whole tree, with its cumulative CPU seconds; None once it is gone."""
        rss = threads = alive = 0
        for proc in self._tree():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    rss += proc.memory_info().rss
                    threads += proc.num_threads()
            except psutil.Error:
                continue
            self._cpu_seen[proc.pid] = times.user + times.system
            alive += 1
        if not alive:
            return None
        # CPU of children that ended between readings stays counted through _cpu_seen.
        return {"t": time.monotonic(), "cpu_s": sum(self._cpu_seen.values()), "rss_mb": rss / 2**20,
                "threads": threads, "processes": alive}

    def _loop(self) -> None:
        t0 = time.thread_time()
        last = self._read()
        while not self._stop.wait(self.interval_s):
            now = self._read()
            if now is None:
                continue
            if last is not None and now["t"] > last["t"]:
                row = {k: now[k] for k in ("t", "rss_mb", "threads", "processes")}
                row["cpu_pct"] = 100.0 * (now["cpu_s"] - last["cpu_s"]) / (now["t"] - last["t"])
                if self._gpu is not None:
                    try:
                        row.update(self._gpu.read())
                    except Exception:
                        pass
                self.samples.append(row)
                self._enforce(row)
            last = now
        self.own_cpu_s = time.thread_time() - t0

    def _enforce(self, row: dict) -> None:
        if self.memory_limit_mb and row["rss_mb"] > self.memory_limit_mb and not self.over_memory:
            self.over_memory = True
            kill_tree(self.pid, signal.SIGKILL)


def _ppid(pid: int) -> int | None:
    """A process's parent, from /proc/PID/stat (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2:].split(None, 2)[1])
    except (OSError, ValueError, IndexError):
        return None


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the trainer's whole process group (it was started in a session of its own)."""
    try:
        os.killpg(os.getpgid(pid), sig)
    except (ProcessLookupError, PermissionError):
        pass
