"""The results page (dlbench.present.results_page) on a hand-made study: every chart drawn and every run on it, its
links resolving, nothing fetched from the network; opened in headless Chromium, its charts draw and its table
shows. tests/test_report.py checks the same on the session's tiny study through the workflow."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_markdown_html import SAMPLE  # tests/ is on sys.path

from dlbench.analysis.summary import summary_table
from dlbench.present import packed, results_page, tables_csv
from dlbench.present.charts import catalog, draw
from dlbench.testing.browser import CHROMIUM, MISSING, run_page
from dlbench.testing.study import make_curves, make_runs, make_samples, with_preset_points

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=MISSING)
DRAWN = ("train_time_by_framework", "status_by_framework")
# The frameworks' colours (dlbench.frameworks.registry): in a picture of the charts only if they drew.
COLOURS = {"pytorch": (0xEE, 0x4C, 0x2C), "tensorflow": (0xFF, 0x8F, 0x00)}


class Links(HTMLParser):
    """Every address the page's markup names (href, src), and every id it holds; a script's text is not markup."""

    def __init__(self):
        super().__init__()
        self.addresses, self.ids, self.tags = [], set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("href", "src"):
                self.addresses.append((tag, name, value))
            elif name == "id":
                self.ids.add(value)


def assert_page_holds_the_results(page: Path, folder: Path, run_folders: bool = True) -> dict:
    """Every chart the folder's index says was drawn is on the page (its spec, as saved), and every run of
    runs.parquet in the table's data, in order; every link resolves (a file, a run's folder and log unless
    run_folders is False, a place on the page); nothing is fetched (no address with a scheme, no script or style
    from a file, no data by URL). Gives the page's packed blocks."""
    text = page.read_text()
    blocks = packed.blocks(text)
    index = catalog.read_index(folder / "charts")
    assert sorted(k for k in blocks if k.startswith("spec-")) == sorted(f"spec-{n}" for n in index["drawn"])
    for name in index["drawn"]:
        saved = json.loads((folder / "charts" / f"{name}.vega.json").read_text())
        assert json.dumps(blocks[f"spec-{name}"], sort_keys=True) == json.dumps(saved, sort_keys=True), name
        assert all("url" not in data for data in blocks[f"spec-{name}"].get("data", [])), name  # data inline
        assert f'id="draw-{name}"' in text and catalog.CHARTS[name].title.split(":")[0] in text
    for name, why in index["not_drawn"].items():
        assert f"spec-{name}" not in blocks and html.escape(why) in text
    runs = pd.read_parquet(folder / "runs.parquet")
    data = blocks["runs-data"]
    ids = [row[0] for row in data["rows"]]
    assert data["columns"][0]["key"] == "run_id" and ids == list(runs.run_id)
    # links: every one relative, and every one there
    links = Links()
    links.feed(text)
    assert "link" not in links.tags and not [a for a in links.addresses if a[1] == "src"]  # all inline
    for _, _, address in links.addresses:
        assert not re.match(r"^[a-z][a-z0-9+.-]*:", address, re.I), address  # no scheme: nothing from afar
        if address.startswith("#"):
            assert address[1:] in links.ids, address
        else:
            assert (page.parent / address).exists(), address
    hrefs = {address for _, _, address in links.addresses}
    assert {"runs.parquet", "runs.csv", "summary.parquet", "summary.csv", "curves.parquet", "samples.parquet",
            "findings.md"} <= hrefs
    for name in index["drawn"]:
        assert {f"charts/{name}.{fmt}" for fmt in ("svg", "png", "pdf")} <= hrefs, name
    for folder_href in data["folders"] if run_folders else []:
        assert (page.parent / folder_href).is_dir(), folder_href
        assert (page.parent / folder_href / data["log"]).is_file(), folder_href
    assert "url(" not in text.split("<script")[0]  # the style fetches nothing
    return blocks


