"""Monitor cost: the same training point with the monitor off, at 0.2 s (the default) and at 0.1 s.

    .venv/bin/python bench/monitor_cost.py [--framework pytorch] [--iterations 300] [--repeats 5] [--threads 1 2]

Runs runner.run_point on one point (Caffe's LeNet on prepared Fashion-MNIST, batch 64) in turn with
monitor=False, interval_s=0.2 and interval_s=0.1 (off, 0.2, 0.1, off, ...) and prints:
- the training time with the monitor against without it: the median over rounds of each round's
  ratio (a round runs off, 0.2 s and 0.1 s one after the other) (target: within 1%);
- the monitor's own CPU, the record's monitor_cpu_s / wall_time_s, in % of one core (target at
  0.1 s: under 1%), and its cost per sample.
About 6 minutes with the defaults.
"""

from __future__ import annotations

import shutil
import sys

import _common as c

from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

MODES = [("off", None), ("0.2 s", 0.2), ("0.1 s", 0.1)]


def one_round(point: dict, ds, python: str) -> dict[str, dict]:
    recs = {}
    for name, interval in MODES:
        out = c.WORK / "monitor_cost" / point["id"]
        shutil.rmtree(out, ignore_errors=True)
        rec = runner.run_point(point, ds, out,
                               RunOptions(python=python, interval_s=interval or 0.2, monitor=interval is not None))
        if rec["status"] != "ok":
            raise SystemExit(f"{rec['status']}: {rec['reason']}")
        recs[name] = rec
    return recs


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__, framework="pytorch", iterations=300, repeats=7, threads=[1, 2]).parse_args(argv)
    ds = c.dataset("fashion_mnist")
    python = c.env_python(args.framework)
    load = c.wait_quiet()
    c.header(f"monitor cost ({args.framework}, {args.iterations} iterations, {args.repeats} repeats)", load)
    rows = []
    for threads in args.threads:
        point = one_point(args.framework, dataset=c.DATASET, iterations=args.iterations, batch_size=64, threads=threads)
        train: dict[str, list[float]] = {m: [] for m, _ in MODES}
        own: dict[str, list[float]] = {m: [] for m, _ in MODES}
        per_sample: dict[str, list[float]] = {m: [] for m, _ in MODES}
        for _ in range(args.repeats):
            for name, rec in c.clean(one_round, point, ds, python).items():  # off, 0.2, 0.1 side by side
                train[name].append(rec["train_time_s"])
                own[name].append(100.0 * rec["monitor_cpu_s"] / rec["wall_time_s"])
                if rec["samples"]:
                    per_sample[name].append(1000.0 * rec["monitor_cpu_s"] / rec["samples"])
        for name, interval in MODES:
            t = c.median(train[name])
            vs = c.median([a / b for a, b in zip(train[name], train["off"])]) - 1  # paired, round by round
            row = {"threads": threads, "monitor": name, "train_s (median)": t, "vs off": f"{100.0 * vs:+.2f}%"}
            if interval is None:
                row.update({"time verdict": "-"})
            else:
                row.update({"time verdict": c.verdict(abs(vs) <= 0.01),
                            "monitor CPU % of a core": c.median(own[name]),
                            "ms CPU/sample": c.median(per_sample[name]) if per_sample[name] else None,
                            "CPU verdict (<1% at 0.1 s)": c.verdict(c.median(own[name]) < 1.0)
                            if interval == 0.1 else "-"})
            rows.append(row)
        print(c.table(rows[-len(MODES):]), flush=True)
    c.summary("all: target training time within 1% of off; monitor CPU < 1% of one core at 0.1 s",
              rows, ["threads", "monitor", "train_s (median)", "vs off", "time verdict",
                     "monitor CPU % of a core", "ms CPU/sample", "CPU verdict (<1% at 0.1 s)"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
