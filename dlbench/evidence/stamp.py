"""What a measured table says of itself: the commit it ran at, when, at what scale, on what machine, under what load.

Read from the records (frames.points), which carry each of these facts from the run itself: a point Snakemake
kept from an earlier run says its own commit, not the one the command ran at.
"""

from __future__ import annotations

import pandas as pd


def _distinct(df: pd.DataFrame, column: str) -> list:
    if column not in df.columns:
        return []
    return sorted({v for v in df[column] if v is not None and not (isinstance(v, float) and pd.isna(v))}, key=str)


def commits(df: pd.DataFrame) -> str:
    """"1a2b3c4", "1a2b3c4-dirty" (tracked files had changed since it), several comma-separated, or "unknown"."""
    if "dlbench_commit" not in df.columns:
        return "unknown (the records do not say)"
    dirty = df.get("dlbench_dirty", pd.Series(False, index=df.index)).map(lambda v: v is True or v == 1)
    named = {}
    for commit, is_dirty in zip(df["dlbench_commit"], dirty):
        if isinstance(commit, str) and commit:
            named[commit[:7]] = named.get(commit[:7], False) or bool(is_dirty)
    if not named:
        return "unknown (the records do not say)"
    return ", ".join(f"{c}-dirty" if d else c for c, d in sorted(named.items()))


def when(df: pd.DataFrame) -> str:
    """"2026-12-03, 13:10 to 13:32 (local time)" from the records' started_at."""
    started = pd.to_datetime(pd.Series(_distinct(df, "started_at")), errors="coerce", format="ISO8601").dropna()
    if started.empty:
        return "on an unknown date (the records do not say)"
    first, last = started.min(), started.max()
    days = first.strftime("%Y-%m-%d") + ("" if first.date() == last.date() else " to " + last.strftime("%Y-%m-%d"))
    return f"on {days}, points started {first:%H:%M} to {last:%H:%M} (local time)"


def machine(df: pd.DataFrame, cores: int | None) -> str:
    """"a 2-core AMD EPYC 7B13 (2 usable), `--cores 2`"."""
    models = _distinct(df, "cpu_model") or ["an unknown CPU"]
    logical = _distinct(df, "cpu_cores_logical")
    usable = _distinct(df, "cpu_cores_usable")
    text = " / ".join(f"{'/'.join(str(int(c)) for c in logical)}-core {m}" if logical else str(m) for m in models)
    if usable and usable != logical:
        text += f" ({'/'.join(str(int(c)) for c in usable)} usable)"
    threads = _distinct(df, "threads")
    if threads:
        text += f", {'/'.join(f'{t:g}' for t in threads)} threads per point"
    return text + (f", Snakemake `--cores {cores}`" if cores else "")


def _span(values: pd.Series, digits: str) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "not measured"
    low, high = values.min(), values.max()
    return f"{low:{digits}}" if low == high else f"{low:{digits}} to {high:{digits}}"


def load(df: pd.DataFrame) -> str:
    """How many ok points trained under outside load (the records' `contended`), and how much there was."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return "no point ran ok"
    if "host_cpu_other_pct_mean" not in ok.columns or ok["host_cpu_other_pct_mean"].isna().all():
        return "outside load not measured (records made before it was)"
    busy = int(ok["contended"].sum())
    limit = _distinct(ok, "contended_pct")
    text = (f"{busy} of {len(ok)} ok points trained under outside load (`contended`: others used more than "
            f"{'/'.join(f'{v:g}' for v in limit) or '?'} % of a core over training; here "
            f"{_span(ok['host_cpu_other_pct_mean'], '.0f')} %, 1-minute load average "
            f"{_span(ok['host_load_start'], '.1f')} at the start)")
    if busy:
        text += ": **their times are not a measure of speed**, only of the order of magnitude"
    return text


def scale_text(scale: float) -> str:
    return "full length" if scale == 1 else f"every length × {scale:g} (`--scale {scale:g}`)"


def stamp(df: pd.DataFrame, scale: float, cores: int | None = None) -> str:
    """The line above a measured table. df: the table's points (frames.points)."""
    return (f"*Measured at commit {commits(df)} {when(df)}, {scale_text(scale)}, on a {machine(df, cores)}; "
            f"{load(df)}.*")
