"""A study's results on one page, results/index.html: the findings, every chart drawn, the table of runs and links
to the tables as files. It opens from the file system with no network and can be sent as it is (its links to
the files beside it then lead nowhere; everything else is inside it).

    the findings       results/findings.md as HTML (dlbench.present.markdown_html)
    the charts         every chart of charts/index.json, drawn by Vega from its spec (charts/<name>.vega.json),
                       each with its SVG, PNG and PDF; one copy of Vega for them all, each drawn as it scrolls
                       into view; the charts not drawn, and why
    the runs           dlbench.present.runs_table: paged, sortable, filterable, each run's folder and log
    the files          the Parquet and CSV tables, the findings, the charts' folder

The charts' specs and the runs travel packed (dlbench.present.packed): at 20,000 runs the page is a few MB.
`snakemake partial` writes the same page into results/partial/ from the points finished so far.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from dlbench import __version__, atomic
from dlbench.node import locks
from dlbench.present import markdown_html, packed, runs_table
from dlbench.present.charts import catalog

PAGE = "index.html"
# The files a page links to, where they are beside it, with what each holds.
FILES = [
    ("runs.parquet", "one row per run, every field of its record"),
    ("runs.csv", "the same, as CSV"),
    ("summary.parquet", "one row per setting and metric: n, mean, sd, 95 % interval, min, max"),
    ("summary.csv", "the same, as CSV"),
    ("curves.parquet", "one row per run and step: loss and accuracy"),
    ("samples.parquet", "one row per run and monitor reading: CPU, memory, GPU"),
    ("findings.md", "the findings as Markdown"),
    ("charts/", "every chart as SVG, PNG, PDF, a page of its own and its Vega spec"),
]

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d1d1f; }
header.top { position: sticky; top: 0; z-index: 5; background: #f6f6f8; border-bottom: 1px solid #ddd;
  padding: .35em 1.2em; display: flex; gap: 1.6em; align-items: baseline; flex-wrap: wrap; }
header.top b { font-size: 15px; }
header.top a { color: #1a56a6; text-decoration: none; }
main { padding: 0 1.2em 3em; }
section { margin-top: 1.2em; }
.prose { max-width: 68em; }
.prose table { border-collapse: collapse; margin: .6em 0; font-size: 13px; }
.prose th, .prose td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
.prose th { background: #eee; }
.prose li { margin: .25em 0; }
h1 { font-size: 22px; margin: .6em 0 .2em; } h2 { font-size: 19px; border-bottom: 1px solid #ddd; }
h3 { font-size: 16px; } h4 { font-size: 15px; margin: 1.2em 0 .3em; }
code { font-size: 12.5px; background: #f2f2f2; padding: 0 2px; }
.lead { color: #444; }
.partial { background: #fff4d6; border: 1px solid #e6c463; padding: .4em .8em; }
.files td { padding: 1px 10px 1px 0; } .files td.size { text-align: right; color: #666; }
.contents { display: flex; gap: 2em; font-size: 13px; }
.contents .findings-list ul { columns: 2 24em; column-gap: 2em; }
.contents ul { margin: .2em 0; padding-left: 1.2em; }
.chart { overflow-x: auto; min-height: 120px; }
.chart svg.marks { max-width: 100%; height: auto; }  /* a chart wider than the screen, shrunk to fit it */
.chart .waiting { color: #888; }
.chart-links { font-size: 12.5px; color: #555; margin: 1.4em 0 .2em; border-top: 1px solid #eee; padding-top: .3em; }
.runs-table { font-size: 13px; }
"""

# Each chart drawn by Vega from its packed spec when it comes near the screen (20 charts of thousands of marks
# would otherwise keep the page busy for seconds after it opens); vega-embed's menu keeps its export actions only.
CHARTS_SCRIPT = """
(function () {
  function draw(el) {
    unpack(el.getAttribute('data-spec')).then(function (spec) {
      return vegaEmbed(el, spec, {renderer: 'svg', mode: 'vega',
                                  actions: {export: true, source: false, compiled: false, editor: false}});
    }).then(function () { el.classList.add('drawn'); }).catch(function (e) {
      el.classList.add('failed');
      el.textContent = 'This chart could not be drawn here (' + e.message + '): open its SVG above.';
    });
  }
  var charts = document.querySelectorAll('.chart[data-spec]');
  if (!('IntersectionObserver' in window)) { Array.prototype.forEach.call(charts, draw); return; }
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting) { seen.unobserve(e.target); draw(e.target); } });
  }, {rootMargin: '1200px 0px'});
  Array.prototype.forEach.call(charts, function (el) { seen.observe(el); });
})();
"""


