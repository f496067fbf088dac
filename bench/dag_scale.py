"""DAG scale: `snakemake -n` and a no-op rerun of 1,000- and 5,000-point sweeps, against a bare Snakefile.

    .venv/bin/python bench/dag_scale.py [--sizes 1000 5000] [--repeats 3]

For each size N, a copy of the workflow (dlbench.testing.sandbox) with a study of N points (digits,
pytorch, 10 learning rates x 10 batch sizes x N/100 repeats, 30 iterations) and a bare Snakefile
with N jobs (one `touch` rule and an `all` rule). Timed from outside, alternating dlbench, bare,
dlbench, bare, ...:
- `snakemake -n` with nothing done yet;
- a no-op rerun: every output the dry run lists is created (each metrics.json a real record's
  text, so the workflow's own reading of finished points is real), `snakemake --touch` records
  them as up to date, and `snakemake -n` is timed again (it must find nothing to do).
Target: dlbench within 1.5x of the bare Snakefile. About 4-5 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import _common as c

from dlbench.testing import sandbox

TARGET = 1.5
LRS = [0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.02, 0.03, 0.05, 0.07]
BATCHES = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
BARE = """N = int(config["n"])


rule all:
    input:
        expand("out/{i}/metrics.json", i=range(N)),


rule one:
    output:
        "out/{i}/metrics.json",
    shell:
        "touch {output}"
"""


def study(n: int) -> dict:
    return {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
            "sweep": {"learning_rate": LRS, "batch_size": BATCHES, "iterations": [30], "threads": [1]},
            "repeats": n // (len(LRS) * len(BATCHES))}


def smk(folder: Path, *args: str) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "study.yaml", *args],
                          cwd=folder, capture_output=True, text=True)
    took = time.monotonic() - t0
    if proc.returncode:
        raise SystemExit(f"snakemake {' '.join(args)} in {folder} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took, proc.stdout + proc.stderr


def jobs_planned(out: str) -> int:
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else 0


def outputs_of(dry_run: str) -> list[str]:
    files = []
    for m in re.finditer(r"^\s+output: (.*)$", dry_run, re.M):
        files += [f.strip() for f in m.group(1).split(",")]
    return files


def a_real_record() -> str:
    """A metrics.json as a real point leaves it (from this machine's earlier runs, else a minimal one)."""
    for path in sorted(c.WORK.glob("*/**/metrics.json")):
        return path.read_text()
    return json.dumps({"status": "ok", "throughput_img_s": 2000.0, "train_time_s": 1.0, "wall_time_s": 5.0})


def materialise(folder: Path, dry_run: str, record: str) -> None:
    for rel in outputs_of(dry_run):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(record if path.name == "metrics.json" else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    record = a_real_record()
    load = c.wait_quiet()
    c.header("DAG scale: snakemake -n, dlbench vs a bare Snakefile with as many jobs", load)
    rows = []
    for n in args.sizes:
        root = c.WORK / "dag_scale" / str(n)
        subprocess.run(["rm", "-rf", str(root)], check=True)
        wf = sandbox.copy_workflow(root / "dlbench", study(n))
        bare = root / "bare"
        bare.mkdir(parents=True)
        (bare / "Snakefile").write_text(BARE)
        (bare / "study.yaml").write_text(f"n: {n}\n")
        times: dict[str, list[float]] = {"dlbench -n": [], "bare -n": [], "dlbench no-op": [], "bare no-op": []}
        outs = {}
        for _ in range(args.repeats):
            t, outs["dlbench"] = c.clean(smk, wf, "-n")
            times["dlbench -n"].append(t)
            t, outs["bare"] = c.clean(smk, bare, "-n")
            times["bare -n"].append(t)
        trains = len(re.findall(r"^(?:local)?rule train:", outs["dlbench"], re.M))
        materialise(wf, outs["dlbench"], record)
        materialise(bare, outs["bare"], "")
        smk(wf, "--touch")
        smk(bare, "--touch")
        for _ in range(args.repeats):
            for name, folder in (("dlbench no-op", wf), ("bare no-op", bare)):
                t, out = c.clean(smk, folder, "-n")
                if jobs_planned(out):
                    raise SystemExit(f"{name}: the no-op rerun plans {jobs_planned(out)} jobs:\n{out[-2000:]}")
                times[name].append(t)
        for what in ("-n", "no-op"):
            d, b = c.median(times[f"dlbench {what}"]), c.median(times[f"bare {what}"])
            rows.append({"points": n, "train jobs": trains, "run": f"snakemake -n ({what})" if what == "no-op"
                         else "snakemake -n", "dlbench s": d, "bare s": b, "ratio": d / b, "target": f"<= {TARGET}",
                         "verdict": c.verdict(d / b <= TARGET)})
        print(c.table(rows[-2:]), flush=True)
    c.summary(f"medians of {args.repeats}", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
