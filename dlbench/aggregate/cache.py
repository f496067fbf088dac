"""The aggregation's cache of parsed run CSVs, so that adding 10 points to 20,000 finished ones parses 10.

    <cache>/index.json          record key -> where each of its CSVs' rows are: [shard, first row, rows] or null
    <cache>/<shard>.arrow       Arrow IPC files; one shard holds the tables of one aggregation that share a schema

A record's key digests its metrics.json (its content) and the size and modification time of its CSVs, so a
rerun of the point (a new record) or an edited CSV is parsed again. A shard keeps each table with the schema
its CSV was read with, and a record's rows come back as a slice of one shard (records that follow each other
there as one slice): the tables stacked from the cache are those a full reading gives, column types included
(dlbench.aggregate.collect promotes them the same way).
Shards no live record uses are dropped once they hold more dead rows than live ones. The cache is only ever
a copy: a missing, unreadable or foreign one is rebuilt from the run folders.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.ipc as ipc

from dlbench.atomic import atomic_path, write_json

VERSION = 1
INDEX = "index.json"
MISSING = object()  # not in the cache (None: in it, as a CSV with no rows)


@dataclass(frozen=True)
class Rows:
    """A record's rows of one CSV in the cache: `num_rows` rows of shard `shard` from row `start`."""

    shard: str
    start: int
    num_rows: int


def record_key(metrics: str | os.PathLike, csv_names: tuple[str, ...]) -> str:
    """A digest of the record's content and of its CSVs' size and modification time (os, not pathlib: this
    runs once per record of the study)."""
    with open(metrics, "rb") as fh:
        h = hashlib.blake2b(fh.read(), digest_size=16)
    folder = os.path.dirname(metrics)
    for name in csv_names:
        try:
            st = os.stat(os.path.join(folder, name))
            h.update(f"{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        except FileNotFoundError:
            h.update(f"{name}:none;".encode())
    return h.hexdigest()


class RunCache:
    def __init__(self, folder: str | os.PathLike):
        self.folder = os.fspath(folder)
        self.entries: dict[str, dict[str, list | None]] = {}
        self.shards: dict[str, pa.Table] = {}
        self.new: dict[str, list[tuple[str, str, pa.Table]]] = {}  # schema digest -> (key, name, table)
        self.used: set[str] = set()
        self.changed = False  # whether the index differs from the one read
        try:
            with open(os.path.join(self.folder, INDEX)) as fh:
                index = json.load(fh)
            if index.get("version") == VERSION:
                self.entries = index["entries"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.entries = {}
        self.loaded = len(self.entries)

    def get(self, key: str, name: str):
        """Where a record's CSV rows are in the cache (Rows), None for a CSV without rows, or MISSING."""
        where = self.entries.get(key, {})
        if name not in where:
            return MISSING
        if where[name] is None:
            self.used.add(key)
            return None
        shard, start, rows = where[name]
        try:
            self._shard(shard)
        except (OSError, pa.ArrowInvalid):
            return MISSING
        self.used.add(key)
        return Rows(shard, start, rows)

    def tables(self, pieces: list) -> list[pa.Table]:
        """The tables of `pieces` (parsed tables and Rows) in order, the Rows of one shard that follow each other
        there as one slice (a study read in its order: a few slices, not one per record)."""
        out: list[pa.Table] = []
        run: Rows | None = None
        for piece in [*pieces, None]:
            if isinstance(piece, Rows) and run and piece.shard == run.shard and piece.start == run.start + run.num_rows:
                run = Rows(run.shard, run.start, run.num_rows + piece.num_rows)
                continue
            if run:
                out.append(self._shard(run.shard).slice(run.start, run.num_rows))
                run = None
            if isinstance(piece, Rows):
                run = piece
            elif piece is not None:
                out.append(piece)
        return out

    def put(self, key: str, name: str, table: pa.Table | None) -> None:
        self.used.add(key)
        self.changed = True
        if table is None:
            self.entries.setdefault(key, {})[name] = None
            return
        schema = hashlib.blake2b(table.schema.serialize().to_pybytes(), digest_size=8).hexdigest()
        self.new.setdefault(schema, []).append((key, name, table))

    def save(self) -> None:
        """Write the new tables as shards (one per schema) and the index; drop what no record uses any more."""
        os.makedirs(self.folder, exist_ok=True)
        self._write_new()
        live = {k: v for k, v in self.entries.items() if k in self.used}
        live_rows = sum(w[2] for v in live.values() for w in v.values() if w)
        all_rows = sum(w[2] for v in self.entries.values() for w in v.values() if w)
        if all_rows > 2 * live_rows or len(self.entries) > 2 * len(live) + 100:
            self._compact(live)
        if self.changed or len(self.entries) != self.loaded:
            write_json(os.path.join(self.folder, INDEX), {"version": VERSION, "entries": self.entries})
        referenced = {w[0] for v in self.entries.values() for w in v.values() if w}
        for name in os.listdir(self.folder):
            if name.endswith(".arrow") and name[:-len(".arrow")] not in referenced:
                os.unlink(os.path.join(self.folder, name))

    def _write_new(self) -> None:
        stamp = hashlib.blake2b(os.urandom(16), digest_size=4).hexdigest()
        for schema, items in self.new.items():
            shard = f"{schema}-{stamp}"
            # one contiguous table (a record's rows are a slice of it: a table of 20,000 chunks slices slowly)
            whole = pa.concat_tables([table for _, _, table in items]).combine_chunks()
            with atomic_path(os.path.join(self.folder, f"{shard}.arrow"), suffix=".arrow") as tmp:
                with ipc.new_file(tmp, whole.schema) as writer:
                    writer.write_table(whole, max_chunksize=1 << 30)
            start = 0
            for key, name, table in items:
                self.entries.setdefault(key, {})[name] = [shard, start, table.num_rows]
                start += table.num_rows
        self.new = {}

    def _compact(self, live: dict) -> None:
        """Rewrite the live records' tables into fresh shards, one per schema."""
        tables = []
        for key, where in live.items():
            for name, spot in where.items():
                rows = self.get(key, name) if spot else MISSING
                if isinstance(rows, Rows):  # (an unreadable shard: parsed again next time)
                    tables.append((key, name, self._shard(rows.shard).slice(rows.start, rows.num_rows)))
        self.entries = {k: {n: None for n, w in v.items() if w is None} for k, v in live.items()}
        self.shards = {}
        self.changed = True
        for key, name, table in tables:
            self.put(key, name, table)
        self._write_new()

    def _shard(self, shard: str) -> pa.Table:
        if shard not in self.shards:
            path = os.path.join(self.folder, f"{shard}.arrow")
            self.shards[shard] = ipc.open_file(pa.memory_map(path)).read_all()
        return self.shards[shard]
