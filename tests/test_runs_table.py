"""The table of runs (dlbench.present.runs_table): every run in the page's data, every value escaped where it is
shown, offline; paged, sorted and filtered in headless Chromium as a reader would."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from dlbench.paths import ROOT
from dlbench.present import packed, runs_table
from dlbench.study import config, sweep
from dlbench.testing.browser import CHROMIUM, MISSING, chromium
from dlbench.testing.study import make_runs

PAPER = ROOT / "config" / "paper.yaml"
HOSTILE = '</script><script>alert(1)</script> <b>bold</b> & "quoted" <!--'


def hostile_runs() -> pd.DataFrame:
    runs = make_runs()
    runs.loc[0, ["status", "reason"]] = ["error", HOSTILE]
    runs.loc[1, "framework"] = "<img src=x onerror=alert(2)>"
    runs["contended"] = [i % 7 == 3 for i in range(len(runs))]
    return runs


def test_every_run_is_in_the_data_and_nothing_of_it_is_markup():
    runs = hostile_runs()
    page = runs_table.render(runs, runs_href="../runs")
    data = packed.blocks(page)["runs-data"]
    heads = [c["head"] for c in data["columns"]]
    assert len(data["rows"]) == len(runs) and all(len(r) == len(heads) for r in data["rows"])
    assert [r[heads.index("id")] for r in data["rows"]] == list(runs.run_id)
    # the values as they are: raw numbers (sorted as numbers), text as text, a blank as null
    accuracy = [r[heads.index("accuracy (%)")] for r in data["rows"]]
    assert accuracy[0] is None and np.isnan(runs.accuracy[0])
    assert accuracy[2:6] == pytest.approx(list(runs.accuracy[2:6]))
    assert data["rows"][1][heads.index("framework")] == "<img src=x onerror=alert(2)>"
    assert data["reasons"][0] == HOSTILE and data["reasons"][2] is None  # an ok run has no reason
    assert [r[heads.index("contended")] for r in data["rows"]] == list(runs.contended)
    failed = runs.status != "ok"
    assert [reason is not None for reason in data["reasons"]] == list(failed)
    # each run's folder, relative to the page, and its framework's log in it
    assert data["folders"][2] == f"../runs/{runs.framework[2]}/{runs.dataset[2]}/{runs.run_id[2]}/"
    assert data["log"] == "trainer.log"
    # nothing of the data is in the page as markup: no hostile text, no tag of its, one script of the table's own
    assert HOSTILE not in page and "<img" not in page and "<b>bold" not in page and "<!--" not in page
    assert page.count("<script>") == 2  # unpack, and the table's own script; the data is a packed block
    # offline: nothing fetched from anywhere
    assert not re.search(r"<[^>]*\bsrc\s*=", page, re.I) and "http" not in page


def test_a_setting_every_run_shares_is_said_once_not_a_column():
    runs = make_runs()  # one network, optimizer, library and repeat; frameworks, devices, threads and more vary
    shown, shared = runs_table.columns_for(runs)
    keys = [c.key for c in shown]
    assert {"network", "optimizer", "library", "repeat"}.isdisjoint(keys)
    assert {"framework", "dataset", "preset", "batch_size", "learning_rate", "device", "threads"} <= set(keys)
    assert [(c.key, v) for c, v in shared] == [("network", "lenet"), ("optimizer", "sgd"), ("library", "default"),
                                                ("repeat", 0)]
    # the measurements are always there, a GPU memory column only where a run has one, and the contended column
    assert {"status", "train_time_s", "test_time_s", "accuracy", "rss_peak_mb", "contended"} <= set(keys)
    assert "gpu_mem_peak_mb" not in keys
    assert "gpu_mem_peak_mb" in [c.key for c in runs_table.columns_for(runs.assign(gpu_mem_peak_mb=5.0))[0]]
    page = runs_table.render(runs)
    assert "Every run (where it applies): network lenet; optimizer sgd; library default; repeat 0." in page
    # the columns fit 1,400 px with the id readable, with what varies in the paper's study (and a GPU's memory)
    assert sum(c.width for c in shown if c.key != "run_id") + runs_table.id_width(shown) <= runs_table.SCREEN_WIDTH
    paper = pd.DataFrame(sweep.plan(config.validate(yaml.safe_load(PAPER.read_text()))).points)
    paper = paper.rename(columns={"id": "run_id"}).assign(status="ok", gpu_mem_peak_mb=1.0)
    shown, _ = runs_table.columns_for(paper)
    assert {"dataset", "preset", "network", "batch_size", "device", "threads", "gpu_mem_peak_mb"} <= {
        c.key for c in shown}
    rest = sum(c.width for c in shown if c.key != "run_id")
    assert rest + runs_table.id_width(shown) <= runs_table.SCREEN_WIDTH, rest  # the id at least its least width


def test_written_whole_from_the_parquet_with_links_from_where_it_is(tmp_path):
    runs = make_runs()
    (tmp_path / "results").mkdir()
    runs.to_parquet(tmp_path / "results/runs.parquet")
    out = runs_table.write(tmp_path / "results/runs.parquet", tmp_path / "runs.html")
    assert out.read_text() == runs_table.render(runs, runs_href="results/runs")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


# Waits for the table, then: sorts by training time both ways, filters by words and by a column, pages, and writes
# what the table shows into the page.
DRIVER = """<script>
const sleep = ms => new Promise(r => setTimeout(r, ms));
const rows = () => [...document.querySelectorAll('#runs-table tbody tr:not(.reason)')];
const ids = () => rows().map(r => r.cells[0].querySelector('a:last-child').textContent);
async function typed(text) {
  const box = document.querySelector('#runs-table .filter');
  box.value = text; box.dispatchEvent(new Event('input')); await sleep(400);
}
async function drive() {
  while (!document.querySelector('#runs-table tbody a')) await sleep(50);
  const seen = {first: ids(), shown: document.querySelector('#runs-table .shown').textContent,
                where: document.querySelector('#runs-table .where').textContent};
  seen.cells = rows().map(r => [...r.cells].map(c => c.textContent));
  seen.heads = [...document.querySelectorAll('#runs-table th')].map(t => t.textContent.replace(/\u00ad/g, ''));
  seen.links = [...rows()[0].querySelectorAll('a')].map(a => a.getAttribute('href'));
  seen.reason = [...document.querySelectorAll('#runs-table tr.reason div')].map(d => d.textContent);
  const th = document.querySelector('#runs-table th[data-key="train_time_s"]');
  th.click(); seen.up = ids();
  th.click(); seen.down = ids();
  document.querySelector('#runs-table [data-step="last"]').click(); seen.last = ids();
  document.querySelector('#runs-table [data-step="first"]').click();
  document.querySelector('#runs-table [data-step="1"]').click(); seen.second = ids();
  await typed('theano diverged'); seen.filtered = ids(); seen.filtered_shown = document.querySelector(
    '#runs-table .shown').textContent;
  await typed('status:oom'); seen.oom = ids();
  await typed('nothing-holds-this'); seen.none = document.querySelector('#runs-table .shown').textContent;
  await typed(''); seen.all = document.querySelector('#runs-table .shown').textContent;
  const out = document.createElement('pre'); out.id = 'out'; out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
}
drive().catch(e => { const out = document.createElement('pre'); out.id = 'out';
                     out.textContent = JSON.stringify({error: String(e)}); document.body.appendChild(out); });
