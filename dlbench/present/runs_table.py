"""Every run of a study as a table a reader pages through, sorts and filters, offline: the results page's table
of runs (dlbench.present.results_page), and `dlbench runs-table` for any runs.parquet.

The runs travel as data inside the page (dlbench.present.packed: JSON, compressed), and a small script of the
page's own draws one page of rows at a time, so that 20,000 runs load, sort and filter in a moment. The columns fit
a 1,400 px screen: a setting every run shares is said once above the table rather than repeated in a column, and
what varies is shown, with the measurements (times, accuracy in %, peak memory) and whether a run was timed while
other work loaded the machine (`contended`). Each run's id links to its folder (its record, curve, samples and
logs) and `log` beside it to the framework's own output; a failed run's reason is the line under it. Every value
reaches the page as data and is escaped where it is shown (a reason may hold `</script>` or `<`).

    python -m dlbench.present.runs_table results/runs.parquet runs.html
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from dlbench import atomic
from dlbench.node import locks
from dlbench.present import packed

# A point's folder under results/runs/, as dlbench.rules.context.run_dir lays it out, and its framework's output.
FOLDER = "{framework}/{dataset}/{run_id}/"
LOG = "trainer.log"


@dataclass(frozen=True)
class Column:
    key: str  # the column of runs.parquet
    head: str
    kind: str = "text"  # text | num | pct (a fraction shown in %) | flag (yes or blank)
    decimals: int | None = None  # a number's decimals (None: as it is, e.g. a learning rate)
    width: int = 70  # px at 13 px type
    setting: bool = False  # said once above the table where every run shares it


def _setting(key: str, head: str, kind: str = "text", width: int = 70) -> Column:
    return Column(key, head, kind, 0 if kind == "num" else None, width, setting=True)


COLUMNS: list[Column] = [
    Column("run_id", "id", width=0),  # its width: what the others leave of the screen (id_width)
    Column("framework", "framework", width=78),
    _setting("dataset", "dataset", width=66),
    _setting("preset", "defaults", width=64),
    _setting("cross_apply", "applied as", width=64),
    _setting("network", "network", width=84),
    _setting("optimizer", "optimizer", width=64),
    _setting("batch_size", "batch", "num", width=46),
    Column("learning_rate", "learning rate", "num", None, 56, setting=True),
    _setting("iterations", "iterations", "num", width=64),
    _setting("epochs", "epochs", "num", width=50),
    _setting("device", "device", width=50),
    _setting("threads", "threads", "num", width=60),
    _setting("library", "library", width=58),
    _setting("compile", "compile", width=60),
    _setting("precision", "precision", width=64),
    _setting("repeat", "repeat", "num", width=50),
    Column("status", "status", width=78),
    Column("train_time_s", "training (s)", "num", 2, 60),
    Column("test_time_s", "testing (s)", "num", 2, 54),
    Column("accuracy", "accuracy (%)", "pct", 2, 60),
    Column("rss_peak_mb", "peak MB", "num", 0, 50),
    Column("gpu_mem_peak_mb", "GPU MB", "num", 0, 50),
    Column("contended", "contended", "flag", width=58),
]
OPTIONAL = {"gpu_mem_peak_mb"}  # shown only where some run has a value
# Where a heading's long word may break, hyphenated, when its column is narrow (the columns fit 1,400 px so).
BREAKS = {"framework": "frame|work", "learning": "learn|ing", "iterations": "iter|ations", "optimizer": "opti|mizer",
          "precision": "pre|cision", "accuracy": "accu|racy", "contended": "con|tended", "defaults": "de|faults",
          "training": "train|ing", "testing": "test|ing", "device": "de|vice", "repeat": "re|peat",
          "compile": "com|pile", "library": "li|brary", "network": "net|work", "dataset": "data|set"}


def heading_html(head: str) -> str:
    """A column's heading as HTML, its long words with a soft hyphen where they may break."""
    return " ".join("&shy;".join(map(html.escape, BREAKS.get(word, word).split("|"))) for word in head.split(" "))
