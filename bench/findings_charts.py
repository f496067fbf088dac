"""Findings and charts of 20,000 records: the two steps after the aggregation, each in its own process as its
rule runs it, timed from outside; another checkout beside this one for a before-and-after.

    .venv/bin/python bench/findings_charts.py [--points 20000] [--runs 3] [--before DIR]

The records are the large hand-made study (dlbench.testing.study.large_frames), written once as the three
Parquet tables the aggregation writes, under $DLBENCH_BENCH_DIR/findings_charts/<points>/. Each run starts
one process for the findings (findings.md, as the findings rule writes it) and one for the charts (every
chart with data, HTML and SVG, and the index), alternating the checkouts; each step's wall and CPU seconds
(user + sys of the process) and the cores others kept busy meanwhile are printed, with the medians. `--before
DIR`: another checkout (a clone, or `git archive COMMIT | tar -x -C DIR`), measured the same way with
PYTHONPATH=DIR; its modules may have the package's earlier names (dlbench.findings, dlbench.charts).
Target (issue 35): findings plus charts within 60 s in all, and no slower than before.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common as c

from dlbench.testing import study

TARGET_S = 60.0
# One step in a process of its own: the module names of this layout, else of the flat one before it.
STEP = """
import sys
from pathlib import Path
data, out, step = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
tables = [data / f"{t}.parquet" for t in ("runs", "curves", "samples")]
if step == "findings":
    try:
        from dlbench.present import findings
    except ImportError:
        from dlbench import findings
    findings.write_findings(tables[0], tables[1], out / "findings.md")
else:
    try:
        from dlbench.present.charts import draw
    except ImportError:
        from dlbench import charts as draw
    draw.draw_all(*tables, out / "charts")
"""


def tables(points: int) -> Path:
    """The large study's Parquet tables, written once per size."""
    folder = c.WORK / "findings_charts" / str(points)
    if not (folder / "samples.parquet").exists():
        folder.mkdir(parents=True, exist_ok=True)
        for name, frame in zip(("runs", "curves", "samples"), study.large_frames(points)):
            frame.to_parquet(folder / f"{name}.parquet", index=False)
    return folder


def timed(checkout: Path, step: str, data: Path, out: Path) -> dict:
    """One step in a fresh process with `checkout` first on the path: wall s, CPU s, others' busy cores."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(checkout), MPLBACKEND="Agg")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    foreign = c.ForeignCpu()
    with foreign:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", STEP, str(data), str(out), step], env=env, check=True, timeout=1800)
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "others_busy_cores": round(foreign.cores, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout, measured beside this one")
    args = parser.parse_args()
    data = tables(args.points)
    sides = {"this checkout": c.REPO, **({f"before ({args.before})": args.before.resolve()} if args.before else {})}
    rows = []
    for run in range(args.runs):
        for side, checkout in sides.items():
            for step in ("findings", "charts"):
                got = timed(checkout, step, data, c.WORK / "findings_charts" / "out" / f"{run}-{len(rows)}")
                rows.append({"side": side, "run": run, "step": step, **got})
                print(json.dumps(rows[-1]), flush=True)
    print(f"\nfindings + charts of {args.points} records ({c.machine_line()}), medians of {args.runs}:")
    for side in sides:
        mine = [r for r in rows if r["side"] == side]
        med = {(step, k): statistics.median(r[k] for r in mine if r["step"] == step)
               for step in ("findings", "charts") for k in ("wall_s", "cpu_s")}
        both = med[("findings", "wall_s")] + med[("charts", "wall_s")]
        busy = max(r["others_busy_cores"] for r in mine)
        print(f"  {side}: findings {med[('findings', 'wall_s')]:.1f} s wall / {med[('findings', 'cpu_s')]:.1f} s "
              f"CPU, charts {med[('charts', 'wall_s')]:.1f} / {med[('charts', 'cpu_s')]:.1f}; both {both:.1f} s "
              f"wall (target {TARGET_S:.0f} s: {'met' if both <= TARGET_S else 'missed'}); others busy up to "
              f"{busy:.2f} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
