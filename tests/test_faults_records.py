"""Records that are not what they should be, injected for real: a metrics.json cut short is a visible row and the
findings count the planned points without a readable record; a machine failure published after its retries and
a damaged record can be chosen by `select.status` and measured again (docs/reliability.md)."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys

import pytest

from dlbench.aggregate import collect
from dlbench.paths import ROOT
from dlbench.present import findings
from dlbench.record import raw, statuses, store
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study import config, sweep
from dlbench.testing import sandbox
from dlbench.testing.faults import small_trainer
from dlbench.testing.faults_node import _hold, _release

STUDY = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
         "sweep": {"learning_rate": [0.01, 0.02, 0.03], "iterations": [20], "threads": [1]}}


@pytest.fixture(scope="module")
def measured(tmp_path_factory, digits_dir):
    """The study's three points in a copy of the workflow: the first trained and then cut to its first 72 bytes,
    the second published `lock_timeout` (another process held the node's lock through its only attempt), the
    third trained ok."""
    wf = tmp_path_factory.mktemp("records") / "wf"
    lock = wf.parent / "measure.lock"
    study = {**STUDY, "measurement": {"lock_file": str(lock), "lock_timeout_s": 1, "retries": 0}}
    sandbox.copy_workflow(wf, study)
    cut, timed_out, ok = sweep.expand(config.validate(json.loads(json.dumps(study))))
    paths = {}
    with small_trainer(step_s=0):
        for name, p in (("cut", cut), ("lock_timeout", timed_out), ("ok", ok)):
            out = wf / "results" / "runs" / p["framework"] / p["dataset"] / p["id"]
            holder = _hold(lock) if name == "lock_timeout" else None
            try:
                runner.run_point(p, digits_dir, out, RunOptions(python=sys.executable, measure_lock=str(lock),
                                                                lock_timeout_s=1))
            finally:
                if holder:
                    _release(holder)
            paths[name] = out / store.RESULT
    paths["cut"].write_bytes(paths["cut"].read_bytes()[:72])
    return wf, paths


def test_a_record_cut_short_is_a_row_and_the_findings_count_the_points_without_a_readable_record(measured):
    _, paths = measured
    runs, curves, _ = collect.collect(list(paths.values()))
    assert sorted(runs["status"]) == ["damaged", "lock_timeout", "ok"]  # no point dropped
    text = findings.render(runs, curves)
    assert "3 points (1 ok, 2 failed)" in text
    assert "1 of the 3 planned points has no readable record (`damaged`" in text
    assert "snakemake --forcerun records" in text  # the fix, in the damaged row's reason


def test_select_status_chooses_a_published_machine_failure_and_a_damaged_record_to_measure_again(measured):
    wf, paths = measured
    assert store.status_in(paths["lock_timeout"].parent) == "lock_timeout"
    assert store.status_in(paths["cut"].parent) == "damaged"
    proc = sandbox.snakemake(wf, "-n", "--configfile", "study.yaml", "--forcerun", "train", "--config",
                             'select={"status": ["lock_timeout", "damaged"]}', timeout=300)
    assert "dlbench: select.status removed 1; 2 of 3 points remain" in proc.stderr, proc.stderr[-2000:]
    assert re.search(r"^train\s+2$", proc.stdout, re.M), proc.stdout[-2000:]
    planned = {line.split("results/runs/")[1].split("/")[2] for line in proc.stdout.splitlines()
               if "results/runs/" in line and raw.MEASUREMENT in line}  # the train rule's output
    assert planned == {paths["cut"].parent.name, paths["lock_timeout"].parent.name}, planned


# A generated page written under a file-size limit of 4 kB: the write fails part-way (EFBIG), as on a full disk.
CUT_PAGE = """
import resource, sys
from pathlib import Path
from dlbench.docgen import write_or_check
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_or_check(Path(sys.argv[1]), "x" * 100_000, False, "the schema")
    print("written")
except OSError as exc:
    print("refused", exc.errno)
"""


def test_a_file_written_outside_the_records_is_whole_or_as_it_was(tmp_path):
    page = tmp_path / "config.md"
    page.write_text("the page as it was\n")
    run = subprocess.run([sys.executable, "-c", CUT_PAGE, str(page)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.stdout.split() == ["refused", str(errno.EFBIG)], run.stdout + run.stderr
    assert page.read_text() == "the page as it was\n" and sorted(tmp_path.iterdir()) == [page]


def test_the_reports_text_explains_every_status_a_record_can_be_tabled_with():
    text = (ROOT / "workflow" / "report" / "workflow.rst").read_text()
    explained = set(re.findall(r"^- ``([a-z_]+)``:", text, re.M))
    assert explained >= {*statuses.RESULTS, *statuses.RETRIED, "cancelled"}, sorted(
        {*statuses.RESULTS, *statuses.RETRIED, "cancelled"} - explained)
    assert f"``{statuses.DAMAGED}``" in text
