"""dlbench.present.comparison on two result sets of 20,000 records each: how long, how much memory, and what it finds.

    .venv/bin/python bench/compare_scale.py [--points 20000] [--runs 3]

The sets are the large hand-made study's records (dlbench.testing.study.large_records: 4 frameworks x 2 datasets
x 2 devices x 5 presets x 5 batch sizes x 5 learning rates x 2 thread counts, 5 repeats of each of its 4,000
settings at 20,000 records, about 3% failed), A from seed 0 and B from seed 1 (other noise, other failures),
each setting's length fixed so that its repeats are one setting's sample; B's PyTorch trains 10% slower, and
B's records name another dlbench commit. Each run is python -m dlbench.present.comparison in its own process, as a user
runs it (reading both runs.parquet, the comparison, comparison.md and the ratios chart as HTML and SVG), timed
from outside: wall and CPU seconds, peak resident memory, and the cores other processes kept busy meanwhile.
Checks: every setting compared, PyTorch's slowdown found, few others flagged; the verdicts counted.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import _common as c
import numpy as np
import pandas as pd

from dlbench.present import comparison
from dlbench.testing import study

SLOWDOWN = 1.10  # B's PyTorch, training time


def result_set(n: int, seed: int, slower: str | None) -> pd.DataFrame:
    records = study.large_records(n, seed)
    cells = min(len(records), 4000)  # the large study's grid
    lengths = np.random.default_rng(99).choice([500, 1000, 2000, 5000], size=cells)
    for i, r in enumerate(records):
        cell = i % cells
        factor = lengths[cell] / r["iterations"]  # the large study draws a length per record: one per setting here
        for key in ("train_time_s", "test_time_s"):
            if r[key] is not None:
                r[key] *= factor * (SLOWDOWN if key == "train_time_s" and r["framework"] == slower else 1)
        r["iterations"] = r["iterations_planned"] = int(lengths[cell])
        r["setting_id"] = f"cell{cell}"
        r["dlbench_commit"] = f"{seed:040d}"
    runs = pd.DataFrame([{k: v for k, v in r.items() if k not in ("curve_rows", "sample_rows")} for r in records])
    return runs.rename(columns={"id": "run_id"})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = c.WORK / "compare_scale"
    work.mkdir(parents=True, exist_ok=True)
    result_set(args.points, 0, None).to_parquet(work / "a.parquet")
    result_set(args.points, 1, "pytorch").to_parquet(work / "b.parquet")
    print(f"# {c.machine_line()}")
    print("| run | wall s | CPU s | peak MB | others' cores | load average (1 min) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for run in range(1, args.runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        with c.ForeignCpu() as foreign:
            subprocess.run([sys.executable, "-m", "dlbench.present.comparison", str(work / "a.parquet"),
                            str(work / "b.parquet"), "--out", str(work / "out")], check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"| {run} | {wall:.1f} | {cpu:.1f} | {after.ru_maxrss / 1024:.0f} | {foreign.cores:.2f} "
              f"| {c.load1():.1f} |", flush=True)
    table = pd.read_parquet(work / "out" / "comparison.parquet")
    train = table[table.metric == "train_time_s"]
    torch = train[train.framework == "pytorch"]
    others = train[train.framework != "pytorch"]
    tested = torch[torch.p_adjusted.notna()]
    print(f"\n{table.setting.nunique()} settings, {len(table)} comparisons; PyTorch's training time: "
          f"{(tested.verdict == 'slower').sum()} of {len(tested)} tested settings slower, median ratio "
          f"{tested.ratio.median():.3f}; the other frameworks: {(others.verdict.isin(['slower', 'faster'])).sum()} "
          f"of {others.p_adjusted.notna().sum()} tested settings flagged")
    for name, rows in (("PyTorch", torch), ("the others", others)):
        print(f"{name}, training time, verdicts: {rows.verdict.value_counts().to_dict()}")
    per = comparison.per_framework(table)
    for _, r in per[per.metric == "train_time_s"].iterrows():
        print(f"per framework, training time: {r.framework} {r.change:.3f} [{r.change_ci_low:.3f}, "
              f"{r.change_ci_high:.3f}] over {r.settings} settings: {r.verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
