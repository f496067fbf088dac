"""Records rebuilt: 20,000 points' records made again from their raw measurements, as the record rule does after a
change to how a record is made (dlbench.run.rebuild), training nothing.

    .venv/bin/python bench/record_rebuild.py [--points 20000] [--repeats 3] [--source RUN_DIR]

One real run folder (by default the aggregation benchmark's: a PyTorch LeNet point on prepared Fashion-MNIST, 1,000
iterations, tests every 500, the monitor at 0.2 s, trained once) is copied --points times as a raw measurement,
each copy with its own point id (point.json, and measurement.json naming its files; the trainer's events and log
and the monitor's samples hard links of the source's) and the source's record beside it. Then, timed from outside
(wall and CPU seconds of this process and the rule's workers):
- `changed`: the record rule after a change to how records are made that changes every record (another code
  digest; each copy's record, the source's, is not its own): every record made again and written;
- `unchanged`: the rule run again with nothing changed: every folder checked (two stats), nothing made;
- `same output`: after a change that changes no record (another digest again): every record made again, none
  written (each compared with the one there).
Target: `changed` under 60 s at 20,000 points (a change to how a record is made rebuilds a finished study in
seconds, against the hours its training took). About 10 minutes for 20,000 points on 2 cores, most of it the
copies; about 600 MB of disk in the bench folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import _common as c
from aggregation import source_run

from dlbench.record import raw, store
from dlbench.run import earlier_layout, rebuild

TARGET_S = 60.0


def copies(src: Path, n: int, root: Path) -> list[Path]:
    """n raw measurements, each a copy of src's with its own point id."""
    shutil.rmtree(root, ignore_errors=True)
    point = json.loads((src / raw.POINT).read_text())
    kept = json.loads((src / raw.MEASUREMENT).read_text())
    folders = []
    for i in range(n):
        rid = f"{point['id']}-copy{i:05d}"
        dest = root / point["framework"] / point["dataset"] / rid
        dest.mkdir(parents=True)
        for name in (raw.EVENTS, raw.LOG, raw.MONITOR):
            os.link(src / name, dest / name)
        (dest / raw.POINT).write_text(json.dumps({**point, "id": rid}, indent=2, sort_keys=True))
        files = {**kept["files"], raw.POINT: raw.file_facts(dest / raw.POINT)}
        (dest / raw.MEASUREMENT).write_text(json.dumps({**kept, "attempt_id": f"copy{i:05d}", "files": files}))
        folders.append(dest)
    return folders


def stale_records(src: Path, folders: list[Path]) -> None:
    """The source's record and tables beside every copy: a record that is not the copy's own."""
    for dest in folders:
        for name in (store.RESULT, *store.TABLES):
            shutil.copy(src / name, dest / name)


def cpu_s() -> float:
    """CPU seconds of this process and its children (the record rule's workers, reaped when it returns)."""
    return sum(ru.ru_utime + ru.ru_stime for ru in (resource.getrusage(resource.RUSAGE_SELF),
                                                     resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed(folders: list[Path], index: Path, code: str) -> tuple[float, float, rebuild.Rebuilt]:
    t0, c0 = time.perf_counter(), cpu_s()
    counts = rebuild.rebuild(folders, index, code, say=lambda line: None)
    return time.perf_counter() - t0, cpu_s() - c0, counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--source", type=Path, help="a finished run folder to copy (default: the aggregation's)")
    args = ap.parse_args(argv)
    src = args.source or source_run()
    earlier_layout.adopt(src)  # a source an earlier dlbench trained: its raw measurement put apart first
    root = c.WORK / "record_rebuild"
    events = sum(1 for _ in open(src / raw.EVENTS))
    samples = sum(1 for _ in open(src / raw.MONITOR))
    folders = copies(src, args.points, root / "runs")
    index = root / "records.json"
    rows = []
    load = c.wait_quiet()
    c.header(f"records rebuilt from raw measurements: {args.points} points ({events} events, {samples} monitor "
             "samples each)", load)
    for repeat in range(args.repeats):
        stale_records(src, folders)
        index.unlink(missing_ok=True)
        for what, code in (("changed", f"a{repeat}"), ("unchanged", f"a{repeat}"), ("same output", f"b{repeat}")):
            with c.ForeignCpu() as foreign:
                wall, cpu, counts = timed(folders, index, code)
            rows.append({"points": args.points, "run": what, "repeat": repeat + 1, "wall s": wall, "cpu s": cpu,
                         "made": counts.made, "written": counts.written, "others' cores": foreign.cores})
            print(c.table(rows[-1:]), flush=True)
    changed = [r["wall s"] for r in rows if r["run"] == "changed"]
    verdict = c.verdict(c.median(changed) <= TARGET_S)
    c.summary(f"median of {args.repeats} `changed`: {c.median(changed):.1f} s ({verdict} against {TARGET_S:g} s)", rows)
    shutil.rmtree(root / "runs", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
