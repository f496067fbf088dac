"""Repeatability: the same point run 5 times on a quiet machine; coefficient of variation of its training time.

    .venv/bin/python bench/repeatability.py [--framework pytorch] [--iterations 300] [--repeats 5] [--threads 1 2]

One point (Caffe's LeNet on prepared Fashion-MNIST, batch 64, --iterations iterations) through
runner.run_point, --repeats times per thread count, thread counts alternating (1, 2, 1, 2, ...).
Prints the training times, their median, and the coefficient of variation (sample standard
deviation / mean). Target: CV under 3%. About 2 minutes with the defaults.
"""

from __future__ import annotations

import shutil
import sys

import _common as c

from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

TARGET = 0.03


def main(argv: list[str] | None = None) -> int:
    ap = c.parser(__doc__, framework="pytorch", iterations=300, repeats=5, threads=[1, 2])
    ap.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE",
                    help="variables for the trainer (e.g. OMP_WAIT_POLICY=PASSIVE)")
    args = ap.parse_args(argv)
    ds = c.dataset("fashion_mnist")
    python = c.env_python(args.framework)
    load = c.wait_quiet()
    c.header(f"repeatability: {args.framework} LeNet, {args.iterations} iterations, {args.repeats} repeats"
             + (f", {' '.join(args.env)}" if args.env else ""), load)
    points = {t: one_point(args.framework, dataset=c.DATASET, iterations=args.iterations, batch_size=64, threads=t)
              for t in args.threads}
    times: dict[int, list[float]] = {t: [] for t in args.threads}
    for _ in range(args.repeats):
        for t, point in points.items():
            out = c.WORK / "repeatability" / point["id"]
            shutil.rmtree(out, ignore_errors=True)
            with c.trainer_env(dict(kv.split("=", 1) for kv in args.env)):
                rec = c.clean(runner.run_point, point, ds, out, RunOptions(python=python))
            if rec["status"] != "ok":
                raise SystemExit(f"{rec['status']}: {rec['reason']}")
            times[t].append(rec["train_time_s"])
    rows = [{"threads": t, "train_s": " ".join(f"{x:.3f}" for x in ts), "median s": c.median(ts),
             "CV": f"{100 * c.cv(ts):.2f}%", "target": "< 3%", "verdict": c.verdict(c.cv(ts) < TARGET)}
            for t, ts in times.items()]
    c.summary(f"{args.repeats} repeats", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
