"""While a study runs: one line per finished point, how many are done and failed, and the time left.

The workflow attaches a `Progress` to Snakemake's logger in the process that schedules the jobs. Snakemake
logs every job it starts (its wildcards) and every job that finishes; on a finished training job the
handler reads that point's record (one file), counts it, and logs a line such as

    dlbench: 7 of 16 points done, 1 failed (oom 1), 9 to go, about 4.2 min left

through Snakemake's own logger, so it reaches the terminal and .snakemake/log/ alike. The time left is the
dry run's estimate for the points still to go (dlbench.plan.estimate), scaled by how long this run's points took
against their own estimates, once one has finished.
"""

from __future__ import annotations

import logging
import os
from collections import Counter

from dlbench.plan import estimate
from dlbench.record import store

LOGGER = "snakemake.logging"
KEYS = ("framework", "dataset", "point")


def _event(record: logging.LogRecord) -> str:
    return str(getattr(record, "event", "") or "")


class Progress(logging.Handler):
    """Counts finished training jobs from Snakemake's log records and logs a progress line for each."""

    def __init__(self, points: dict[tuple, dict], run_dir, done: estimate.Finished, seconds=None,
                 emit_line=None):
        super().__init__(level=logging.INFO)
        self.points, self.run_dir = points, run_dir
        self.total = len(points)
        pending = {(p["framework"], p["dataset"], p["id"]) for p in done.pending}
        self.guess = {key: seconds(points[key]) if seconds else None for key in pending}
        self.done = self.total - len(pending)
        # the points finished before this run, by status (one small file each)
        self.statuses: Counter = Counter(
            (store.read_or_skip(os.path.join(run_dir(p), store.RESULT)) or {}).get("status", "error")
            for key, p in points.items() if key not in pending)
        self.jobs: dict[int, tuple] = {}
        self.took = self.expected = 0.0  # this run's finished points: their wall time and their estimate
        self.emit_line = emit_line or (lambda line: logging.getLogger(LOGGER).info(line))

    def emit(self, record: logging.LogRecord) -> None:
        event = _event(record)
        try:
            if event.endswith("job_info"):
                wildcards = getattr(record, "wildcards", None) or {}
                if all(k in wildcards for k in KEYS):
                    self.jobs[getattr(record, "jobid", None)] = tuple(wildcards[k] for k in KEYS)
            elif event.endswith("job_finished"):
                key = self.jobs.pop(getattr(record, "job_id", None), None)
                if key in self.points:
                    self.emit_line(self.finished(key))
        except Exception:  # noqa: BLE001 - a progress line must never stop the study
            self.handleError(record)

    def finished(self, key: tuple) -> str:
        """Count the point of `key` as finished (its record says how) and say where the study stands."""
        record = store.read_or_skip(os.path.join(self.run_dir(self.points[key]), store.RESULT)) or {}
        if key in self.guess:
            self.done += 1
            guess = self.guess.pop(key)
            if guess and record.get("wall_time_s"):
                self.took += record["wall_time_s"]
                self.expected += guess
        self.statuses[record.get("status", "error")] += 1
        return self.line()

    def line(self) -> str:
        failed = {s: n for s, n in sorted(self.statuses.items()) if s != "ok"}
        text = f"dlbench: {self.done} of {self.total} points done, {sum(failed.values())} failed"
        if failed:
            text += " (" + ", ".join(f"{s} {n}" for s, n in failed.items()) + ")"
        left = len(self.guess)
        text += f", {left} to go"
        if left:
            known = [g for g in self.guess.values() if g]
            scale = self.took / self.expected if self.expected else 1.0
            if known:
                text += f", about {_duration(sum(known) * scale)} left"
                if len(known) < left:
                    text += f" (and {left - len(known)} points with no estimate)"
            else:
                text += ", time left unknown (no estimate)"
        return text


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def attach(points: dict[tuple, dict], run_dir, done: estimate.Finished, root: str = ".",
           model: estimate.Model | None = None) -> Progress:
    """A Progress on Snakemake's logger, with the estimate of every point still to go (model: one made of the
    same finished points already)."""
    model = model or estimate.model_of(done, root)
    handler = Progress(points, run_dir, done, seconds=lambda p: model.seconds(p)[0])
    logging.getLogger(LOGGER).addHandler(handler)
    return handler
