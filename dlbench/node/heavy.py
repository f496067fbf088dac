"""Run a command as heavy work on this node: no point is measured while it runs (dlbench.node.locks.heavy_work).

    dlbench heavy [--what TEXT] -- COMMAND [ARG ...]
    python -m dlbench.node.heavy [--what TEXT] -- COMMAND [ARG ...]     the same

For what loads the CPU outside a workflow job, such as a Caffe build started by hand
(`dlbench heavy -- bash envs/caffe/build.sh PREFIX`; `dlbench envs build` and the
workflow's builds take heavy work themselves). The node lock is the workflow's ($DLBENCH_NODE_LOCK) or
measurement.lock_file's default. Exits with the command's status. Standard library only, so any python3
with the repository on its path can run it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from dlbench.node import locks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench heavy",
                                     description="run a command as heavy work: no point is measured on this node "
                                     "while it runs")
    parser.add_argument("--what", default="heavy work", help="what the command is, for the wait's message")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG ...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: dlbench heavy -- COMMAND [ARG ...]")
    if shutil.which(command[0]) is None:  # said before the wait for the node, not as a traceback after it
        print(f"dlbench heavy: no command {command[0]!r} on PATH; give the command's name or path", file=sys.stderr)
        return 2
    try:
        with locks.heavy_work(locks.node_lock(), args.what):
            return subprocess.call(command)
    except (locks.LockTimeout, locks.LockUnusable) as exc:  # the node's locks: held too long, or unusable here
        print(f"dlbench: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
