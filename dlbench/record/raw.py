"""A point's raw measurement: what only training gives, kept apart from the record that is made from it.

    <point folder>/point.json        the point as it ran
                  /events.jsonl      the trainer's events (dlbench.frameworks.protocol)
                  /trainer.log       the trainer's output
                  /monitor.jsonl     the monitor's samples, one JSON line each, on the monotonic clock of the events
                  /measurement.json  the runner's facts of the attempt (Facts) and the digest and size of each file
                                     above: written last, the train rule's output

dlbench.run.measure writes it into the attempt's folder; dlbench.run.derive reads it back (`read`) and makes the
record from it (dlbench.run.build_record), in the training job and again in the record rule, so that a change to
how a record is made rebuilds the records and trains nothing. A measurement is whole when measurement.json is
there and its files agree with it (`disagreement`).

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from dlbench.atomic import dumps, fsync_dir, fsync_file, write_json
from dlbench.frameworks import protocol
from dlbench.node import hostload

POINT = "point.json"
EVENTS = "events.jsonl"
LOG = "trainer.log"
MONITOR = "monitor.jsonl"
MEASUREMENT = "measurement.json"
FILES = (POINT, EVENTS, LOG, MONITOR)  # what measurement.json names
FORMAT = 1  # measurement.json's format


@dataclass
class Facts:
    """What the runner knows of one attempt besides the trainer's events and the monitor's samples."""

    t_launch: float  # monotonic clock: the trainer's start ...
    t_end: float  # ... and its end, as the runner saw them
    wall: float = 0.0  # the wall clock at the start (the attempt's folder is named by it)
    returncode: int | None = None
    ended: str | None = None  # how the runner ended the trainer: timeout, hung, cancelled, preempted
    over_memory: bool = False  # the monitor read the resident memory over the budget (and ended the trainer)
    capped: bool = False  # the hard cap ended it (dlbench.node.memcap.ended_by_cap)
    oom_killed: str | None = None  # why its memory cgroup's OOM killer ended it (SIGKILL: dlbench.node.oomkill)
    pauses: tuple[float, ...] = ()  # seconds of each stop of the job the runner noticed (SIGSTOP)
    unreaped: int | None = None  # the pid of a trainer that outlived SIGKILL
    kill_wait_s: float = 30.0  # how long the runner waited for it
    lock_intact: bool | None = None  # whether the node's lock was held throughout (None: no lock)
    requeue_refused: str | None = None  # why SLURM refused to requeue the preempted job (dlbench.node.slurm_job)
    time_limit_s: float | None = None
    memory_limit_mb: float | None = None
    memory_cap: str | None = None  # the hard cap's kind, where a budget is set
    hang_s: float | None = None
    contended_pct: float = hostload.CONTENDED_PCT
    monitor_cpu_s: float = 0.0
    gpu_nvml_failures: str | None = None
    gpu_readings_stopped: str | None = None
    monitor_died: tuple[float, str] | None = None  # (monotonic time, error): Monitor.died
    gpu_idle: dict = field(default_factory=dict)  # the device's idle memory and power, read before the start
    machine: dict = field(default_factory=dict)  # the machine and dlbench's build (dlbench.record.fields: The machine)
    attempt: dict = field(default_factory=dict)  # the runner's fields of the attempt: lock, environment, dataset
    log_tail: str = ""  # the trainer's last lines of output (trainer.log's; not kept in measurement.json)

    @classmethod
    def of(cls, kept: dict) -> Facts:
        """Facts as measurement.json keeps them (JSON has lists where these have tuples)."""
        known = {f.name for f in fields(cls)}
        facts = cls(**{k: v for k, v in kept.items() if k in known})
        facts.pauses = tuple(facts.pauses)
        facts.monitor_died = tuple(facts.monitor_died) if facts.monitor_died else None
        return facts


@dataclass
class Measurement:
    """A raw measurement read back whole."""

    point: dict
    events: list[dict]
    samples: list[dict]
    facts: Facts | None  # None where an earlier layout's record stands in for them (earlier_record)
    attempt_id: str
    files: dict  # each raw file's digest and size, as measurement.json names them
    log_tail: str = ""  # the trainer's last lines of output
    earlier_record: dict | None = None  # the record an earlier layout kept (dlbench.run.earlier_layout)


class NotWhole(ValueError):
    """A folder whose raw measurement is missing or not the one its measurement.json names; the message says why."""


def file_facts(path: Path) -> dict:
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def write_samples(folder: str | os.PathLike, samples: list[dict]) -> None:
    with open(Path(folder) / MONITOR, "w") as fh:
        fh.writelines(dumps(s) + "\n" for s in samples)


def write(folder: str | os.PathLike, facts: Facts | None, samples: list[dict] | None, attempt_id: str | None = None,
          **kept) -> str:
    """Complete an attempt's raw measurement in `folder` (its point, events and log are there): the monitor's samples
    (None: monitor.jsonl is there already), then measurement.json, naming every file; its files durable first.
    `kept`: what measurement.json holds beside the facts (an earlier layout's record, in place of the facts). The
    measurement's id (`attempt_id`, else a new one)."""
    folder = Path(folder)
    if samples is not None:
        write_samples(folder, samples)
    for name in FILES:
        if not (folder / name).exists():
            (folder / name).write_text("")
        fsync_file(folder / name)
    fsync_dir(folder)
    attempt_id = attempt_id or uuid.uuid4().hex
    if facts is not None:
        kept["facts"] = {k: v for k, v in asdict(facts).items() if k != "log_tail"}
    write_json(folder / MEASUREMENT, {"format": FORMAT, "attempt_id": attempt_id,
                                      "files": {name: file_facts(folder / name) for name in FILES}, **kept})
    return attempt_id


def disagreement(folder: str | os.PathLike, kept: dict) -> str | None:
    """Why a folder's raw files are not the ones its measurement.json names (sizes: a stat each); None where they
    are."""
    for name, facts in kept.get("files", {}).items():
        try:
            size = (Path(folder) / name).stat().st_size
        except FileNotFoundError:
            return f"{name} is missing"
        if size != facts.get("bytes"):
            return f"{name} has {size} bytes, its measurement.json says {facts.get('bytes')}"
    return None


def kept(folder: str | os.PathLike) -> dict:
    """A folder's measurement.json, or NotWhole saying why there is none to read."""
    path = Path(folder) / MEASUREMENT
    try:
        kept = json.loads(path.read_text())
    except FileNotFoundError:
        raise NotWhole(f"{path} is missing") from None
    except (OSError, ValueError) as exc:
        raise NotWhole(f"{path} cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(kept, dict) or "attempt_id" not in kept:
        raise NotWhole(f"{path} is not a measurement")
    return kept


def whole(folder: str | os.PathLike) -> bool:
    """Whether a folder holds a whole raw measurement."""
    try:
        return disagreement(folder, kept(folder)) is None
    except NotWhole:
        return False


def read_samples(path: Path) -> list[dict]:
    return protocol.json_lines(path.read_text()) if path.exists() else []


def log_tail(path: Path, lines: int = 30) -> str:
    """The last lines of the trainer's output."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def read(folder: str | os.PathLike) -> Measurement:
    """The raw measurement in `folder`, whole, or NotWhole saying why not."""
    folder = Path(folder)
    measured = kept(folder)
    problem = disagreement(folder, measured)
    if problem:
        raise NotWhole(f"{folder}: {problem}")
    try:
        point = json.loads((folder / POINT).read_text())
    except (OSError, ValueError) as exc:
        raise NotWhole(f"{folder / POINT} cannot be read ({type(exc).__name__}: {exc})") from None
    try:
        facts = Facts.of(measured["facts"]) if "facts" in measured else None
    except (TypeError, ValueError, AttributeError) as exc:
        raise NotWhole(f"{folder / MEASUREMENT}: its facts cannot be read ({type(exc).__name__}: {exc})") from None
    return Measurement(point, protocol.read(folder / EVENTS), read_samples(folder / MONITOR), facts,
                       measured["attempt_id"], measured.get("files", {}), log_tail(folder / LOG),
                       measured.get("earlier_record"))
