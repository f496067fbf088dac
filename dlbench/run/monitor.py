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

from dlbench.node import hostload
from dlbench.node.deadline import NVML_TIMEOUT_S, bounded
from dlbench.node.procs import kill_tree

# gpu_energy_j: the device's energy since the monitor opened it (NVML's counter)
GPU_SAMPLE_FIELDS = ("gpu_util_pct", "gpu_mem_mb", "gpu_power_w", "gpu_energy_j")
SAMPLE_FIELDS = ("t", "cpu_pct", "rss_mb", "threads", "processes", *GPU_SAMPLE_FIELDS,
                 "host_cpu_other_pct", "host_load_1m")  # outside load (dlbench.node.hostload)


# Each GPU quantity of a sample: its field, the NVML call that reads it, and how its answer becomes the field.
GPU_READINGS = (("gpu_util_pct", "nvmlDeviceGetUtilizationRates", lambda r: r.gpu),
                ("gpu_mem_mb", "nvmlDeviceGetMemoryInfo", lambda r: r.used / 2**20),
                ("gpu_power_w", "nvmlDeviceGetPowerUsage", lambda mw: mw / 1000.0))
ENERGY_CALL = "nvmlDeviceGetTotalEnergyConsumption"  # mJ since the driver loaded


class _Gpu:
    """NVML readings of one device, each quantity read on its own.

    A call the device refuses (power or energy are NotSupported on some boards and virtual GPUs) leaves
    out its own field only; `failures()` says which calls failed, how, and how often.
    """

    def __init__(self, device: int | str):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = (pynvml.nvmlDeviceGetHandleByIndex(device) if isinstance(device, int)
                       else pynvml.nvmlDeviceGetHandleByUUID(device))
        self.calls: dict[str, int] = {}
        self.failed: dict[str, tuple[str, int]] = {}  # NVML call -> (its first error, how many times it failed)
        self.energy0 = self._call(ENERGY_CALL)  # None: no energy counter, and it is not asked again

    def _call(self, name: str):
        self.calls[name] = self.calls.get(name, 0) + 1
        try:
            return getattr(self.nvml, name)(self.handle)
        except Exception as exc:  # pynvml.NVMLError_*, or a call this pynvml lacks
            error, times = self.failed.get(name, (f"{type(exc).__name__} ({exc})", 0))
            self.failed[name] = (error, times + 1)
            return None

    def read(self) -> dict:
        out = {}
        for key, call, convert in GPU_READINGS:
            answer = self._call(call)
            if answer is not None:
                out[key] = convert(answer)
        if self.energy0 is not None and (total := self._call(ENERGY_CALL)) is not None:
            out["gpu_energy_j"] = (total - self.energy0) / 1000.0
        return out

    def failures(self) -> str | None:
        """The NVML calls that failed: '<call>: <error> (<failed> of <calls> calls)', '; '-joined; None if none."""
        return "; ".join(f"{call}: {error} ({times} of {self.calls[call]} calls)"
                         for call, (error, times) in sorted(self.failed.items())) or None


def nvml_index(visible: str | None, ordinal: int = 0) -> int | str:
    """The NVML device behind CUDA ordinal `ordinal`, given CUDA_VISIBLE_DEVICES (indices or UUIDs).

    NVML numbers the node's GPUs physically; a job pinned to GPU 3 sees it as CUDA device 0.
    """
    if not visible:
        return ordinal
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    entry = entries[ordinal] if ordinal < len(entries) else entries[0]
    return int(entry) if entry.isdigit() else entry


def open_gpu(device: int | str) -> _Gpu | str:
    """NVML readings of one GPU (its NVML index or UUID: see nvml_index); where NVML cannot open it, why not."""
    try:
        return _Gpu(device)
    except Exception as exc:  # no pynvml, no driver, no such device
        return f"NVML could not open GPU {device}: {type(exc).__name__} ({exc})"


