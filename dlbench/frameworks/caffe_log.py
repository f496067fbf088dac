"""Caffe's log, read as it is written: glog lines into (time, kind, fields), and those into training events.

Pure functions and one small state machine (`Tracker`); no Caffe and no numpy needed, so
every rule here is tested on recorded logs.

A glog line (GLOG_logtostderr=1) is

    <I|W|E|F>[yyyy]mmdd hh:mm:ss.uuuuuu TID file:line] message

(glog 0.6 writes the year, older glog does not). The lines `caffe train` writes while it
trains, and the kinds `parse_line` gives them:

    caffe.cpp:232]       Starting Optimization                         start_optimization
    solver.cpp:...]      Solving LeNet                                 solving
    solver.cpp:...]      Learning Rate Policy: inv                     lr_policy
    solver.cpp:231]      Iteration 20, loss = 1.07654                  train_loss
    solver.cpp:...]          Train net output #0: loss = 1.07 (...)    train_output
    sgd_solver.cpp:106]  Iteration 20, lr = 0.00998503                 lr
    solver.cpp:346]      Iteration 200, Testing net (#0)               test_start
    solver.cpp:413]          Test net output #0: accuracy = 0.793      test_output
    solver.cpp:...]      Snapshotting to HDF5 file x.caffemodel.h5     snapshot
    solver.cpp:325]      Optimization Done.                            done

and those of `caffe test`: `Running for N iterations.` (test_running), `Batch i, name = v`
(test_batch), `Loss: v` (test_mean_loss) and `name = v` from caffe.cpp (test_result).
An `F` line is `fatal`; a line without the glog prefix (a stack trace, glibc's
`double free or corruption`) is `raw`. Numbers are floats, `nan`, `-nan`, `inf` and
`-inf` included.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from dataclasses import dataclass, field

PREFIX = re.compile(r"^(?P<sev>[IWEF])(?P<date>\d{8}|\d{4}) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\.(?P<us>\d{6})\s+"
                    r"(?P<tid>\d+) (?P<file>[^:\]\s]+):(?P<line>\d+)\] ?(?P<msg>.*)$")
NUMBER = r"([-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
# (message pattern, kind, field names); first match wins.
PATTERNS: list[tuple[re.Pattern, str, tuple[str, ...]]] = [
    (re.compile(rf"^Iteration (\d+)(?: \([^)]*\))?, loss = {NUMBER}$", re.I), "train_loss", ("iteration", "loss")),
    (re.compile(rf"^Iteration (\d+), lr = {NUMBER}$", re.I), "lr", ("iteration", "lr")),
    (re.compile(r"^Iteration (\d+), Testing net \(#(\d+)\)$"), "test_start", ("iteration", "net")),
    (re.compile(rf"^\s*Test net output #(\d+): (\S+) = {NUMBER}(?: \(\* \S+ = \S+ loss\))?$", re.I),
     "test_output", ("index", "name", "value")),
    (re.compile(rf"^\s*Train net output #(\d+): (\S+) = {NUMBER}(?: \(\* \S+ = \S+ loss\))?$", re.I),
     "train_output", ("index", "name", "value")),
    (re.compile(r"^Starting Optimization$"), "start_optimization", ()),
    (re.compile(r"^Solving (.*)$"), "solving", ("name",)),
    (re.compile(r"^Learning Rate Policy: (\S+)$"), "lr_policy", ("policy",)),
    (re.compile(r"^Snapshotting to (?:HDF5|binary proto) file (.*)$"), "snapshot", ("path",)),
    (re.compile(r"^Optimization Done\.$"), "done", ()),
    (re.compile(r"^Optimization stopped early\.$"), "stopped", ()),
    (re.compile(r"^Running for (\d+) iterations\.$"), "test_running", ("iterations",)),
    (re.compile(rf"^Batch (\d+), (\S+) = {NUMBER}$", re.I), "test_batch", ("batch", "name", "value")),
    (re.compile(rf"^Loss: {NUMBER}$", re.I), "test_mean_loss", ("loss",)),
    (re.compile(rf"^(\w+) = {NUMBER}(?: \(\* \S+ = \S+ loss\))?$", re.I), "test_result", ("name", "value")),
]
INT_FIELDS = {"iteration", "net", "index", "iterations", "batch", "line"}
FLOAT_FIELDS = {"loss", "lr", "value"}


def number(text: str) -> float:
    """A number as Caffe prints it (C++ ostream): 0.5, 1e-05, nan, -nan, inf, -inf."""
    t = text.strip().lower()
    if t.lstrip("+-").startswith("nan"):
        return math.nan
    if t.lstrip("+-").startswith("inf"):
        return -math.inf if t.startswith("-") else math.inf
    return float(t)


def log_time(date: str, h: str, m: str, s: str, us: str, year: int | None = None) -> float:
    """Seconds (UTC-like, no time zone applied) of a glog time stamp; mmdd stamps take `year` (default: now)."""
    if len(date) == 8:
        y, mo, d = int(date[:4]), int(date[4:6]), int(date[6:])
    else:
        y, mo, d = (year or time.localtime().tm_year), int(date[:2]), int(date[2:])
    return calendar.timegm((y, mo, d, int(h), int(m), int(s), 0, 0, 0)) + int(us) / 1e6


@dataclass
class Line:
    time: float | None  # seconds (see log_time); None for a raw line
    kind: str
    fields: dict = field(default_factory=dict)
    severity: str | None = None
    source: str | None = None  # file:line
    message: str = ""


def parse_line(text: str, year: int | None = None) -> Line:
    """One line of Caffe's log as (time, kind, fields)."""
    text = text.rstrip("\r\n")
    m = PREFIX.match(text)
    if not m:
        return Line(None, "raw", {}, None, None, text)
    t = log_time(m["date"], m["h"], m["m"], m["s"], m["us"], year)
    msg, source = m["msg"], f"{m['file']}:{m['line']}"
    if m["sev"] == "F":
        return Line(t, "fatal", {}, "F", source, msg)
    for pattern, kind, names in PATTERNS:
        hit = pattern.match(msg)
        if hit is None:
            continue
        if kind == "test_result" and m["file"] != "caffe.cpp":
            continue
        fields = {}
        for name, value in zip(names, hit.groups()):
            fields[name] = int(value) if name in INT_FIELDS else number(value) if name in FLOAT_FIELDS else value
        return Line(t, kind, fields, m["sev"], source, msg)
    return Line(t, "other", {}, m["sev"], source, msg)