def _size(path: Path) -> str:
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if path.is_dir() else path.stat().st_size
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return ""


def files_section(folder: Path) -> str:
    rows = [f'<tr><td><a href="{html.escape(name)}">{html.escape(name)}</a></td>'
            f'<td class="size">{_size(folder / name)}</td><td>{html.escape(what)}</td></tr>'
            for name, what in FILES if (folder / name).exists()]
    return f'<table class="files">{"".join(rows)}</table>'


def _chart_block(name: str, charts: Path, charts_href: str) -> str:
    spec = catalog.CHARTS[name]
    links = " &middot; ".join(f'<a href="{charts_href}/{name}.{fmt}">{label}</a>' for fmt, label in
                              (("svg", "SVG"), ("png", "PNG"), ("pdf", "PDF"), ("html", "its own page"))
                              if (charts / f"{name}.{fmt}").exists())
    # the chart's own title heads it; this line names its files
    head = [f'<div class="chart-links" id="chart-{name}" title="{html.escape(spec.title)}">{html.escape(name)}: '
            f"{links}</div>"]
    vega = charts / f"{name}.vega.json"
    if not vega.exists():  # drawn by an earlier dlbench, before the specs were kept: its SVG, as it is
        svg = (charts / f"{name}.svg").read_text()
        return "\n".join([*head, f'<div class="chart drawn" id="draw-{name}" data-chart="{name}">{svg}</div>'])
    return "\n".join([
        *head,
        f'<div class="chart" id="draw-{name}" data-chart="{name}" data-spec="spec-{name}">'
        '<span class="waiting">drawing&hellip;</span></div>',
        packed.block_of_packed(f"spec-{name}", _packed_spec(vega)),
    ])


def _packed_spec(path: Path) -> str:
    """A chart's saved Vega spec, packed: as it is where it is strict JSON, else read and written strict (NaN as
    null)."""
    text = path.read_text()
    try:
        json.loads(text, parse_constant=_refuse)
    except ValueError:
        return packed.pack(json.loads(text))
    return packed.pack_json(text)


def _refuse(constant: str):
    raise ValueError(f"{constant} is not JSON")


def charts_section(charts: Path, charts_href: str = "charts") -> tuple[str, list[tuple[str, str]]]:
    """Every chart the folder's index says was drawn, by category, and the charts not drawn with why; and the
    categories as (id, title) for the page's contents."""
    index = catalog.read_index(charts)
    by_category: dict[str, list[str]] = {}
    for name in index["drawn"]:  # the catalog's order, each category together
        by_category.setdefault(catalog.CHARTS[name].category, []).append(name)
    parts, categories = [], []
    for category, names in by_category.items():
        anchor = "charts-" + markdown_html.slug(category, set())
        categories.append((anchor, category))
        parts.append(f'<h3 id="{anchor}">{html.escape(category)}</h3>')
        parts += [_chart_block(name, charts, charts_href) for name in names]
    if index["not_drawn"]:
        said = "".join(f"<li>{html.escape(catalog.CHARTS[name].title if name in catalog.CHARTS else name)}: "
                       f"{html.escape(why)}</li>" for name, why in index["not_drawn"].items())
        parts.append(f'<h3 id="charts-not-drawn">Not drawn (no data in this study)</h3><ul>{said}</ul>')
    if not index["drawn"]:
        parts.insert(0, "<p>No chart had data to draw.</p>")
    return "\n".join(parts), categories


