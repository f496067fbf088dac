"""Points an earlier layout recorded: given their raw measurement apart from the record, so that none is trained again.

An earlier dlbench made the record inside the training job and kept, in each point's folder, metrics.json (the
record: the train rule's output then), curve.csv, samples.csv (the monitor's samples with their phase, their
time in seconds since the trainer's start, to 0.1 ms), events.jsonl, trainer.log and point.json. That is the raw
measurement (dlbench.record.raw) but for the runner's facts (how the trainer ended, the limits, the machine, the
attempt), which the record holds. `adopt` writes what is missing: monitor.jsonl from samples.csv, and
measurement.json, which keeps the earlier record whole in place of the facts; `facts` reads the facts back from
that record each time the record is made again (dlbench.run.derive), so that such a point's record is rebuilt
like any other and nothing it measured is lost (the earlier record also stays in its attempts/).

Snakemake compares a job's params (the code digest among them) only for outputs it has metadata for, and
measurement.json, new, has none: an adopted point is up to date as long as measurement.json is newer than its
inputs, which it is, being written now. So the main Snakemake adopts every point of the study before it plans
anything (dry runs too: it only adds files, and a dry run would otherwise plan every point again). The adopted
measurements are noted (PENDING) until the next run that starts jobs gives each of their train jobs Snakemake's
metadata, as if it had just run (dlbench.rules.adopted): from then on a change to what the job runs reruns an
adopted point like any other.
"""

from __future__ import annotations

import csv
import json
import os
import re
from base64 import urlsafe_b64encode
from pathlib import Path

from dlbench.atomic import write_text
from dlbench.frameworks import protocol
from dlbench.record import raw, store
from dlbench.run import build_record
from dlbench.study import point_facts

SAMPLES = "samples.csv"
# The adopted measurements whose train jobs have no Snakemake metadata yet (dlbench.rules.adopted gives it).
PENDING = os.path.join("results", "runs", ".adopted-without-metadata.json")
# Where Snakemake's file persistence keeps each output's record (its name: the path, URL-safe base64).
METADATA = os.path.join(".snakemake", "metadata")
# A field every record has had since each adapter trains as its framework's users get it (no opt-in speed-up in a
# default point; before, PyTorch's CPU points ran channels-last): a record without it is no measurement of the
# point as it is now, so its point is not adopted but trained again.
SINCE_DEFAULTS = "memory_format_in_effect"
# What store.publish adds to a record, never build_record: not a fact of the attempt.
BOOKKEEPING = ("attempt_id", "files")
_UNREAPED = re.compile(r"; the trainer \(pid (\d+)\) did not exit within ([0-9.]+) s of SIGKILL.*$", re.S)
_REFUSED = re.compile(r"refused to requeue it \(scontrol: (.*)\); the point ends as failed", re.S)
_DIED = re.compile(r"^(-?[0-9.]+) s after launch \((.*)\); no samples after it", re.S)


def t_launch(record: dict, events: list[dict]) -> float:
    """The trainer's start on the clock of its events: its first event less the record's start-up time."""
    return events[0]["t"] - (record.get("startup_time_s") or 0.0) if events else 0.0


def samples_of(path: Path, launched: float) -> list[dict]:
    """The monitor's samples from an earlier samples.csv: on the events' clock again, without their phase (which
    the record works out), an empty cell a reading the sample did not have."""
    samples = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            sample = {k: _number(v) for k, v in row.items() if k != "phase" and v not in ("", None)}
            if "t" in sample:
                sample["t"] = sample["t"] + launched
            samples.append(sample)
    return samples


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def adopt(out_dir: str | os.PathLike) -> bool:
    """Give a point folder of an earlier layout its raw measurement (see the module's doc); False where there is
    nothing to adopt: a measurement already, no record, a record that is not whole, or one made before the adapters
    took their frameworks' defaults (SINCE_DEFAULTS): that point trains again."""
    out = Path(out_dir)
    if (out / raw.MEASUREMENT).exists() or not (out / store.RESULT).exists():
        return False
    try:
        record = store.read(out / store.RESULT)
    except (OSError, store.BadRecord):
        return False
    if store.disagreement(out / store.RESULT, record) or not (out / raw.POINT).exists():
        return False
    if SINCE_DEFAULTS not in record:  # its adapter's switches unknown (PyTorch's ran channels-last): measured again
        return False
    launched = t_launch(record, protocol.read(out / raw.EVENTS))
    samples = samples_of(out / SAMPLES, launched) if (out / SAMPLES).exists() else []
    raw.write(out, None, samples, attempt_id=record.get("attempt_id"), earlier_record=record)
    return True


