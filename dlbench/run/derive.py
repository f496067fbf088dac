"""A point's record made from its raw measurement on disk: read whole (dlbench.record.raw), built
(dlbench.run.build_record, pure), with its tables.

The one way a record is made. The training job makes it as its point ends (dlbench.run.runner), so that a point's
record is there the moment it finishes; the record rule makes it again (dlbench.run.rebuild) where the code that
makes records changed. The record's code digest (dlbench/rules/code_digest.py) starts at that rule's job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dlbench.record import raw
from dlbench.run import build_record, earlier_layout
from dlbench.run.monitor import SAMPLE_FIELDS
from dlbench.study import point_facts

CURVE = "curve.csv"
SAMPLES = "samples.csv"
TABLES = (CURVE, SAMPLES)


@dataclass
class Derived:
    """A record and its tables, made from a raw measurement."""

    record: dict
    tables: list[tuple[str, tuple[str, ...], list[dict]]]  # (file, fields, rows) of each CSV
    raw_files: dict  # the facts (digest, size) of the raw files it was made from, as measurement.json names them
    wall: float  # the wall clock at the attempt's start (its folder under attempts/ is named by it)


def record_of(folder: str | os.PathLike) -> Derived:
    """The record and tables of the raw measurement in `folder` (raw.NotWhole where it is not whole)."""
    measured = raw.read(folder)
    facts = measured.facts or earlier_layout.facts(measured)
    facts.log_tail = measured.log_tail
    point, events, samples = measured.point, measured.events, measured.samples
    record = build_record.build_record(point, point_facts.derive(point), events, samples, facts)
    record["attempt_id"] = measured.attempt_id
    tables = [(CURVE, build_record.CURVE_FIELDS, build_record.curve_rows(events, facts.t_launch)),
              (SAMPLES, ("phase",) + SAMPLE_FIELDS, build_record.sample_rows(samples, events, facts.t_launch))]
    return Derived(record, tables, measured.files, facts.wall)
