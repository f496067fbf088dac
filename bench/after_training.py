"""Everything after training at scale: aggregation, charts, findings and the report of 20,000 records.

    .venv/bin/python bench/after_training.py [--points 20000] [--added 10]

The records are the large hand-made study (dlbench.testing.study.write_large_study: 4 frameworks x 2 datasets
x 2 devices x 5 presets x 5 batch sizes x 5 learning rates x 2 thread counts x repeats, about 3% failed,
each with a learning curve of about 100 rows and the monitor's samples every 0.2 s), written once as run
folders under $DLBENCH_BENCH_DIR/after_training (about 4 minutes and 5 GB the first time). Each step runs
in its own process, as the workflow's jobs do, timed from outside (wall and CPU seconds, and the
process's peak resident memory):
- aggregate: collect.aggregate of every record, with an empty cache (a full reading), as the rule runs it;
- charts: draw.draw_all (HTML and SVG of every chart with data, and the index); findings: findings.write_findings;
- report: `snakemake --report` of a copy of the workflow whose results/ holds these files;
- aggregate, --added more points: after --added new run folders, with the cache the first one left.
Checks: every chart drawn (none "could not be drawn"), each HTML under 5 MB, a chart that samples says so.
Targets: aggregate + charts + findings + report under 60 s in all, each step's memory under 4 GB; the
incremental aggregation a small fraction of the full one.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _common as c

from dlbench.testing import sandbox, study

TARGET_S = 60.0
TARGET_MB = 4096
MAX_HTML_MB = 5.0
# Each step imports what its rule's script imports, no more.
STEP = """
import json, resource, sys
from pathlib import Path
out = Path(sys.argv[1])
step = sys.argv[2]
if step == "aggregate":
    from dlbench.aggregate import collect
    paths = [Path(p) for p in json.loads(Path(sys.argv[3]).read_text())]
    collect.aggregate(paths, out / "runs.parquet", out / "curves.parquet", out / "samples.parquet", membership={},
                      cache=out / ".aggregate-cache")
elif step == "charts":
    from dlbench.present.charts import draw
    draw.draw_all(out / "runs.parquet", out / "curves.parquet", out / "samples.parquet", out / "charts")
elif step == "findings":
    from dlbench.present import findings
    findings.write_findings(out / "runs.parquet", out / "curves.parquet", out / "findings.md")
print(json.dumps({"maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], cwd: Path | None = None) -> dict:
    cpu0 = _children_cpu_s()
    with c.ForeignCpu() as foreign:
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        wall = time.monotonic() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    try:
        rss = json.loads(proc.stdout.strip().splitlines()[-1])["maxrss_mb"]
    except (IndexError, ValueError, KeyError):
        rss = None
    return {"wall s": wall, "cpu s": _children_cpu_s() - cpu0, "peak MB": rss, "others' cores": foreign.cores}


def step(out: Path, name: str, *extra: str) -> dict:
    return timed([sys.executable, "-c", STEP, str(out), name, *extra])


def records_at(root: Path, n: int) -> list[Path]:
    """The large study's n run folders under root (written once, kept for the next run)."""
    done = root / f"written-{n}"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.monotonic()
        study.write_large_study(root / "runs", n)
        done.write_text(f"{time.monotonic() - t0:.0f} s\n")
    return sorted((root / "runs").glob("*/*/*/metrics.json"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000)
    ap.add_argument("--added", type=int, default=10)
    args = ap.parse_args(argv)
    root = c.WORK / "after_training"
    paths = records_at(root / f"study-{args.points}", args.points)
    extra_root = root / f"added-{args.added}"
    shutil.rmtree(extra_root, ignore_errors=True)
    extra = study.write_large_study(extra_root, args.added, seed=1)
    wf = sandbox.copy_workflow(root / "workflow", {"datasets": ["digits"], "frameworks": ["pytorch"],
                                                   "preset": ["caffe"], "sweep": {"iterations": [30]}})
    out = wf / "results"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    lists = root / "lists"
    lists.mkdir(exist_ok=True)
    (lists / "all.json").write_text(json.dumps([str(p) for p in paths]))
    (lists / "added.json").write_text(json.dumps([str(p) for p in paths + extra]))
    load = c.busy_cores(1.0)
    c.header(f"everything after training: {len(paths)} records", load)
    rows = [{"step": "aggregate (full, empty cache)", **step(out, "aggregate", str(lists / "all.json"))}]
    rows.append({"step": "charts", **step(out, "charts")})
    rows.append({"step": "findings", **step(out, "findings")})
    targets = ["results/findings.md", "results/charts"]
    rows.append({"step": "report (snakemake --report)", **timed(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "study.yaml", "--report", "report.html",
         *targets], cwd=wf)})
    total = {k: sum(r[k] for r in rows) for k in ("wall s", "cpu s")}
    peak = max(r["peak MB"] or 0 for r in rows)
    rows.append({"step": "all four", **total, "peak MB": peak,
                 "verdict": c.verdict(total["wall s"] < TARGET_S and peak < TARGET_MB)})
    full = rows[0]["wall s"]
    inc = step(out, "aggregate", str(lists / "added.json"))
    rows.append({"step": f"aggregate (+{args.added} points, cache)", **inc,
                 "verdict": f"{inc['wall s'] / full:.0%} of the full one"})
    # what the charts drew
    sizes = {p.stem: p.stat().st_size / 1e6 for p in (out / "charts").glob("*.html")}
    broken = [p.stem for p in (out / "charts").glob("*.svg") if "could not be drawn" in p.read_text()]
    sampled = [p.stem for p in (out / "charts").glob("*.svg") if "a random sample of" in p.read_text()]
    print(c.table([{"chart": k, "html MB": v, "sampled": k in sampled} for k, v in sorted(sizes.items())]))
    print(f"# charts: {len(sizes)} drawn, not drawn: {broken or 'none'}; largest HTML {max(sizes.values()):.2f} MB "
          f"(limit {MAX_HTML_MB:g}); report.html {(wf / 'report.html').stat().st_size / 1e6:.1f} MB; "
          f"findings.md {(out / 'findings.md').stat().st_size / 1e3:.0f} kB")
    c.summary(f"{len(paths)} records; targets: under {TARGET_S:g} s in all, under {TARGET_MB} MB; "
              f"records written in {(root / f'study-{args.points}' / f'written-{args.points}').read_text().strip()}",
              rows)
    return 0 if not broken and max(sizes.values()) < MAX_HTML_MB else 1


if __name__ == "__main__":
    sys.exit(main())
