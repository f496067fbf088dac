"""Script parity: each framework's own-defaults point through dlbench against that framework's own documented way.

    .venv/bin/python bench/script_parity.py [FRAMEWORK ...] [--repeats 5] [--threads 2] [--iterations N]

Per framework, its own-defaults point (preset `own`) on the prepared Fashion-MNIST, shortened to a number of
iterations (ITERATIONS below, or --iterations for all), once through dlbench's runner (runner.run_point: the
record's train_time_s) and once the way that framework's own documentation trains it, on the same network,
data (the point's input handling), batch size, settings and number of steps, in pairs run side by side whose
order alternates (dlbench first, then the own way first, ...):

- tensorflow: three lines: the study's mnist_deep.py as TensorFlow 1 ran it (a Session, under tf.compat.v1);
  the same script as TensorFlow's migration guide has TensorFlow 2 run it (a tf.function step, the script's
  AdamOptimizer); and Keras `fit`, as TensorFlow 2's own documentation trains a network (bench/own_ways.py);
- pytorch: PyTorch's MNIST example's train() loop, DataLoader and all (bench/own_ways.py);
- jax: Flax's MNIST example's train_epoch, apply_model and update_model (bench/own_ways.py);
- theano: the Theano tutorial's LeNet loop, a compiled train_model with updates and givens (bench/own_ways.py);
- caffe: `caffe train` run by hand on the solver and net the adapter wrote, timed from glog (bench/adapter_speed.py).

Each side's time is its training steps alone: dlbench's train_time_s, and the own way's clock around its loop,
both with the first step and neither with building, compiling or tests. The figure is, pair by pair, dlbench's
training time / the own way's; per framework one line: the median of those ratios, their spread (lowest and
highest) and the verdict against the target, within 5 % both ways (0.95 to 1.05): a default point faster than
the framework's own way is as wrong as a slower one. Also the accuracies, and the cores other processes kept busy
during the pairs (the ratio is taken pair by pair, so a slow drift of the machine's load falls on both sides; a
figure to record needs a quiet machine: about 20 minutes for all five with the defaults).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import _common as c
from adapter_speed import caffe_hand_throughput

from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

# Iterations per pair side: about 10-40 s of training on 2 cores, long enough that a step's noise averages out.
ITERATIONS = {"tensorflow": 500, "caffe": 500, "pytorch": 2000, "theano": 100, "jax": 200}
# Each framework's own ways (bench/own_ways.py's names, "caffe" is `caffe train`), each with its line's label.
OWN_WAYS = {"tensorflow": {"tensorflow": "mnist_deep.py (compat.v1)", "tensorflow_migrated": "mnist_deep.py migrated",
                           "keras_fit": "Keras fit"},
            "pytorch": {"pytorch": "MNIST example's train()"}, "caffe": {"caffe": "caffe train"},
            "theano": {"theano": "tutorial's LeNet train_model"}, "jax": {"jax": "Flax example's train_epoch"}}
TARGET = 0.05  # within 5 % of the own way's time, both ways
OTHERS = "others' cores"


def run_dlbench(point: dict, ds: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    rec = runner.run_point(point, ds, out, RunOptions(python=c.env_python(point["framework"])))
    if rec["status"] != "ok":
        raise SystemExit(f"dlbench run failed: {rec['status']}: {rec['reason']}\n{rec.get('log_tail', '')}")
    return {"train_time_s": rec["train_time_s"], "accuracy": rec["accuracy"]}


def run_own(way: str, point: dict, ds: Path, out: Path) -> dict:
    fw, iterations = point["framework"], point["iterations"]
    if way == "caffe":  # needs the solver dlbench wrote: the dlbench side of the pair has run
        img_s, _ = caffe_hand_throughput(point, out, iterations)
        return {"train_time_s": iterations * point["batch_size"] / img_s, "accuracy": None}
    env = measure.trainer_env(point)  # the variables a trainer gets: threads, the framework's own
    env.pop("TF_NUM_INTEROP_THREADS", None)  # a plain Session, or fit: TensorFlow's own inter-op default
    spec = out.parent / f"{fw}-point.json"
    spec.write_text(json.dumps(point))
    proc = subprocess.run([c.env_python(fw), str(c.REPO / "bench" / "own_ways.py"), way, str(spec), str(ds)],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"own way {way} of {fw} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pair(point: dict, ds: Path, out: Path, own_first: bool) -> tuple[dict, dict[str, dict], float]:
    """(dlbench, {own way: its run}, cores others kept busy meanwhile), side by side; Caffe's own run needs
    dlbench's solver, so it runs second."""
    ways = list(OWN_WAYS[point["framework"]])
    with c.ForeignCpu() as foreign:
        if own_first and point["framework"] != "caffe":
            own = {way: run_own(way, point, ds, out) for way in ways}
            mine = run_dlbench(point, ds, out)
        else:
            mine = run_dlbench(point, ds, out)
            own = {way: run_own(way, point, ds, out) for way in ways}
    return mine, own, foreign.cores


