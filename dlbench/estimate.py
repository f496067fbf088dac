"""How long the points without a result will take, judged from the points already measured."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from dlbench import records
from dlbench.datasets import catalog
from dlbench.lr import steps_per_epoch


def planned_images(point: dict) -> int:
    n = point.get("input", {}).get("train_samples") or catalog.INFO[point["dataset"]]["train_count"]
    iterations = point["iterations"] or math.ceil(point["epochs"] * steps_per_epoch(n, point["batch_size"]))
    return iterations * point["batch_size"]


def _kind(p: dict) -> tuple:
    return (p["framework"], p["network"], p["dataset"], p["device"], p["threads"])


def measured_points(points: list[dict], run_dir) -> tuple[dict, list[dict]]:
    """(throughput and overhead of finished points by kind, the points without a result)."""
    measured: dict[tuple, list[tuple[float, float]]] = {}
    pending = []
    for p in points:
        r = records.read_or_skip(Path(run_dir(p)) / records.RESULT)
        if r is None:
            pending.append(p)
            continue
        if r.get("status") == "ok" and r.get("throughput_img_s"):
            measured.setdefault(_kind(p), []).append((r["throughput_img_s"], r["wall_time_s"] - r["train_time_s"]))
    return measured, pending


def point_seconds(p: dict, measured: dict) -> float | None:
    """Expected wall time of one point from comparable measured ones; None when there are none."""
    same = measured.get(_kind(p)) or [m for k, ms in measured.items() if k[:2] == _kind(p)[:2] for m in ms]
    if not same:
        return None
    throughput = statistics.median(m[0] for m in same)
    overhead = statistics.median(m[1] for m in same)
    return planned_images(p) / throughput + overhead


def estimate(points: list[dict], run_dir) -> dict:
    """Seconds for the points lacking metrics.json, from measured throughput of comparable points."""
    measured, pending = measured_points(points, run_dir)
    seconds, unknown = 0.0, 0
    for p in pending:
        guess = point_seconds(p, measured)
        if guess is None:
            unknown += 1
        else:
            seconds += guess
    return {"points": len(points), "pending": len(pending), "measured_kinds": len(measured),
            "estimated_s": seconds, "unknown": unknown}


def describe(est: dict) -> str:
    hours = est["estimated_s"] / 3600
    text = (f"dlbench: {est['pending']} of {est['points']} points have no result yet; "
            f"estimated training time for them: {hours:.2f} h ({est['estimated_s']:.0f} s)")
    if est["unknown"]:
        text += f", not counting {est['unknown']} points with no comparable measured point"
    return text
