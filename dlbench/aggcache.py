"""The aggregation's cache of parsed run CSVs, so that adding 10 points to 20,000 finished ones parses 10.

    <cache>/index.json          record key -> where each of its CSVs' rows are: [shard, first row, rows] or null
    <cache>/<shard>.arrow       Arrow IPC files; one shard holds the tables of one aggregation that share a schema

A record's key digests its metrics.json (its content) and the size and modification time of its CSVs, so a
rerun of the point (a new record) or an edited CSV is parsed again. A shard keeps each table with the schema
its CSV was read with, and a record's rows come back as a slice of one shard: the tables stacked from the
cache are those a full reading gives, column types included (dlbench.results promotes them the same way).
Shards no live record uses are dropped once they hold more dead rows than live ones. The cache is only ever
a copy: a missing, unreadable or foreign one is rebuilt from the run folders.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from dlbench.atomic import atomic_path, write_json

VERSION = 1
INDEX = "index.json"
MISSING = object()  # not in the cache (None: in it, as a CSV with no rows)


def record_key(metrics: Path, csv_names: tuple[str, ...]) -> str:
    """A digest of the record's content and of its CSVs' size and modification time."""
    h = hashlib.blake2b(metrics.read_bytes(), digest_size=16)
    for name in csv_names:
        try:
            st = (metrics.parent / name).stat()
            h.update(f"{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        except FileNotFoundError:
            h.update(f"{name}:none;".encode())
    return h.hexdigest()


class RunCache:
    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.entries: dict[str, dict[str, list | None]] = {}
        self.shards: dict[str, pa.Table] = {}
        self.new: dict[str, list[tuple[str, str, pa.Table]]] = {}  # schema digest -> (key, name, table)
        self.used: set[str] = set()
        try:
            index = json.loads((self.folder / INDEX).read_text())
            if index.get("version") == VERSION:
                self.entries = index["entries"]
        except (OSError, ValueError, KeyError, TypeError):
            self.entries = {}

    def get(self, key: str, name: str):
        """The cached table of a record's CSV, None for a CSV without rows, or MISSING."""
        where = self.entries.get(key, {})
        if name not in where:
            return MISSING
        self.used.add(key)
        if where[name] is None:
            return None
        shard, start, rows = where[name]
        try:
            table = self._shard(shard)
        except (OSError, pa.ArrowInvalid):
            return MISSING
        return table.slice(start, rows)

    def put(self, key: str, name: str, table: pa.Table | None) -> None:
        self.used.add(key)
        if table is None:
            self.entries.setdefault(key, {})[name] = None
            return
        schema = hashlib.blake2b(table.schema.serialize().to_pybytes(), digest_size=8).hexdigest()
        self.new.setdefault(schema, []).append((key, name, table))

    def save(self) -> None:
        """Write the new tables as shards (one per schema) and the index; drop what no record uses any more."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._write_new()
        live = {k: v for k, v in self.entries.items() if k in self.used}
        live_rows = sum(w[2] for v in live.values() for w in v.values() if w)
        all_rows = sum(w[2] for v in self.entries.values() for w in v.values() if w)
        if all_rows > 2 * live_rows or len(self.entries) > 2 * len(live) + 100:
            self._compact(live)
        write_json(self.folder / INDEX, {"version": VERSION, "entries": self.entries})
        referenced = {w[0] for v in self.entries.values() for w in v.values() if w}
        for path in self.folder.glob("*.arrow"):
            if path.stem not in referenced:
                path.unlink()

    def _write_new(self) -> None:
        stamp = hashlib.blake2b(os.urandom(16), digest_size=4).hexdigest()
        for schema, items in self.new.items():
            shard = f"{schema}-{stamp}"
            # one contiguous table (a record's rows are a slice of it: a table of 20,000 chunks slices slowly)
            whole = pa.concat_tables([table for _, _, table in items]).combine_chunks()
            with atomic_path(self.folder / f"{shard}.arrow", suffix=".arrow") as tmp:
                with ipc.new_file(tmp, whole.schema) as writer:
                    writer.write_table(whole, max_chunksize=1 << 30)
            start = 0
            for key, name, table in items:
                self.entries.setdefault(key, {})[name] = [shard, start, table.num_rows]
                start += table.num_rows
        self.new = {}

    def _compact(self, live: dict) -> None:
        """Rewrite the live records' tables into fresh shards, one per schema."""
        tables = [(key, name, self.get(key, name)) for key, where in live.items() for name, spot in where.items()
                  if spot]
        tables = [t for t in tables if t[2] is not MISSING]  # an unreadable shard: parsed again next time
        self.entries = {k: {n: None for n, w in v.items() if w is None} for k, v in live.items()}
        self.shards = {}
        for key, name, table in tables:
            self.put(key, name, table)
        self._write_new()

    def _shard(self, shard: str) -> pa.Table:
        if shard not in self.shards:
            self.shards[shard] = ipc.open_file(pa.memory_map(str(self.folder / f"{shard}.arrow"))).read_all()
        return self.shards[shard]