def idle_gpu(device: int | str) -> dict:
    """The GPU's memory in use and its power before a point's trainer starts (None where NVML cannot say).

    NVML's figures are the whole device's: what a point adds to these is its own.
    """
    gpu = open_gpu(device)
    reading = gpu.read() if isinstance(gpu, _Gpu) else {}
    return {"gpu_mem_idle_mb": reading.get("gpu_mem_mb"), "gpu_power_idle_w": reading.get("gpu_power_w")}


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
RESCAN_S = 1.0  # how often the whole machine's process list is read for new descendants
JOIN_S = 10.0  # longest stop() waits for the sampling thread


@dataclass(frozen=True)
class ProcStat:
    """What one read of /proc/PID/stat says of a process."""

    ppid: int
    start: int  # start time in clock ticks: a reused pid has another
    cpu_s: float  # its own CPU and that of the children it has waited for
    threads: int
    rss_bytes: int


def proc_stat(pid: int) -> ProcStat | None:
    """/proc/PID/stat, parsed (None once the process is gone). One small read: a sample costs little."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
        f = raw[raw.rindex(b")") + 2:].split()  # the name may hold spaces and parentheses
        ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
        return ProcStat(int(f[1]), int(f[19]), ticks / CLOCK_TICKS, int(f[17]), int(f[21]) * PAGE_BYTES)
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Monitor:
    pid: int
    interval_s: float = 0.2
    gpu_index: int | str | None = None  # the NVML device sampled (index or UUID); None: no GPU readings
    memory_limit_mb: float | None = None
    samples: list[dict] = field(default_factory=list)
    over_memory: bool = False
    own_cpu_s: float = 0.0
    died: tuple[float, str] | None = None  # (monotonic time, the error) where a reading raised: no samples after it

    def __post_init__(self):
        self._stop = threading.Event()
        self._tree: dict[int, int] = {}  # pid -> start time, the root and the descendants found so far
        self._seen_pids: set[int] = set()  # every process of the machine at the last full scan
        self._last_scan = -float("inf")
        self._unseen_cpu_s = 0.0  # CPU the tree's processes used before they were found
        self.gpu_gave_up: str | None = None  # why the GPU readings stopped, where they did
        self._gpu, self._gpu_error = None, None
        if self.gpu_index is not None:
            try:
                gpu = bounded(lambda: open_gpu(self.gpu_index), NVML_TIMEOUT_S)
                self._gpu, self._gpu_error = (gpu, None) if not isinstance(gpu, str) else (None, gpu)
            except TimeoutError as exc:
                self.gpu_gave_up = self._gpu_error = f"NVML did not open the GPU: {exc}"
        self._thread = threading.Thread(target=self._loop, name="dlbench-monitor", daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (a monitor that never started has nothing to stop)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_S)  # bounded: a reading stuck in the kernel must not hold the node's lock

    def gpu_failures(self) -> str | None:
        """Why the GPU fields are missing, in part (the NVML calls that failed) or whole; None: none missing."""
        return self._gpu_error or (self._gpu.failures() if self._gpu is not None else None)

    def _scan(self, now: float) -> None:
        """Add the descendants that appeared since the last reading.

        Each reading asks every process of the tree for the children of its main thread (one small
        read each, and where subprocess and compilers start them). The whole machine's process list,
        which also finds children of other threads, is read every RESCAN_S only.
        """
        if now - self._last_scan >= RESCAN_S:
            self._last_scan = now
            try:
                pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
                # At the first scan the machine's processes are only noted: they are older than the
                # monitor, and the root's children among them are in its children file below.
                candidates = pids - self._seen_pids if self._seen_pids else set()
                self._seen_pids = pids
            except OSError:
                candidates = set()
        else:
            candidates = set()
        for pid in list(self._tree):
            try:
                with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
                    candidates.update(int(c) for c in fh.read().split())
            except OSError:
                pass
        pending = {pid: st for pid in candidates - self._tree.keys() if (st := proc_stat(pid)) is not None}
        grew = True
        while grew:  # a child and its own child may both be new
            grew = False
            for pid, st in list(pending.items()):
                if st.ppid in self._tree:
                    self._tree[pid] = st.start
                    # What it used before it was found would land in one interval: leave it out of the curve.
                    self._unseen_cpu_s += st.cpu_s
                    del pending[pid]
                    grew = True

    def _read(self) -> dict | None:
        """One reading of the whole tree, with its cumulative CPU seconds; None once it is gone."""
        if not self._tree:
            root = proc_stat(self.pid)
            if root is None:
                return _read_psutil(self.pid) if not os.path.exists("/proc/self/stat") else None
            self._tree[self.pid] = root.start
            self._unseen_cpu_s = root.cpu_s
        started = time.monotonic()
        self._scan(started)
        cpu_s = rss = threads = alive = 0
        for pid, start in list(self._tree.items()):
            st = proc_stat(pid)
            if st is None or st.start != start:  # ended: its CPU is now in its parent's (waited-for) count
                del self._tree[pid]
                continue
            cpu_s += st.cpu_s
            rss += st.rss_bytes
            threads += st.threads
            alive += 1
        if self.pid not in self._tree:
            return None
        # The middle of the read: a thread descheduled during it skews the CPU window least.
        # tree_cpu_s: all the tree's CPU, what it used before it was found too (the machine's count has it).
        return {"t": (started + time.monotonic()) / 2, "cpu_s": cpu_s - self._unseen_cpu_s, "rss_mb": rss / 2**20,
                "threads": threads, "processes": alive, "tree_cpu_s": cpu_s, **hostload.reading()}

    def _loop(self) -> None:
        """Sample until stopped. A reading that raises ends the samples, and the memory budget's watch with them,
        but not silently: `died` says when and why (the record's monitor_died)."""
        t0 = time.thread_time()
        try:
            self._sample()
        except Exception as exc:  # noqa: BLE001 - whatever it was, the record must say the samples stop here
            self.died = (time.monotonic(), f"{type(exc).__name__}: {exc}")
        finally:
            self.own_cpu_s = time.thread_time() - t0

    def _sample(self) -> None:
        last = self._read()
        while not self._stop.wait(self.interval_s):
            now = self._read()
            if now is None:
                continue
            if last is not None and now["t"] - last["t"] < self.interval_s / 2:
                # Woken late and then early (a loaded machine): CPU time moves in 10 ms ticks, so a reading
                # over a sliver of time would show a spike of hundreds of percent. Measure over a longer span.
                continue
            if last is not None:
                row = {k: now[k] for k in ("t", "rss_mb", "threads", "processes")}
                row["cpu_pct"] = max(0.0, 100.0 * (now["cpu_s"] - last["cpu_s"]) / (now["t"] - last["t"]))
                row["host_cpu_other_pct"] = hostload.others_pct(last, now, now["t"] - last["t"])
                row["host_load_1m"] = now.get("host_load_1m")
                if self._gpu is not None:
                    try:
                        row.update(bounded(self._gpu.read, NVML_TIMEOUT_S))
                    except TimeoutError as exc:  # a hung driver: no more GPU readings, the CPU ones go on
                        self._gpu, self.gpu_gave_up = None, f"an NVML reading hung: {exc}"
                        self._gpu_error = self.gpu_gave_up
                    except Exception:
                        pass
                self.samples.append(row)
                self._enforce(row)
            last = now

    def _enforce(self, row: dict) -> None:
        if self.memory_limit_mb and row["rss_mb"] > self.memory_limit_mb and not self.over_memory:
            self.over_memory = True
            kill_tree(self.pid, signal.SIGKILL)


def _read_psutil(pid: int) -> dict | None:
    """The same reading where there is no /proc (not Linux): psutil walks the tree each time."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    cpu_s = rss = threads = alive = 0
    for proc in procs:
        try:
            with proc.oneshot():
                t = proc.cpu_times()
                cpu_s += t.user + t.system + t.children_user + t.children_system
                rss += proc.memory_info().rss
                threads += proc.num_threads()
            alive += 1
        except psutil.Error:
            continue
    return {"t": time.monotonic(), "cpu_s": cpu_s, "rss_mb": rss / 2**20, "threads": threads, "processes": alive}

