"""A point's records on disk: its result, the attempts kept beside it, and reading a record safely.

    results/runs/<framework>/<dataset>/<point>/metrics.json      the result Snakemake and the aggregation see
                                              /curve.csv, samples.csv, trainer.log, events.jsonl, point.json
                                              /attempts/<when>-<host>-<pid>/   every finished attempt, kept
                                              (metrics.json and its files, hard links where the file system allows)

Snakemake deletes a job's outputs before it runs it again (a changed adapter, --forcerun), so the
attempts folder, which is no output of any rule, is where a measurement survives a rerun that fails.

Standard library only: the runner and the dry-run estimate read records without pandas.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

from dlbench.atomic import write_json

RESULT = "metrics.json"
ATTEMPTS = "attempts"
RUN_FILES = ("point.json", "events.jsonl", "trainer.log", "curve.csv", "samples.csv")
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
    """The status of the point's record in out_dir; None where it has none (or it is not a record)."""
    record = read_or_skip(Path(out_dir) / RESULT)
    return record.get("status") if record else None


def attempt_name(started_wall: float, pid: int | None = None) -> str:
    """A finished attempt's folder name: when it started, on which host, by which process."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(started_wall))
    return f"{stamp}-{socket.gethostname()}-{pid or os.getpid()}"


def keep_attempt(out_dir: str | os.PathLike, record: dict, source_dir: str | os.PathLike, name: str) -> Path:
    """Keep a finished attempt under out_dir/attempts/<name>/: its record and its run files."""
    source_dir = Path(source_dir)
    folder = Path(out_dir) / ATTEMPTS / name
    folder.mkdir(parents=True, exist_ok=True)
    for file in RUN_FILES:
        src = source_dir / file
        if src.exists():
            _link_or_copy(src, folder / file)
    write_json(folder / RESULT, record)
    return folder


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
