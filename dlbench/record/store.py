"""A point's records on disk: its result, the attempts kept beside it, and reading a record safely.

    results/runs/<framework>/<dataset>/<point>/metrics.json      the record the aggregation reads
                                              /curve.csv, samples.csv   its tables
                                              /point.json, events.jsonl, trainer.log, monitor.jsonl,
                                               measurement.json          the raw measurement it was made from
                                                                         (dlbench.record.raw; measurement.json
                                                                         is the train rule's output)
                                              /attempts/<when>-<host>-<pid>/   every finished attempt, kept
                                              (its raw measurement, record and tables, hard links where the file
                                              system allows)

Snakemake deletes a job's outputs before it runs it again (a changed adapter, --forcerun), so the
attempts folder, which is no output of any rule, is where a measurement survives a rerun that fails.

A record is whole or absent: its files are fsynced, folders too, and metrics.json, written last, names
its attempt (`attempt_id`, its raw measurement's) and each file's digest, size and rows (`files`). A record whose
files say otherwise (a power loss between two renames, two runners publishing into one folder) is not a result:
`disagreement` says why, and the aggregation sets it aside so that the point runs again.

Standard library only: the runner and the dry-run estimate read records without pandas.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path

from dlbench.atomic import dumps, fsync_dir, fsync_file, write_json
from dlbench.frameworks import protocol
from dlbench.record import raw

RESULT = "metrics.json"
ATTEMPTS = "attempts"
TABLES = ("curve.csv", "samples.csv")  # the record's tables
# An attempt's files beside its record: the raw measurement (measurement.json, which names the others, last) and
# the record's tables.
RUN_FILES = (*raw.FILES, *TABLES, raw.MEASUREMENT)
# What every record holds; a file without them is not a record (cut short, hand-edited, another tool's).
REQUIRED = ("id", "framework", "dataset", "status")


class BadRecord(ValueError):
    """A metrics.json that cannot be read as a record; the message names the problem."""


def read(path: str | os.PathLike) -> dict:
    """The record in `path`, or BadRecord saying why it is not one."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecord(f"not UTF-8 text (byte {exc.start})") from exc
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRecord(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    if not isinstance(record, dict):
        raise BadRecord(f"a JSON {type(record).__name__}, not an object")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise BadRecord(f"lacks {', '.join(missing)}")
    return record


def read_or_skip(path: str | os.PathLike) -> dict | None:
    """The record in `path`; None if there is none, with one line on stderr if the file is not a record."""
    try:
        return read(path)
    except FileNotFoundError:
        return None
    except (OSError, BadRecord) as exc:
        print(f"dlbench: skipping {path}: {exc}; the point counts as not done (delete the file to run it again)",
              file=sys.stderr)
        return None


def status_in(out_dir: str | os.PathLike) -> str | None:
    """The status of the point's record in out_dir, as the aggregation would table it: None where it has none,
    `damaged` where it is not a record or its files disagree with it (so that `select.status` can name it)."""
    from dlbench.record.statuses import DAMAGED

    path = Path(out_dir) / RESULT
    try:
        record = read(path)
    except FileNotFoundError:
        return None
    except (OSError, BadRecord):
        return DAMAGED
    return DAMAGED if disagreement(path, record) else record.get("status")


def attempt_name(started_wall: float, pid: int | None = None) -> str:
    """A finished attempt's folder name: when it started, on which host, by which process."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(started_wall))
    return f"{stamp}-{socket.gethostname()}-{pid or os.getpid()}"


def keep_attempt(out_dir: str | os.PathLike, record: dict, source_dir: str | os.PathLike, name: str) -> Path:
    """Keep a finished attempt under out_dir/attempts/<name>/: its record and its run files (RUN_FILES)."""
    source_dir = Path(source_dir)
    folder = Path(out_dir) / ATTEMPTS / name
    folder.mkdir(parents=True, exist_ok=True)
    for file in RUN_FILES:
        src = source_dir / file
        if src.exists():
            _link_or_copy(src, folder / file)
    write_json(folder / RESULT, record)
    return folder


def file_facts(path: Path) -> dict:
    """What metrics.json says of one of its files: sha256, bytes, and rows (a CSV's without its header)."""
    return data_facts(path.read_bytes(), path.suffix == ".csv")


def data_facts(data: bytes, csv_file: bool) -> dict:
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            "rows": max(0, lines - 1) if csv_file else lines}


def table_text(fields, rows) -> str:
    """A table as its CSV file holds it: the fields' columns only, a missing or None value empty."""
    fields = list(fields)
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(fields)
    writer.writerows([[row.get(f) for f in fields] for row in rows])
    return out.getvalue()


def write_table(path: Path, fields, rows) -> None:
    with open(path, "w", newline="") as fh:
        fh.write(table_text(fields, rows))


def publish(out_dir: str | os.PathLike, work: str | os.PathLike, record: dict, tables, name: str, *,
            result: bool = True, raw_files: dict | None = None) -> None:
    """Write the record's tables into `work` (which holds its raw measurement), tie every file to the record, keep
    the attempt, and (result) make it the point's result: the files moved into out_dir, measurement.json last of
    them, then metrics.json.

    tables: (file name, fields, rows) of each CSV; raw_files: the raw files' facts as measurement.json names them
    (the record takes them rather than reading the files again). Raises OSError (ENOSPC, say) with out_dir's
    earlier result removed or intact, never half replaced: an earlier metrics.json goes first, so that no moment
    has it beside another run's files.
    """
    out_dir, work = Path(out_dir), Path(work)
    for file, fields, rows in tables:
        write_table(work / file, fields, rows)
    present = [f for f in RUN_FILES if (work / f).exists()]
    for file in present:
        fsync_file(work / file)
    fsync_dir(work)
    record.setdefault("attempt_id", uuid.uuid4().hex)
    record["files"] = _files(work, [f for f in present if f != raw.MEASUREMENT], raw_files)
    out_dir.mkdir(parents=True, exist_ok=True)
    keep_attempt(out_dir, record, work, name)  # kept first: an attempt is never lost between here and the result
    if not result:
        return
    (out_dir / RESULT).unlink(missing_ok=True)
    for file in present:
        os.replace(work / file, out_dir / file)
    fsync_dir(out_dir)
    write_json(out_dir / RESULT, record)


def _files(folder: Path, names, raw_files: dict | None) -> dict:
    """What a record says of its files: the raw files' facts as their measurement names them, the others read."""
    return {f: (raw_files or {}).get(f) or file_facts(folder / f) for f in names}


def rewrite(out_dir: str | os.PathLike, record: dict, tables, raw_files: dict | None = None, *,
            durable: bool = True) -> bool:
    """Make `record` and its tables the point's result in out_dir, beside its raw measurement (the record rule:
    the record made again from the measurement already there); False where the record and tables there are
    these already (nothing is written). Never half replaced: the tables are written beside, then metrics.json
    goes, the tables take their place, and metrics.json comes last; an attempt kept keeps its own.

    durable=False leaves the files to the caller to make durable (the record rule: one sync for thousands of
    records, before it notes them; a record cut by a power loss before then is made again at its next run)."""
    out_dir = Path(out_dir)
    texts = {file: table_text(fields, rows).encode() for file, fields, rows in tables}
    names = [f for f in (*raw.FILES, *TABLES) if f in texts or (out_dir / f).exists()]
    record = {**record, "files": {f: data_facts(texts[f], True) if f in texts else
                                  (raw_files or {}).get(f) or file_facts(out_dir / f) for f in names}}
    text = (dumps(record, indent=2, sort_keys=True, default=str) + "\n").encode()
    if _holds(out_dir / RESULT, text) and all(_holds(out_dir / f, data) for f, data in texts.items()):
        return False
    staged = {file: out_dir / f".rebuilt-{file}" for file in (*texts, RESULT)}
    try:
        for file, data in texts.items():
            staged[file].write_bytes(data)
            if durable:
                fsync_file(staged[file])
        (out_dir / RESULT).unlink(missing_ok=True)
        for file in texts:
            os.replace(staged.pop(file), out_dir / file)
        if durable:
            fsync_dir(out_dir)
            write_json(out_dir / RESULT, record)
        else:
            staged[RESULT].write_bytes(text)
            os.replace(staged.pop(RESULT), out_dir / RESULT)
        return True
    finally:
        for path in staged.values():  # what was not moved into place
            path.unlink(missing_ok=True)


def _holds(path: Path, data: bytes) -> bool:
    """Whether a file holds exactly `data` (its size first: most that differ, differ there)."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def disagreement(path: str | os.PathLike, record: dict, names=None) -> str | None:
    """Why a record's files are not the ones it names (None: they are, or it names none, as older records).

    Checks sizes only (a stat each); the digests are checked where a file is read whole (dlbench.aggregate.collect).
    """
    folder = Path(path).parent
    for file, facts in (record.get("files") or {}).items():
        if names is not None and file not in names:
            continue
        try:
            size = (folder / file).stat().st_size
        except FileNotFoundError:
            return f"{file} is missing"
        if size != facts.get("bytes"):
            return f"{file} has {size} bytes, the record says {facts.get('bytes')} (another attempt's file?)"
    return None


def set_aside(out_dir: str | os.PathLike, folder: str | os.PathLike, why: str = "unpublished") -> bool:
    """Move a folder a dead runner left (its trainer finished; the record was never published) under
    out_dir/attempts/, so that what it measured is not deleted; False where it holds no finished training."""
    folder = Path(folder)
    if protocol.last_status(protocol.read(folder / raw.EVENTS)) is None:
        return False
    target = Path(out_dir) / ATTEMPTS / f"{folder.name.lstrip('.')}-{why}"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(folder, target)
    fsync_dir(target.parent)
    return True


def finished_in_job(out_dir: str | os.PathLike, job: str | None, retried=()) -> Path | None:
    """An attempt of this point that this same SLURM job finished (a result, its files intact), newest first:
    what a requeued job group publishes again instead of measuring the point a second time."""
    if job is None:
        return None
    for path in reversed(attempts(out_dir)):
        try:
            record = read(path)
        except (OSError, BadRecord):
            continue
        if (str(record.get("slurm_job_id")) == str(job) and record["status"] not in (*retried, "cancelled")
                and record.get("files") and disagreement(path, record) is None):
            return path
    return None


def republish(attempt: str | os.PathLike, out_dir: str | os.PathLike, **extra) -> dict:
    """Make a kept attempt the point's result again (its files, its raw measurement's facts with `extra` among the
    attempt's, then its record with `extra`, last): a record made again from the measurement says `extra` too."""
    attempt, out_dir = Path(attempt), Path(out_dir)
    record = {**read(attempt), **extra}
    (out_dir / RESULT).unlink(missing_ok=True)
    for file in record.get("files", {}):
        _link_or_copy(attempt.parent / file, out_dir / file)
    measured = attempt.parent / raw.MEASUREMENT
    if measured.exists():
        kept = json.loads(measured.read_text())
        if "facts" in kept:
            kept["facts"]["attempt"] = {**kept["facts"].get("attempt", {}), **extra}
        else:  # an earlier layout's record stands in for the facts (dlbench.run.earlier_layout)
            kept["earlier_record"] = {**kept.get("earlier_record", {}), **extra}
        write_json(out_dir / raw.MEASUREMENT, kept)
    fsync_dir(out_dir)
    write_json(out_dir / RESULT, record)
    return record


def cancelled_last(out_dir: str | os.PathLike) -> dict | None:
    """The record of the point's newest attempt where it was cancelled (SIGTERM to the job) and no attempt has
    begun since; None otherwise (runner.cancel_stands says whether somebody meant it)."""
    kept = attempts(out_dir)
    if not kept:
        return None
    try:
        record = read(kept[-1])
    except (OSError, BadRecord):
        return None
    if record.get("status") != "cancelled":
        return None
    kept_at = kept[-1].stat().st_mtime
    marks = (Path(out_dir) / ATTEMPTS).glob(f"{STARTED}*.json")
    return None if any(mark.stat().st_mtime > kept_at for mark in marks) else record


def last_status(out_dir: str | os.PathLike) -> str | None:
    """The status of the point's newest kept attempt; None where none is kept or it cannot be read."""
    kept = attempts(out_dir)
    try:
        return read(kept[-1]).get("status") if kept else None
    except (OSError, BadRecord):
        return None


STARTED = ".started-"  # attempts/.started-<host>-<pid>.json: an attempt under way, removed when it is kept


def mark_started(out_dir: str | os.PathLike, **facts) -> Path:
    """Note that an attempt of this point is under way (host, pid, SLURM job, and `facts`): an attempt that
    dies with its node leaves this mark and nothing else."""
    folder = Path(out_dir) / ATTEMPTS
    folder.mkdir(parents=True, exist_ok=True)
    mark = folder / f"{STARTED}{socket.gethostname()}-{os.getpid()}.json"
    write_json(mark, {"host": socket.gethostname(), "pid": os.getpid(), "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                      "started": time.time(), **facts})
    return mark


def lost_attempts(out_dir: str | os.PathLike, alive) -> list[dict]:
    """The marks of attempts that ended without a word (their job is gone); alive(mark) -> bool | None says
    whether a mark's job still lives (None: cannot tell, not counted as lost)."""
    folder = Path(out_dir) / ATTEMPTS
    lost = []
    for mark in sorted(folder.glob(f"{STARTED}*.json")) if folder.is_dir() else []:
        try:
            facts = json.loads(mark.read_text())
        except (OSError, ValueError):
            continue
        if alive(facts) is False:
            lost.append(facts)
    return lost


def attempts(out_dir: str | os.PathLike) -> list[Path]:
    """The kept attempts of a point, oldest first."""
    root = Path(out_dir) / ATTEMPTS
    return sorted(p for p in root.glob(f"*/{RESULT}")) if root.is_dir() else []


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link costs nothing and survives Snakemake removing the original; a copy where links cannot be made."""
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