def parse(lines, year: int | None = None) -> list[Line]:
    return [parse_line(line, year) for line in lines]


def fatal_message(lines: list[Line]) -> str | None:
    """The first `F` line's message (what Caffe died of), with where it was raised."""
    for line in lines:
        if line.kind == "fatal":
            return f"{line.message} [{line.source}]"
    return None


def first_nonfinite_loss(lines: list[Line]) -> tuple[int, float] | None:
    """(iteration, loss) of the first training loss that is nan or inf."""
    for line in lines:
        if line.kind == "train_loss" and not math.isfinite(line.fields["loss"]):
            return line.fields["iteration"], line.fields["loss"]
    return None


class Clock:
    """Log times as seconds since the first stamped line, robust to a year-less stamp crossing New Year."""

    def __init__(self):
        self.first: float | None = None
        self.last: float | None = None
        self.shift = 0.0

    def __call__(self, t: float) -> float:
        t += self.shift
        if self.last is not None and t < self.last - 86400:  # mmdd stamps wrapped from Dec 31 to Jan 1
            self.shift += 365 * 86400
            t += 365 * 86400
        if self.first is None:
            self.first = t
        self.last = max(t, self.last or t)
        return t - self.first

    @property
    def elapsed(self) -> float:
        """Seconds from the first stamped line to the latest."""
        return 0.0 if self.first is None else self.last - self.first


