"""Theano's compile cache across points: compile time and new compiled modules, per-process hash seed vs fixed.

    .venv/bin/python bench/theano_compile.py [--points 4] [--repeats 2]

Each point is a fresh trainer process (as in the workflow): Theano's LeNet on digits, 10 iterations, 1 thread,
each point its own learning rate (so nothing but the rate differs). Run twice in turn: with Python's hash seed
random per process (PYTHONHASHSEED unset, how every Theano point ran before) and fixed (PYTHONHASHSEED=0, what
the Theano record of dlbench/frameworks/registry.py now sets). Reported: the record's compile_time_s and the
modules that appeared in the environment's compile cache during the point. About 2 minutes.
"""

from __future__ import annotations

import os
import sys
import time

import _common as c

from dlbench.environments import key
from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point


def modules(cache) -> int:
    return sum(1 for _ in cache.rglob("mod.cpp"))


def main(argv: list[str] | None = None) -> int:
    ap = c.parser(__doc__, repeats=2)
    ap.add_argument("--points", type=int, default=4)
    args = ap.parse_args(argv)
    cache = key.env_dir("theano") / "theano-cache"
    data, python = c.dataset("digits"), c.env_python("theano")
    load = c.busy_cores(1.0)
    c.header("Theano compile cache: a fresh process per point, only the learning rate differs", load)
    got: dict[str, dict[str, list[float]]] = {"random": {"compile": [], "new": []}, "0": {"compile": [], "new": []}}
    rate = iter(0.0101 + 0.0007 * i for i in range(10_000))
    for _ in range(args.repeats):
        for seed in ("random", "0"):
            for _ in range(args.points):
                point = one_point("theano", iterations=10, threads=1, learning_rate=round(next(rate), 6))
                # the runner passes its own environment on; the Theano record's PYTHONHASHSEED is set over it
                record_env = measure.registry.get("theano").env
                saved = dict(record_env)
                record_env.pop("PYTHONHASHSEED", None)
                os.environ.pop("PYTHONHASHSEED", None)
                if seed != "random":
                    record_env["PYTHONHASHSEED"] = seed
                before = modules(cache)
                try:
                    rec = runner.run_point(point, data, c.WORK / "theano_compile" / f"{point['id']}-{time.time()}",
                                           RunOptions(python=python))
                finally:
                    record_env.clear()
                    record_env.update(saved)
                if rec["status"] != "ok":
                    raise SystemExit(f"{rec['status']}: {rec['reason']}")
                got[seed]["compile"].append(rec["compile_time_s"])
                got[seed]["new"].append(modules(cache) - before)
    rows = [{"PYTHONHASHSEED": seed, "points": len(v["compile"]), "compile s (median)": c.median(v["compile"]),
             "compile s (min)": min(v["compile"]), "new modules per point": sum(v["new"]) / len(v["new"])}
            for seed, v in got.items()]
    c.summary(f"{args.points} points x {args.repeats} rounds per seed, alternating", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
