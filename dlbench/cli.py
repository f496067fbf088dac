"""Command-line entry points the workflow's rules call (and people can call by hand).

    python -m dlbench.cli prepare DATASET --out DIR [--local PATH]
    python -m dlbench.cli train --point JSON --dataset-dir DIR --env ENV_JSON --out DIR
    python -m dlbench.cli validate CONFIG.yaml
"""

from __future__ import annotations

import argparse
import json
import signal
import sys


def _prepare(args) -> int:
    from dlbench.datasets import prepare

    try:
        meta = prepare.prepare(args.dataset, args.out, local=args.local or None, downloads=args.downloads)
    except prepare.DatasetError as exc:
        print(f"dlbench: dataset {args.dataset}: {exc}", file=sys.stderr)
        return 2
    print(f"{args.dataset}: {meta['train_count']} train / {meta['test_count']} test images, "
          f"digest {meta['digest'][:12]}", file=sys.stderr)
    return 0


def _train(args) -> int:
    from dlbench import runner

    point = json.loads(args.point)
    python = None
    if args.env:
        with open(args.env) as fh:
            python = json.load(fh)["python"]
    # A cancelled job (SIGTERM from Snakemake or scancel) still stops its trainer.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    record = runner.run_point(point, args.dataset_dir, args.out, python=python, interval_s=args.interval,
                              monitor_enabled=args.monitor, time_limit_s=args.time_limit,
                              memory_limit_mb=args.memory_limit, measure_lock=args.measure_lock or None)
    summary = {k: record.get(k) for k in ("status", "reason", "train_time_s", "accuracy", "rss_peak_mb")}
    print(json.dumps(summary))
    return 0


def _validate(args) -> int:
    from dlbench import config, envinfo, sweep

    try:
        cfg = config.load(args.config, local_cores=envinfo.usable_cores())
    except config.ConfigError as exc:
        print(f"dlbench: config error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.config}: valid, {len(sweep.expand(cfg))} points")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.cli")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="prepare a dataset")
    p.add_argument("dataset")
    p.add_argument("--out", required=True)
    p.add_argument("--local", default="")
    p.add_argument("--downloads", default="resources/downloads")
    t = sub.add_parser("train", help="run one point")
    t.add_argument("--point", required=True, help="the point, as JSON")
    t.add_argument("--dataset-dir", required=True)
    t.add_argument("--env", default="", help="the framework environment's JSON; empty: this Python")
    t.add_argument("--out", required=True)
    t.add_argument("--interval", type=float, default=0.2)
    t.add_argument("--no-monitor", dest="monitor", action="store_false")
    t.add_argument("--time-limit", type=float, default=None)
    t.add_argument("--memory-limit", type=float, default=None)
    t.add_argument("--measure-lock", default="", help="node-local file to lock while measuring")
    v = sub.add_parser("validate", help="check a config file")
    v.add_argument("config")
    args = parser.parse_args(argv)
    return {"prepare": _prepare, "train": _train, "validate": _validate}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
