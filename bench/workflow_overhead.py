"""Workflow overhead: a point's job wall time taken apart into the trainer's phases and what surrounds them.

    .venv/bin/python bench/workflow_overhead.py [FRAMEWORK ...] [--iterations 100] [--repeats 3]

Each point (Caffe's LeNet on prepared Fashion-MNIST, batch 64, threads 1) runs as the train rule
runs it: `python -m dlbench.cli train --point ... --env ...` in a process of its own, timed from
outside (the job's wall time). From the record: the trainer's interpreter start (startup_time_s),
its framework import, data load, build, compile, training, test, and the rest of wall_time_s;
the runner's own share (its interpreter, imports, writing the record) is job wall - wall_time_s;
the monitor's CPU is monitor_cpu_s. `to first step`: from the job's start to the trainer's first training
step (its `train` phase starting, read from events.jsonl: the trainer's clock is the system's monotonic
clock, the same as this script's), and of it `before trainer`: from the job's start until the trainer's
code runs (the runner's interpreter and imports, the monitor, the trainer's interpreter). Frameworks in turn,
--repeats times; medians.
Target: the data load of prepared Fashion-MNIST under 0.5 s. About 2-3 minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import _common as c

from dlbench.study.sweep import one_point

PHASES = ("startup", "import", "data_load", "build", "compile", "train", "test")
TARGET_DATA_S = 0.5


def run_job(fw: str, point: dict, ds, env_json) -> dict:
    out = c.WORK / "workflow_overhead" / point["id"]
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "dlbench.cli", "train", "--point", json.dumps(point, sort_keys=True),
           "--dataset-dir", str(ds), f"--env={env_json}", "--out", str(out), "--interval", "0.2"]
    env = dict(os.environ, PYTHONPATH=str(c.REPO))
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=c.REPO, env=env, check=True, capture_output=True)
    job = time.monotonic() - t0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.strip()]
    started = next(e for e in events if e["e"] == "process_start")
    train = next(e for e in events if e["e"] == "phase_start" and e.get("name") == "train")
    rec = json.loads((out / "metrics.json").read_text())
    if rec["status"] != "ok":
        raise SystemExit(f"{fw}: {rec['status']}: {rec['reason']}")
    parts = {p: rec.get(f"{p}_time_s") or 0.0 for p in PHASES}
    parts["interval tests"] = rec.get("interval_test_time_s") or 0.0
    parts["rest of trainer"] = rec["wall_time_s"] - sum(parts.values())
    parts["runner"] = job - rec["wall_time_s"]
    parts["job wall"] = job
    parts["before trainer"] = started["pid_started_at"] - t0
    parts["to first step"] = train["t"] - t0
    parts["monitor CPU"] = rec["monitor_cpu_s"]
    return parts


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__, frameworks=c.ALL_FRAMEWORKS, iterations=100, repeats=3).parse_args(argv)
    frameworks = c.usable(args.frameworks)
    ds = c.dataset("fashion_mnist")
    envs = {}
    for fw in frameworks:
        envs[fw] = c.WORK / "workflow_overhead" / f"{fw}.json"
        envs[fw].parent.mkdir(parents=True, exist_ok=True)
        envs[fw].write_text(json.dumps({"env": fw, "kind": "site", "python": c.env_python(fw)}))
    load = c.wait_quiet()
    c.header("workflow overhead: one point's job wall time, taken apart (seconds, medians)", load)
    got: dict[str, list[dict]] = {fw: [] for fw in frameworks}
    for _ in range(args.repeats):
        for fw in frameworks:
            point = one_point(fw, dataset=c.DATASET, iterations=args.iterations, batch_size=64, threads=1)
            got[fw].append(c.clean(run_job, fw, point, ds, envs[fw]))
    rows = []
    for fw, runs in got.items():
        row = {"framework": fw}
        for key in runs[0]:
            row[key] = c.median([r[key] for r in runs])
        row["data_load verdict (<0.5 s)"] = c.verdict(row["data_load"] < TARGET_DATA_S)
        rows.append(row)
    c.summary(f"{args.repeats} repeats, {args.iterations} iterations, threads 1", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
