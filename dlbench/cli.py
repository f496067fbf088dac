"""The `dlbench` command: one dispatch to the commands, each another module's.

    dlbench                       the commands, one line each (also `dlbench --help`)
    dlbench COMMAND --help        one command's arguments
    python -m dlbench ...         the same command (also python -m dlbench.cli)

Most commands are another module's main(argv) (COMMANDS says whose), and that module is also a command of its
own: `dlbench compare A B` is `python -m dlbench.present.comparison A B`. `prepare` and `train`, the workflow's
jobs, are dlbench.rules.jobs's functions, their arguments read here; `docs` is this module's. Each returns an
exit status: 0, or 2 after one line on stderr naming the problem and the fix; `train` also 75
(dlbench.record.statuses.EXIT_RETRY) where the machine failed the point and it is to run again.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    summary: str  # what it does, in one line: `dlbench`'s list, and the first line of its --help
    module: str = ""  # the module whose main(argv) it is; "": this module's own
    alias: str = ""  # `python -m <alias>` runs it too (default: the module)

    @property
    def python_m(self) -> str:
        return self.alias or self.module


COMMANDS = {
    "validate": Command("check a config file: each mistake in one line naming it, else how many points it has",
                        "dlbench.study.validate"),
    "plan": Command("estimate how long a study will take, from the points already measured (--probe: measure first)",
                    "dlbench.plan.command"),
    "compare": Command("compare result sets with a baseline, setting by setting, each with a verdict (--fail-on: "
                       "a CI gate)", "dlbench.present.comparison"),
    "calibrate": Command("measure how often each sentence of the findings errs, by simulation (docs/verdicts.md)",
                         "dlbench.analysis.calibrate"),
    "evidence": Command("run config/evidence.yaml and write docs/reproduction.md's evidence tables",
                        "dlbench.evidence.command", alias="dlbench.evidence"),
    "envs": Command("build, check, list, key and lock the framework environments; write their conda files",
                    "dlbench.environments.command"),
    "heavy": Command("run a command as heavy work: no point is measured on this node while it runs",
                     "dlbench.node.heavy"),
    "peak": Command("measure this machine's matrix-multiply peaks, the yardsticks for achieved GFLOP/s",
                    "dlbench.node.peak"),
    "runs-table": Command("write every run of a study as one HTML page, sortable and filterable",
                          "dlbench.present.runs_table"),
    "docs": Command("write the site's generated pages (docs/config.md, docs/record.md); --site: also build the site"),
    "prepare": Command("prepare a dataset into a folder (the workflow's prepare_dataset job)"),
    "train": Command("run one point (the workflow's train job)"),
}


def listing() -> str:
    """`dlbench` and `dlbench --help`: every command in one line."""
    width = max(map(len, COMMANDS))
    lines = ["usage: dlbench COMMAND [ARG ...]", "",
             "The commands of dlbench, a Snakemake workflow that benchmarks deep learning frameworks (the study",
             "itself runs with snakemake: README.md). `dlbench COMMAND --help` gives a command's arguments.", "",
             "commands:"]
    lines += [f"  {name:<{width}}  {c.summary}" for name, c in COMMANDS.items()]
    aliases = ", ".join(f"{name}: {c.python_m}" for name, c in COMMANDS.items() if c.module)
    lines += ["", *textwrap.wrap(f"Also `python -m dlbench.cli COMMAND`, and `python -m MODULE` for a command that is "
                                 f"a module's ({aliases}).", 100)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The `dlbench` console script (pyproject.toml), and `python -m dlbench.cli`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    if argv[0] == "--version":  # the version every record carries as dlbench_version
        from dlbench import __version__

        print(f"dlbench {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    command = COMMANDS.get(name)
    if command is None:
        print(f"dlbench: no command {name!r}; the commands are {', '.join(COMMANDS)} (`dlbench --help` says what "
              "each does)", file=sys.stderr)
        return 2
    if command.module:
        return importlib.import_module(command.module).main(rest)
    if name == "docs":
        return docs(rest)
    return _job(name, rest)


def docs(argv: list[str] | None = None) -> int:
    """The generated pages, as their own modules write them: docs/config.md (dlbench.docgen.config_keys) and
    docs/record.md (dlbench.docgen.record_fields); with --site, then the site itself (MkDocs, mkdocs.yml, with
    warnings as errors: a broken link between pages, or a page missing from the nav, fails the build)."""
    import subprocess

    from dlbench.docgen import MKDOCS, config_keys, record_fields

    parser = argparse.ArgumentParser(prog="dlbench docs", description=COMMANDS["docs"].summary)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from its source")
    what.add_argument("--site", nargs="?", const="site", metavar="DIR",
                      help="also build the site into DIR (default: site/), offline, with warnings as errors")
    args = parser.parse_args(argv)
    if args.site is not None and Path(args.site).exists() and not Path(args.site).is_dir():
        print(f"dlbench docs: --site {args.site} is a file; name a new or empty folder", file=sys.stderr)
        return 2
    if args.site is not None and not _site_dir_is_ours(Path(args.site)):
        # MkDocs empties the folder it builds into: never a folder of the user's own
        print(f"dlbench docs: --site {args.site} holds files that are not a site MkDocs built, and the build would "
              "delete them; name a new or empty folder", file=sys.stderr)
        return 2
    flags = ["--check"] if args.check else []
    statuses = [config_keys.main(flags), record_fields.main(flags)]  # both, so that --check names every stale page
    if args.site is None or max(statuses):
        return max(statuses)
    try:
        import mkdocs  # noqa: F401  (a test tool: envs/base.txt pins it)
    except ImportError:
        print("dlbench docs: mkdocs is not installed beside this Python; run `bash scripts/setup.sh`", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(MKDOCS), "--site-dir",
               str(Path(args.site).resolve())]
    try:
        return 0 if subprocess.run(command, timeout=600).returncode == 0 else 1
    except subprocess.TimeoutExpired:
        print("dlbench docs: the site's build took over 600 s; stopped", file=sys.stderr)
        return 1


def _site_dir_is_ours(folder) -> bool:
    """Absent, empty, or a site MkDocs built before (its 404 page and sitemap): what `--site` may empty."""
    if not folder.exists():
        return True
    if not folder.is_dir():
        return False
    return not any(folder.iterdir()) or all((folder / name).is_file() for name in ("404.html", "sitemap.xml"))


def _point_json(text: str) -> dict:
    """--point: a JSON object, else argparse's one line (exit 2) before anything runs."""
    try:
        point = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg} at column {exc.colno}); give the point as a JSON "
                                         "object") from None
    if not isinstance(point, dict):
        raise argparse.ArgumentTypeError(f"a JSON {type(point).__name__}, not an object; give the point as one")
    missing = [key for key in POINT_KEYS if key not in point]
    if missing:
        raise argparse.ArgumentTypeError(f"the point has no {', '.join(missing)}; give a whole point, as the "
                                         "workflow writes it (a run folder's point.json)")
    return point