@dataclass
class Tracker:
    """Turns `caffe train` lines into the events the other adapters' loop (base.SteppedAdapter.train) emits,
    timed from the log's own stamps.

    Training time runs from `Learning Rate Policy` (the solver's last line before its loop) to
    the first line after the loop (a snapshot, the final display's loss, the final test or
    `Optimization Done`), less the tests in between (each from `Testing net` to its last
    `Test net output`). Where the final display follows the loop, its one forward pass is
    inside that span: Caffe writes no line between the last update and it.

    feed(line) returns a list of (event, fields); events: build_end, train_start, step, test_start,
    test, train_end, done. A step is held until its `lr` line (the update that follows the loss),
    so that it carries both; `finish()` flushes what is pending at the end of the log.
    """

    max_iter: int
    steps_per_epoch: int = 1
    clock: Clock = field(default_factory=Clock)
    train_start: float | None = None
    train_end: float | None = None
    test_total_s: float = 0.0  # interval tests, inside the training span
    pending_step: dict | None = None
    test: dict | None = None
    final_test: dict | None = None
    steps: list[dict] = field(default_factory=list)
    tests: list[dict] = field(default_factory=list)
    done: bool = False

    def train_time(self, now: float | None = None) -> float:
        """Training seconds up to `now` (log seconds), or in all once the loop has ended."""
        if self.train_start is None:
            return 0.0
        end = self.train_end if self.train_end is not None else (now if now is not None else self.clock.elapsed)
        return max(0.0, end - self.train_start - self.test_total_s)

    def feed(self, line: Line) -> list[tuple[str, dict]]:
        if line.time is None:
            return []
        now = self.clock(line.time)
        out: list[tuple[str, dict]] = []
        if line.kind == "lr" and self.pending_step and self.pending_step["iteration"] == line.fields["iteration"]:
            self.pending_step["lr"] = line.fields["lr"]
            out += self._flush_step()
            return out
        if line.kind not in ("train_output", "test_output"):
            out += self._flush_step()
        if line.kind != "test_output" and self.test is not None:
            out += self._end_test()
        kind = line.kind
        if kind == "start_optimization":
            out.append(("build_end", {"log_s": now}))
        elif kind in ("solving", "lr_policy"):
            if self.train_start is None or kind == "lr_policy":
                first = self.train_start is None
                self.train_start = now
                if first:
                    out.append(("train_start", {"log_s": now}))
        elif kind == "train_loss":
            it = line.fields["iteration"]
            if it >= self.max_iter:  # the display after the loop: a forward pass only
                out += self._loop_ended(now)
            self._start_train_if_needed(now, out)
            self.pending_step = {"iteration": it, "epoch": it / self.steps_per_epoch, "loss": line.fields["loss"],
                                 "lr": None, "train_time_s": self.train_time(now)}
            if not math.isfinite(line.fields["loss"]):  # no waiting for the lr line: stop at once
                out += self._flush_step()
        elif kind == "test_start":
            it = line.fields["iteration"]
            if it >= self.max_iter:
                out += self._loop_ended(now)
            self.test = {"iteration": it, "start": now, "end": now, "outputs": {}, "final": it >= self.max_iter}
            out.append(("test_start", {"iteration": it, "final": self.test["final"], "log_s": now}))
        elif kind == "test_output" and self.test is not None:
            self.test["outputs"][line.fields["name"]] = line.fields["value"]
            self.test["end"] = now
        elif kind == "snapshot":  # snapshot: 0, so only the one after training
            out += self._loop_ended(now)
        elif kind in ("done", "stopped") and not self.done:  # solver.cpp and caffe.cpp both say it
            out += self._loop_ended(now)
            self.done = True
            out.append(("done", {"log_s": now, "stopped": kind == "stopped"}))
        return out

    def finish(self) -> list[tuple[str, dict]]:
        """The end of the log: flush a held step and a test whose last output was the last line."""
        out = self._flush_step()
        if self.test is not None:
            out += self._end_test()
        return out

    def _start_train_if_needed(self, now: float, out: list) -> None:
        if self.train_start is None:  # no solver header seen (a cut log): start at the first iteration
            self.train_start = now
            out.append(("train_start", {"log_s": now}))

    def _loop_ended(self, now: float) -> list[tuple[str, dict]]:
        if self.train_end is not None or self.train_start is None:
            return []
        self.train_end = now
        return [("train_end", {"log_s": now, "train_time_s": self.train_time(now)})]

    def _flush_step(self) -> list[tuple[str, dict]]:
        if self.pending_step is None:
            return []
        step, self.pending_step = self.pending_step, None
        self.steps.append(step)
        return [("step", step)]

    def _end_test(self) -> list[tuple[str, dict]]:
        test, self.test = self.test, None
        took = test["end"] - test["start"]
        if not test["final"]:
            self.test_total_s += took
        event = {"iteration": test["iteration"], "accuracy": test["outputs"].get("accuracy"),
                 "loss": test["outputs"].get("loss"), "test_time_s": took,
                 "train_time_s": self.train_time(test["end"]), "final": test["final"]}
        self.tests.append(event)
        if test["final"]:
            self.final_test = event
        return [("test", event)]


def test_summary(lines: list[Line]) -> dict | None:
    """What `caffe test` printed: mean accuracy and loss over its batches, and the time the batches took.

    The time runs from `Running for N iterations.` (the weights are loaded by then) to the last
    result line; None where the log has no results (the run failed).
    """
    clock = Clock()
    start = end = None
    results: dict[str, float] = {}
    for line in lines:
        if line.time is None:
            continue
        now = clock(line.time)
        if line.kind == "test_running":
            start = now
        elif line.kind == "test_result" and start is not None:
            results[line.fields["name"]] = line.fields["value"]
            end = now
    if start is None or end is None or "accuracy" not in results:
        return None
    return {"accuracy": results["accuracy"], "loss": results.get("loss"), "test_time_s": end - start}
