"""`caffe` run as a child of the trainer: its log read line by line as it is written, and its failures in words."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

from dlbench.frameworks import caffe_log
from dlbench.frameworks.base import Diverged
from dlbench.frameworks.caffe_binary import caffe_env
from dlbench.node.procs import die_with_parent


class CaffeProcess:
    """`caffe ARGS` as a child, its log read line by line, copied to our stdout (the trainer's log)."""

    def __init__(self, binary: str, args: list[str], cwd: str, threads: int | None):
        self.started = time.monotonic()
        self.proc = subprocess.Popen([binary, *args], cwd=cwd, env=caffe_env(threads), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                     bufsize=1, preexec_fn=die_with_parent)
        self.lines: list[caffe_log.Line] = []
        self.year = time.localtime().tm_year

    def __iter__(self):
        for text in self.proc.stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
            line = caffe_log.parse_line(text, self.year)
            self.lines.append(line)
            yield line

    def wait(self) -> int:
        return self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def threads(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return None


def failure(run: CaffeProcess, returncode: int, what: str = "caffe") -> Exception:
    """A finished child's failure: divergence if its log shows a nan/inf loss, else its F line."""
    nonfinite = caffe_log.first_nonfinite_loss(run.lines)
    if nonfinite is not None:  # Caffe 1.0 may crash (double free, SIGABRT) after a nan: divergence comes first
        return Diverged(*nonfinite)
    fatal = caffe_log.fatal_message(run.lines)
    if fatal:
        return RuntimeError(f"{what}: {fatal} ({_how(returncode)})")
    tail = " | ".join(ln.message for ln in run.lines[-3:] if ln.message)
    return RuntimeError(f"{what} ended ({_how(returncode)}) without an F line; last lines: {tail}")


def _how(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit {returncode}"
