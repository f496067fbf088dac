"""Probes: one short point of every kind a study has nothing measured of, run in its own environment, so that the
estimate (dlbench.plan.estimate) has a rate for it. Their records are kept in results/probes/, by kind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from dlbench.plan.estimate import PROBES, finished, kind, probe_name, test_size

PROBE_ITERATIONS = 50  # a probe's length: enough steps for a rate, far fewer than a point's


def probe(cfg: dict, points: list[dict], run_dir, iterations: int = PROBE_ITERATIONS,
          root: str | os.PathLike = ".") -> int:
    """Run one short point (`iterations`, no interval tests, at most 1,000 test images) of every kind that has
    neither a finished point nor a probe, in its own environment, and keep its record in results/probes/.

    As the study's own points: a probe measures under the node's measurement lock (measurement.lock_file, waiting
    at most measurement.lock_timeout_s, then recorded `lock_timeout`), and a dataset it prepares is heavy work,
    never beside a measurement (LockTimeout past the same wait)."""
    from dlbench.datasets import prepare
    from dlbench.environments import build, choice, site
    from dlbench.node.locks import heavy_work
    from dlbench.run import runner
    from dlbench.run.options import RunOptions

    measurement = cfg["measurement"]
    lock = measurement["lock_file"] if measurement["exclusive"] else None
    options = {"measure_lock": lock, "lock_timeout_s": measurement["lock_timeout_s"],
               "gpu_per_device": measurement["gpu"] == "per_device"}
    done = finished(points, run_dir, Path(root) / PROBES)
    todo: dict[str, dict] = {}
    for p in done.pending:
        if kind(p) not in done.by_kind:
            todo.setdefault(probe_name(p), p)
    for name, p in todo.items():
        short = {**p, "iterations": iterations, "epochs": None, "test_interval": None,
                 "input": {**p.get("input", {}), "test_samples": min(test_size(p), 1000)}}
        data = Path(root) / "resources/datasets" / p["dataset"]
        if not (data / "meta.json").exists():
            with heavy_work(lock, f"preparing {p['dataset']} for a probe", timeout_s=measurement["lock_timeout_s"]):
                prepare.prepare(p["dataset"], data, local=cfg.get("data", {}).get(p["dataset"]))
        env_name, python = choice.point_env(cfg, p)
        env = site.probed(p["framework"], env_name, python) if python else build.environment(env_name)
        t0 = time.perf_counter()
        record = runner.run_point(short, data, Path(root) / PROBES / name,
                                  RunOptions(python=env.interpreter, env=env, **options))
        waited = f", after {record['lock_wait_s']:.1f} s waiting for the node's lock" \
            if (record.get("lock_wait_s") or 0) > 1 else ""
        print(f"dlbench: probe {name}: {record['status']}, {record.get('throughput_img_s') or 0:.0f} img/s, "
              f"{time.perf_counter() - t0:.1f} s{waited}", file=sys.stderr)
    return len(todo)