def adopt_all(folders, pending: str | os.PathLike = PENDING) -> list[str]:
    """adopt() every point folder that has a record and no measurement; the folders adopted, their measurements
    added to those pending Snakemake's metadata."""
    adopted = []
    for folder in folders:
        if not os.path.exists(os.path.join(folder, raw.MEASUREMENT)) and adopt(folder):
            adopted.append(str(folder))
    if adopted:
        write_text(pending, json.dumps(sorted({*pending_metadata(pending),
                                               *(os.path.join(f, raw.MEASUREMENT) for f in adopted)})))
    return adopted


def forget_preparations(files, pending: str | os.PathLike = PENDING, metadata: str | os.PathLike = METADATA
                        ) -> list[str]:
    """The prepared inputs of the adopted points (Caffe's HDF5 files, written by code that has not changed since):
    their Snakemake records removed, so that the code digest's new form alone does not prepare them again and, with
    them, train every point that reads them; each noted pending like an adopted measurement, to be given its
    metadata as now at the next run (dlbench.rules.adopted). The files whose record was removed."""
    forgotten = []
    for f in files:
        record = Path(metadata) / urlsafe_b64encode(str(f).encode()).decode()  # Snakemake's file persistence
        if os.path.exists(f) and record.is_file():
            record.unlink()
            forgotten.append(str(f))
    if forgotten:
        write_text(pending, json.dumps(sorted({*pending_metadata(pending), *forgotten})))
    return forgotten


def pending_metadata(pending: str | os.PathLike = PENDING) -> list[str]:
    """The adopted measurements whose train jobs have no Snakemake metadata yet."""
    try:
        return list(json.loads(Path(pending).read_text()))
    except (OSError, ValueError, TypeError):
        return []


def facts(measured: raw.Measurement) -> raw.Facts:
    """The runner's facts of an adopted point, read back from its earlier record: those its fields say (how it
    ended, the limits, the monitor's own figures), and every field that build_record does not make (the machine,
    the attempt, a republished record's mark) kept as it was."""
    record, events = measured.earlier_record, measured.events
    status, reason = record.get("status"), record.get("reason") or ""
    launched = t_launch(record, events)
    unreaped = _UNREAPED.search(reason)
    refused = _REFUSED.search(reason) if status == "preempted" else None
    died = _DIED.match(record.get("monitor_died") or "")
    paused = record.get("paused_s") or 0.0
    facts = raw.Facts(
        t_launch=launched, t_end=launched + (record.get("wall_time_s") or 0.0), returncode=record.get("returncode"),
        ended=status if status in ("timeout", "hung", "cancelled", "preempted") else None,
        over_memory=record.get("oom_by") == "monitor", capped=record.get("oom_by") == "cap",
        oom_killed=record.get("reason") if record.get("oom_by") == "cgroup" else None,
        pauses=(paused,) if paused else (), unreaped=int(unreaped.group(1)) if unreaped else None,
        kill_wait_s=float(unreaped.group(2)) if unreaped else raw.Facts.kill_wait_s,
        lock_intact=False if status == "lock_lost" else None, requeue_refused=refused.group(1) if refused else None,
        time_limit_s=record.get("time_limit_s"), memory_limit_mb=record.get("memory_limit_mb"),
        memory_cap=record.get("memory_cap"), hang_s=record.get("hang_limit_s"),
        contended_pct=record.get("contended_pct", raw.Facts.contended_pct),
        monitor_cpu_s=record.get("monitor_cpu_s") or 0.0, gpu_nvml_failures=record.get("gpu_nvml_failures"),
        gpu_readings_stopped=record.get("gpu_readings_stopped"),
        monitor_died=(launched + float(died.group(1)), died.group(2)) if died else None,
        gpu_idle={k: record[k] for k in ("gpu_mem_idle_mb", "gpu_power_idle_w") if k in record},
        log_tail=measured.log_tail)
    point = measured.point
    made = build_record.build_record(point, point_facts.derive(point), events, measured.samples, facts)
    facts.attempt = {k: v for k, v in record.items() if k not in made and k not in BOOKKEEPING}
    return facts


def said(adopted: list[str]) -> str:
    """One line on the points adopted."""
    return (f"dlbench: {len(adopted)} points recorded by an earlier dlbench are kept, not trained again: their raw "
            "measurement was put apart from their record (measurement.json, monitor.jsonl), and the record rule "
            f"makes their records again from it ({', '.join(adopted[:2])}{', ...' if len(adopted) > 2 else ''})")
