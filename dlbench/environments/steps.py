"""The child processes of an environment's build, each with a time limit.

A build step (the venv, pip's install, a recipe's compile) runs in a session of its own, so that what it starts
ends with it: a failed, cancelled or hung step leaves nothing running (run). The short questions around a build
(pip freeze, pip-compile, pip's resolver) run with the same limits (limited). A step past its limit counts as
hung: it is ended and the build fails in one line that names the step, its log and the fix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from dlbench.environments.errors import EnvError
from dlbench.node.procs import kill_tree

# The longest each kind of step may run, in seconds, before it counts as hung. Generous: pip fetching a GPU
# framework over a slow link, Caffe's compile on 2 cores (about 10 minutes), CUDA Caffe's.
LIMITS_S = {"venv": 600, "install": 3600, "recipe": 3 * 3600, "freeze": 300, "lock": 1800, "resolve": 1800}
LIMIT_ENV = "DLBENCH_ENV_STEP_LIMIT_S"  # one limit for every step, where a site's index or compiler is slower
TERM_S = 5.0  # how long an ended step has after SIGTERM before its group is killed
POLL_S = 0.2  # how often a running step is looked at


def limit(kind: str) -> float:
    """The time limit of a kind of step (LIMITS_S), or the one $DLBENCH_ENV_STEP_LIMIT_S sets for every step."""
    given = os.environ.get(LIMIT_ENV)
    if given:
        try:
            return float(given)
        except ValueError:
            raise EnvError(f"{LIMIT_ENV}={given!r} is not a number of seconds; unset it or give one") from None
    return float(LIMITS_S[kind])


def build_limit() -> float:
    """The longest a whole build may take: every step's limit. Another builder of the same environment is waited
    for this long at most."""
    return sum(limit(kind) for kind in ("venv", "install", "recipe", "freeze"))


def hung(what: str, seconds: float, log: str | os.PathLike | None = None) -> EnvError:
    """The one line a step past its limit ends with."""
    where = f"; its output is in {log}" if log else ""
    return EnvError(f"{what} ran past its limit of {seconds:g} s and was ended (a hang: a package index or "
                    f"download that stopped answering, a compile that stalled){where}; fix the cause and build "
                    f"again, or allow more time with {LIMIT_ENV}=SECONDS")


def run(cmd: list[str], log, kind: str, **kw) -> None:
    """Run one build step, its output into the open file `log`, in a session of its own, for at most limit(kind);
    EnvError where it fails or hangs."""
    said = " ".join(map(str, cmd))
    log.write(f"$ {said}\n")
    log.flush()
    seconds = limit(kind)
    proc, past = None, False
    try:  # from the start: a cancel (SIGTERM raises SystemExit: build) right after the step started ends it too
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        deadline = time.monotonic() + seconds
        # Exited but not reaped: its pid, the group's id, cannot be reused while the group is ended.
        while not exited(proc.pid) and not past:
            past = time.monotonic() >= deadline
            if not past:
                time.sleep(POLL_S)
    finally:  # once: after the reaping, its pid may be another process's
        returncode = end_group(proc) if proc is not None else None
    if past:
        raise hung(f"the build step `{said}`", seconds, log.name)
    if returncode:
        raise EnvError(f"`{said}` failed (exit {returncode}); see {log.name}")


def limited(cmd: list[str], kind: str, what: str, **kw) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output, text) for at most limit(kind); EnvError naming `what` where it hangs."""
    seconds = limit(kind)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=seconds, **kw)
    except subprocess.TimeoutExpired:
        raise hung(what, seconds) from None


def end_group(proc: subprocess.Popen) -> int | None:
    """End a build step's process group (a step still running was interrupted: SIGTERM first) and reap it;
    its exit status. A failed compiler or pip leaves children that would outlive the build and its folder."""
    if not exited(proc.pid):
        kill_tree(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=TERM_S)
        except subprocess.TimeoutExpired:
            pass
    kill_tree(proc.pid, signal.SIGKILL)
    return proc.wait()


def exited(pid: int) -> bool:
    """Whether a child has exited (a zombie not yet reaped), without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