def _contents(headings: list[tuple[int, str, str]], categories: list[tuple[str, str]]) -> str:
    findings = "".join(f'<li><a href="#{a}">{html.escape(t)}</a></li>' for level, a, t in headings if level == 2)
    charts = "".join(f'<li><a href="#{a}">{html.escape(t)}</a></li>' for a, t in categories)
    return (f'<nav class="contents"><div class="findings-list"><b><a href="#findings">Findings</a></b><ul>{findings}'
            f'</ul></div><div><b><a href="#charts">Charts</a></b><ul>{charts}</ul><b><a href="#runs">Runs</a></b>'
            ' &middot; <b><a href="#files">Files</a></b></div></nav>')


def _study_line(runs: pd.DataFrame) -> str:
    def names(column: str) -> str:
        return ", ".join(sorted(map(str, runs[column].dropna().unique()))) if column in runs else ""

    parts = [runs_table.counts_line(runs)]
    parts += [f"{label}: {names(col)}" for col, label in (("framework", "frameworks"), ("dataset", "datasets"),
                                                          ("device", "devices")) if names(col)]
    return "; ".join(parts)


def render(folder: Path, runs_root: Path, title: str = "Results", note: str | None = None,
           page: Path | None = None) -> str:
    """The page for the results in `folder` (runs.parquet, findings.md, charts/ and the other tables beside them);
    runs_root: the folder holding the runs' own folders (results/runs); note: a line said at the top (a partial
    study's "k of N points"). Links are relative to the page (`page`, by default folder/index.html)."""
    from dlbench.present.charts import draw  # Altair and vl-convert: only when a page is written

    page = page or folder / PAGE
    runs = pd.read_parquet(folder / "runs.parquet")
    ids: set[str] = {"files", "findings", "charts", "runs", "top"}
    findings_md = folder / "findings.md"
    findings, headings = (markdown_html.render(findings_md.read_text(), ids, shift=1) if findings_md.exists()
                          else ("<p>No findings were written.</p>", []))
    charts_href = runs_table.href_between(page, folder / "charts")
    charts, categories = charts_section(folder / "charts", charts_href)
    table = runs_table.section(runs, runs_table.href_between(page, runs_root))
    note_html = f'<p class="partial">{html.escape(note)}</p>' if note else ""
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>", f"<style>{STYLE}{runs_table.STYLE}</style>",
        f"<script>{packed.SCRIPT}</script></head>",
        '<body id="top"><header class="top"><b>dlbench</b><a href="#findings">Findings</a><a href="#charts">Charts</a>'
        '<a href="#runs">Runs</a><a href="#files">Files</a></header><main>',
        f"<h1>{html.escape(title)}</h1>", note_html, f'<p class="lead">{html.escape(_study_line(runs))}.</p>',
        _contents(headings, categories),
        f'<section id="files"><h2>Files</h2>{files_section(folder)}</section>',
        f'<section id="findings" class="prose">{findings}</section>',
        f'<section id="charts"><h2>Charts</h2>{charts}</section>',
        f'<section id="runs"><h2>Runs</h2>{table}</section>',
        f'<p class="lead">Written by dlbench {html.escape(__version__)}. Open the page from the results folder for '
        "its links to the files and the runs' folders; the findings, charts and runs are inside it.</p>",
        "</main>",
        f"<script>{draw.javascript()}</script>",
        f"<script>{CHARTS_SCRIPT}</script>",
        "</body></html>", ""])


def write(folder: str | Path, out: str | Path | None = None, runs_root: str | Path | None = None,
          title: str = "Results", note: str | None = None) -> Path:
    """The results page of `folder` (by default folder/index.html), written whole or not at all. Heavy work (the
    workflow runs it while a study may still measure): never beside a measurement on this node."""
    folder = Path(folder)
    out = Path(out) if out else folder / PAGE
    with locks.heavy_work(locks.node_lock(), "the results page"):
        text = render(folder, Path(runs_root) if runs_root else folder / "runs", title, note, out)
        atomic.write_text(out, text)
    return out


def announce(outputs) -> list[str]:
    """The lines a finished run ends with: where each results page among its jobs' outputs is (those that exist)."""
    pages = dict.fromkeys(str(f) for f in outputs if Path(str(f)).name == PAGE)
    return [f"dlbench: the results, on one page: {Path(p).resolve().as_uri()}" for p in pages if Path(p).is_file()]