# Scrolls to each chart in turn as a reader would, waits until Vega has drawn it (or given up), then reports what
# each chart and the table hold.
DRIVER = """
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function drive() {
  const charts = [...document.querySelectorAll('.chart')], seen = {charts: {}};
  for (const c of charts) {
    c.scrollIntoView();
    while (!c.classList.contains('drawn') && !c.classList.contains('failed')) await sleep(50);
    const svg = c.querySelector('svg.marks') || c.querySelector('svg');
    seen.charts[c.getAttribute('data-chart')] = {drawn: c.classList.contains('drawn'),
      text: c.textContent.slice(0, 300), marks: c.querySelectorAll('[class*="role-mark"]').length,
      width: svg ? svg.getBoundingClientRect().width : 0};
  }
  while (!document.querySelector('#runs-table tbody a')) await sleep(50);
  seen.rows = document.querySelectorAll('#runs-table tbody tr:not(.reason)').length;
  seen.shown = document.querySelector('#runs-table .shown').textContent;
  seen.findings = document.getElementById('findings').textContent.length;
  report(seen);
}
drive().catch(e => report({error: String(e)}));
"""


def open_in_chromium(page: Path, profile: Path) -> dict:
    """What a reader scrolling down the page sees drawn (DRIVER, in real time)."""
    seen = run_page(page, DRIVER, profile, timeout_s=600)
    assert "error" not in seen, seen
    return seen


# Waits until every chart on the screen has been drawn, then reports how many.
DRAWN_ON_SCREEN = """
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function drive() {
  const on = [...document.querySelectorAll('.chart')].filter(c => c.getBoundingClientRect().top < innerHeight);
  while (on.some(c => !c.classList.contains('drawn') && !c.classList.contains('failed'))) await sleep(50);
  report({drawn: on.filter(c => c.classList.contains('drawn')).length});
}
drive().catch(e => report({error: String(e)}));
"""


def screenshot(page: Path, section: str, profile: Path, shot: Path) -> np.ndarray:
    """The page at 1,400 x 1,000 showing its header and one section (the others hidden) once the charts on the
    screen have been drawn, as pixels."""
    from test_report import png_pixels  # the screenshot decoder of the report's tests

    seen = run_page(page, DRAWN_ON_SCREEN, profile, head=f"<style>main > *:not(#{section}) {{ display: none; }}"
                    "</style>", output=f"--screenshot={shot}")
    assert "error" not in seen, seen
    assert shot.exists(), "Chromium wrote no screenshot"
    return png_pixels(shot)


def assert_colours_drawn(pixels: np.ndarray, frameworks) -> None:
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # not blank
    for fw in frameworks:
        near = (np.abs(pixels - np.array(COLOURS[fw])).sum(axis=2) < 60).sum()
        assert near > 20, (fw, near)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A hand-made study's results folder as the workflow leaves it: the tables (Parquet and CSV), findings, two
    charts drawn and the others not, and every run's folder with its log."""
    root = tmp_path_factory.mktemp("page")
    folder = root / "results"
    (folder / "charts").mkdir(parents=True)
    runs = with_preset_points(make_runs())
    runs["contended"] = np.arange(len(runs)) % 11 == 5
    runs.loc[3, ["status", "reason", "train_time_s"]] = ["error", "</script><b>x</b> & <!--", np.nan]
    curves, samples = make_curves(runs), make_samples(runs)
    for name, frame in (("runs", runs), ("curves", curves), ("samples", samples), ("summary", summary_table(runs))):
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    for name in ("runs", "summary"):
        tables_csv.write(folder / f"{name}.parquet", folder / f"{name}.csv")
    for name in DRAWN:
        draw.save(draw.draw(name, runs, curves, samples), folder / "charts" / name)
    (folder / "charts" / catalog.INDEX).write_text(json.dumps(
        {"drawn": list(DRAWN), "not_drawn": {"gpu_timeline": "no GPU point <none>"}}))
    (folder / "findings.md").write_text(SAMPLE.replace("charts/x.svg", "charts/status_by_framework.svg"))
    for run in runs.itertuples():
        run_dir = folder / "runs" / run.framework / run.dataset / run.run_id
        run_dir.mkdir(parents=True)
        (run_dir / "trainer.log").write_text("the framework's output\n")
    results_page.write(folder)
    return folder


def test_the_page_holds_every_chart_and_run_its_links_resolve_and_it_needs_no_network(results):
    page = results / "index.html"
    assert_page_holds_the_results(page, results)
    text = page.read_text()
    # one copy of Vega for every chart; each chart's files beside it
    assert text.count(draw.javascript()) == 1 and text.count("<script>") == 4  # unpack, table, Vega, charts
    assert "</script><b>x</b>" not in text and "<b>x</b>" not in text  # a reason is data, never markup
    assert "<h2 id=\"findings-of-this-run\">Findings of this run</h2>" in text  # the findings, a level down
    assert "Not drawn (no data in this study)" in text and "no GPU point &lt;none&gt;" in text


