"""Adapter speed: dlbench's training loop against a minimal hand-written loop of the same framework.

    .venv/bin/python bench/adapter_speed.py [FRAMEWORK ...] [--iterations 200] [--repeats 3] [--threads 1 2]

Per framework and thread count: the same point (Caffe's LeNet on prepared Fashion-MNIST, batch 64,
SGD momentum 0.9, weight decay 5e-4) once through dlbench (runner.run_point, the record's
throughput_img_s) and once through each hand loop of bench/hand_loops.py in the framework's own
environment with the same thread variables, interleaved (dlbench-hand, then hand-dlbench, ...). The
figure (`ratio`) is the median over repeats of dlbench's throughput / the hand loop's, each
repeat's pair taken side by side, every iteration counted on both sides (the first one, with its
one-time graph optimisation and primitive creation, included, as in the record). `steady ratio`
leaves out the first iteration(s) on both sides: the loops' own speed; Keras fit traces in its
first step and is judged on it. Target: >= 0.97. PyTorch's `channels_last` hand loop is paired with dlbench's
point of the same layout (`memory_format: channels_last`), its `loop` with the default point (contiguous).

Caffe, where its adapter and environment are there: dlbench's caffe point against `caffe train` run
by hand on the solver and net the adapter wrote (trainer.log), timed from the same glog lines.
About 2-4 minutes per framework with the defaults.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as c

from dlbench.frameworks import protocol
from dlbench.run import measure, runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point

HAND_VARIANTS = {"pytorch": ["loop", "channels_last"], "tensorflow": ["function", "fit"], "theano": ["givens"]}
# The dlbench point a hand loop is paired with, where it is not the default point: the same opt-ins on both sides.
VARIANT_POINT = {"channels_last": {"memory_format": "channels_last"}}
TARGET = 0.97


def dlbench_throughput(point: dict, ds: Path, out_root: Path) -> tuple[float, float]:
    """The record's throughput, and the steady state's: from the first `step` event to the end."""
    out = out_root / f"{point['framework']}-{point['id']}"
    shutil.rmtree(out, ignore_errors=True)
    rec = runner.run_point(point, ds, out, RunOptions(python=c.env_python(point["framework"])))
    if rec["status"] != "ok":
        raise SystemExit(f"dlbench run failed: {rec['status']}: {rec['reason']}\n{rec.get('log_tail', '')}")
    first = next(e for e in protocol.read(out / "events.jsonl") if e["e"] == "step")
    steady = (rec["iterations"] - first["iteration"]) * point["batch_size"] / (rec["train_time_s"]
                                                                              - first["train_time_s"])
    return rec["throughput_img_s"], steady


def hand_throughput(point: dict, variant: str, ds: Path, iterations: int) -> tuple[float | None, float]:
    env = measure.trainer_env(point)  # the thread variables the runner gives a trainer
    cmd = [c.env_python(point["framework"]), str(c.REPO / "bench" / "hand_loops.py"), point["framework"], variant,
           str(ds), str(iterations), str(point["batch_size"]), str(point["threads"])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"hand loop {point['framework']}/{variant} failed:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    return got["throughput_img_s"], got["steady_throughput_img_s"]


GLOG_TIME = re.compile(r"^[IWEF](?:\d{4})?(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})")


def _glog_s(line: str) -> float | None:
    m = GLOG_TIME.match(line)
    if not m:
        return None
    mo, d, h, mi, s, us = map(int, m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s + us / 1e6


def caffe_hand_throughput(point: dict, dlbench_out: Path, iterations: int) -> tuple[float, None]:
    """`caffe train` by hand on the adapter's own solver and net, timed by glog from the solver's
    `Learning Rate Policy` line to the first line after its loop (the final display, test or `Optimization Done`)."""
    log = (dlbench_out / "trainer.log").read_text()
    solver = log.split("# dlbench: solver.prototxt\n", 1)[1].split("# dlbench: net.prototxt\n", 1)[0]
    net = log.split("# dlbench: net.prototxt\n", 1)[1]
    net = net[:net.index("\n}\n", net.rindex('name: "loss"')) + 3]
    binary = Path(c.env_python("caffe")).parent.parent / "caffe" / "bin" / "caffe"
    with tempfile.TemporaryDirectory(prefix="bench-caffe-") as tmp:
        old_net = re.search(r'^net: "(.*)"$', solver, re.M).group(1)
        solver = solver.replace(old_net, f"{tmp}/net.prototxt")
        solver = re.sub(r'^snapshot_prefix: ".*"$', f'snapshot_prefix: "{tmp}/final"', solver, flags=re.M)
        Path(tmp, "net.prototxt").write_text(net)
        Path(tmp, "solver.prototxt").write_text(solver)
        env = measure.trainer_env(point) | {"GLOG_logtostderr": "1"}
        proc = subprocess.run([str(binary), "train", f"--solver={tmp}/solver.prototxt"], env=env, cwd=tmp,
                              capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"caffe train by hand failed:\n{proc.stderr[-3000:]}")
    start = end = None
    after_loop = (f"Iteration {iterations}, loss", f"Iteration {iterations}, Testing net", "Snapshotting",
                  "Optimization Done")
    for line in proc.stderr.splitlines():
        if "Learning Rate Policy" in line:
            start = _glog_s(line)
        elif start is not None and end is None and any(s in line for s in after_loop):
            end = _glog_s(line)  # the first line after the loop (no tests inside it: test_interval > max_iter)
    return iterations * point["batch_size"] / (end - start), None


def pair(fw: str, variant: str, point: dict, ds: Path, out_root: Path, iterations: int,
         hand_first: bool = False) -> tuple:
    """(dlbench img/s, hand img/s, dlbench steady img/s, hand steady img/s), one right after the other.

    The machine's speed drifts by several per cent over minutes, and the second run of a pair is not
    always as fast as the first: pairs alternate which side runs first (dlbench-hand, hand-dlbench).
    Caffe's hand run needs the solver dlbench wrote, so dlbench runs first there.
    """
    def hand() -> tuple:
        if fw == "caffe":
            return caffe_hand_throughput(point, out_root / f"{fw}-{point['id']}", iterations)
        return hand_throughput(point, variant, ds, iterations)

    if hand_first and fw != "caffe":
        (h, h_steady), (d, d_steady) = hand(), dlbench_throughput(point, ds, out_root)
    else:
        (d, d_steady), (h, h_steady) = dlbench_throughput(point, ds, out_root), hand()
    return d, h, d_steady, h_steady


def main(argv: list[str] | None = None) -> int:
    # Those with a hand loop to compare with, and Caffe (the framework that runs its own solver: `caffe train`).
    comparable = [fw for fw in c.ALL_FRAMEWORKS if fw in HAND_VARIANTS or not c.registry.get(fw).stepped]
    args = c.parser(__doc__, frameworks=comparable, iterations=200, repeats=3, threads=[1, 2]).parse_args(argv)
    missing = [fw for fw in args.frameworks if fw not in comparable]
    if missing:
        raise SystemExit(f"no hand-written loop to compare {', '.join(missing)} with; "
                         f"choose from {', '.join(comparable)}")
    frameworks = c.usable(args.frameworks)
    ds = c.dataset("fashion_mnist")
    out_root = c.WORK / "adapter_speed"
    load = c.wait_quiet()
    c.header("adapter speed: dlbench's loop / a hand-written loop (throughput ratio)", load)
    rows = []
    for fw in frameworks:
        busy = c.wait_quiet()  # before each framework's measurements too
        print(f"# {fw}: {busy:.2f} cores busy with other work at start", flush=True)
        variants = HAND_VARIANTS.get(fw, ["caffe_train"])
        for threads in args.threads:
            points = {v: one_point(fw, dataset=c.DATASET, iterations=args.iterations, batch_size=64, threads=threads,
                                   **VARIANT_POINT.get(v, {})) for v in variants}
            pairs: dict[str, list[tuple]] = {v: [] for v in variants}
            for r in range(args.repeats):
                for v in variants:  # each pair side by side, its order alternating repeat after repeat
                    pairs[v].append(c.clean(pair, fw, v, points[v], ds, out_root, args.iterations, r % 2 == 1))
            for v, got in pairs.items():
                ratio = c.median([d / h for d, h, _, _ in got]) if got[0][1] else None
                steady = c.median([ds_ / hs for _, _, ds_, hs in got]) if got[0][3] else None
                judged = ratio if ratio is not None else steady
                rows.append({"framework": fw, "hand loop": v, "threads": threads,
                             "dlbench img/s": c.median([g[0] for g in got]),
                             "hand img/s": c.median([g[1] for g in got]) if ratio is not None else None,
                             "ratio": ratio, "steady ratio": steady, "target": f">= {TARGET}",
                             "verdict": c.verdict(judged >= TARGET) + ("" if ratio is not None else " (steady)")})
            print(c.table(rows[-len(pairs):]), flush=True)
    c.summary(f"all ({args.repeats} repeats, {args.iterations} iterations, median of paired ratios)", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
