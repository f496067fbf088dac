"""What the benchmarks of the harness share: the machine, a quiet-machine wait, points, tables.

Work files go to $DLBENCH_BENCH_DIR (default $DLBENCH_CACHE/bench, the user's own: a fixed name in /tmp could be
made first, or be a link, by another user), never into the clone. Kept between runs: the benchmarks reuse it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import psutil

from dlbench.datasets import prepare
from dlbench.environments import build, key
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry
from dlbench.node import hostload, machine
from dlbench.paths import ROOT, cache_root
from dlbench.testing.sandbox import environment

REPO = ROOT  # the checkout the benchmarks measure
WORK = Path(os.environ.get("DLBENCH_BENCH_DIR") or cache_root() / "bench")
DATASET = "fashion_mnist"  # the benchmarks' dataset: real, MNIST's geometry, on this machine


def machine_line() -> str:
    mem = psutil.virtual_memory().total / 2**30
    return (f"{machine.cpu_model()}, {machine.usable_cores()} cores, {mem:.0f} GiB, "
            f"{platform.system()} {platform.release()}, {time.strftime('%Y-%m-%d %H:%M')}")


def load1() -> float:
    return os.getloadavg()[0]


QUIET_CORES = float(os.environ.get("DLBENCH_BENCH_QUIET", "0.1"))


def busy_cores(window_s: float = 3.0) -> float:
    """Cores the whole machine kept busy over window_s, this process's sleep included (so: others).

    The load average is no gauge here: on some virtual machines it idles near 1 with every core idle.
    """
    b0, t0 = _busy_cpu_s(), time.monotonic()
    time.sleep(window_s)
    return (_busy_cpu_s() - b0) / (time.monotonic() - t0)


def wait_quiet(timeout_s: float = 900.0) -> float:
    """Wait until other processes keep less than QUIET_CORES cores busy (the machine is shared).

    Returns the busy cores seen when measuring starts; after timeout_s it measures anyway and says so.
    Set DLBENCH_BENCH_NO_WAIT=1 to skip the wait (a quick try, not a figure to record).
    """
    if os.environ.get("DLBENCH_BENCH_NO_WAIT"):
        return busy_cores(0.5)
    t0 = time.monotonic()
    said = False
    while (busy := busy_cores()) >= QUIET_CORES:
        if time.monotonic() - t0 > timeout_s:
            print(f"# others still keep {busy:.2f} cores busy after {timeout_s:.0f} s: measuring anyway",
                  file=sys.stderr)
            break
        if not said:
            print(f"# waiting for a quiet machine ({busy:.2f} cores busy >= {QUIET_CORES})", file=sys.stderr)
            said = True
        time.sleep(5)
    return busy


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (everything but idle and iowait; dlbench.node.hostload)."""
    return hostload.read_busy_s() or 0.0


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
KEPT: list[float] = []  # foreign load during the measurements kept


def clean(fn, *args, tries: int = 6, **kw):
    """fn(*args, **kw), run again (after waiting for a quiet machine) while others used more than
    MAX_FOREIGN_CORES of the machine during it; the last try is kept whatever it saw."""
    for attempt in range(tries):
        with ForeignCpu() as foreign:
            result = fn(*args, **kw)
        if foreign.cores <= MAX_FOREIGN_CORES or attempt == tries - 1 or os.environ.get("DLBENCH_BENCH_NO_WAIT"):
            KEPT.append(foreign.cores)
            return result
        DISCARDED.append(foreign.cores)
        print(f"# others used {foreign.cores:.2f} cores during a measurement: discarded, measuring again",
              file=sys.stderr, flush=True)
        time.sleep(5)
        wait_quiet()
    return result


def discarded_note() -> str:
    disturbed = [f for f in KEPT if f > MAX_FOREIGN_CORES]
    if disturbed:  # kept anyway: DLBENCH_BENCH_NO_WAIT, or the last try
        return (f"{len(disturbed)} of {len(KEPT)} measurements kept although other processes used "
                f"{min(disturbed):.2f}-{max(disturbed):.2f} cores during them (mean {statistics.mean(KEPT):.2f})")
    if not DISCARDED:
        return f"no measurement disturbed by other processes (foreign CPU <= {MAX_FOREIGN_CORES:.2f} cores)"
    return (f"{len(DISCARDED)} measurement(s) discarded and repeated: other processes used "
            f"{min(DISCARDED):.2f}-{max(DISCARDED):.2f} cores during them")


def dataset(name: str = "fashion_mnist") -> Path:
    """The prepared dataset (once per work folder)."""
    out = WORK / "datasets" / name
    if not (out / "meta.json").exists():
        prepare.prepare(name, out)
    return out


def env_python(framework: str) -> str:
    return str(build.build(framework) / "bin" / "python")


def env_ready(framework: str) -> bool:
    """Whether the framework's environment is already built (never starts a build)."""
    try:
        return (key.env_dir(framework) / "READY").exists()
    except EnvError:
        return False


@contextlib.contextmanager
def trainer_env(extra: dict[str, str]):
    """Variables for the trainers started inside the block (measure.trainer_env starts from os.environ)."""
    with environment(extra):
        yield


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


def header(title: str, busy: float) -> None:
    print(f"# {title}")
    print(f"# machine: {machine_line()}")
    print(f"# at start: {busy:.2f} cores busy with other work, 1-min load average {load1():.2f}")


def summary(text: str, rows: list[dict], columns: list[str] | None = None) -> None:
    """The closing line (what was measured, how quiet it stayed) and the table of every row."""
    print()
    print(f"# {text}; {time.strftime('%H:%M')}, load at end {load1():.2f}; {discarded_note()}")
    print(table(rows, columns))


ALL_FRAMEWORKS = registry.names()


def parser(doc: str, *, frameworks: list[str] | None = None, framework: str | None = None,
           iterations: int | None = None, repeats: int = 3, threads: list[int] | None = None
           ) -> argparse.ArgumentParser:
    """The options the benchmarks share, with each one's own defaults."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    if frameworks is not None:
        ap.add_argument("frameworks", nargs="*", default=frameworks)
    if framework is not None:
        ap.add_argument("--framework", default=framework)
    if iterations is not None:
        ap.add_argument("--iterations", type=int, default=iterations)
    ap.add_argument("--repeats", type=int, default=repeats)
    if threads is not None:
        ap.add_argument("--threads", type=int, nargs="+", default=threads)
    return ap


def usable(frameworks: list[str]) -> list[str]:
    """The frameworks asked for, less Caffe where its environment (built from source, about 3 minutes on 2 cores)
    is not built yet."""
    if "caffe" in frameworks and not env_ready("caffe"):
        print("# caffe: skipped (its environment is not built: .venv/bin/dlbench envs build caffe)")
        return [fw for fw in frameworks if fw != "caffe"]
    return list(frameworks)