PAGE_ROWS = 100
# The id column (a run's log and folder) takes what the others leave of a 1,400 px screen (its page's margins and
# scroll bar apart), within these bounds: px.
SCREEN_WIDTH, ID_WIDTHS = 1360, (140, 320)


def id_width(shown: list[Column]) -> int:
    low, high = ID_WIDTHS
    return max(low, min(high, SCREEN_WIDTH - sum(c.width for c in shown if c.key != "run_id")))

STYLE = """
.runs-table .controls { margin: .4em 0; display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
.runs-table .filter { width: 34em; font: inherit; padding: 2px 4px; }
.runs-table .pager button { font: inherit; min-width: 2.2em; }
.runs-table .wrap { overflow-x: auto; }
.runs-table table { border-collapse: collapse; table-layout: fixed; width: 100%; }
.runs-table table { font-size: 12.5px; }
.runs-table th, .runs-table td { border: 1px solid #ddd; padding: 2px 4px; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap; }
.runs-table th { background: #eee; cursor: pointer; user-select: none; white-space: normal; vertical-align: bottom;
  font-size: 11.5px; font-weight: 600; }
.runs-table th[aria-sort=ascending]::after { content: " \\25B2"; }
.runs-table th[aria-sort=descending]::after { content: " \\25BC"; }
.runs-table td.num { text-align: right; font-variant-numeric: tabular-nums; }
.runs-table tr.failed td { background: #fdecea; }
.runs-table tr.reason td { white-space: normal; color: #7a1f1f; font-size: 12px; border-top: 0;
  background: #fdf6f5; }
.runs-table tr.reason div { display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical;
  overflow: hidden; }
.runs-table td.flag { color: #b35900; }
.runs-table td.id a:first-child { font-size: 11px; margin-right: .3em; }
"""

