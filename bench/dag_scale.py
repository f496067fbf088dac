"""DAG scale: `snakemake -n` and a no-op rerun of 1,000- to 20,000-point sweeps, against a bare Snakefile.

    .venv/bin/python bench/dag_scale.py [--sizes 1000 5000 20000] [--repeats 3] [--before DIR]

For each size N, a copy of the workflow (dlbench.testing.sandbox) with a study of N points (digits,
PyTorch with Caffe's preset, 10 learning rates x 10 batch sizes x N/100 repeats, 30 iterations) and
a bare Snakefile with N jobs (one `touch` rule and an `all` rule). `--shaped` adds a bare Snakefile whose
one rule has the train rule's shape: its input (two files made by other rules), output (three files), log,
params, threads, resources and script, each a plain value (what Snakemake pays per job for that shape,
without any of dlbench's functions); dlbench is then judged against it (target: within 1.10x). The shape is
the train rule's as it was when the record was its output (three files; now one, the raw measurement, and
one record job for all points): the yardstick the figures in docs/performance.md were measured against. `--before DIR`
adds another side:
the workflow files of another checkout (e.g. `git archive <commit> | tar -x -C DIR`), so that a
change is measured before and after in the same run. Timed from outside, rotating the sides:
- `snakemake -n` with nothing done yet;
- a no-op rerun: every output the dry run lists is created (and beside each point's raw measurement
  its metrics.json, a real record's text, so the workflow's own reading of finished points is real),
  `snakemake --touch` records them as up to date, and `snakemake -n` is timed again (it must find
  nothing to do).
`--no-noop` leaves the no-op rerun out (the shaped target is on `-n`).
Each run is reported as wall seconds and as CPU seconds (user + sys of snakemake and its children,
from getrusage(RUSAGE_CHILDREN)), which stays meaningful when others load the machine; the cores
other processes kept busy during the runs are printed beside them. Target: dlbench within 1.5x of
the bare Snakefile. About 4-5 minutes for 1,000 and 5,000 points; 20,000 adds about 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _common as c

from dlbench.testing import sandbox

TARGET = 1.5  # against the bare one-line rule
TARGET_SHAPED = 1.10  # against the bare rule of the train rule's shape
LRS = [0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.02, 0.03, 0.05, 0.07]
BATCHES = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
# N jobs, each making out/{i}/metrics.json: the target rule both bare Snakefiles share.
ALL = """N = int(config["n"])


rule all:
    input:
        expand("out/{i}/metrics.json", i=range(N)),
"""
BARE = ALL + """

rule one:
    output:
        "out/{i}/metrics.json",
    shell:
        "touch {output}"
"""


# The same jobs with the train rule's shape (workflow/rules/train.smk): two inputs made by other rules, three
# outputs, a log, params, threads, the train rule's resources and retries, a script; every value plain.
SHAPED = ALL + """

rule data:
    output:
        "data.npz",
    shell:
        "touch {output}"


rule env:
    output:
        "env.json",
    shell:
        "touch {output}"


rule one:
    input:
        data="data.npz",
        env="env.json",
    output:
        metrics="out/{i}/metrics.json",
        curve="out/{i}/curve.csv",
        samples="out/{i}/samples.csv",
    log:
        "out/{i}/job.log",
    retries: 1
    threads: 1
    resources:
        dlbench_measure=1,
        gpu=0,
        gpu_model="",
        cpus_per_task=1,
        mem_mb=8000,
        runtime=90,
        slurm_partition="",
        slurm_account="",
        slurm_extra="",
        dlbench_attempt=1,
        dlbench_retries=1,
    params:
        point={"framework": "pytorch", "dataset": "digits", "batch_size": 32, "learning_rate": 0.01},
        code="0123456789ab",
        env={"env": "pytorch", "kind": "built", "key": "0123456789ab"},
        runner={"interval_s": 0.2, "monitor": True, "hang_s": 1800},
    script:
        "touch.py"
"""
SHAPED_SIDE = "bare, train's shape"
TOUCH = "from pathlib import Path\n\nfor f in snakemake.output:\n    Path(f).touch()\n"


def study(n: int) -> dict:
    return {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
            "sweep": {"learning_rate": LRS, "batch_size": BATCHES, "iterations": [30], "threads": [1]},
            "repeats": max(1, n // (len(LRS) * len(BATCHES)))}


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def smk(folder: Path, *args: str) -> tuple[float, float, float, str]:
    """(wall s, CPU s of snakemake and its children, cores others kept busy meanwhile, output)."""
    cpu0 = _children_cpu_s()
    with c.ForeignCpu() as foreign:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "study.yaml",
                               *args], cwd=folder, capture_output=True, text=True)
        took = time.monotonic() - t0
    cpu = _children_cpu_s() - cpu0
    if proc.returncode:
        raise SystemExit(f"snakemake {' '.join(args)} in {folder} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took, cpu, foreign.cores, proc.stdout + proc.stderr


def plugin_import_s() -> float:
    """Seconds `import snakemake_executor_plugin_slurm` takes: Snakemake imports it at every start, and at import it
    asks `scontrol show config`, which waits out its timeouts where SLURM is installed but no controller answers
    (about 9 s here). Both sides pay it; it is printed so that a figure taken that way says so."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import snakemake_executor_plugin_slurm"], capture_output=True)
    return time.monotonic() - t0


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
    return json.dumps({"id": "x", "framework": "pytorch", "dataset": "digits", "status": "ok",
                       "throughput_img_s": 2000.0, "train_time_s": 1.0, "wall_time_s": 5.0})


