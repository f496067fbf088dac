"""Fidelity of memory: the peak RSS the monitor sees of a process that holds a known block for 0.3 s.

    .venv/bin/python bench/memory_fidelity.py [--mb 500] [--hold 0.3] [--repeats 5]

A trainer-like process starts, waits 0.5 s, allocates a block of --mb MiB and writes every page,
holds it --hold seconds, frees it, waits 0.5 s and exits; it reports its own kernel high-water
mark (getrusage ru_maxrss), the known peak. The same process is watched by:
- dlbench's Monitor (dlbench.run.monitor, as runner.run_point uses it) at 0.2 s (the default) and 0.1 s;
- Snakemake's `benchmark:` directive: a one-rule Snakefile in a temporary folder runs it, and
  the benchmark file's max_rss is read.
Runs alternate (monitor 0.2 s, monitor 0.1 s, Snakemake, ...). The figure is the median and the
worst of peak seen / known peak. Target: the monitor within 5% of the known peak (every repeat).
About 1 minute.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import _common as c

from dlbench.run.monitor import Monitor

ALLOC = textwrap.dedent("""
    import json, resource, sys, time
    mb, hold = int(sys.argv[1]), float(sys.argv[2])
    time.sleep(0.5)
    block = bytearray(mb * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(hold)
    del block
    time.sleep(0.5)
    print(json.dumps({"maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""")
SNAKEFILE = textwrap.dedent("""
    rule alloc:
        output: "done.json"
        benchmark: "bench.tsv"
        shell: "{python} {script} {mb} {hold} > {{output}}"
""")
TARGET = 0.05


def with_monitor(script: Path, mb: int, hold: float, interval: float) -> tuple[float, float]:
    proc = subprocess.Popen([sys.executable, str(script), str(mb), str(hold)], stdout=subprocess.PIPE, text=True)
    mon = Monitor(proc.pid, interval).start()
    out, _ = proc.communicate()
    mon.stop()
    return max(s["rss_mb"] for s in mon.samples), json.loads(out)["maxrss_mb"]


def with_snakemake(folder: Path) -> tuple[float, float]:
    for name in ("done.json", "bench.tsv"):
        (folder / name).unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--quiet", "all"], cwd=folder, check=True,
                   capture_output=True)
    with open(folder / "bench.tsv") as fh:
        row = next(csv.DictReader(fh, delimiter="\t"))
    seen = float(row["max_rss"]) if row["max_rss"] not in ("NA", "-", "") else float("nan")
    return seen, json.loads((folder / "done.json").read_text())["maxrss_mb"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--hold", type=float, default=0.3)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    load = c.wait_quiet()
    c.header(f"fidelity of memory: a {args.mb} MiB block held {args.hold} s", load)
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp:
        folder = Path(tmp)
        script = folder / "alloc.py"
        script.write_text(ALLOC)
        (folder / "Snakefile").write_text(SNAKEFILE.format(python=sys.executable, script=script, mb=args.mb,
                                                           hold=args.hold))
        got: dict[str, list[tuple[float, float]]] = {"monitor 0.2 s": [], "monitor 0.1 s": [], "snakemake": []}
        for _ in range(args.repeats):
            got["monitor 0.2 s"].append(with_monitor(script, args.mb, args.hold, 0.2))
            got["monitor 0.1 s"].append(with_monitor(script, args.mb, args.hold, 0.1))
            got["snakemake"].append(with_snakemake(folder))
    rows = []
    for name, pairs in got.items():
        ratios = [s / k for s, k in pairs]
        worst = max(ratios, key=lambda r: abs(r - 1) if r == r else float("inf"))
        ok = all(abs(r - 1) <= TARGET for r in ratios)
        rows.append({"watcher": name, "known peak MiB": c.median([k for _, k in pairs]),
                     "seen MiB (median)": c.median([s for s, _ in pairs]), "seen/known (median)": c.median(ratios),
                     "worst": worst, "target": "within 5%" if name != "snakemake" else "(reported)",
                     "verdict": c.verdict(ok) if name != "snakemake" else ("within 5%" if ok else "misses")})
    c.summary(f"{args.repeats} repeats; known peak = the process's own ru_maxrss", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
