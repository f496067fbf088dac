"""The `dlbench` command, and the jobs of the workflow as functions (the workflow's scripts call the functions).

    dlbench                       the commands, one line each (also `dlbench --help`)
    dlbench COMMAND --help        one command's arguments
    python -m dlbench.cli ...     the same command

Most commands are another module's main(argv) (COMMANDS says whose), and that module is also a command of its
own: `dlbench compare A B` is `python -m dlbench.present.comparison A B`. `prepare`, `train`, `validate` and `docs` are
this module's. Each function returns an exit status: 0, or 2 after one line on stderr naming the problem and the
fix; `train` also 75 (dlbench.record.statuses.EXIT_RETRY) where the machine failed the point and it is to run again.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import textwrap
from dataclasses import dataclass


def prepare(dataset: str, out: str, local: str | None = None, downloads: str = "resources/downloads",
            test_copy: str | None = None) -> int:
    from dlbench.datasets import prepare as datasets
    from dlbench.node.locks import LockTimeout, LockUnusable, heavy_work, node_lock

    try:
        with heavy_work(node_lock(), f"preparing {dataset}"):  # never beside a measurement on this node
            meta = datasets.prepare(dataset, out, local=local or None, downloads=downloads,
                                    test_copy=test_copy or None)
    except (datasets.DatasetError, LockTimeout, LockUnusable) as exc:
        print(f"dlbench: dataset {dataset}: {exc}", file=sys.stderr)
        return 2
    print(f"{dataset}: {meta['train_count']} train / {meta['test_count']} test images, "
          f"digest {meta['digest'][:12]}", file=sys.stderr)
    return 0


def train(point: dict, dataset_dir: str, out: str, env_json: str | None = None, *, env: dict | None = None,
          interval_s: float = 0.2, monitor: bool = True, time_limit_s: float | None = None,
          memory_limit_mb: float | None = None, hang_s: float | None = None, measure_lock: str | None = None,
          gpu_per_device: bool = True, lock_timeout_s: float | None = None, contended_pct: float | None = None,
          quiet_wait_s: float = 0.0, attempt: int = 1, retries: int = 0) -> int:
    """Run one point (dlbench.run.runner) in its framework's environment.

    env_json: a built environment's description (dlbench.environments.build.provide); else env: the environment the
    workflow chose (a site one names its interpreter); neither: this Python.
    hang_s: seconds without an event before the point ends as hung (0: never; None: the runner's default).
    attempt, retries: Snakemake's count of this job's attempts and how many reruns it allows; a failure of
    the machine (dlbench.record.statuses) before the last attempt keeps the attempt only and exits EXIT_RETRY. The
    rule allows one attempt more (retries + 2): it trains nothing, and publishes `node_lost` where the last
    allowed attempt died with its node, so that the study's tables are drawn; else it fails at once.
    A retry of an attempt that somebody cancelled (scancel, SIGTERM to the job; not SLURM's time limit) trains
    nothing: the cancel stands until the workflow's next run (runner.cancel_stands).
    """
    from dlbench.node import slurm_job
    from dlbench.record import statuses as outcomes
    from dlbench.record import store
    from dlbench.run import runner

    env = dict(env or {})
    if env_json:
        with open(env_json) as fh:
            env.update(json.load(fh))
    _end_on_signals()
    runner.note_continue_signals()  # a suspended job, resumed: its point's times include the pause
    if attempt > 1 and runner.cancel_stands(out):
        print(f"dlbench: attempt {attempt} is not run: the attempt before it was cancelled (scancel, or SIGTERM "
              "to the job), which is kept in attempts/; the workflow's next run trains the point again",
              file=sys.stderr)
        return 1
    final = runner.tries(attempt) > retries
    after_last = attempt > retries + 1
    if attempt > 1 and store.last_status(out) == "data_changed":
        _prepare_again(dataset_dir)
    try:
        record = runner.run_point(point, dataset_dir, out, python=env.get("python"), env=env or None,
                                  interval_s=interval_s, monitor_enabled=monitor, time_limit_s=time_limit_s,
                                  memory_limit_mb=memory_limit_mb, measure_lock=measure_lock or None,
                                  gpu_per_device=gpu_per_device, attempt=attempt, final_attempt=final,
                                  after_last=after_last,
                                  **({} if hang_s is None else {"hang_s": hang_s}),
                                  **({} if lock_timeout_s is None else {"lock_timeout_s": lock_timeout_s}),
                                  **({} if contended_pct is None else {"contended_pct": contended_pct}),
                                  quiet_wait_s=quiet_wait_s)
    except outcomes.MachineFailure as exc:
        print(f"dlbench: {exc.status}: {exc}; the job fails so that it runs again", file=sys.stderr)
        return outcomes.EXIT_RETRY
    except SystemExit:
        # SIGTERM: a user's scancel stays a cancel; SLURM's preemption (PreemptMode=CANCEL, which Snakemake's
        # plugin would wait on for ever) is answered by requeueing the job, so that SLURM runs it again.
        if slurm_job.requeue_if_preempted():
            print("dlbench: preempted: SLURM preempted the job, which is requeued to run again", file=sys.stderr)
        raise
    if record is None:
        print(f"dlbench: attempt {attempt} only publishes node_lost where the last allowed attempt (measurement."
              f"retries = {retries}) died with its node; that one ended otherwise (see its lines above), so the "
              "point stays failed", file=sys.stderr)
        return 1
    print(json.dumps({k: record.get(k) for k in ("status", "reason", "train_time_s", "accuracy", "rss_peak_mb")}))
    if outcomes.retried(record["status"]) and not final:
        print(f"dlbench: {record['status']}: {record['reason']}; a failure of the machine, not a result: the "
              f"attempt is kept and the job fails so that it runs again (attempt {attempt} of {retries + 1})",
              file=sys.stderr)
        return outcomes.EXIT_RETRY
    return 0


def _prepare_again(dataset_dir: str) -> None:
    """The retry of a point whose dataset changed since its preparation prepares it again first (heavy work), in
    one line; where that fails the point runs anyway, and its last attempt publishes `data_changed`."""
    from dlbench.datasets import prepare as datasets
    from dlbench.node.locks import LockTimeout, LockUnusable, heavy_work, node_lock

    try:
        with heavy_work(node_lock(), f"preparing {dataset_dir} again"):
            print(f"dlbench: {datasets.prepare_again(dataset_dir)}", file=sys.stderr)
    except (datasets.DatasetError, LockTimeout, LockUnusable, OSError) as exc:
        print(f"dlbench: dataset {dataset_dir} not prepared again: {exc}", file=sys.stderr)


# Each ends a job as a cancel: SIGTERM (Snakemake, scancel), SIGINT (Ctrl-C), SIGHUP (a lost login).
CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _end_on_signals() -> None:
    """A cancelled job still stops its trainer and keeps its attempt (runner: cancelled), exiting 128 + the signal.
    Once: SLURM, srun and Snakemake may each pass a signal on, and a second one must not cut short the keeping of
    the attempt."""
    def on_cancel(signum, _frame):
        for sig in CANCEL_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        sys.exit(128 + signum)

    for sig in CANCEL_SIGNALS:
        signal.signal(sig, on_cancel)


def validate(config_path: str) -> int:
    from dlbench.node import machine
    from dlbench.study import config, sweep

    try:
        cfg = config.load(config_path, local_cores=machine.usable_cores())
    except config.ConfigError as exc:
        print(f"dlbench: config error: {exc}", file=sys.stderr)
        return 2
    print(f"{config_path}: valid, {len(sweep.expand(cfg))} points")
    return 0


@dataclass(frozen=True)
class Command:
    summary: str  # what it does, in one line: `dlbench`'s list, and the first line of its --help
    module: str = ""  # the module whose main(argv) it is; "": this module's own
    alias: str = ""  # `python -m <alias>` runs it too (default: the module)

    @property
    def python_m(self) -> str:
        return self.alias or self.module


COMMANDS = {
    "validate": Command("check a config file: one line naming what is wrong, else how many points it has"),
    "plan": Command("estimate how long a study will take, from the points already measured (--probe: measure first)",
                    "dlbench.plan.command"),
    "compare": Command("compare two result sets: per setting, B / A with its interval and a verdict",
                       "dlbench.present.comparison"),
    "calibrate": Command("measure how often each verdict errs, by simulation (docs/verdicts.md)",
                         "dlbench.analysis.calibrate"),
    "evidence": Command("run config/evidence.yaml and write docs/reproduction.md's evidence tables",
                        "dlbench.evidence.command", alias="dlbench.evidence"),
    "envs": Command("build, check, list, key and lock the framework environments; write their conda files",
                    "dlbench.environments.build"),
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
    from pathlib import Path

    from dlbench.docgen import MKDOCS, config_keys, record_fields

    parser = argparse.ArgumentParser(prog="dlbench docs", description=COMMANDS["docs"].summary)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from its source")
    what.add_argument("--site", nargs="?", const="site", metavar="DIR",
                      help="also build the site into DIR (default: site/), offline, with warnings as errors")
    args = parser.parse_args(argv)
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


def _job(name: str, argv: list[str]) -> int:
    """prepare, train and validate: this module's own commands."""
    parser = argparse.ArgumentParser(prog="dlbench")
    sub = parser.add_subparsers(dest="cmd", required=True)

    def command(cmd: str) -> argparse.ArgumentParser:
        return sub.add_parser(cmd, help=COMMANDS[cmd].summary, description=COMMANDS[cmd].summary)

    p = command("prepare")
    p.add_argument("dataset")
    p.add_argument("--out", required=True)
    p.add_argument("--local", default="")
    p.add_argument("--downloads", default="resources/downloads")
    p.add_argument("--test-copy", default="", help="for tests: the local copy is a test data set (say what it is); "
                   "its digest is not checked, and its records say so")
    t = command("train")
    t.add_argument("--point", required=True, help="the point, as JSON")
    t.add_argument("--dataset-dir", required=True)
    t.add_argument("--env", default="", help="the framework environment's JSON; empty: this Python")
    t.add_argument("--out", required=True)
    t.add_argument("--interval", type=float, default=0.2)
    t.add_argument("--no-monitor", dest="monitor", action="store_false")
    t.add_argument("--time-limit", type=float, default=None)
    t.add_argument("--memory-limit", type=float, default=None)
    t.add_argument("--hang-limit", type=float, default=None,
                   help="seconds without an event from the trainer before it is ended as hung (0: never)")
    t.add_argument("--measure-lock", default="", help="node-local file to lock while measuring")
    t.add_argument("--gpu-alone", dest="gpu_per_device", action="store_false",
                   help="GPU points measure one at a time per node (default: one per GPU)")
    t.add_argument("--attempt", type=int, default=1, help="this job's attempt (Snakemake counts from 1)")
    t.add_argument("--retries", type=int, default=0,
                   help="reruns allowed: a failure of the machine before the last attempt exits 75, publishing nothing")
    command("validate").add_argument("config")
    args = parser.parse_args([name, *argv])
    if args.cmd == "prepare":
        return prepare(args.dataset, args.out, args.local, args.downloads, args.test_copy)
    if args.cmd == "train":
        return train(json.loads(args.point), args.dataset_dir, args.out, args.env or None, interval_s=args.interval,
                     monitor=args.monitor, time_limit_s=args.time_limit, memory_limit_mb=args.memory_limit,
                     hang_s=args.hang_limit, measure_lock=args.measure_lock, gpu_per_device=args.gpu_per_device,
                     attempt=args.attempt, retries=args.retries)
    return validate(args.config)


if __name__ == "__main__":
    sys.exit(main())
