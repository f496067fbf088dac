"""Run one point: its attempt measured (dlbench.run.measure), kept, and published as one record.

The attempt's files go to a hidden folder first: the raw measurement (dlbench.record.raw), then the record made
from it (dlbench.run.derive) and its tables. The raw measurement's measurement.json, the train rule's output, and
then metrics.json, the sign of a finished point for the aggregation, are moved last and atomically, so an
interrupted point never looks complete. Every finished attempt is kept beside the point (dlbench.record.store).

What is measured is dlbench.run.measure's alone; this module decides which attempt runs and keeps and publishes
what it measured, so that changing it reruns no point (the training digest starts at measure, not here).
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

from dlbench.node import procs, slurm_job
from dlbench.node.procs import remove_dead_leftovers
from dlbench.record import statuses, store
from dlbench.record.statuses import MachineFailure
from dlbench.run import derive, measure
from dlbench.run.measure import Admission, Work
from dlbench.run.options import RunOptions, tries


def run_point(point: dict, dataset_dir: str | Path, out_dir: str | Path, options: RunOptions = RunOptions()
              ) -> dict | None:
    """Train one point (see _run_point) as `options` say, holding the node's measurement lock if they name one.

    The lock is node-local: jobs sharing a machine (cluster jobs, grouped points) do not disturb each
    other's measurement. A lock that stays taken, or cannot be used, is a failure of the machine
    (dlbench.record.statuses): the attempt is kept and, unless it is the last one allowed, nothing is published.

    In a job SLURM requeued, a point this job already finished is published again, not measured twice. An
    attempt that died with its node leaves only a mark (store.mark_started); where every earlier run of
    the point did (Snakemake's attempts and SLURM's own requeues of the job alike, `tries`), the last
    allowed one publishes `node_lost` rather than try again, so that the study's tables are drawn from what
    finished. The attempt after the last allowed one (options.after_last) only publishes `node_lost` where that
    one died with its node too; None (nothing published) where it ended otherwise.
    """
    out = Path(out_dir)
    if slurm_job.restart_count():
        done = store.finished_in_job(out, slurm_job.job_id(), statuses.RETRIED)
        if done is not None:
            return store.republish(done, out, republished_after_requeue=slurm_job.restart_count())
    lost = store.lost_attempts(out, _job_alive)
    if options.after_last and not lost:
        return None
    runs = tries(options.attempt)
    try:
        mark = store.mark_started(out, attempt=options.attempt)
    except OSError as exc:
        if statuses.disk_full(exc):
            raise MachineFailure("disk_full", f"no space left to start the point in {out}: {exc}") from exc
        raise
    try:
        if options.after_last or (options.final and runs > 1 and len(lost) >= runs - 1):
            reason = (f"{len(lost)} runs of this point before this one ended without a word (their job or node "
                      "died: no record, no status); the point is given up here, so that the study's tables are "
                      "drawn")
            return _run_point(point, dataset_dir, out_dir, options,
                              lambda work: measure.attempt(point, work, options, Admission(
                                  refused=("node_lost", reason), lost_attempts=len(lost))))
        return _run_point(point, dataset_dir, out_dir, options,
                          lambda work: measure.measure(point, work, options, lost_attempts=len(lost)))
    finally:
        mark.unlink(missing_ok=True)
        if (out / store.RESULT).exists():  # a record stands: the marks of lost attempts are history now
            for facts in lost:
                (out / store.ATTEMPTS / f"{store.STARTED}{facts['host']}-{facts['pid']}.json").unlink(
                    missing_ok=True)


def cancel_stands(out_dir: str | Path) -> bool:
    """Whether the point's last attempt was cancelled by somebody (scancel; SIGTERM to a job off SLURM), so
    that a retry of its job would undo what they asked for. SLURM's SIGTERM at a job's time limit is no such
    cancel: its job ends TIMEOUT, and its retry asks for more time (context.Study.point_runtime). Where SLURM's
    accounting cannot say how the job ended, the retry runs."""
    record = store.cancelled_last(out_dir)
    if record is None:
        return False
    if not record.get("slurm_job_id"):
        return True
    state = slurm_job.final_state(str(record["slurm_job_id"]))
    return state is not None and state.startswith("CANCELLED")


def _job_alive(facts: dict) -> bool | None:
    """Whether the job of an attempt's mark still lives: its pid on this host, else SLURM's word. An earlier
    run of this very SLURM job (requeued since) is dead: SLURM runs one at a time."""
    if facts.get("host") == socket.gethostname():
        return procs.alive(int(facts["pid"]))
    if facts.get("slurm_job_id") and str(facts["slurm_job_id"]) == slurm_job.job_id():
        return False
    return slurm_job.running(str(facts["slurm_job_id"])) if facts.get("slurm_job_id") else None


def _run_point(point: dict, dataset_dir: str | Path, out_dir: str | Path, options: RunOptions, measured) -> dict:
    """Measure one attempt into its hidden folder (measured(work): dlbench.run.measure) and publish it: metrics.json,
    curve.csv and samples.csv beside its raw measurement in out_dir.

    Every finished attempt (any status) is also kept under out_dir/attempts/ (dlbench.record.store); a failure
    of the machine is published as the record only on the final attempt (options.final), else only kept, so
    that the job fails and runs again. Where the job itself is cancelled while the trainer runs, the attempt is
    kept and the exception goes on. A full disk while the record is written raises MachineFailure("disk_full"),
    leaving what was there.
    """
    out = Path(out_dir).resolve()
    # Unfinished folders are named by host and pid: only those of dead runners of this host are removed, and one
    # whose trainer had finished is kept aside under attempts/ first (store.set_aside).
    remove_dead_leftovers(out.parent, measure.folder_prefix(out), keep=lambda folder: store.set_aside(out, folder))
    work = measure.prepare(point, dataset_dir, out)
    try:
        measured(work)
    except BaseException:  # the job itself is cancelled: the trainer went with it (measure), the attempt is kept
        _keep(work)
        shutil.rmtree(work.folder, ignore_errors=True)
        raise
    return publish(work, options)


def _keep(work: Work) -> None:
    """Keep a cancelled attempt's measurement under attempts/, where the disk lets it. Where its measurement could not
    be written whole, or kept (a full disk: ENOSPC, EDQUOT; any other error of the file system), that is said in one
    line, the half-kept attempt removed, and the cancel's own exit status stands (a traceback must not replace it).
    A cancel before the trainer was started (while the node's lock was waited for) leaves nothing to keep."""
    if not work.log.exists():
        return
    name = None
    try:
        made = derive.record_of(work.folder)
        name = store.attempt_name(made.wall)
        store.keep_attempt(work.out_dir, made.record, work.folder, name)
    except (OSError, ValueError) as exc:  # ValueError: raw.NotWhole, a measurement the full disk cut short
        if name is not None:
            shutil.rmtree(work.out_dir / store.ATTEMPTS / name, ignore_errors=True)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        print(f"dlbench: the cancelled attempt could not be kept in {work.out_dir / store.ATTEMPTS} ({why}): "
              "nothing of it is kept or published; the cancel stands", file=sys.stderr)


def publish(work: Work, options: RunOptions) -> dict:
    """The attempt's record and tables, made from its raw measurement, kept under attempts/ and (unless a failure
    of the machine before the final attempt) published as the point's result; the hidden folder goes."""
    try:
        made = derive.record_of(work.folder)
        store.publish(work.out_dir, work.folder, made.record, made.tables, store.attempt_name(made.wall),
                      result=options.final or not made.record["machine_failure"], raw_files=made.raw_files)
    except OSError as exc:
        if not statuses.disk_full(exc):
            raise
        shutil.rmtree(work.folder, ignore_errors=True)
        raise MachineFailure("disk_full", f"no space left while writing the record into {work.out_dir}: {exc}") from exc
    shutil.rmtree(work.folder, ignore_errors=True)
    return made.record
