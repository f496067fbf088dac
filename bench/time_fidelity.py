"""Fidelity of time: the record's train and test times against an outside clock around the same phases.

    .venv/bin/python bench/time_fidelity.py [FRAMEWORK ...] [--iterations 300] [--repeats 3]

While runner.run_point trains a point (Caffe's LeNet on prepared Fashion-MNIST, batch 64, no tests
during training), a thread of this process tails the trainer's events.jsonl every millisecond and
stamps, on its own monotonic clock, the moment each phase line appears. The outside train time is
the time between the `train` phase's start and end lines as seen from outside; the outside test
time likewise for the `test` phase; the outside wall time is this process's clock around run_point.
Each is compared with the record's train_time_s, test_time_s and wall_time_s.
Target: within 1% or 20 ms (whichever is larger). About 2-3 minutes for the four frameworks.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import _common as c

from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

TOL_S, TOL_REL = 0.020, 0.01


class Tail(threading.Thread):
    """Stamps each line of a file with this process's monotonic clock when it first shows."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.lines: list[tuple[float, dict]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.path.exists():
            if self.done.is_set():
                return
            time.sleep(0.001)
        buf = b""
        with open(self.path, "rb") as fh:  # the open file survives the runner moving it into place
            while True:
                chunk = fh.read()
                now = time.monotonic()
                if chunk:
                    buf += chunk
                    *whole, buf = buf.split(b"\n")
                    for line in whole:
                        try:
                            self.lines.append((now, json.loads(line)))
                        except json.JSONDecodeError:
                            pass
                elif self.done.is_set():
                    return
                else:
                    time.sleep(0.001)

    def seen(self, event: str, name: str) -> float | None:
        return next((t for t, e in self.lines if e.get("e") == event and e.get("name") == name), None)


def within(record: float, outside: float) -> bool:
    return abs(record - outside) <= max(TOL_S, TOL_REL * outside)


def measure(fw: str, point: dict, ds: Path) -> dict:
    out = c.WORK / "time_fidelity" / point["id"]
    shutil.rmtree(out, ignore_errors=True)
    tail = Tail(out.parent / f".{out.name}.partial-{os.getpid()}" / "events.jsonl")
    tail.start()
    t0 = time.monotonic()
    rec = runner.run_point(point, ds, out, RunOptions(python=c.env_python(fw)))
    wall = time.monotonic() - t0
    tail.done.set()
    tail.join()
    if rec["status"] != "ok":
        raise SystemExit(f"{fw}: {rec['status']}: {rec['reason']}")
    train = tail.seen("phase_end", "train") - tail.seen("phase_start", "train")
    test = tail.seen("phase_end", "test") - tail.seen("phase_start", "test")
    return {"train": (rec["train_time_s"], train), "test": (rec["test_time_s"], test),
            "wall": (rec["wall_time_s"], wall)}


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__, frameworks=c.ALL_FRAMEWORKS, iterations=300, repeats=3).parse_args(argv)
    frameworks = c.usable(args.frameworks)
    ds = c.dataset("fashion_mnist")
    load = c.wait_quiet()
    c.header("fidelity of time: record vs an outside clock (tailing events.jsonl)", load)
    got: dict[str, list[dict]] = {fw: [] for fw in frameworks}
    for _ in range(args.repeats):
        for fw in frameworks:  # frameworks in turn, repeat after repeat
            point = one_point(fw, dataset=c.DATASET, iterations=args.iterations, batch_size=64, threads=1)
            got[fw].append(c.clean(measure, fw, point, ds))
    rows = []
    for fw in frameworks:
        for what in ("train", "test", "wall"):
            pairs = [m[what] for m in got[fw]]
            worst = max(pairs, key=lambda p: abs(p[0] - p[1]))
            rows.append({"framework": fw, "phase": what, "record s (median)": c.median([r for r, _ in pairs]),
                         "outside s (median)": c.median([o for _, o in pairs]),
                         "worst diff ms": 1000.0 * (worst[0] - worst[1]),
                         "worst diff %": 100.0 * (worst[0] - worst[1]) / worst[1],
                         "target": "1% or 20 ms", "verdict": c.verdict(all(within(r, o) for r, o in pairs))})
    c.summary(f"{args.repeats} repeats each, threads 1, {args.iterations} iterations", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
