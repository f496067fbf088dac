"""The workflow's jobs as functions: prepare a dataset, train a point (workflow/scripts/ and `dlbench prepare`,
`dlbench train` call them).

Each returns an exit status: 0, or 2 after one line on stderr naming the problem and the fix; `train` also 75
(dlbench.record.statuses.EXIT_RETRY) where the machine failed the point and it is to run again.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Mapping

from dlbench.environments.environment import Environment
from dlbench.run.options import RunOptions


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


def environment(built: str | None = None, chosen: Mapping | None = None) -> Environment | None:
    """The Environment a point's job runs in, from one place: the one the workflow chose (`chosen`, the train rule's
    `env` param: Environment.params), else the one a description file names (`built`: `dlbench train --env FILE`,
    the framework_env rule's output); neither: None, this Python. The train rule names the description file of a
    built one too, as its input: that is the build the job waits for, not a second source of the environment."""
    if chosen:
        return Environment.of_params(chosen)
    if built:
        return Environment.read(built)
    return None


def train(point: dict, dataset_dir: str, out: str, options: RunOptions = RunOptions()) -> int:
    """Run one point (dlbench.run.runner) as `options` say.

    A failure of the machine (dlbench.record.statuses) before the last attempt (options.final) keeps the attempt
    only and exits EXIT_RETRY. The rule allows one attempt more (retries + 2): it trains nothing, and publishes
    `node_lost` where the last allowed attempt died with its node, so that the study's tables are drawn; else it
    fails at once. A retry of an attempt that somebody cancelled (scancel, SIGTERM to the job; not SLURM's time
    limit) trains nothing: the cancel stands until the workflow's next run (runner.cancel_stands).
    """
    from dlbench.node import slurm_job
    from dlbench.record import statuses, store
    from dlbench.run import measure, runner

    attempt, retries = options.attempt, options.retries
    _end_on_signals()
    measure.note_continue_signals()  # a suspended job, resumed: its point's times include the pause
    if attempt > 1 and runner.cancel_stands(out):
        print(f"dlbench: attempt {attempt} is not run: the attempt before it was cancelled (scancel, or SIGTERM "
              "to the job), which is kept in attempts/; the workflow's next run trains the point again",
              file=sys.stderr)
        return 1
    if attempt > 1 and store.last_status(out) == "data_changed":
        _prepare_again(dataset_dir)
    try:
        record = runner.run_point(point, dataset_dir, out, options)
    except statuses.MachineFailure as exc:
        print(f"dlbench: {exc.status}: {exc}; the job fails so that it runs again", file=sys.stderr)
        return statuses.EXIT_RETRY
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
    if statuses.retried(record["status"]) and not options.final:
        print(f"dlbench: {record['status']}: {record['reason']}; a failure of the machine, not a result: the "
              f"attempt is kept and the job fails so that it runs again (attempt {attempt} of {retries + 1})",
              file=sys.stderr)
        return statuses.EXIT_RETRY
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
