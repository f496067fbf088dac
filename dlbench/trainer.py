"""The trainer process: runs one point's adapter inside the framework's environment.

    python -m dlbench.trainer POINT_JSON DATASET_DIR EVENTS_JSONL
    python -m dlbench.trainer --probe FRAMEWORK

Everything it knows goes to EVENTS_JSONL as it happens (phases, loss, tests, info);
its last event is `status`. Exit codes: 0 ok, 3 unavailable, 4 diverged, 1 error.
`--probe` imports the framework's adapter as a point would and prints, as one line of JSON, the
versions of that interpreter (Python, numpy, the framework, its CUDA and cuDNN): how dlbench
checks an environment it did not build (dlbench/envs.py).
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
import traceback

EXIT = {"ok": 0, "error": 1, "unavailable": 3, "diverged": 4}


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
    from dlbench.frameworks.base import Diverged, Reporter, Unavailable

    reporter = Reporter(events_path)
    reporter.emit("process_start", pid_started_at=started)
    try:
        with reporter.phase("import"):
            adapter = importlib.import_module(f"dlbench.frameworks.{point['framework']}").ADAPTER
        result = adapter(point, dataset_dir, reporter).run()
        reporter.emit("result", **result)
        status, reason = "ok", None
    except Unavailable as exc:
        status, reason = "unavailable", str(exc)
    except Diverged as exc:
        status, reason = "diverged", str(exc)
        reporter.emit("diverged", iteration=exc.iteration, loss=exc.loss)
    except MemoryError as exc:
        status, reason = "oom", f"MemoryError: {exc}"
    except Exception as exc:  # a failed point is data: record what happened
        status, reason = "error", f"{type(exc).__name__}: {exc}"
        reporter.emit("traceback", text=traceback.format_exc()[-4000:])
    reporter.emit("status", status=status, reason=reason)
    reporter.close()
    return EXIT.get(status, 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
