"""The trainer process: runs one point's adapter inside the framework's environment.

    python -m dlbench.frameworks.trainer POINT_JSON DATASET_DIR EVENTS_JSONL
    python -m dlbench.frameworks.trainer --probe FRAMEWORK

Everything it knows goes to EVENTS_JSONL as it happens (phases, loss, tests, info);
its last event is `status`, and its exit code says the same (the protocol: dlbench.frameworks.protocol; a full
disk also where the events file itself could not be written).
`--probe` imports the framework's adapter as a point would and prints, as one line of JSON, the
versions of that interpreter (Python, numpy, the framework, its CUDA and cuDNN): how dlbench
checks an environment it did not build (dlbench/environments/build.py).
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
import traceback

from dlbench.frameworks import protocol


def probe(framework: str) -> dict:
    """The versions this interpreter gives a framework's trainer; fails (an import error) where it cannot run one."""
    adapter = importlib.import_module(f"dlbench.frameworks.{framework}").ADAPTER
    import numpy

    return {"python_version": platform.python_version(), "numpy_version": numpy.__version__, **adapter.versions()}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        print(json.dumps(probe(argv[1])))
        return 0
    started = time.monotonic()
    point_path, dataset_dir, events_path = argv
    with open(point_path) as fh:
        point = json.load(fh)
    from dlbench.frameworks.base import Reporter
    from dlbench.record.statuses import disk_full

    try:
        reporter = Reporter(events_path)
        reporter.emit(protocol.PROCESS_START, pid_started_at=started)
        status, reason = _train(point, dataset_dir, reporter)
        reporter.emit(protocol.STATUS, status=status, reason=reason)
        reporter.close()
    except OSError as exc:  # the events themselves cannot be written: the exit code says why
        return protocol.EXIT["disk_full"] if disk_full(exc) else protocol.EXIT["error"]
    return protocol.EXIT.get(status, 1)


def _train(point: dict, dataset_dir: str, reporter) -> tuple[str, str | None]:
    """Run the point's adapter; its status and reason, whatever happened."""
    from dlbench.datasets.store import ChangedSincePrepared
    from dlbench.frameworks.base import Diverged, Unavailable
    from dlbench.record.statuses import disk_full

    try:
        with reporter.phase("import"):
            adapter = importlib.import_module(f"dlbench.frameworks.{point['framework']}").ADAPTER
    except ImportError as exc:  # the framework (or a library it loads) is missing or broken in its environment
        reporter.emit(protocol.TRACEBACK, text=traceback.format_exc()[-4000:])
        return "env_damaged", f"the framework's environment cannot import it: {type(exc).__name__}: {exc}"
    try:
        result = adapter(point, dataset_dir, reporter).run()
        reporter.emit(protocol.RESULT, **result)
        return "ok", None
    except Unavailable as exc:
        return getattr(exc, "status", "unavailable"), str(exc)
    except Diverged as exc:
        reporter.emit(protocol.DIVERGED, iteration=exc.iteration, loss=exc.loss)
        return "diverged", str(exc)
    except MemoryError as exc:
        return "oom", f"MemoryError: {exc}"
    except ChangedSincePrepared as exc:  # the copy on disk, not the point: its retry prepares it again
        return "data_changed", str(exc)
    except Exception as exc:  # a failed point is data: record what happened
        if disk_full(exc):  # not the point's fault: the runner has the job run again
            return "disk_full", f"{type(exc).__name__}: {exc}"
        reporter.emit(protocol.TRACEBACK, text=traceback.format_exc()[-4000:])
        return "error", f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
