"""Aggregation: 1,000 run records into the three Parquet files with dlbench.aggregate.collect.aggregate.

    .venv/bin/python bench/aggregation.py [--runs 1000] [--repeats 3] [--source RUN_DIR]

One real run folder (by default a PyTorch LeNet point on prepared Fashion-MNIST, 1,000 iterations,
tests every 500, the monitor at 0.2 s: trained once by this script) is copied --runs times, each
copy with its own point id in its folder name, metrics.json and point.json. Then
collect.aggregate(...) writes runs/curves/samples.parquet from them, with the study membership and
a machine peak file as the aggregate rule passes them; timed --repeats times (median), with the
time split into reading (collect.collect) and the whole. Target: under 5 s. About 1-2 minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import _common as c

from dlbench.aggregate import collect
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

TARGET_S = 5.0


def source_run() -> Path:
    # the preset tests every 500 iterations
    point = one_point("pytorch", dataset=c.DATASET, iterations=1000, batch_size=64, threads=1)
    out = c.WORK / "aggregation" / "source" / point["id"]
    if not (out / "metrics.json").exists():
        rec = runner.run_point(point, c.dataset("fashion_mnist"), out, RunOptions(python=c.env_python("pytorch")))
        if rec["status"] != "ok":
            raise SystemExit(f"{rec['status']}: {rec['reason']}")
    return out


def copies(src: Path, n: int, root: Path) -> tuple[list[Path], dict]:
    shutil.rmtree(root, ignore_errors=True)
    record = json.loads((src / "metrics.json").read_text())
    point = json.loads((src / "point.json").read_text())
    paths, membership = [], {}
    for i in range(n):
        rid = f"{record['id']}-copy{i:05d}"
        dest = root / record["framework"] / record["dataset"] / rid
        shutil.copytree(src, dest)
        (dest / "metrics.json").write_text(json.dumps({**record, "id": rid, "seed": record["seed"] + i}, indent=2))
        (dest / "point.json").write_text(json.dumps({**point, "id": rid}, indent=2))
        paths.append(dest / "metrics.json")
        membership[rid] = ["main"]
    return paths, membership


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    result = fn(*args, **kw)
    return result, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--source", type=Path, help="a finished run folder to copy (default: train one)")
    args = ap.parse_args(argv)
    src = args.source or source_run()
    root = c.WORK / "aggregation" / "runs"
    paths, membership = copies(src, args.runs, root)
    peak = c.WORK / "aggregation" / "peak.json"
    peak.write_text(json.dumps({"gemm_n": 2048, "gflops_by_threads": {"1": 90.0, "2": 180.0}}))
    out = c.WORK / "aggregation" / "out"
    out.mkdir(parents=True, exist_ok=True)
    sizes = {name: len((src / name).read_text().splitlines()) - 1 for name in ("curve.csv", "samples.csv")}
    load = c.wait_quiet()
    c.header(f"aggregation: {args.runs} run folders into Parquet", load)
    read_s, total_s = [], []
    for _ in range(args.repeats):
        r, t = c.clean(timed, collect.collect, paths)
        read_s.append(t)
        runs, t = c.clean(timed, collect.aggregate, paths, out / "runs.parquet", out / "curves.parquet",
                          out / "samples.parquet", membership=membership, peak_path=peak)
        total_s.append(t)
    assert len(runs) == args.runs
    t = c.median(total_s)
    row = {"runs": args.runs, "reading (collect) s": c.median(read_s), "aggregate s (median)": t,
           "worst s": max(total_s), "target": f"< {TARGET_S:g} s", "verdict": c.verdict(t < TARGET_S)}
    c.summary(f"each run folder: {sizes['curve.csv']} curve rows, {sizes['samples.csv']} samples; "
              f"{args.repeats} repeats", [row])
    return 0


if __name__ == "__main__":
    sys.exit(main())
