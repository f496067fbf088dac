"""The time estimate against measured times: before anything ran, and after one point per framework and network.

    .venv/bin/python bench/estimate_error.py                 run the small study below, then compare
    .venv/bin/python bench/estimate_error.py --results DIR   compare with a finished study's folder instead
    .venv/bin/python bench/estimate_error.py --results DIR --derive   the efficiencies and fixed costs it shows

The small study: the four frameworks with their own defaults and with Caffe's (so each has its own network
and LeNet), on digits and Fashion-MNIST, batch 16 and 64, 200 iterations, 1 and 2 threads: 64 points, about
10 minutes on a quiet 2-core machine. For every ok point, its wall time (the record's `wall_time_s`) is
compared with the estimate (dlbench.plan.estimate):
- before any measurement: the FLOPs model (the machine's GEMM peak from results/machine/peak.json, the
  framework's default efficiency and fixed cost);
- after one point per framework and network: the first ok point of each (framework, network) in the
  study's order counts as finished, every other point is estimated from it (same kind: measured; other
  dataset or threads: scaled) and compared.
Targets: every point within 2x before any measurement; within 25% after one point per framework and network.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import _common as c
import pandas as pd
import yaml

from dlbench.paths import SCHEMA
from dlbench.plan import estimate
from dlbench.record import store
from dlbench.study import config, sweep
from dlbench.testing import sandbox

STUDY = {"datasets": ["digits", "fashion_mnist"], "frameworks": ["pytorch", "tensorflow", "theano", "caffe"],
         "preset": ["own", "caffe"], "sweep": {"iterations": [200], "batch_size": [16, 64], "threads": [1, 2]}}


def run_study(folder: Path) -> Path:
    wf = sandbox.copy_workflow(folder, STUDY)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "study.yaml"],
                          cwd=wf, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return wf


def ratios(points: list[dict], records_by_id: dict, done: estimate.Finished, peak: dict) -> pd.DataFrame:
    model = estimate.Model(done, peak)
    rows = []
    for p in points:
        r = records_by_id.get(p["id"])
        if not r or r.get("status") != "ok":
            continue
        seconds, source = model.seconds(p)
        rows.append({"framework": p["framework"], "network": p["network"], "dataset": p["dataset"],
                     "threads": p["threads"], "batch": p["batch_size"], "measured s": r["wall_time_s"],
                     "estimate s": seconds, "ratio": seconds / r["wall_time_s"], "source": source})
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame, what: str, target: str, ok) -> list[dict]:
    rows = []
    for threads, g in [("all", df), *((str(t), g) for t, g in df.groupby("threads"))]:
        within = g["ratio"].map(ok).mean()
        rows.append({"estimate": what, "threads": threads, "points": len(g),
                     "median est/measured": statistics.median(g["ratio"]),
                     "worst (x off)": g["ratio"].map(lambda x: max(x, 1 / x)).max(), "target": target,
                     "within target": f"{within:.0%}", "verdict": c.verdict(within == 1.0)})
    return rows


def derive(runs: pd.DataFrame) -> None:
    """Median fraction of the peak and fixed cost per framework: the defaults estimate.py would take."""
    ok = runs[runs.status == "ok"].copy()
    busy = ok[["train_time_s", "test_time_s", "interval_test_time_s"]].fillna(0).sum(axis=1)
    ok["fixed_s"] = ok["wall_time_s"] - busy
    table = ok.groupby(["framework", "threads"]).agg(efficiency=("peak_fraction", "median"),
                                                     fixed_s=("fixed_s", "median"), points=("run_id", "size"))
    print(table.round(3).to_string())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, help="a finished study's workflow folder (with study.yaml)")
    ap.add_argument("--derive", action="store_true", help="print the efficiencies and fixed costs it shows")
    args = ap.parse_args(argv)
    folder = args.results or run_study(c.WORK / "estimate_error")
    runs = pd.read_parquet(folder / "results/runs.parquet")
    if args.derive:
        derive(runs)
        return 0
    cfg = config.validate(yaml.safe_load((folder / "study.yaml").read_text()), schema_path=SCHEMA)
    points = sweep.plan(cfg).points
    records_by_id = {}
    for p in points:
        r = store.read_or_skip(folder / f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}/metrics.json")
        if r:
            records_by_id[p["id"]] = r
    peak = estimate.peak_gflops(sorted({p["threads"] for p in points}), folder, measure=False)
    c.header(f"estimate vs measured wall time, {len(records_by_id)} points of {folder}", c.busy_cores(1.0))
    print(f"# peak GFLOP/s by threads: {peak}; load during the study: see its records' started_at and the "
          "machine's load then")
    before = ratios(points, records_by_id, estimate.Finished(list(points)), peak)
    first = {}
    for p in points:
        if records_by_id.get(p["id"], {}).get("status") == "ok":
            first.setdefault((p["framework"], p["network"]), p)
    done = estimate.Finished([p for p in points if p["id"] not in {q["id"] for q in first.values()}])
    for p in first.values():
        done.by_kind.setdefault(estimate.kind(p), []).append(estimate.measure_of(records_by_id[p["id"]], p))
    after = ratios(done.pending, records_by_id, done, peak)
    print(c.table(before.round(3).to_dict("records")))
    print()
    print(c.table(after.round(3).to_dict("records")))
    c.summary("estimate / measured wall time per point",
              summary(before, "before any measurement", "within 2x", lambda x: 0.5 <= x <= 2)
              + summary(after, "after one point per framework and network", "within 25%",
                        lambda x: abs(x - 1) <= 0.25))
    return 0


if __name__ == "__main__":
    sys.exit(main())
