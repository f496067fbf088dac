"""Repeatability: the same point run 5 times on a quiet machine; coefficient of variation of its training time.

    .venv/bin/python bench/repeatability.py [--framework pytorch] [--iterations 300] [--repeats 5] [--threads 1 2]

One point (Caffe's LeNet on prepared Fashion-MNIST, batch 64, --iterations iterations) through
runner.run_point, --repeats times per thread count, thread counts alternating (1, 2, 1, 2, ...).
Prints the training times, their median, and the coefficient of variation (sample standard
deviation / mean). Target: CV under 3%. About 2 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import shutil
import sys

import _common as c

from dlbench import runner

TARGET = 0.03


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", default="pytorch")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    ds = c.dataset("fashion_mnist")
    python = c.env_python(args.framework)
    load = c.wait_quiet()
    c.header(f"repeatability: {args.framework} LeNet, {args.iterations} iterations, {args.repeats} repeats", load)
    points = {t: c.make_point(args.framework, iterations=args.iterations, batch_size=64, threads=t)
              for t in args.threads}
    times: dict[int, list[float]] = {t: [] for t in args.threads}
    loads: list[float] = []
    for _ in range(args.repeats):
        for t, point in points.items():
            out = c.WORK / "repeatability" / point["id"]
            shutil.rmtree(out, ignore_errors=True)
            loads.append(c.load1())
            rec = c.clean(runner.run_point, point, ds, out, python=python)
            if rec["status"] != "ok":
                raise SystemExit(f"{rec['status']}: {rec['reason']}")
            times[t].append(rec["train_time_s"])
    rows = [{"threads": t, "train_s": " ".join(f"{x:.3f}" for x in ts), "median s": c.median(ts),
             "CV": f"{100 * c.cv(ts):.2f}%", "target": "< 3%", "verdict": c.verdict(c.cv(ts) < TARGET)}
            for t, ts in times.items()]
    print(f"# 1-min load during the runs: {min(loads):.2f} .. {max(loads):.2f}; at end {c.load1():.2f}; "
          f"{c.discarded_note()}")
    print(c.table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
