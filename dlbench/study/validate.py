"""`dlbench validate CONFIG`: check a config file: each mistake in one line naming it, else how many points it has."""

from __future__ import annotations

import argparse
import sys


def validate(config_path: str) -> int:
    """0 and the number of points of a valid config; 2 and one line on stderr per mistake of an invalid one."""
    from dlbench.node import machine
    from dlbench.study import config, sweep

    try:
        cfg = config.load(config_path, local_cores=machine.usable_cores())
    except config.ConfigError as exc:
        print(exc.said(), file=sys.stderr)
        return 2
    print(f"{config_path}: valid, {len(sweep.expand(cfg))} points")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench validate", description=__doc__.split(": ", 1)[1].rstrip("."))
    parser.add_argument("config")
    return validate(parser.parse_args(argv).config)


if __name__ == "__main__":
    sys.exit(main())