# Draw a page of rows; sort on a heading's click (again: the other way); keep the rows holding every word typed
# (`column:value` looks in one column). The data: {columns, rows, folders, reasons} (see table_data).
SCRIPT = """
(function () {
  var root = document.getElementById('runs-table'), body = root.querySelector('tbody');
  var heads = root.querySelectorAll('thead th'), box = root.querySelector('.filter');
  var info = root.querySelector('.shown'), where = root.querySelector('.where'), PAGE = %(page)d;
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]; });
  }
  function fmt(n) { return n.toLocaleString('en-US'); }
  unpack('runs-data').then(function (d) {
    var cols = d.columns, rows = d.rows, n = rows.length, idCol = cols.findIndex(function (c) {
      return c.key === 'run_id'; });
    // one number format per column, made once (toLocaleString makes one per call: seconds at 20,000 runs)
    var formats = cols.map(function (c) {
      return c.decimals === null ? null : new Intl.NumberFormat('en-US', {minimumFractionDigits: c.decimals,
                                                                          maximumFractionDigits: c.decimals}); });
    function show(i, v) {
      var col = cols[i];
      if (v === null || v === undefined) return '';
      if (col.kind === 'flag') return v ? 'yes' : '';
      if (col.kind === 'text') return String(v);
      if (col.kind === 'pct') v = v * 100;
      if (col.decimals === null) return String(v);
      if (v !== 0 && Math.abs(v) < Math.pow(10, -col.decimals)) return v.toPrecision(2);
      return formats[i].format(v);
    }
    // what a filter searches: each cell's text in lower case, and the row's with its reason; made a slice at a time
    // while the page is idle (half a second at 20,000 runs), the rest at once if a filter comes first
    var lower = [], whole = [];
    function index(upto) {
      for (var k = lower.length; k < upto; k++) {
        lower.push(rows[k].map(function (v, i) { return show(i, v).toLowerCase(); }));
        whole.push(lower[k].join(' ') + ' ' + (d.reasons[k] || '').toLowerCase());
      }
    }
    function searchable() { index(n); }
    (function later() {
      index(Math.min(n, lower.length + 2000));
      if (lower.length < n) setTimeout(later, 0);
    })();
    var keys = cols.map(function (c) { return c.key.toLowerCase(); });
    var heads_ = cols.map(function (c) { return c.head.toLowerCase(); });
    var order = rows.map(function (r, k) { return k; }), shown = order, page = 0;
    function cell(k, i) {
      var c = cols[i], t = show(i, rows[k][i]);
      if (i === idCol) return '<td class="id" title="' + esc(t) + '"><a href="' + esc(d.folders[k] + d.log) +
                              '">log</a> <a href="' + esc(d.folders[k]) + '">' + esc(t) + '</a></td>';
      var cls = c.kind === 'text' ? '' : ' class="' + (c.kind === 'flag' ? 'flag' : 'num') + '"';
      return '<td' + cls + (c.kind === 'text' ? ' title="' + esc(t) + '"' : '') + '>' + esc(t) + '</td>';
    }
    function draw() {
      var pages = Math.max(1, Math.ceil(shown.length / PAGE));
      page = Math.min(Math.max(page, 0), pages - 1);
      var html = [], from = page * PAGE, to = Math.min(shown.length, from + PAGE);
      for (var j = from; j < to; j++) {
        var k = shown[j], failed = d.reasons[k] !== null;
        html.push('<tr' + (failed ? ' class="failed"' : '') + '>' + cols.map(function (c, i) { return cell(k, i); })
                  .join('') + '</tr>');
        if (failed && d.reasons[k])
          html.push('<tr class="reason"><td colspan="' + cols.length + '"><div title="' + esc(d.reasons[k]) +
                    '">' + esc(d.reasons[k]) + '</div></td></tr>');
      }
      body.innerHTML = html.join('');
      info.textContent = shown.length ? fmt(from + 1) + '\\u2013' + fmt(to) + ' of ' + fmt(shown.length) +
        (shown.length < n ? ' shown (of ' + fmt(n) + ')' : '') :
        'no run holds every word of ' + JSON.stringify(box.value);
      where.textContent = 'page ' + fmt(page + 1) + ' of ' + fmt(pages);
    }
    function filter() {
      var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean).map(function (w) {
        var at = w.indexOf(':'), i = at > 0 ? keys.indexOf(w.slice(0, at)) : -1;
        if (at > 0 && i < 0) i = heads_.indexOf(w.slice(0, at));
        return i >= 0 ? [i, w.slice(at + 1)] : [-1, w];
      });
      if (words.length) searchable();
      shown = !words.length ? order : order.filter(function (k) {
        return words.every(function (w) {
          return (w[0] < 0 ? whole[k] : lower[k][w[0]]).indexOf(w[1]) >= 0; });
      });
      page = 0;
      draw();
    }
    Array.prototype.forEach.call(heads, function (th, i) {
      if (i >= cols.length) return;
      th.addEventListener('click', function () {
        var down = th.getAttribute('aria-sort') === 'ascending', text = cols[i].kind === 'text';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
        var sign = down ? -1 : 1;
        var keyed = rows.map(function (r) {
          var v = r[i];
          return v === null || v === undefined ? null : text ? String(v).toLowerCase() : v; });
        order = order.slice().sort(function (a, b) {
          var x = keyed[a], y = keyed[b];
          if (x === null || y === null) return x === y ? a - b : (x === null ? 1 : -1);  // blanks last
          return x < y ? -sign : x > y ? sign : a - b;
        });
        filter();
      });
    });
    var timer = null;
    box.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(filter, 120); });
    root.querySelector('.pager').addEventListener('click', function (ev) {
      var step = ev.target.getAttribute('data-step');
      if (step === null) return;
      page = step === 'first' ? 0 : step === 'last' ? Infinity : page + Number(step);
      draw();
    });
    filter();
  }).catch(function (e) {
    body.innerHTML = '<tr><td colspan="' + heads.length + '">' + esc(e.message) + '</td></tr>';
  });
})();
""".replace("%(page)d", str(PAGE_ROWS))


