"""A workflow job's output into its log file: the one way the scripts of workflow/scripts/ log.

Snakemake gives every rule a `log:`; a `script:` job writes there what it and the processes it
starts print (file descriptors 1 and 2 are redirected, so a child's output lands there too).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path

from dlbench.node.locks import LockTimeout, LockUnusable


@contextlib.contextmanager
def to_log(path: str | os.PathLike):
    """stdout and stderr of this process, and of its children, appended to `path` for the block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run(log_path: str | os.PathLike, main) -> None:
    """Run a job's `main()` with its output in its log, and exit with its status (an exception: 1, its traceback
    in the log). `main` returns an exit status (2 after printing one line that names the problem and the fix);
    anything else it returns (a table it wrote, None) counts as 0."""
    with to_log(log_path):
        try:
            code = main()
            code = code if isinstance(code, int) and not isinstance(code, bool) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except (LockTimeout, LockUnusable) as exc:  # heavy work kept off the node: its one line says why and how
            print(f"dlbench: {exc}", file=sys.stderr)
            code = 1
        except BaseException:  # noqa: BLE001 - whatever it was, the log is where the user will look
            traceback.print_exc()
            code = 1
    sys.exit(code)
