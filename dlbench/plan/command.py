"""`dlbench plan CONFIG [--probe]`: how long a study will take, from the points already measured."""

from __future__ import annotations

import argparse
import sys

from dlbench import arguments
from dlbench.plan import estimate, probes


def main(argv: list[str] | None = None) -> int:
    from dlbench.paths import SCHEMA
    from dlbench.study import config, sweep

    ap = argparse.ArgumentParser(prog="dlbench plan",
                                 description="estimate how long a study will take, from the points already "
                                 "measured (--probe: measure first)")
    ap.add_argument("config", help="the study's config file (as for --configfile)")
    ap.add_argument("--probe", action="store_true", help="first run one short point of every unmeasured kind")
    ap.add_argument("--iterations", type=arguments.count(1, "a number of iterations"), default=probes.PROBE_ITERATIONS,
                    help="a probe's length")
    args = ap.parse_args(argv)
    try:
        cfg = config.load(args.config, schema_path=SCHEMA)
    except config.ConfigError as exc:
        print(exc.said(), file=sys.stderr)
        return 2
    points = sweep.plan(cfg).points

    def run_dir(p: dict) -> str:
        return f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}"

    if args.probe:
        from dlbench.datasets.prepare import DatasetError
        from dlbench.environments.errors import EnvError
        from dlbench.node.locks import LockTimeout, LockUnusable

        try:
            probes.probe(cfg, points, run_dir, args.iterations)
        except (LockTimeout, LockUnusable, DatasetError, EnvError) as exc:  # the node's locks, its data, its builds
            print(f"dlbench plan: {exc}", file=sys.stderr)
            return 1
    print(estimate.describe(estimate.estimate(points, run_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