def verdict(ratios: list[float]) -> str:
    """Within the target both ways, by the median of the paired ratios; the spread says how sure."""
    median = c.median(ratios)
    if abs(median - 1) <= TARGET:
        return "PASS"
    return "MISS (dlbench faster)" if median < 1 else "MISS (dlbench slower)"


def line(fw: str, way: str, point: dict, pairs: list[tuple[dict, dict[str, dict], float]]) -> dict:
    got = [(mine, own[way], foreign) for mine, own, foreign in pairs]
    ratios = [mine["train_time_s"] / own["train_time_s"] for mine, own, _ in got]
    return {"framework": fw, "own way": OWN_WAYS[fw][way], "network": point["network"], "batch": point["batch_size"],
            "iterations": point["iterations"], "pairs": len(got),
            "dlbench s": c.median([m["train_time_s"] for m, _, _ in got]),
            "own s": c.median([o["train_time_s"] for _, o, _ in got]),
            "dlbench / own": c.median(ratios), "lowest": min(ratios), "highest": max(ratios),
            "target": f"1 +/- {TARGET:g}", "verdict": verdict(ratios),
            "dlbench acc": c.median([m["accuracy"] for m, _, _ in got]),
            "own acc": c.median([o["accuracy"] for _, o, _ in got]) if got[0][1]["accuracy"] is not None else None,
            OTHERS: c.median([f for _, _, f in got])}


def main(argv: list[str] | None = None) -> int:
    ap = c.parser(__doc__, frameworks=list(ITERATIONS), repeats=5, threads=[2])
    ap.add_argument("--iterations", type=int, default=None, help="iterations per side for every framework "
                    "(default: each framework's own, ITERATIONS)")
    args = ap.parse_args(argv)
    unknown = [fw for fw in args.frameworks if fw not in ITERATIONS]
    if unknown:
        raise SystemExit(f"no own way to compare {', '.join(unknown)} with; choose from {', '.join(ITERATIONS)}")
    ds = c.dataset("fashion_mnist")
    busy = c.busy_cores(1.0)
    c.header("script parity: dlbench's own-defaults point / the framework's own way (training-time ratio)", busy)
    rows = []
    for fw in c.usable(args.frameworks):
        for threads in args.threads:
            point = one_point(fw, preset="own", dataset=c.DATASET, iterations=args.iterations or ITERATIONS[fw],
                              threads=threads)
            out = c.WORK / "script_parity" / fw / "run"
            out.parent.mkdir(parents=True, exist_ok=True)
            got = [pair(point, ds, out, r % 2 == 1) for r in range(args.repeats)]
            for way in OWN_WAYS[fw]:
                rows.append({**line(fw, way, point, got), "threads": threads})
                r = rows[-1]
                print(f"{fw:<10} {threads} thread(s) against {r['own way']}: dlbench / own {r['dlbench / own']:.3f} "
                      f"(pairs {r['lowest']:.3f}-{r['highest']:.3f}, n {r['pairs']}) {r['verdict']}; "
                      f"{r['dlbench s']:.4g} s / {r['own s']:.4g} s; others kept {r[OTHERS]:.2f} cores busy",
                      flush=True)
    c.summary(f"{args.repeats} pairs per framework, median of the paired ratios dlbench / own (training time; "
              f"1 = the same; target within {TARGET:.0%} both ways); others' cores: the cores other processes kept "
              f"busy during the pairs, load1 {os.getloadavg()[0]:.2f}", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
