"""`snakemake partial` and the progress lines, on a real two-point study: with one point missing, partial trains
nothing and says 1 of 2; beside a running study it still draws; the running study says how far it is."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from dlbench.plan import estimate
from dlbench.present import packed
from dlbench.present.charts import catalog
from dlbench.rules import progress
from dlbench.study import config, sweep
from dlbench.testing.sandbox import copy_workflow, snakemake, tiny_study

TWO = {**tiny_study(), "frameworks": ["pytorch"]}  # .test/config/config.yaml, one framework: two points


def run_dir(p: dict) -> str:
    return f"results/runs/{p['framework']}/{p['dataset']}/{p['id']}"


def planned(cfg: dict) -> list[dict]:
    return sweep.plan(config.validate(cfg)).points


@pytest.fixture(scope="module")
def two_points(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("partial"), TWO, "two.yaml")


@pytest.mark.long
def test_partial_with_one_point_missing_trains_nothing_and_says_1_of_2(two_points):
    root = two_points
    first, second = planned(TWO)
    # one point trained, for real (its job's output, the raw measurement; the record beside it)
    snakemake(root, f"{run_dir(first)}/measurement.json", "--configfile", "two.yaml")
    dry = snakemake(root, "partial", "-n", "--configfile", "two.yaml").stdout
    assert re.search(r"^partial\s+1$", dry, re.M) and not re.search(r"^(train|aggregate)\s", dry, re.M), dry[-2000:]
    drawn = snakemake(root, "partial", "--configfile", "two.yaml")
    assert not (root / run_dir(second) / "metrics.json").exists()  # nothing trained
    # its last lines say where the page is
    said = f"dlbench: the results, on one page: {(root / 'results/partial/index.html').resolve().as_uri()}"
    assert said in (drawn.stdout + drawn.stderr).splitlines()[-6:], (drawn.stdout + drawn.stderr)[-1500:]
    assert not (root / "results/runs.parquet").exists()  # nor the study's own tables written
    out = root / "results/partial"
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs.run_id) == [first["id"]] and runs.status.iloc[0] == "ok"
    findings = (out / "findings.md").read_text()
    assert findings.startswith("# Findings") and "**Partial: drawn from 1 of 2 points**" in findings
    index = catalog.read_index(out / "charts")
    assert index["drawn"] and "gpu_timeline" in index["not_drawn"]  # the charts with data, and no file for the others
    for path in catalog.chart_files(str(out / "charts"), index["drawn"]):
        if not path.endswith((".png", ".pdf")):  # the images are drawn from the SVG
            assert "1 of 2 points" in Path(path).read_text(), path
    assert not (out / "charts/gpu_timeline.svg").exists()
    assert "Charts not drawn (no data in this study): " in findings and "GPU timeline (no GPU point)" in findings
    # the results page of the one finished run, saying so, its links to the study's own run folders
    page = (out / "index.html").read_text()
    assert "Partial: drawn from 1 of 2 points (drawn while the study was unfinished)." in page
    data = packed.blocks(page)["runs-data"]
    assert [row[0] for row in data["rows"]] == [first["id"]]
    assert data["folders"] == [f"../runs/pytorch/{first['dataset']}/{first['id']}/"]
    assert (out / data["folders"][0] / data["log"]).is_file()
    assert len(pd.read_csv(out / "runs.csv")) == 1 and set(pd.read_parquet(out / "summary.parquet").framework) == {
        "pytorch"}
    # nothing new has finished: nothing to do
    again = snakemake(root, "partial", "-n", "--configfile", "two.yaml").stdout
    assert "Nothing to be done" in again, again[-1500:]


@pytest.mark.long
def test_partial_beside_a_running_study_and_the_progress_lines(two_points):
    root = two_points
    first, second = planned(TWO)
    assert (root / run_dir(first) / "metrics.json").exists() and not (root / run_dir(second) / "metrics.json").exists()
    (root / "results/partial/findings.md").unlink()  # so that partial has work to do beside the study
    log = (root / "study.out").open("w")
    study = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "two.yaml"],
                             cwd=root, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not list((root / ".snakemake/locks").glob("*")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert study.poll() is None, (root / "study.out").read_text()[-2000:]  # the study is still running
        drawn = snakemake(root, "partial", "--configfile", "two.yaml")  # no lock conflict: they share no file
        assert re.search(r"^partial\s+1$", drawn.stdout + drawn.stderr, re.M), drawn.stderr[-2000:]
        assert re.search(r"\*\*Partial: drawn from [12] of 2 points\*\*", (root / "results/partial/findings.md")
                         .read_text())
        assert study.wait(timeout=900) == 0, (root / "study.out").read_text()[-3000:]
    finally:
        if study.poll() is None:
            study.terminate()
            study.wait(timeout=600)
        log.close()
    runs = pd.read_parquet(root / "results/runs.parquet")
    assert len(runs) == 2 and (runs.status == "ok").all()
    # one line for the point this run trained, on the terminal and in Snakemake's log
    line = "dlbench: 2 of 2 points done, 0 failed, 0 to go"
    assert (root / "study.out").read_text().count(line) == 1
    logs = [path.read_text() for path in (root / ".snakemake/log").glob("*.snakemake.log")]
    assert sum(text.count(line) for text in logs) == 1


def make_record(folder: Path, status: str, wall: float) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(f'{{"id": "x", "framework": "f", "dataset": "d", "status": "{status}", '
                                         f'"wall_time_s": {wall}}}')


def test_each_finished_training_job_gives_one_line_with_the_time_left(tmp_path):
    points = {("pytorch", "digits", f"p{i}"): {"framework": "pytorch", "dataset": "digits", "id": f"p{i}"}
              for i in range(4)}
    folder = lambda p: str(tmp_path / p["id"])  # noqa: E731
    make_record(tmp_path / "p0", "ok", 5.0)  # finished before this run
    done = estimate.Finished(pending=[p for k, p in points.items() if k[2] != "p0"], done=1)
    lines = []
    handler = progress.Progress(points, folder, done, seconds=lambda p: 100.0, emit_line=lines.append)
    logger = logging.getLogger("test-progress")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def job(jobid, point, status, wall, rule_wildcards=None):
        wildcards = rule_wildcards or {"framework": "pytorch", "dataset": "digits", "point": point}
        logger.info("rule", extra={"event": "job_info", "jobid": jobid, "wildcards": wildcards})
        if point:
            make_record(tmp_path / point, status, wall)
        logger.info("done", extra={"event": "job_finished", "job_id": jobid})

    job(1, None, "", 0, rule_wildcards={"dataset": "digits"})  # another rule's job: no line
    assert lines == []
    job(2, "p1", "ok", 50.0)
    # the point took half its estimate: the two to go, 100 s each by the estimate, take about 100 s (1.7 min)
    assert lines[-1] == "dlbench: 2 of 4 points done, 0 failed, 2 to go, about 1.7 min left"
    job(3, "p2", "oom", 50.0)
    assert lines[-1] == "dlbench: 3 of 4 points done, 1 failed (oom 1), 1 to go, about 50 s left"
    job(4, "p3", "ok", 50.0)
    assert lines[-1] == "dlbench: 4 of 4 points done, 1 failed (oom 1), 0 to go" and len(lines) == 3
