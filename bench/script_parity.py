"""Script parity: each framework's point through dlbench against that framework's own way of training it.

    .venv/bin/python bench/script_parity.py [FRAMEWORK ...] [--iterations 500] [--repeats 3] [--threads 2]

Per framework, the same network, settings, data (prepared Fashion-MNIST) and length, run through
dlbench's runner (runner.run_point: the record's train_time_s and accuracy) and the framework's own
way, in pairs side by side whose order alternates (dlbench first, then own first, ...):

- tensorflow: its own-defaults point (mnist_deep, Adam 1e-4, batch 50) against the study's
  mnist_deep.py as TensorFlow 1 ran it, re-implemented under tf.compat.v1 (bench/own_ways.py);
- pytorch: its own-defaults point (Torch's MNIST example network, batch 10) against a bare loop of
  the same network (bench/own_ways.py);
- caffe: its own-defaults point (LeNet) against `caffe train` run by hand on the solver and net the
  adapter wrote, timed from glog (bench/adapter_speed.py);
- jax: its own-defaults point (Flax's MNIST example network, SGD 0.1 momentum 0.9, batch 128) against
  that example's own loop, numpy batches fed to a jitted step (bench/own_ways.py);
- theano: no loop of its own-defaults network (lenet5_tanh with validation) exists to compare with;
  its point of Caffe's LeNet preset against bench/hand_loops.py's `givens` loop of the same network.

Prints, per framework, the median over pairs of own time / dlbench time (>= 1: dlbench trains at
least as fast as the framework's own way) with the accuracies, and the load other processes put on
the machine during the pairs. The ratio is taken pair by pair, so a slow drift of the machine's load
falls on both sides; a figure for a quiet machine needs a run on one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import _common as c
from adapter_speed import caffe_hand_throughput, hand_throughput

from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

# Whose preset each framework's point takes: its own (the default), or Caffe's LeNet where only a
# hand loop of that network exists.
PRESET = {"tensorflow": "own", "pytorch": "own", "caffe": "own", "theano": "caffe", "jax": "own"}
OWN_WAY = {"tensorflow": "compat.v1 mnist_deep.py", "pytorch": "bare loop", "caffe": "caffe train",
           "theano": "hand loop (givens)", "jax": "Flax example's loop"}


def run_dlbench(point: dict, ds: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    rec = runner.run_point(point, ds, out, RunOptions(python=c.env_python(point["framework"])))
    if rec["status"] != "ok":
        raise SystemExit(f"dlbench run failed: {rec['status']}: {rec['reason']}\n{rec.get('log_tail', '')}")
    return {"train_time_s": rec["train_time_s"], "accuracy": rec["accuracy"]}


def run_own(point: dict, ds: Path, out: Path) -> dict:
    fw, iterations = point["framework"], point["iterations"]
    if fw == "caffe":  # needs the solver dlbench wrote: the dlbench side of the pair has run
        img_s, _ = caffe_hand_throughput(point, out, iterations)
        return {"train_time_s": iterations * point["batch_size"] / img_s, "accuracy": None}
    if fw == "theano":
        img_s, _ = hand_throughput(point, "givens", ds, iterations)
        return {"train_time_s": iterations * point["batch_size"] / img_s, "accuracy": None}
    env = measure.trainer_env(point)
    env.pop("TF_NUM_INTEROP_THREADS", None)  # the script's plain Session: TensorFlow's own inter-op default
    proc = subprocess.run([c.env_python(fw), str(c.REPO / "bench" / "own_ways.py"), fw, str(ds), str(iterations),
                           str(point["threads"])], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"own way of {fw} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pair(point: dict, ds: Path, out: Path, own_first: bool) -> tuple[dict, dict, float]:
    """(dlbench, own, cores others kept busy meanwhile); Caffe's own run needs dlbench's solver, so it runs second."""
    with c.ForeignCpu() as foreign:
        if own_first and point["framework"] != "caffe":
            own = run_own(point, ds, out)
            mine = run_dlbench(point, ds, out)
        else:
            mine = run_dlbench(point, ds, out)
            own = run_own(point, ds, out)
    return mine, own, foreign.cores


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__, frameworks=list(PRESET), iterations=500, repeats=3).parse_args(argv)
    ds = c.dataset("fashion_mnist")
    threads = 2
    busy = c.busy_cores(1.0)
    c.header("script parity: a framework's own way / dlbench (training-time ratio, >= 1: dlbench as fast)", busy)
    rows = []
    for fw in c.usable(args.frameworks):
        point = one_point(fw, preset=PRESET[fw], dataset=c.DATASET, iterations=args.iterations, threads=threads)
        out = c.WORK / "script_parity" / fw
        got = [pair(point, ds, out, r % 2 == 1) for r in range(args.repeats)]
        ratios = [own["train_time_s"] / mine["train_time_s"] for mine, own, _ in got]
        rows.append({"framework": fw, "network": point["network"], "own way": OWN_WAY[fw],
                     "iterations": args.iterations, "batch": point["batch_size"],
                     "dlbench s": c.median([m["train_time_s"] for m, _, _ in got]),
                     "own s": c.median([o["train_time_s"] for _, o, _ in got]),
                     "own / dlbench": c.median(ratios), "min": min(ratios), "max": max(ratios),
                     "dlbench acc": c.median([m["accuracy"] for m, _, _ in got]),
                     "own acc": c.median([o["accuracy"] for _, o, _ in got]) if got[0][1]["accuracy"] else None,
                     "others' cores": c.median([f for _, _, f in got]), "load1": round(os.getloadavg()[0], 2)})
        print(c.table(rows[-1:]), flush=True)
    c.summary(f"{args.repeats} pairs per framework, {args.iterations} iterations, {threads} threads, median of "
              "paired ratios; others' cores: the cores other processes kept busy during the pairs", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
