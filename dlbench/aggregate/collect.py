"""Run records into tidy Parquet: runs (one row per point), curves (per step), samples (per reading)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from dlbench.aggregate.cache import MISSING, RunCache, record_key
from dlbench.atomic import atomic_path
from dlbench.record import fields, raw, statuses, store

KEYS = ("id", "framework", "dataset")
CSVS = ("curve.csv", "samples.csv")
# What a damaged record's row says to do: its raw measurement is apart from it (dlbench.record.raw).
FIX = ("make the record again from the point's raw measurement with `snakemake --forcerun records` (where the "
       "measurement itself is not whole, the record rule says so and how to measure the point again; every attempt "
       "stays in attempts/)")


def _read_csv(path: Path, facts: dict | None = None) -> tuple[pa.Table | None, str | None]:
    """One run's CSV as an Arrow table (pyarrow's reader costs less per small file than pandas'), and why it
    is not the file its record names (facts: the record's digest and rows of it), None where it is."""
    if not path.exists():
        return None, f"{path.name} is missing" if facts else None
    data = path.read_bytes()
    if facts and hashlib.sha256(data).hexdigest() != facts.get("sha256"):
        return None, f"{path.name}'s digest is not the one the record names (another attempt's file?)"
    table = pa_csv.read_csv(pa.BufferReader(data)) if data else None
    if facts and (table.num_rows if table is not None else 0) != facts.get("rows"):
        return None, f"{path.name} has other rows than the record names"
    return (table if table is not None and table.num_rows else None), None


def _stack(tables: list[pa.Table], owners: list[dict], rows: list[int]) -> pd.DataFrame:
    """The tables one under another, each row led by its run's keys; columns one run lacks stay empty.

    owners and rows: each record and how many of the rows are its own, in order (the cache may hand several
    records' rows over as one table).
    """
    if not tables:
        return pd.DataFrame(columns=["run_id", *KEYS[1:]])
    table = pa.concat_tables(tables, promote_options="permissive")
    # A column empty in every run (no GPU, no tests) is numbers nobody measured, as pandas would read it.
    table = table.cast(pa.schema([pa.field(f.name, pa.float64()) if pa.types.is_null(f.type) else f
                                  for f in table.schema]))
    # The run keys, one entry per run taken row by row in Arrow (a string per row in numpy costs seconds).
    owner = pa.array(np.repeat(np.arange(len(owners)), rows))
    keys = {("run_id" if k == "id" else k): pa.array([r[k] for r in owners], pa.string()).take(owner)
            for k in KEYS}
    for i, (name, column) in enumerate(keys.items()):
        table = table.add_column(i, name, column)
    return table.to_pandas()


def damaged(path: Path, record: dict, problem: str) -> dict:
    """A record whose files disagree with it, as a failed point: `damaged`, the reason naming the files and the
    fix, said on stderr too. Nothing is moved (a study may be live: `partial` reads it) and nothing is lost."""
    reason = (f"its files disagree with its record ({problem}; the record says {record.get('status')}): {FIX}")
    print(f"dlbench: {path}: {reason}", file=sys.stderr)
    return {**record, "status": statuses.DAMAGED, "reason": reason}


def unreadable(path: Path, problem: str) -> dict | None:
    """A metrics.json that is not a record, as a failed point (`damaged`) made from the point's own settings
    (point.json beside it), so that the point is neither dropped from the tables nor taken for measured; None
    where no point.json says what the point was (then it is skipped, with one line)."""
    from dlbench.run.build_record import POINT_FIELDS
    from dlbench.study import point_facts

    try:
        point = json.loads((path.parent / raw.POINT).read_text())
        row = {k: point.get(k) for k in POINT_FIELDS} | point_facts.derive(point).fields()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"dlbench: skipping {path}: {problem}, and its point.json cannot say which point it was "
              f"({type(exc).__name__}: {exc}); delete the file to run it again", file=sys.stderr)
        return None
    reason = f"its record cannot be read ({problem}): {FIX}"
    print(f"dlbench: {path}: {reason}", file=sys.stderr)
    return {**row, "status": statuses.DAMAGED, "reason": reason, "machine_failure": False}


def _row(path: Path, record: dict) -> dict:
    """The record as a row of the runs table."""
    record = {k: v for k, v in record.items() if k != "files"}  # the record's own integrity: no column
    # How many finished attempts the point has had (this one included): a rerun that failed is visible.
    record["attempts"] = max(1, len(store.attempts(path.parent)))
    return record


