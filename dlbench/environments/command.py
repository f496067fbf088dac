"""`dlbench envs`: build, check, list, key and lock the framework environments; write their conda files.

    dlbench envs build ENV [--check] [--out resources/envs/ENV.json]
    dlbench envs list [--all]
    dlbench envs key ENV
    dlbench envs lock [ENV ...]
    dlbench envs conda [--check]

(also `python -m dlbench.environments.command ...`)
"""

from __future__ import annotations

import argparse
import sys

from dlbench.environments import build, conda, key, lock
from dlbench.frameworks import registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench envs",
                                     description="build, check, list, key and lock the framework environments; "
                                     "write their conda files")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or find) an environment: a framework's (pytorch) or a variant's")
    b.add_argument("env")
    b.add_argument("--out", help="write the environment's description here (JSON)")
    b.add_argument("--check", action="store_true", help="check that a cached one imports and trains one step "
                   "(unless checked since its inputs last changed); move a broken one aside and build it again")
    sub.add_parser("key", help="print an environment's cache key").add_argument("env")
    lst = sub.add_parser("list", help="print the frameworks' CPU environments (what set-up builds), one a line")
    lst.add_argument("--all", action="store_true", help="every environment, the variants too")
    lk = sub.add_parser("lock", help="write envs/<env>.lock (every package, hashed) from envs/<env>.txt; needs PyPI")
    lk.add_argument("envs", nargs="*", help="environments to lock (default: every one, and base)")
    c = sub.add_parser("conda", help="write workflow/envs/*.yaml from the pins")
    c.add_argument("--check", action="store_true", help="only say which differ from the pins (exit 1 if any)")
    args = parser.parse_args(argv)
    known = [*registry.env_names(), *(["base"] if args.cmd == "lock" else [])]
    named = args.envs if args.cmd == "lock" else [args.env] if args.cmd in ("build", "key") else []
    unknown = [env for env in named if env not in known]
    if unknown:  # one line, before any build or resolver run
        print(f"dlbench envs {args.cmd}: no environment {unknown[0]!r}; the environments are {', '.join(known)}",
              file=sys.stderr)
        return 2
    if args.cmd == "list":
        print("\n".join(registry.env_names() if args.all else registry.names()))
        return 0
    if args.cmd == "key":
        print(key.env_key(args.env))
        return 0
    if args.cmd == "lock":
        for env in args.envs or [*registry.env_names(), "base"]:
            print(lock.lock(env))
        return 0
    if args.cmd == "conda":
        stale = conda.write_conda(check=args.check)
        for env in stale:
            print(f"workflow/envs/{env}.yaml {'differs from' if args.check else 'written from'} envs/{env}.txt")
        return 1 if args.check and stale else 0
    return build.provide(args.env, args.out, check_first=args.check)


if __name__ == "__main__":
    sys.exit(main())