# What every point holds and the runner reads before anything else (the whole point: dlbench.study.sweep).
POINT_KEYS = ("id", "framework", "dataset", "device", "threads")


def _not_a_file(text: str) -> str:
    """--out of a job: the point's or the dataset's folder, never an existing file."""
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; name the folder to write (it is created)")
    return text


def _job(name: str, argv: list[str]) -> int:
    """prepare and train, the workflow's jobs (dlbench.rules.jobs): their arguments."""
    from dlbench import arguments
    from dlbench.rules import jobs
    from dlbench.run.options import RunOptions

    parser = argparse.ArgumentParser(prog=f"dlbench {name}", description=COMMANDS[name].summary)
    if name == "prepare":
        parser.add_argument("dataset")
        parser.add_argument("--out", required=True, type=_not_a_file)
        parser.add_argument("--local", default="")
        parser.add_argument("--downloads", default="resources/downloads", type=_not_a_file)
        parser.add_argument("--test-copy", default="", help="for tests: the local copy is a test data set (say what "
                            "it is); its digest is not checked, and its records say so")
        args = parser.parse_args(argv)
        return jobs.prepare(args.dataset, args.out, args.local, args.downloads, args.test_copy)
    parser.add_argument("--point", required=True, type=_point_json, help="the point, as JSON (an object)")
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--env", default="", help="the framework environment's JSON; empty: this Python")
    parser.add_argument("--out", required=True, type=_not_a_file)
    parser.add_argument("--interval", type=arguments.positive, default=0.2)
    parser.add_argument("--no-monitor", dest="monitor", action="store_false")
    parser.add_argument("--time-limit", type=arguments.positive, default=None)
    parser.add_argument("--memory-limit", type=arguments.positive, default=None)
    parser.add_argument("--hang-limit", type=arguments.at_least_zero, default=None,
                        help="seconds without an event from the trainer before it is ended as hung (0: never)")
    parser.add_argument("--measure-lock", default="", help="node-local file to lock while measuring")
    parser.add_argument("--gpu-alone", dest="gpu_per_device", action="store_false",
                        help="GPU points measure one at a time per node (default: one per GPU)")
    parser.add_argument("--attempt", type=arguments.count(1, "an attempt"), default=1,
                        help="this job's attempt (Snakemake counts from 1)")
    parser.add_argument("--retries", type=arguments.count(0, "a number of retries"), default=0,
                        help="reruns allowed: a failure of the machine before the last attempt exits 75, publishing "
                        "nothing")
    args = parser.parse_args(argv)
    settings = {"interval_s": args.interval, "monitor": args.monitor, "time_limit_s": args.time_limit,
                "memory_limit_mb": args.memory_limit, "hang_s": args.hang_limit,
                "measure_lock": args.measure_lock or None, "gpu_per_device": args.gpu_per_device}
    options = RunOptions.of_job(settings, env=jobs.environment(args.env or None), attempt=args.attempt,
                                retries=args.retries)
    return jobs.train(args.point, args.dataset_dir, args.out, options)


if __name__ == "__main__":
    sys.exit(main())
