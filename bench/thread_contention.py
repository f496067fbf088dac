"""Threads under contention: a 2-thread point while one other busy process shares the 2 cores.

    .venv/bin/python bench/thread_contention.py [--iterations 100] [--repeats 2] [FRAMEWORK ...]

The same point (Caffe's LeNet on prepared Fashion-MNIST, batch 64) through runner.run_point with
threads=1 and threads=2, on the quiet machine and beside one busy process (a Python loop this
script starts and stops), side by side. For PyTorch also with OMP_WAIT_POLICY=PASSIVE (libgomp's
threads sleep at once at a barrier instead of spinning first) and GOMP_SPINCOUNT=10000 (a short spin).
Prints training time, the slowdown of threads=2 against threads=1 in the same condition, and
the trainer's mean CPU (the monitor's cpu_util_mean_pct). Figure: reported (see docs/performance.md).
About 5 minutes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import _common as c

from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

VARIANTS = {
    "pytorch": [(1, {}), (2, {}), (2, {"OMP_WAIT_POLICY": "PASSIVE"}), (2, {"GOMP_SPINCOUNT": "10000"})],
    "tensorflow": [(1, {}), (2, {})],
    "theano": [(1, {}), (2, {})],
    "caffe": [(1, {}), (2, {})],
}


def run(point: dict, ds, extra_env: dict) -> dict:
    out = c.WORK / "thread_contention" / point["id"]
    shutil.rmtree(out, ignore_errors=True)
    with c.trainer_env(extra_env):
        rec = runner.run_point(point, ds, out, RunOptions(python=c.env_python(point["framework"])))
    if rec["status"] != "ok":
        raise SystemExit(f"{point['framework']}: {rec['status']}: {rec['reason']}")
    return rec


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__, frameworks=["pytorch", "tensorflow", "theano"], iterations=100,
                    repeats=2).parse_args(argv)
    ds = c.dataset("fashion_mnist")
    load = c.wait_quiet()
    c.header("threads under contention: one busy process beside a training point", load)
    got: dict[tuple, list[dict]] = {}
    for _ in range(args.repeats):
        for condition in ("quiet", "1 busy process"):
            hog = None
            if condition != "quiet":
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                for fw in args.frameworks:
                    for threads, env in VARIANTS[fw]:
                        point = one_point(fw, dataset=c.DATASET, iterations=args.iterations, batch_size=64,
                                          threads=threads)
                        key = (condition, fw, threads, " ".join(f"{k}={v}" for k, v in env.items()) or "default")
                        # Others' load is guarded against on the quiet machine (our own busy process would count).
                        rec = c.clean(run, point, ds, env) if hog is None else run(point, ds, env)
                        got.setdefault(key, []).append(rec)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
    rows = []
    for (condition, fw, threads, env), recs in got.items():
        t = c.median([r["train_time_s"] for r in recs])
        one = c.median([r["train_time_s"] for r in got[(condition, fw, 1, "default")]])
        rows.append({"condition": condition, "framework": fw, "threads": threads, "env": env, "train s": t,
                     "vs threads=1": f"{t / one:.2f}x", "trainer CPU %": c.median([r["cpu_util_mean_pct"]
                                                                                 for r in recs])})
    c.summary(f"{args.repeats} repeats, {args.iterations} iterations", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