</script>"""


def drive(tmp_path, runs: pd.DataFrame) -> dict:
    page = tmp_path / "runs.html"
    page.write_text(runs_table.render(runs, runs_href="runs").replace("</body>", DRIVER + "</body>"))
    proc = chromium(tmp_path / "profile", "--virtual-time-budget=30000", "--dump-dom", page.as_uri(), timeout=120)
    m = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:] + proc.stderr[-2000:]
    seen = json.loads(html.unescape(m.group(1)))
    assert "error" not in seen, seen
    return seen


@pytest.mark.skipif(CHROMIUM is None, reason=MISSING)
def test_the_table_pages_sorts_and_filters_in_a_browser(tmp_path):
    runs = hostile_runs()
    seen = drive(tmp_path, runs)
    page_rows = runs_table.PAGE_ROWS
    assert seen["first"] == list(runs.run_id[:page_rows]) and seen["where"] == f"page 1 of {-(-len(runs) // page_rows)}"
    assert seen["shown"] == f"1\u2013{page_rows} of {len(runs)}"
    # the first row as a reader sees it: accuracy in %, the id a link to the run's folder, `log` to its output
    first = runs.iloc[0]
    heads = seen["heads"]
    assert heads[0] == "id" and heads[-1] == "contended" and "accuracy (%)" in heads
    row = dict(zip(heads, seen["cells"][0]))
    assert row["status"] == "error" and row["training (s)"] == "" and row["framework"] == first.framework
    assert seen["links"] == [f"runs/{first.framework}/{first.dataset}/{first.run_id}/trainer.log",
                             f"runs/{first.framework}/{first.dataset}/{first.run_id}/"]
    assert row["id"] == f"log {first.run_id}"
    assert seen["reason"][0] == HOSTILE  # a failed run's reason: the line under it, as the text it was
    # ascending: the fastest first; descending: the slowest first; the runs without a time last either way (ties and
    # blanks in the table's order)
    untimed = list(runs.run_id[runs.train_time_s.isna()])
    up = list(runs.dropna(subset=["train_time_s"]).sort_values("train_time_s", kind="stable").run_id) + untimed
    down = list(runs.dropna(subset=["train_time_s"]).sort_values("train_time_s", ascending=False, kind="stable")
                .run_id) + untimed
    assert seen["up"] == up[:page_rows] and seen["down"] == down[:page_rows]
    last = (len(runs) - 1) // page_rows * page_rows
    assert seen["last"] == down[last:] and seen["second"] == down[page_rows:2 * page_rows]
    # every word, anywhere in the row or its reason; column:value in that column only
    diverged = runs[(runs.framework == "theano") & (runs.status == "diverged")]
    assert sorted(seen["filtered"]) == sorted(diverged.run_id) and len(diverged)
    assert seen["filtered_shown"] == f"1\u2013{len(diverged)} of {len(diverged)} shown (of {len(runs)})"
    assert sorted(seen["oom"]) == sorted(runs.run_id[runs.status == "oom"])
    assert seen["none"].startswith("no run holds every word")
    assert seen["all"] == f"1\u2013{page_rows} of {len(runs)}"


@pytest.mark.skipif(CHROMIUM is None, reason=MISSING)
def test_accuracy_is_shown_in_percent_and_contended_runs_say_so(tmp_path):
    runs = hostile_runs().iloc[2:6].reset_index(drop=True)
    runs["contended"] = [False, True, None, False]
    seen = drive(tmp_path, runs)
    shown = [dict(zip(seen["heads"], cells)) for cells in seen["cells"]]
    assert seen["first"] == list(runs.run_id)
    assert [row["accuracy (%)"] for row in shown] == [f"{a * 100:.2f}" for a in runs.accuracy]
    assert [row["contended"] for row in shown] == ["", "yes", "", ""]