def test_the_runs_and_the_summary_as_csv_are_their_parquet_tables(results):
    for name in ("runs", "summary"):
        table = pd.read_parquet(results / f"{name}.parquet")
        csv = pd.read_csv(results / f"{name}.csv")
        assert list(csv.columns) == list(table.columns) and len(csv) == len(table)
        numbers = table.select_dtypes("number").columns
        assert np.allclose(csv[numbers].to_numpy(float), table[numbers].to_numpy(float), equal_nan=True)
    assert (pd.read_csv(results / "runs.csv").run_id == pd.read_parquet(results / "runs.parquet").run_id).all()


def test_each_chart_is_also_a_png_and_a_pdf_of_its_svg(results):
    for name in DRAWN:
        png, pdf = (results / "charts" / f"{name}.png").read_bytes(), (results / "charts" / f"{name}.pdf").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and pdf[:5] == b"%PDF-"
        svg = (results / "charts" / f"{name}.svg").read_text()
        width = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)"', svg).group(1))
        png_width = int.from_bytes(png[16:20], "big")
        assert png_width == pytest.approx(width * draw.PNG_SCALE, abs=2)  # the SVG, drawn at twice its size


@needs_chromium
def test_in_a_browser_every_chart_draws_and_the_table_shows(results, tmp_path):
    seen = open_in_chromium(results / "index.html", tmp_path / "profile")
    assert set(seen["charts"]) == set(DRAWN)
    for name, chart in seen["charts"].items():
        assert chart["drawn"] and chart["marks"] > 0 and chart["width"] > 300, (name, chart)
        assert "could not be drawn" not in chart["text"], name
    runs = pd.read_parquet(results / "runs.parquet")
    assert seen["rows"] == min(len(runs), 100) and seen["shown"] == f"1\u2013100 of {len(runs)}"
    assert seen["findings"] > 500
    assert_colours_drawn(screenshot(results / "index.html", "charts", tmp_path / "profile", tmp_path / "c.png"),
                         COLOURS)


def test_a_partial_page_says_so_and_links_to_the_studys_run_folders(results, tmp_path):
    partial = results / "partial"
    partial.mkdir(exist_ok=True)
    for name in ("runs.parquet", "findings.md"):
        (partial / name).write_bytes((results / name).read_bytes())
    (partial / "charts").mkdir(exist_ok=True)
    (partial / "charts" / catalog.INDEX).write_text(json.dumps({"drawn": [], "not_drawn": {}}))
    page = results_page.write(partial, runs_root=results / "runs", title="Results so far",
                              note="Partial: drawn from 3 of 9 points.")
    text = page.read_text()
    assert '<p class="partial">Partial: drawn from 3 of 9 points.</p>' in text and "No chart had data" in text
    folders = packed.blocks(text)["runs-data"]["folders"]
    assert all(f.startswith("../runs/") and (partial / f).is_dir() for f in folders)
    # the files it has, and only those: no CSV or summary was written here
    assert 'href="runs.parquet"' in text and 'href="runs.csv"' not in text


def test_charts_drawn_before_their_specs_were_kept_are_on_the_page_as_their_svgs(results, tmp_path):
    old = tmp_path / "results"
    (old / "charts").mkdir(parents=True)
    (old / "runs.parquet").write_bytes((results / "runs.parquet").read_bytes())
    (old / "charts" / "status_by_framework.svg").write_text((results / "charts/status_by_framework.svg").read_text())
    (old / "charts" / catalog.INDEX).write_text(json.dumps({"drawn": ["status_by_framework"], "not_drawn": {}}))
    text = results_page.write(old, runs_root=results / "runs").read_text()
    assert 'id="draw-status_by_framework"' in text and 'class="mark-' in text.split('id="draw-status_by_framework"')[1]
    assert "spec-status_by_framework" not in packed.blocks(text)


def test_a_run_ends_with_where_its_pages_are(results, tmp_path):
    page = results / "index.html"
    lines = results_page.announce([str(page), str(page), str(results / "runs.parquet"), str(tmp_path / "index.html")])
    assert lines == [f"dlbench: the results, on one page: {page.resolve().as_uri()}"]  # once; one that is not there: no