def _value(value):
    """A cell's value as JSON carries it: numbers and text as they are, blanks as null."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    return value if isinstance(value, (bool, int, float, str)) else str(value)


def _flag(value) -> bool:
    return value is True or (not isinstance(value, str) and _value(value) == 1)


def _column(runs: pd.DataFrame, key: str, flag: bool = False) -> list:
    """A column's values as the page carries them (a column the runs lack: blanks), one list for all the runs."""
    if key not in runs:
        return [False if flag else None] * len(runs)
    return [_flag(v) if flag else _value(v) for v in runs[key].tolist()]


def columns_for(runs: pd.DataFrame) -> tuple[list[Column], list[tuple[Column, object]]]:
    """The columns the table shows, and the settings every run shares (each with its value) said once above it.
    A setting with at most one value among the runs is shared (a blank where a run lacks it says nothing)."""
    shown, shared = [], []
    for col in COLUMNS:
        values = runs[col.key].dropna().unique() if col.key in runs else []
        if col.setting and len(values) <= 1:
            if len(values):
                shared.append((col, _value(values[0])))
            continue
        if col.key in OPTIONAL and not len(values):
            continue
        shown.append(col)
    return shown, shared


def table_data(runs: pd.DataFrame, runs_href: str) -> dict:
    """What the page's script draws: the columns shown, a row of raw values per run, each run's folder (relative to
    the page: runs_href is the folder holding results/runs/'s folders, as seen from the page), and the reason of
    each failed run (null for an ok one)."""
    shown, _ = columns_for(runs)
    prefix = runs_href.rstrip("/") + "/" if runs_href else ""
    columns = [_column(runs, c.key, c.kind == "flag") for c in shown]
    status, reason = _column(runs, "status"), _column(runs, "reason")
    return {
        "columns": [{"key": c.key, "head": c.head, "kind": c.kind, "decimals": c.decimals} for c in shown],
        "rows": [list(row) for row in zip(*columns)] if columns else [[] for _ in range(len(runs))],
        "folders": [prefix + FOLDER.format(framework=fw, dataset=ds, run_id=rid) for fw, ds, rid in
                    zip(_column(runs, "framework"), _column(runs, "dataset"), _column(runs, "run_id"))],
        "reasons": [None if s == "ok" else str(r or "") for s, r in zip(status, reason)],
        "log": LOG,
    }


def _shared_line(shared: list[tuple[Column, object]]) -> str:
    if not shared:
        return ""
    said = "; ".join(f"{html.escape(col.head)} {html.escape(str(value))}" for col, value in shared)
    return f'<p class="shared">Every run (where it applies): {said}.</p>'


def counts_line(runs: pd.DataFrame) -> str:
    """'N runs (k ok, ...)': the statuses in order of how many."""
    counts = runs["status"].value_counts() if "status" in runs else pd.Series(dtype=int)
    said = ", ".join(f"{n:,} {status}" for status, n in counts.items())
    return f"{len(runs):,} runs ({said})" if said else f"{len(runs):,} runs"


