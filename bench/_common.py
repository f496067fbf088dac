"""What the benchmarks of the harness share: the machine, a quiet-machine wait, points, tables.

Work files go to $DLBENCH_BENCH_DIR (default /tmp/dlbench-bench), never into the clone.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from dlbench import config, envinfo, envs, sweep  # noqa: E402
from dlbench.datasets import prepare  # noqa: E402

WORK = Path(os.environ.get("DLBENCH_BENCH_DIR", "/tmp/dlbench-bench"))
FASHION = Path("/usr/share/datasets/fashion-mnist")


def machine() -> str:
    mem = psutil.virtual_memory().total / 2**30
    return (f"{envinfo.cpu_model()}, {envinfo.usable_cores()} cores, {mem:.0f} GiB, "
            f"{platform.system()} {platform.release()}, {time.strftime('%Y-%m-%d %H:%M')}")


def load1() -> float:
    return os.getloadavg()[0]


def wait_quiet(max_load: float = 0.8, timeout_s: float = 900.0, poll_s: float = 10.0) -> float:
    """Wait until the 1-minute load average is below max_load (other people's jobs share the machine).

    Returns the load average seen when measuring starts; after timeout_s it measures anyway and says so.
    Set DLBENCH_BENCH_NO_WAIT=1 to skip the wait (a quick try, not a figure to record).
    """
    if os.environ.get("DLBENCH_BENCH_NO_WAIT"):
        return load1()
    t0 = time.monotonic()
    said = False
    while load1() >= max_load:
        if time.monotonic() - t0 > timeout_s:
            print(f"# load still {load1():.2f} after {timeout_s:.0f} s: measuring anyway", file=sys.stderr)
            break
        if not said:
            print(f"# waiting for a quiet machine (1-min load {load1():.2f} >= {max_load})", file=sys.stderr)
            said = True
        time.sleep(poll_s)
    return load1()


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (everything but idle and iowait)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class ForeignCpu:
    """How many cores other people's processes kept busy while the block ran (machine busy - ours)."""

    def __enter__(self) -> ForeignCpu:
        self.t0, self.busy0, self.own0 = time.monotonic(), _busy_cpu_s(), _own_cpu_s()
        return self

    def __exit__(self, *exc) -> None:
        wall = max(1e-9, time.monotonic() - self.t0)
        self.cores = max(0.0, (_busy_cpu_s() - self.busy0) - (_own_cpu_s() - self.own0)) / wall


MAX_FOREIGN_CORES = float(os.environ.get("DLBENCH_BENCH_MAX_FOREIGN", "0.05"))
DISCARDED: list[float] = []  # foreign load of the measurements thrown away and run again


def clean(fn, *args, tries: int = 6, **kw):
    """fn(*args, **kw), run again (after waiting for a quiet machine) while others used more than
    MAX_FOREIGN_CORES of the machine during it; the last try is kept whatever it saw."""
    for attempt in range(tries):
        with ForeignCpu() as foreign:
            result = fn(*args, **kw)
        if foreign.cores <= MAX_FOREIGN_CORES or attempt == tries - 1 or os.environ.get("DLBENCH_BENCH_NO_WAIT"):
            return result
        DISCARDED.append(foreign.cores)
        print(f"# others used {foreign.cores:.2f} cores during a measurement: discarded, measuring again",
              file=sys.stderr, flush=True)
        time.sleep(5)
        wait_quiet()
    return result


def discarded_note() -> str:
    if not DISCARDED:
        return f"no measurement disturbed by other processes (foreign CPU <= {MAX_FOREIGN_CORES:.2f} cores)"
    return (f"{len(DISCARDED)} measurement(s) discarded and repeated: other processes used "
            f"{min(DISCARDED):.2f}-{max(DISCARDED):.2f} cores during them")


def dataset(name: str = "fashion_mnist") -> Path:
    """The prepared dataset (once per work folder)."""
    out = WORK / "datasets" / name
    if not (out / "meta.json").exists():
        local = str(FASHION) if name == "fashion_mnist" else None
        prepare.prepare(name, out, local=local)
    return out


def make_point(framework: str, preset: str = "caffe", dataset_name: str = "fashion_mnist", **sweep_values) -> dict:
    """One validated point, as the workflow would expand it (tests/conftest.py's make_point)."""
    cfg = config.validate({"datasets": [dataset_name], "frameworks": [framework], "preset": [preset],
                           "sweep": {k: [v] for k, v in sweep_values.items()}})
    (point,) = sweep.expand(cfg)
    return point


def env_python(framework: str) -> str:
    return str(envs.build(framework) / "bin" / "python")


def env_ready(framework: str) -> bool:
    """Whether the framework's environment is already built (never starts a build)."""
    try:
        return (envs.env_dir(framework) / "READY").exists()
    except envs.EnvError:
        return False


def median(values) -> float:
    return statistics.median(values)


def cv(values) -> float:
    """Coefficient of variation (sample standard deviation / mean)."""
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    columns = columns or list(rows[0])
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


def header(title: str, load: float) -> None:
    print(f"# {title}")
    print(f"# machine: {machine()}")
    print(f"# 1-min load average at start: {load:.2f}")
