"""The record rule: every point's record made again from its raw measurement where the code that makes records, or
the measurement, changed since; in one job for all points, training nothing.

A training job makes its point's record as the point ends (dlbench.run.runner), so records are there while a
study runs. This job keeps them the current code's: results/records.json, its output, says for each point folder
from which measurement (measurement.json's size and time) its record was made, and how the record's own file
stood then, and by which code (its digest, dlbench/rules/code_digest.py: record_digest). A folder whose
measurement, record or code is not the one noted is made again (dlbench.run.derive); a record that comes out the
same is not written again. The aggregation reads the records this file lists.

A measurement that is not whole (its files disagree with its measurement.json) has no record made: one line says
so and how to measure the point again, and the study goes on with what stands (the aggregation tables a record
that does not agree with its files as `damaged`).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from dlbench.atomic import write_text
from dlbench.record import raw, store
from dlbench.run import derive

FORMAT = 1


@dataclass
class Rebuilt:
    """What one run of the record rule did."""

    points: int = 0
    made: int = 0  # records made again from their measurement
    written: int = 0  # of those, records that came out other than they were (written)
    not_whole: int = 0  # measurements that are not whole: no record made


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def read_index(path: str | os.PathLike) -> dict:
    """records.json as it is ({} where there is none or it cannot be read)."""
    try:
        index = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return index if isinstance(index, dict) and index.get("format") == FORMAT else {}


def records_in(path: str | os.PathLike) -> list[str]:
    """The records (their metrics.json) that records.json lists, in the study's order."""
    return [os.path.join(folder, store.RESULT) for folder in read_index(path).get("records", {})]


def rebuild(folders, index_path: str | os.PathLike, code: str, say=None, workers: int | None = None) -> Rebuilt:
    """Make the record of every folder again where its measurement, its record or `code` (the record digest) is not
    the one records.json notes, then write records.json (last: an interrupted run is done again). The records are
    made on every core this job may use (`workers`), written without a sync each and made durable together, with
    one sync, before records.json notes them."""
    say = say or (lambda line: print(line, file=sys.stderr))
    before = read_index(index_path)
    noted = before.get("records", {}) if before.get("code") == code else {}
    done, counts, stale = {}, Rebuilt(), []
    for folder in map(str, folders):
        counts.points += 1
        measurement = _stat(os.path.join(folder, raw.MEASUREMENT))
        record = _stat(os.path.join(folder, store.RESULT))
        done[folder] = noted.get(folder)
        if noted.get(folder) != [measurement, record] or record is None:
            stale.append((folder, measurement))
    workers = workers or len(os.sched_getaffinity(0))
    if workers > 1 and len(stale) >= PARALLEL_FROM:
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            made = list(pool.map(_make, [folder for folder, _ in stale], chunksize=CHUNK))
    else:
        made = [_make(folder) for folder, _ in stale]
    for (folder, measurement), (written, problem) in zip(stale, made):
        if problem is not None:
            counts.not_whole += 1
            say(f"dlbench: {folder}: no record made: its raw measurement is not whole ({problem}); measure the point "
                f"again with `snakemake --forcerun {os.path.join(folder, raw.MEASUREMENT)}`")
            done[folder] = None  # listed (the aggregation tables what stands there), looked at again next time
            continue
        counts.made += 1
        counts.written += written
        done[folder] = [measurement, _stat(os.path.join(folder, store.RESULT))]
    if counts.written:
        os.sync()  # every record written, durable before records.json says so
    write_text(index_path, json.dumps({"format": FORMAT, "code": code, "records": done}))  # the study's order
    return counts


PARALLEL_FROM = 64  # fewer records are made in this process (a pool costs more than it saves)
CHUNK = 32  # records a worker makes per task


def _make(folder: str) -> tuple[bool, str | None]:
    """Make one folder's record again: (whether it was written, why no record could be made)."""
    try:
        made = derive.record_of(folder)
    except raw.NotWhole as exc:
        return False, str(exc)
    return store.rewrite(folder, made.record, made.tables, made.raw_files, durable=False), None


def main(measurements, index_path: str, code: str) -> Rebuilt:
    """The rule's job: the point folders of the measurements given (the rule's input)."""
    counts = rebuild([os.path.dirname(m) for m in measurements], index_path, code)
    print(f"dlbench: records: {counts.points} points, {counts.made} made again from their raw measurement "
          f"({counts.written} came out changed), {counts.not_whole} measurements not whole", file=sys.stderr)
    return counts
