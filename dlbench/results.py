"""Run records into tidy Parquet: runs (one row per point), curves (per step), samples (per reading)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dlbench.atomic import atomic_path

KEYS = ("id", "framework", "dataset")


def _read_csv(path: Path, record: dict) -> pd.DataFrame | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    df = pd.read_csv(path)
    if df.empty:
        return None
    for i, key in enumerate(KEYS):
        df.insert(i, "run_id" if key == "id" else key, record[key])
    return df


def collect(metrics_paths) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    runs, curves, samples = [], [], []
    for path in map(Path, metrics_paths):
        record = json.loads(path.read_text())
        runs.append(record)
        for name, bucket in (("curve.csv", curves), ("samples.csv", samples)):
            df = _read_csv(path.parent / name, record)
            if df is not None:
                bucket.append(df)
    runs_df = pd.DataFrame(runs).rename(columns={"id": "run_id"})
    curves_df = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=["run_id", *KEYS[1:]])
    samples_df = pd.concat(samples, ignore_index=True) if samples else pd.DataFrame(columns=["run_id", *KEYS[1:]])
    return runs_df, curves_df, samples_df


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path, suffix=".parquet") as tmp:
        df.to_parquet(tmp, index=False)


def add_study_context(runs: pd.DataFrame, membership: dict[str, list[str]] | None,
                      peak: dict | None) -> pd.DataFrame:
    """Columns that depend on the whole study: sub-study membership, and the fraction of the machine's peak."""
    runs = runs.copy()
    if membership is not None and "run_id" in runs:
        runs["studies"] = runs["run_id"].map(lambda i: ",".join(membership.get(i, [])))
    if peak and "achieved_gflops" in runs:
        by_threads = {int(k): v for k, v in peak["gflops_by_threads"].items()}
        runs["peak_gflops"] = runs["threads"].map(by_threads).where(runs["device"] == "cpu")
        runs["peak_fraction"] = runs["achieved_gflops"] / runs["peak_gflops"]
    return runs


def aggregate(metrics_paths, runs_out, curves_out, samples_out, *, membership=None, peak_path=None) -> pd.DataFrame:
    runs, curves, samples = collect(metrics_paths)
    peak = json.loads(Path(peak_path).read_text()) if peak_path else None
    runs = add_study_context(runs, membership, peak)
    write_parquet(runs, runs_out)
    write_parquet(curves, curves_out)
    write_parquet(samples, samples_out)
    return runs
