"""Run a command as heavy work on this node: no point is measured while it runs (dlbench.node.locks.heavy_work).

    dlbench heavy [--what TEXT] [--timeout S] -- COMMAND [ARG ...]
    python -m dlbench.node.heavy [--what TEXT] [--timeout S] -- COMMAND [ARG ...]     the same

For what loads the CPU outside a workflow job, such as a Caffe build started by hand
(`dlbench heavy -- bash envs/caffe/build.sh PREFIX`; `dlbench envs build` and the
workflow's builds take heavy work themselves). The node lock is the workflow's ($DLBENCH_NODE_LOCK) or
measurement.lock_file's default. Exits with the command's status. The command runs at most --timeout seconds
(default TIMEOUT_S): while it runs no point on the node measures, so one that hangs would stop them all; past it,
its process group is ended (SIGTERM, then SIGKILL) and the exit status is 124, as timeout(1)'s. Standard library
only, so any python3 with the repository on its path can run it.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys

from dlbench.node import locks, procs

TIMEOUT_S = 4 * 3600.0  # far above a Caffe build's minutes; --timeout for longer work
TERM_WAIT_S = 10.0  # how long a command ended past its time has to exit after SIGTERM, before SIGKILL
EXIT_TIMEOUT = 124


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench heavy",
                                     description="run a command as heavy work: no point is measured on this node "
                                     "while it runs")
    parser.add_argument("--what", default="heavy work", help="what the command is, for the wait's message")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help="end the command after this many seconds (default %(default)g), exit 124")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG ...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: dlbench heavy -- COMMAND [ARG ...]")
    if shutil.which(command[0]) is None:  # said before the wait for the node, not as a traceback after it
        print(f"dlbench heavy: no command {command[0]!r} on PATH; give the command's name or path", file=sys.stderr)
        return 2
    if not args.timeout > 0:
        parser.error(f"--timeout {args.timeout:g}: give a number of seconds above 0")
    try:
        with locks.heavy_work(locks.node_lock(), args.what):
            return _run_within(command, args.timeout, args.what)
    except (locks.LockTimeout, locks.LockUnusable) as exc:  # the node's locks: held too long, or unusable here
        print(f"dlbench: {exc}", file=sys.stderr)
        return 1


def _run_within(command: list[str], timeout_s: float, what: str) -> int:
    """The command's exit status; past timeout_s its process group ended and EXIT_TIMEOUT. A signal that ends this
    process (SIGTERM, SIGINT, SIGHUP) is passed on to the command's group first: its children do not outlive it."""
    child = subprocess.Popen(command, process_group=0)  # a group of its own: ended whole, its children too

    def pass_on(signum, _frame):
        procs.kill_tree(child.pid, signum)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, pass_on)
    try:
        return child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        procs.kill_tree(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=TERM_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        procs.kill_tree(child.pid, signal.SIGKILL)
        child.wait()
        print(f"dlbench heavy: {what} ran past its {timeout_s:g} s (--timeout) and was ended", file=sys.stderr)
        return EXIT_TIMEOUT


if __name__ == "__main__":
    sys.exit(main())