def section(runs: pd.DataFrame, runs_href: str) -> str:
    """The table of runs as a block of a page (its data, markup and script; the page supplies STYLE, and
    dlbench.present.packed.SCRIPT for `unpack`)."""
    shown, shared = columns_for(runs)
    widths = [id_width(shown) if c.key == "run_id" else c.width for c in shown]
    cols = "".join(f'<col style="width:{w}px">' for w in widths)
    # the columns' widths are their least: a wider screen shares the room left among them all; a narrower one
    # scrolls the table sideways
    least = sum(widths)
    heads = "".join(f'<th data-key="{c.key}" title="sort by {html.escape(c.head)}">{heading_html(c.head)}</th>'
                    for c in shown)
    return "\n".join([
        '<div class="runs-table" id="runs-table">',
        f"<p>{html.escape(counts_line(runs))}. Click a heading to sort by it (again: the other way). Type to keep "
        "the runs holding every word (<code>column:value</code> looks in one column: <code>status:oom</code>, "
        "<code>framework:caffe</code>). A run's id opens its folder (record, curve, samples, logs), and "
        "<code>log</code> beside it the framework's own output; a failed run's "
        "reason is the line under it.</p>",
        _shared_line(shared),
        '<div class="controls"><input class="filter" type="search" aria-label="filter the runs" '
        'placeholder="filter: e.g. pytorch diverged, or status:oom"> <span class="shown"></span> '
        '<span class="pager"><button data-step="first" title="first page">&laquo;</button>'
        '<button data-step="-1" title="previous page">&lsaquo;</button> <span class="where"></span> '
        '<button data-step="1" title="next page">&rsaquo;</button>'
        '<button data-step="last" title="last page">&raquo;</button></span></div>',
        f'<div class="wrap"><table style="min-width:{least}px"><colgroup>{cols}</colgroup>'
        f'<thead><tr>{heads}</tr></thead>'
        f'<tbody><tr><td colspan="{len(shown)}">loading the runs</td></tr></tbody></table></div>',
        packed.block("runs-data", table_data(runs, runs_href)),
        f"<script>{SCRIPT}</script>",
        "</div>",
    ])


def render(runs: pd.DataFrame, title: str = "Every run", runs_href: str = "runs") -> str:
    """The table of runs as a page of its own."""
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>body {{ font: 13px system-ui, sans-serif; margin: 1em; }}{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>", f"<script>{packed.SCRIPT}</script>", section(runs, runs_href),
        "</body></html>", ""])


def href_between(page: str | os.PathLike, folder: str | os.PathLike) -> str:
    """The relative address of `folder` from the page `page` (links that work wherever the results are moved)."""
    return Path(os.path.relpath(Path(folder).resolve(), Path(page).resolve().parent)).as_posix()


def write(runs_parquet: str | Path, out: str | Path, title: str = "Every run") -> Path:
    """The table of the runs of runs_parquet as the page `out`, written whole or not at all; its links lead to the
    runs/ folder beside runs_parquet. Heavy work (seconds of CPU at thousands of runs, and the workflow runs it while
    the study measures): never beside a measurement on this node."""
    with locks.heavy_work(locks.node_lock(), "the runs table"):
        runs_href = href_between(out, Path(runs_parquet).parent / "runs")
        atomic.write_text(out, render(pd.read_parquet(runs_parquet), title, runs_href))
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench runs-table",
                                     description="write every run of a study as one HTML page, sortable and "
                                     "filterable")
    parser.add_argument("runs", help="results/runs.parquet")
    parser.add_argument("out", help="the page to write, e.g. runs.html")
    args = parser.parse_args(argv)
    if not Path(args.runs).is_file():
        print(f"dlbench runs-table: no file {args.runs}; name a study's results/runs.parquet (snakemake writes it)",
              file=sys.stderr)
        return 2
    if not Path(args.out).parent.is_dir() or Path(args.out).is_dir():
        print(f"dlbench runs-table: cannot write {args.out}: name a page in an existing folder", file=sys.stderr)
        return 2
    try:
        print(write(args.runs, args.out))
    except (locks.LockTimeout, locks.LockUnusable) as exc:  # the node's locks: held too long, or unusable here
        print(f"dlbench: {exc}", file=sys.stderr)
        return 1
    except pa.ArrowInvalid as exc:
        print(f"dlbench runs-table: {args.runs} is not a Parquet table ({exc}); name a study's results/runs.parquet",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