def collect(metrics_paths, cache: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The records and their curves and samples; a file that is not a record (unreadable) and a record whose files
    disagree with it are failed rows (damaged) without curve or samples, each said in one line.

    cache: a folder for the parsed CSVs (dlbench.aggregate.cache), so that only new or changed records' CSVs are
    parsed; the frames are the same with or without it.
    """
    runs = []
    # per CSV: its tables (or their places in the cache), whose they are, and how many rows
    found: dict[str, tuple[list, list[dict], list[int]]] = {name: ([], [], []) for name in CSVS}
    run_cache = RunCache(cache) if cache else None
    for path in map(Path, metrics_paths):
        try:
            record = store.read(path)
        except FileNotFoundError:
            continue
        except (OSError, store.BadRecord) as exc:
            row = unreadable(path, str(exc))
            if row is not None:
                runs.append(_row(path, row))
            continue
        key = record_key(path, CSVS) if run_cache else None
        problem, parsed = store.disagreement(path, record, CSVS), {}
        for name in CSVS if problem is None else ():
            table = run_cache.get(key, name) if run_cache else MISSING
            fresh = table is MISSING  # (a cached table was checked when it was parsed)
            if fresh:
                table, problem = _read_csv(path.parent / name, (record.get("files") or {}).get(name))
                if problem:
                    break
            parsed[name] = table, fresh
        if problem:  # loud and kept: a failed row, its files left as they are, no curve or samples from them
            runs.append(_row(path, damaged(path, record, problem)))
            continue
        runs.append(_row(path, record))
        for name, (tables, owners, rows) in found.items():
            table, fresh = parsed[name]
            if run_cache and fresh:
                run_cache.put(key, name, table)
            if table is not None:
                tables.append(table)
                owners.append(record)
                rows.append(table.num_rows)
    if run_cache:
        found = {name: (run_cache.tables(tables), owners, rows) for name, (tables, owners, rows) in found.items()}
        run_cache.save()
    runs_df = pd.DataFrame(runs).rename(columns=fields.RENAMED)
    runs_df = runs_df[fields.ordered_columns(runs_df.columns)]
    return runs_df, _stack(*found["curve.csv"]), _stack(*found["samples.csv"])


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path, suffix=".parquet") as tmp:
        df.to_parquet(tmp, index=False)


def add_study_context(runs: pd.DataFrame, membership: dict[str, list[str]] | None,
                      peak: dict | None, tuning: dict[str, dict] | None = None) -> pd.DataFrame:
    """Columns that depend on the whole study: sub-study membership, the place of a point in a tuning
    grid (sweep.tuning: `tuning_grid`, `tuning_is_default`; empty outside one), and the fraction of the
    machine's peak."""
    runs = runs.copy()
    if membership is not None and "run_id" in runs:
        runs["studies"] = runs["run_id"].map(lambda i: ",".join(membership.get(i, [])))
    if tuning is not None and "run_id" in runs:
        for column in ("tuning_grid", "tuning_is_default"):
            runs[column] = runs["run_id"].map(lambda i, c=column: tuning.get(i, {}).get(c))
    if peak and "achieved_gflops" in runs:
        # Like with like: a bf16 point against the bfloat16 GEMM peak, any other against the float32 one.
        cpu = runs["device"] == "cpu"
        for precision in ("fp32", "bf16"):
            key = "gflops_by_threads" if precision == "fp32" else "bf16_gflops_by_threads"
            by_threads = {int(k): v for k, v in (peak.get(key) or {}).items()}
            runs[f"peak_gflops_{precision}"] = runs["threads"].map(by_threads).where(cpu).astype(float)
        bf16 = runs["precision"] == "bf16" if "precision" in runs else pd.Series(False, index=runs.index)
        runs["peak_gflops"] = runs["peak_gflops_bf16"].where(bf16, runs["peak_gflops_fp32"])
        runs["peak_fraction"] = runs["achieved_gflops"] / runs["peak_gflops"]
        runs["peak_fraction_fp32"] = runs["achieved_gflops"] / runs["peak_gflops_fp32"]
    return runs


def aggregate(metrics_paths, runs_out, curves_out, samples_out, *, membership=None, peak_path=None,
              tuning=None, cache: str | Path | None = None) -> pd.DataFrame:
    """The three Parquet tables (the summary is a rule of its own on runs.parquet: dlbench.analysis.summary);
    cache: a folder that keeps the parsed CSVs between aggregations (see collect)."""
    runs, curves, samples = collect(metrics_paths, cache)
    peak = json.loads(Path(peak_path).read_text()) if peak_path else None
    runs = add_study_context(runs, membership, peak, tuning)
    runs = runs[fields.ordered_columns(runs.columns)]  # the columns in the record's order
    write_parquet(runs, runs_out)
    write_parquet(curves, curves_out)
    write_parquet(samples, samples_out)
    return runs
