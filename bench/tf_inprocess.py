"""TensorFlow at 2 threads, dlbench's loop against the hand loop in one process: no runner, no monitor beside it.

    .venv/bin/python bench/tf_inprocess.py [--iterations 200] [--repeats 5] [--threads 2]

Runs itself again in TensorFlow's environment (with the thread variables the runner gives a trainer) and
there alternates, in one process, the TensorFlow adapter's whole run (dlbench.frameworks.tensorflow, events
to a scratch file) and bench/hand_loops.py's `function` loop on the same point (Caffe's LeNet on prepared
Fashion-MNIST, batch 64). Both count every iteration, the first included. If the ratio here is near 1 while
bench/adapter_speed.py's is not, the difference lies outside the loop (the runner and the monitor beside
the trainer, the process start); if it is as low, it lies in the adapter's own per-step work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def inner(point_json: str, dataset_dir: str, repeats: int) -> None:
    sys.path[:0] = [str(HERE.parent), str(HERE)]
    import hand_loops

    from dlbench.frameworks import base
    from dlbench.frameworks.tensorflow import ADAPTER

    point = json.loads(point_json)
    iterations, threads = point["iterations"], point["threads"]
    x, y = hand_loops.load(dataset_dir)
    idx = hand_loops.batches(len(y), 64, iterations)
    rows = []
    for r in range(repeats):
        for side in (("dlbench", "hand") if r % 2 == 0 else ("hand", "dlbench")):
            if side == "dlbench":
                with tempfile.TemporaryDirectory() as tmp:
                    result = ADAPTER(point, dataset_dir, base.Reporter(Path(tmp) / "events.jsonl")).run()
                rows.append({"side": side, "round": r, "img_s": result["throughput_img_s"]})
            else:
                took, _, _ = hand_loops.tensorflow("function", x, y, idx, threads)
                rows.append({"side": side, "round": r, "img_s": iterations * 64 / took})
    print(json.dumps(rows))


def main(argv: list[str] | None = None) -> int:
    import _common as c

    from dlbench.run.threads import thread_env
    from dlbench.study.sweep import one_point

    ap = c.parser(__doc__, iterations=200, repeats=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    ds = c.dataset("fashion_mnist")
    env = dict(os.environ, PYTHONPATH=str(c.REPO), **thread_env(args.threads, None),
               TF_CPP_MIN_LOG_LEVEL="1", TF_ENABLE_ONEDNN_OPTS="1", CUDA_VISIBLE_DEVICES="")
    load = c.busy_cores(1.0)
    c.header(f"TensorFlow in one process, {args.threads} threads: dlbench's adapter vs the hand loop", load)
    with c.ForeignCpu() as foreign:
        t0 = time.monotonic()
        point = one_point("tensorflow", dataset=c.DATASET, iterations=args.iterations, batch_size=64,
                          threads=args.threads)
        out = subprocess.run([c.env_python("tensorflow"), __file__, "--inner", json.dumps(point), str(ds),
                              str(args.repeats)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    by_round = {}
    for row in rows:
        by_round.setdefault(row["round"], {})[row["side"]] = row["img_s"]
    ratios = [r["dlbench"] / r["hand"] for r in by_round.values()]
    table = [{"round": k, "dlbench img/s": v["dlbench"], "hand img/s": v["hand"], "ratio": v["dlbench"] / v["hand"]}
             for k, v in sorted(by_round.items())]
    c.summary(f"{args.repeats} rounds, {args.iterations} iterations, {time.monotonic() - t0:.0f} s; others kept "
              f"{foreign.cores:.2f} cores busy; median ratio {c.median(ratios):.3f} (target >= 0.97)", table)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inner"]:
        inner(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