def materialise(folder: Path, dry_run: str, record: str) -> None:
    """Every output the dry run lists; beside each train job's (its raw measurement, measurement.json) the point's
    record too, as the job leaves it (a bare Snakefile's metrics.json is its output)."""
    for rel in outputs_of(dry_run):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(record if path.name == "metrics.json" else "")
        if path.name == "measurement.json":
            (path.parent / "metrics.json").write_text(record)


def copy_checkout(source: Path, dest: Path, cfg: dict) -> Path:
    """The workflow files of another checkout (the `before` side), with the same study."""
    dest.mkdir(parents=True)
    for name in sandbox.WORKFLOW_FILES:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy(src, dest / name)
    (dest / "study.yaml").write_text(json.dumps(cfg))
    return dest


def compare(n: int, trains: int, what: str, times: dict[str, list]) -> list[dict]:
    """One row per side: its median wall and CPU seconds against the bare rule's and, where it ran, against the
    bare rule of the train rule's shape (the target dlbench is judged by when it is there)."""
    med = {side: [c.median(x[k] for x in runs) for k in range(3)] for side, runs in times.items()}
    shaped = med.get(SHAPED_SIDE)
    rows = []
    for side in [s for s in med if s != "bare"]:
        wall, cpu, others = med[side]
        row = {"points": n, "train jobs": trains, "run": "snakemake -n" + (" (no-op)" if what == "no-op" else ""),
               "side": side, "wall s": wall, "bare wall s": med["bare"][0], "wall ratio": wall / med["bare"][0],
               "cpu s": cpu, "bare cpu s": med["bare"][1], "cpu ratio": cpu / med["bare"][1],
               "others' cores": max(others, med["bare"][2])}
        if shaped and side != SHAPED_SIDE:
            row.update({"shape wall s": shaped[0], "wall / shape": wall / shaped[0], "cpu / shape": cpu / shaped[1],
                        "verdict (wall / shape)": c.verdict(wall / shaped[0] <= TARGET_SHAPED)})
        else:
            row["verdict (cpu)"] = c.verdict(cpu / med["bare"][1] <= TARGET)
        rows.append(row)
    return rows


def columns(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(k for r in rows for k in r))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", type=Path, help="another checkout's workflow, measured beside this one")
    ap.add_argument("--shaped", action="store_true", help="also a bare Snakefile whose rule has the train rule's "
                    "shape (input, output, log, params, threads, resources, script): what Snakemake itself pays")
    ap.add_argument("--no-noop", action="store_true", help="time `-n` only, not the no-op rerun")
    args = ap.parse_args(argv)
    record = a_real_record()
    load = c.wait_quiet()
    c.header("DAG scale: snakemake -n, dlbench vs a bare Snakefile with as many jobs", load)
    print(f"# the SLURM executor plugin's import (every side, every run): {plugin_import_s():.1f} s")
    rows = []
    for n in args.sizes:
        root = c.WORK / "dag_scale" / str(n)
        subprocess.run(["rm", "-rf", str(root)], check=True)
        sides = {"dlbench": sandbox.copy_workflow(root / "dlbench", study(n))}
        if args.before:
            sides["before"] = copy_checkout(args.before, root / "before", study(n))
        bare = root / "bare"
        bare.mkdir(parents=True)
        (bare / "Snakefile").write_text(BARE)
        (bare / "study.yaml").write_text(f"n: {n}\n")
        sides["bare"] = bare
        if args.shaped:
            shaped = root / "shaped"
            shaped.mkdir(parents=True)
            (shaped / "Snakefile").write_text(SHAPED)
            (shaped / "touch.py").write_text(TOUCH)
            (shaped / "study.yaml").write_text(f"n: {n}\n")
            sides[SHAPED_SIDE] = shaped
        times = {(side, what): [] for side in sides for what in ("-n", "no-op")}
        outs = {}
        for i in range(args.repeats):
            order = list(sides)[i % len(sides):] + list(sides)[:i % len(sides)]  # rotate who goes first
            for side in order:
                *t, outs[side] = smk(sides[side], "-n")
                times[(side, "-n")].append(t)
        trains = len(re.findall(r"^(?:local)?rule train:", outs["dlbench"], re.M))
        whats = ["-n"]
        if not args.no_noop:
            whats.append("no-op")
            for side, folder in sides.items():
                materialise(folder, outs[side], record if side in ("dlbench", "before") else "")
                smk(folder, "--touch")
            for i in range(args.repeats):
                order = list(sides)[i % len(sides):] + list(sides)[:i % len(sides)]
                for side in order:
                    *t, out = smk(sides[side], "-n")
                    if jobs_planned(out):
                        raise SystemExit(f"{side} no-op: the rerun plans {jobs_planned(out)} jobs:\n{out[-2000:]}")
                    times[(side, "no-op")].append(t)
        for what in whats:
            rows += compare(n, trains, what, {side: times[(side, what)] for side in sides})
        print(c.table([r for r in rows if r["points"] == n], columns(rows)), flush=True)
    c.summary(f"medians of {args.repeats}; target <= {TARGET}x the bare rule, <= {TARGET_SHAPED}x the train "
              "rule's shape", rows, columns(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
