"""The table of every run (dlbench.present.runs_table): every run a row, every value escaped, offline; sorted and
filtered
in headless Chromium as a reader would."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from dlbench.present import runs_table
from dlbench.testing.browser import CHROMIUM, MISSING, chromium
from dlbench.testing.study import make_runs

HOSTILE = '</script><script>alert(1)</script> <b>bold</b> & "quoted" <!--'


class Cells(HTMLParser):
    """The text of every body cell, row by row, as a browser reads the page."""

    def __init__(self):
        super().__init__()
        self.rows, self.heads, self._in, self._where = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tbody":
            self._where = "body"
        elif tag == "tr" and self._where == "body":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._in = tag
            (self.rows[-1] if tag == "td" else self.heads).append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._in = None

    def handle_data(self, data):
        if self._in == "td":
            self.rows[-1][-1] += data
        elif self._in == "th":
            self.heads[-1] += data


def hostile_runs():
    runs = make_runs()
    runs.loc[0, ["status", "reason"]] = ["error", HOSTILE]
    runs.loc[1, "framework"] = "<img src=x onerror=alert(2)>"
    return runs


def test_every_run_is_a_row_and_every_value_is_escaped():
    runs = hostile_runs()
    page = runs_table.render(runs)
    cells = Cells()
    cells.feed(page)
    heads = cells.heads
    assert len(cells.rows) == len(runs) and all(len(r) == len(runs_table.COLUMNS) for r in cells.rows)
    ids = [r[heads.index("id")] for r in cells.rows]
    assert ids == list(runs.run_id)
    # the hostile reason comes back as the text it was, and never as markup
    assert cells.rows[0][heads.index("reason")] == HOSTILE
    assert cells.rows[1][heads.index("framework")] == "<img src=x onerror=alert(2)>"
    assert page.count("<script>") == 1 and page.count("</script>") == 1 and "<b>bold" not in page
    assert "<img" not in page and "<!--" not in page
    # offline: nothing fetched from anywhere
    assert not re.search(r"<[^>]*\b(src|href)\s*=", page, re.I) and "http" not in page
    # numbers are shown rounded and sorted by their raw value; a column the study lacks is blank
    row = cells.rows[2]
    assert row[heads.index("accuracy")] == f"{runs.accuracy.iloc[2]:.4f}"
    assert f'data-v="{float(runs.train_time_s.iloc[2])!r}"' in page
    assert all(r[heads.index("peak GPU memory (MB)")] == "" for r in cells.rows)
    failed = int((runs.status != "ok").sum())
    assert page.count('<tr class="failed">') == failed and f"{len(runs)} runs (" in page


def test_written_whole_from_the_parquet(tmp_path):
    runs = make_runs()
    runs.to_parquet(tmp_path / "runs.parquet")
    out = runs_table.write(tmp_path / "runs.parquet", tmp_path / "runs.html")
    assert out.read_text() == runs_table.render(runs)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


# Sorts by training time both ways and filters, then writes what the table shows into the page.
DRIVER = """<script>
function ids() { return [...document.querySelectorAll('#runs tbody tr')].filter(r => !r.hidden)
                   .map(r => r.cells[0].textContent); }
const th = [...document.querySelectorAll('#runs th')].find(t => t.textContent === 'training time (s)');
th.click(); const up = ids();
th.click(); const down = ids();
const box = document.getElementById('filter');
box.value = 'theano diverged'; box.dispatchEvent(new Event('input'));
const filtered = ids(), shown = document.getElementById('shown').textContent;
box.value = ''; box.dispatchEvent(new Event('input'));
const out = document.createElement('pre'); out.id = 'out';
out.textContent = JSON.stringify({up, down, filtered, shown, all: ids().length});
document.body.appendChild(out);
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason=MISSING)
def test_the_page_sorts_and_filters_in_a_browser(tmp_path):
    runs = hostile_runs()
    page = tmp_path / "runs.html"
    page.write_text(runs_table.render(runs).replace("</body>", DRIVER + "</body>"))
    proc = chromium(tmp_path / "profile", "--allow-file-access-from-files", "--dump-dom", page.as_uri())
    m = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:] + proc.stderr[-2000:]
    seen = json.loads(html.unescape(m.group(1)))
    timed = runs.dropna(subset=["train_time_s"])
    # ascending: the fastest first, the runs without a time last; descending: the slowest first
    assert seen["up"][0] == timed.loc[timed.train_time_s.idxmin(), "run_id"]
    assert seen["down"][0] == timed.loc[timed.train_time_s.idxmax(), "run_id"]
    assert set(seen["up"][len(timed):]) == set(runs.run_id[runs.train_time_s.isna()])
    times = runs.set_index("run_id").train_time_s
    assert np.all(np.diff(times[seen["up"][:len(timed)]].to_numpy()) >= 0)
    diverged = runs[(runs.framework == "theano") & (runs.status == "diverged")]
    assert sorted(seen["filtered"]) == sorted(diverged.run_id) and seen["shown"] == str(len(diverged)) != "0"
    assert seen["all"] == len(runs)
