"""Every run of a study as one HTML page: sortable by any column, filterable by any text, offline.

The page needs nothing but itself (no CDN, no external script): the rows are plain HTML, every value escaped
(a reason may hold `</script>` or `<`), and a few lines of inline script sort and filter them. Each cell's
sort key is its raw value (numbers compare as numbers, text as text, blanks last).

    python -m dlbench.present.runs_table results/runs.parquet results/runs.html
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa

from dlbench import atomic
from dlbench.node import locks

# (column of runs.parquet, heading, decimals: None for text). A column a study lacks is left blank.
COLUMNS: list[tuple[str, str, int | None]] = [
    ("run_id", "id", None),
    ("framework", "framework", None),
    ("dataset", "dataset", None),
    ("preset", "preset", None),
    ("cross_apply", "applied as", None),
    ("network", "network", None),
    ("optimizer", "optimizer", None),
    ("batch_size", "batch size", 0),
    ("learning_rate", "learning rate", 6),
    ("iterations", "iterations", 0),
    ("epochs", "epochs", 0),
    ("device", "device", None),
    ("threads", "threads", 0),
    ("library", "library", None),
    ("compile", "compile", None),
    ("precision", "precision", None),
    ("repeat", "repeat", 0),
    ("status", "status", None),
    ("reason", "reason", None),
    ("train_time_s", "training time (s)", 2),
    ("test_time_s", "testing time (s)", 2),
    ("wall_time_s", "whole run (s)", 1),
    ("accuracy", "accuracy", 4),
    ("rss_peak_mb", "peak memory (MB)", 0),
    ("gpu_mem_peak_mb", "peak GPU memory (MB)", 0),
    ("started_at", "started", None),
]

STYLE = """
body { font: 13px system-ui, sans-serif; margin: 1em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 2px 6px; vertical-align: top; }
th { background: #eee; cursor: pointer; position: sticky; top: 0; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.reason { max-width: 40em; }
tr.failed td { background: #fdecea; }
#filter { width: 30em; }
"""

# Sort on a header click (again: the other way); show the rows holding every word of the filter.
SCRIPT = """
(function () {
  var table = document.getElementById('runs'), body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows), shown = document.getElementById('shown');
  var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
  function key(row, i, numeric) {
    var c = row.cells[i], v = c.hasAttribute('data-v') ? c.getAttribute('data-v') : c.textContent;
    if (v === '') return null;
    return numeric ? parseFloat(v) : v.toLowerCase();
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.addEventListener('click', function () {
      var numeric = th.hasAttribute('data-num'), down = th.getAttribute('aria-sort') === 'ascending';
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
      var order = rows.map(function (r, n) { return [key(r, i, numeric), n]; });
      order.sort(function (a, b) {
        if (a[0] === b[0]) return a[1] - b[1];
        if (a[0] === null) return 1;
        if (b[0] === null) return -1;
        return (a[0] < b[0] ? -1 : 1) * (down ? -1 : 1);
      });
      order.forEach(function (o) { body.appendChild(rows[o[1]]); });
    });
  });
  document.getElementById('filter').addEventListener('input', function (ev) {
    var words = ev.target.value.toLowerCase().split(/\\s+/).filter(Boolean), n = 0;
    rows.forEach(function (r, k) {
      var hit = words.every(function (w) { return texts[k].indexOf(w) >= 0; });
      r.hidden = !hit;
      if (hit) n += 1;
    });
    shown.textContent = n;
  });
})();
"""


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT


def _cell(value, decimals: int | None, css: str = "") -> str:
    if _blank(value):
        return '<td data-v=""></td>'
    if decimals is not None:
        number = float(value)
        shown = f"{number:,.{decimals}f}" if decimals else f"{round(number):,}"
        if decimals and number and abs(number) < 10 ** -decimals:
            shown = f"{number:.2g}"
        return f'<td class="num" data-v="{number!r}">{shown}</td>'
    text = html.escape(str(value), quote=True)
    css = f' class="{css}"' if css else ""
    return f"<td{css}>{text}</td>"  # sorted by its text


def render(runs: pd.DataFrame, title: str = "Every run") -> str:
    """The page: one row per run, the columns of COLUMNS, every value escaped."""
    heads = "".join(f"<th{' data-num' if decimals is not None else ''}>{html.escape(head)}</th>"
                    for _, head, decimals in COLUMNS)
    lines = []
    records = runs.to_dict("records")
    for record in records:
        cells = "".join(_cell(record.get(column), decimals, "reason" if column == "reason" else "")
                        for column, _, decimals in COLUMNS)
        failed = "" if record.get("status") == "ok" else ' class="failed"'
        lines.append(f"<tr{failed}>{cells}</tr>")
    counts = runs["status"].value_counts() if "status" in runs else pd.Series(dtype=int)
    summary = ", ".join(f"{n} {html.escape(str(status))}" for status, n in counts.items())
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(records)} runs ({summary}). Click a heading to sort by it (again: the other way); type to show "
        "only the rows holding every word you type (a framework, a status, a word of a reason).</p>",
        '<p><input id="filter" type="search" placeholder="filter: e.g. pytorch oom" aria-label="filter"> '
        f'<span id="shown">{len(records)}</span> of {len(records)} shown</p>',
        f'<table id="runs"><thead><tr>{heads}</tr></thead><tbody>', *lines, "</tbody></table>",
        f"<script>{SCRIPT}</script>", "</body></html>", ""])


def write(runs_parquet: str | Path, out: str | Path, title: str = "Every run") -> Path:
    """results/runs.html from results/runs.parquet, written whole or not at all. Heavy work (seconds of CPU at
    thousands of runs, and its rule runs while the study measures): never beside a measurement on this node."""
    with locks.heavy_work(locks.node_lock(), "the runs table"):
        atomic.write_text(out, render(pd.read_parquet(runs_parquet), title))
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench runs-table",
                                     description="write every run of a study as one HTML page, sortable and "
                                     "filterable")
    parser.add_argument("runs", help="results/runs.parquet")
    parser.add_argument("out", help="the page to write, e.g. results/runs.html")
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
