"""The command: run config/evidence.yaml in its own folder, then write its tables into docs/reproduction.md.

    dlbench evidence [--scale 0.05] [--cores 2] [--workdir .evidence] [--doc docs/reproduction.md]
    dlbench evidence --render-only      the tables again from the folder's last run, nothing trained

Also `python -m dlbench.evidence ...`. Exit status 0; 2 after one line on stderr where the doc's markers are
wrong (the doc is left as it was); 1 where the study failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlbench.evidence import markers, study
from dlbench.node import machine
from dlbench.paths import ROOT

DOC = ROOT / "docs" / "reproduction.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=None,
                        help="every length times this (Snakemake's --config scale=...); default: full length (hours)")
    parser.add_argument("--cores", type=int, default=machine.usable_cores(), help="Snakemake's --cores")
    parser.add_argument("--workdir", type=Path, default=study.WORKDIR,
                        help="Snakemake's working directory for the study (default: .evidence/, never results/)")
    parser.add_argument("--configfile", type=Path, default=study.CONFIG,
                        help="the study (default: config/evidence.yaml)")
    parser.add_argument("--doc", type=Path, default=DOC, help="the document whose marked tables are rewritten")
    parser.add_argument("--render-only", action="store_true",
                        help="train nothing: write the tables of the folder's last run (its own scale)")


def run(args: argparse.Namespace) -> int:
    import pandas as pd  # here, not above: `dlbench train` imports nothing of it

    from dlbench.analysis.published import read_published
    from dlbench.evidence.render import render

    if not args.doc.is_file():  # said before the study, not as a traceback after hours of it
        print(f"dlbench evidence: --doc {args.doc}: {'a folder' if args.doc.is_dir() else 'no such file'}; name the "
              "document whose marked tables are rewritten (default docs/reproduction.md)", file=sys.stderr)
        return 2
    try:
        # The markers are checked before the study runs: hours of training must not end in a doc it cannot write.
        markers.replace_blocks(args.doc.read_text(), {name: "" for name in study.STUDIES}, where=str(args.doc))
        if args.render_only:
            info = study.last_run(args.workdir)
            if args.scale is not None and args.scale != info["scale"]:
                raise study.StudyFailed(f"{args.workdir}'s last run was at scale {info['scale']:g}, not "
                                        f"{args.scale:g}; leave --scale out with --render-only, or run it")
        else:
            info = study.run(args.workdir, args.configfile, 1.0 if args.scale is None else args.scale, args.cores)
        runs = pd.read_parquet(Path(args.workdir) / study.RUNS)
        blocks = render(runs, info["scale"], read_published(), info.get("cores"))
        markers.rewrite(args.doc, blocks)
    except markers.MarkerError as exc:
        print(f"dlbench evidence: {exc}", file=sys.stderr)
        return 2
    except study.StudyFailed as exc:
        print(f"dlbench evidence: {exc}", file=sys.stderr)
        return 1
    print(f"{args.doc}: {', '.join(blocks)} written from {Path(args.workdir) / study.RUNS} "
          f"({len(runs)} points, scale {info['scale']:g}, {info['wall_s']:.0f} s of running)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench evidence",
                                     description="run config/evidence.yaml and write docs/reproduction.md's evidence "
                                     "tables")
    add_arguments(parser)
    return run(parser.parse_args(argv))
