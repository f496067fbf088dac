"""The Snakemake report and the charts, opened in headless Chromium: did the charts draw?"""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import markdown  # Python-Markdown (the docs site's): what the page's findings must agree with
import numpy as np
import pandas as pd
import pytest
from test_charts import DRAWS, SVG_MARKS, assert_draws_its_data, html_rows, svg_marks  # tests/ is on sys.path
from test_markdown_html import words
from test_results_page import assert_colours_drawn, assert_page_holds_the_results, open_in_chromium, screenshot

from dlbench.analysis import frames, groups, guidance, observations, summary, verdicts
from dlbench.datasets import catalog as datasets_catalog
from dlbench.present import findings, results_page, tables_csv
from dlbench.present.charts import catalog, draw
from dlbench.present.charts.pieces import MAX_MARKS
from dlbench.study import presets
from dlbench.testing import study as hand_made
from dlbench.testing.browser import CHROMIUM, MISSING, chromium
from dlbench.testing.sandbox import copy_workflow, tiny_study

TINY = tiny_study()  # .test/config/config.yaml
# Until `rule all` lists results/findings.md, the tests ask for it by name.
TARGETS = ["all", "results/findings.md"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=MISSING)


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "snakemake", *TARGETS, "--cores", "2", "--configfile", "tiny.yaml",
                           *args], cwd=workdir, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def study(tiny_run):
    """The session's tiny real study and its Snakemake report (read only)."""
    return tiny_run


def report_sections() -> list[list[str | None]]:
    """Every (category, subcategory) of the report's results: the charts' (dlbench.present.charts.catalog) and the
    findings'."""
    svgs = [f for f in catalog.chart_files("c") if f.endswith(".svg")]
    sections = {(catalog.category(f), catalog.subcategory(f)) for f in svgs}
    return sorted([list(s) for s in sections | {("Findings", None), ("Results page", None)}],
                  key=lambda s: (s[0], s[1] or ""))


# A page that opens the report in a frame, walks every category and subcategory, opens every file in it and
# writes what it saw as JSON into the page, for --dump-dom to return.
WALKER = """<!doctype html><html><body>
<iframe id="r" src="report.html" style="width:1400px;height:1000px"></iframe><pre id="out">pending</pre>
<script>
const SECTIONS = %s;  // [category, subcategory or null]
const sleep = ms => new Promise(r => setTimeout(r, ms));
const frame = document.getElementById('r');
function link(d, text) { return [...d.querySelectorAll('a')].find(a => a.textContent.trim() === text); }
async function open(d, cat, sub) {
  const home = link(d, 'Results'); if (home) { home.click(); await sleep(300); }
  const c = link(d, cat);
  if (!c) return false;
  c.click(); await sleep(600);
  // a category of one subcategory opens its files at once
  if (sub) { const s = link(d, sub); if (s) { s.click(); await sleep(600); } }
  return true;
}
async function walk() {
  await sleep(1500);
  const d = frame.contentDocument, seen = {files: {}, images: {}};
  for (const [cat, sub] of SECTIONS) {
    if (!(await open(d, cat, sub))) { seen.files[cat] = seen.files[cat] || null; continue; }
    const rows = [...d.querySelectorAll('tbody tr')];
    const names = rows.map(r => r.querySelector('td').textContent.trim());
    seen.files[cat] = (seen.files[cat] || []).concat(names);
    for (const name of names) {
      if (!name.endsWith('.svg')) continue;
      const row = [...d.querySelectorAll('tbody tr')].find(r => r.querySelector('td').textContent.trim() === name);
      row.querySelector('a[iconname=eye]').click();
      await sleep(600);
      const file = name.split('/').pop();
      const img = [...d.querySelectorAll('img')].find(i => i.src.includes('filename=' + file + ';'));
      seen.images[name] = img ? {width: img.naturalWidth, height: img.naturalHeight,
                                 svg: atob(img.src.split('base64,')[1])} : null;
      await open(d, cat, sub);
    }
  }
  document.getElementById('out').textContent = JSON.stringify(seen);
}
frame.addEventListener('load', () => walk().catch(e => {
  document.getElementById('out').textContent = 'ERROR ' + e;
}));
</script></body></html>"""


@pytest.mark.slow
@needs_chromium
def test_the_report_lists_every_chart_and_draws_it(study, tmp_path):
    walker = study / "walker.html"
    walker.write_text(WALKER % json.dumps(report_sections()))
    proc = chromium(tmp_path / "profile", "--allow-file-access-from-files", "--virtual-time-budget=120000",
                    "--dump-dom", walker.as_uri())
    m = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.S)
    assert m and m.group(1) != "pending" and not m.group(1).startswith("ERROR"), proc.stdout[-2000:]
    seen = json.loads(html.unescape(m.group(1)))
    listed = {f for files in seen["files"].values() for f in (files or [])}
    index = catalog.read_index(study / "results/charts")
    assert set(index["drawn"]) | set(index["not_drawn"]) == set(draw.CHARTS)
    for name in index["drawn"]:
        spec = draw.CHARTS[name]
        path = f"results/charts/{name}.svg"
        assert path in seen["files"][spec.category], (name, seen["files"])
        image = seen["images"][path]
        assert image and image["width"] > 100 and image["height"] > 40, (name, image and image["width"])
        svg = image["svg"]
        assert svg.lstrip().startswith("<svg") and 'class="mark-' in svg, name
        assert "could not be drawn" not in svg, name
    assert "results/findings.md" in listed and seen["files"]["Results page"] == ["results/index.html"]
    # The tiny study has no GPU, no threads sweep and one preset: those charts are not drawn, not in the report,
    # and the findings say so in a line.
    for name in ("gpu_timeline", "speedup_vs_threads", "defaults_matrix_accuracy"):
        assert name in index["not_drawn"], (name, index)
    for name in index["not_drawn"]:
        assert f"results/charts/{name}.svg" not in listed, name
        assert not (study / f"results/charts/{name}.svg").exists(), name
    assert draw.NO_DATA not in seen["images"]["results/charts/train_time_by_framework.svg"]["svg"]
    line = next(line for line in (study / "results/findings.md").read_text().splitlines()
                if line.startswith("Charts not drawn (no data in this study): "))
    assert "GPU timeline (no GPU point)" in line and "speed-up against threads (one thread count per setting)" in line


@pytest.mark.slow
def test_the_results_page_holds_every_chart_and_run_of_the_study(study):
    """results/index.html of the tiny study: every chart drawn and every run on it, its links resolving (the tables,
    the charts' files, each run's folder and log), nothing from the network; in the report too; and the run's last
    lines say where it is."""
    page = study / "results/index.html"
    blocks = assert_page_holds_the_results(page, study / "results")
    runs = pd.read_parquet(study / "results/runs.parquet")
    assert len(blocks["runs-data"]["rows"]) == len(runs) == len(TINY["frameworks"]) * 2
    drawn = catalog.read_index(study / "results/charts")["drawn"]
    assert len(drawn) >= 8 and {"train_time_by_framework", "cpu_timeline"} <= set(drawn)
    # the findings on the page are findings.md, as Python-Markdown reads it
    text = page.read_text()
    reference = markdown.markdown((study / "results/findings.md").read_text(), extensions=["tables"])
    findings = text[text.index('<section id="findings" class="prose">'):text.index('<section id="charts">')]
    assert words(findings) == words(reference) and len(reference) > 2000
    assert "results/index.html" in (study / "report.html").read_text()
    last = (study / "run.out").read_text().splitlines()[-6:]
    assert f"dlbench: the results, on one page: {page.resolve().as_uri()}" in last, last


@pytest.mark.slow
@needs_chromium
def test_the_results_page_of_the_study_draws_in_a_browser(study, tmp_path):
    """Opened as a reader would, at 1,400 x 1,000: every chart draws as they scroll past, the table lists the runs,
    and a picture of the charts holds the frameworks' colours (it is not blank)."""
    page = study / "results/index.html"
    seen = open_in_chromium(page, tmp_path / "profile")
    drawn = catalog.read_index(study / "results/charts")["drawn"]
    assert sorted(seen["charts"]) == sorted(drawn)
    for name, chart in seen["charts"].items():
        assert chart["drawn"] and chart["marks"] > 0 and chart["width"] > 300, (name, chart)
    runs = pd.read_parquet(study / "results/runs.parquet")
    assert seen["rows"] == len(runs) and seen["shown"] == f"1\u2013{len(runs)} of {len(runs)}"
    assert_colours_drawn(screenshot(page, "charts", tmp_path / "profile", tmp_path / "charts.png"), TINY["frameworks"])


def png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) into an array of pixels."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and color in (2, 6) and interlace == 0
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), np.int32)
    prev = np.zeros(width * bpp, np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average (3) or Paeth (4): pixel by pixel
            cur = np.zeros_like(line)
            for i in range(len(line)):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                if kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) % 256
        out[y], prev = cur, cur
    return out.reshape(height, width, bpp)[:, :, :3]


def walk_report(root: Path, profile: Path) -> dict:
    """What the WALKER page saw of root/report.html: the files of every category and each SVG drawn."""
    walker = root / "walker.html"
    walker.write_text(WALKER % json.dumps(report_sections()))
    proc = chromium(profile, "--allow-file-access-from-files", "--virtual-time-budget=120000", "--dump-dom",
                    walker.as_uri(), timeout=600)
    m = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.S)
    assert m and m.group(1) != "pending" and not m.group(1).startswith("ERROR"), proc.stdout[-2000:]
    return json.loads(html.unescape(m.group(1)))


@pytest.fixture(scope="module")
def large_study(tmp_path_factory):
    """20,000 hand-made records (dlbench.testing.study: curves and samples of realistic length, failures),
    their charts and findings as the rules write them, and the Snakemake report of them."""
    root = copy_workflow(tmp_path_factory.mktemp("large"), TINY, "tiny.yaml")
    out = root / "results"
    out.mkdir()
    for name, frame in zip(("runs", "curves", "samples"), hand_made.large_frames(20000)):
        frame.to_parquet(out / f"{name}.parquet", index=False)
    draw.draw_all(out / "runs.parquet", out / "curves.parquet", out / "samples.parquet", out / "charts")
    findings.write_findings(out / "runs.parquet", out / "curves.parquet", out / "findings.md")
    summary.summary_table(pd.read_parquet(out / "runs.parquet")).to_parquet(out / "summary.parquet", index=False)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "tiny.yaml", "--report",
                           "report.html", "results/findings.md", "results/charts"], cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


@pytest.mark.long
def test_every_chart_of_20000_points_is_drawn_small_enough_and_says_what_it_samples(large_study):
    folder = large_study / "results/charts"
    runs, curves, samples = (pd.read_parquet(large_study / "results" / f"{n}.parquet")
                             for n in ("runs", "curves", "samples"))
    published = draw.read_published()
    index = catalog.read_index(folder)
    for name in draw.CHARTS:
        if name in index["not_drawn"]:  # only where the tables have nothing for it (no compile axis, no tuning grid)
            assert DRAWS[name][1](runs, curves, samples, published).empty, f"{name} says it has no data"
            assert not (folder / f"{name}.svg").exists() and not (folder / f"{name}.html").exists(), name
            continue
        page = folder / f"{name}.html"
        assert page.stat().st_size < 5e6, (name, page.stat().st_size)
        svg = (folder / f"{name}.svg").read_text()
        assert "could not be drawn" not in svg and 'class="mark-' in svg, name
        assert draw.NO_DATA not in svg, name
        # what it draws is the study's: every value drawn is the tables' (a sample of them, where it says so)
        sampled = "a random sample of" in svg
        rows, fields = html_rows(page.read_text())
        assert_draws_its_data(name, rows, fields, runs, curves, samples, published, whole=not sampled)
        marks = svg_marks(svg)
        assert sum(marks.values()) > 0, name
        if name in SVG_MARKS and not sampled:
            for layer, count in SVG_MARKS[name](runs).items():
                assert marks[layer] == count, (name, layer, marks[layer], count)
    # the sampled charts of points: a dot for each point the page holds, about MAX_MARKS of them (the Pareto front
    # is drawn whole, besides)
    for name, layer in (("train_time_by_framework", "child_layer_2_marks"), ("pareto_front", "child_layer_0_marks")):
        rows, _ = html_rows((folder / f"{name}.html").read_text())
        dots = rows[rows["run_id"].notna() & (rows["status"] == "ok")].drop_duplicates("run_id")
        drawn = svg_marks((folder / f"{name}.svg").read_text())[f"mark-symbol role-mark {layer}"]
        assert drawn == len(dots) and 0.9 * MAX_MARKS <= drawn <= 1.05 * MAX_MARKS, (name, drawn, len(dots))
    # the charts whose marks would be one per point or run draw a sample, and say so in their subtitle
    for name in ("train_time_by_framework", "pareto_front", "time_to_accuracy", "train_time_vs_batch_size"):
        assert "a random sample of" in (folder / f"{name}.svg").read_text(), name
    assert "a random sample of" not in (folder / "status_by_framework.svg").read_text()  # counts: nothing sampled
    assert draw.NO_DATA not in (folder / "train_time_by_framework.svg").read_text()


@pytest.mark.long
@needs_chromium
def test_the_report_of_20000_points_opens_with_every_chart_drawn(large_study, tmp_path):
    seen = walk_report(large_study, tmp_path / "profile")
    for name in catalog.read_index(large_study / "results/charts")["drawn"]:
        spec = draw.CHARTS[name]
        path = f"results/charts/{name}.svg"
        assert path in seen["files"][spec.category], (name, seen["files"])
        image = seen["images"][path]
        assert image and image["width"] > 100 and image["height"] > 40, (name, image and image["width"])
        assert 'class="mark-' in image["svg"] and "could not be drawn" not in image["svg"], name
    assert "results/findings.md" in {f for files in seen["files"].values() for f in (files or [])}


@pytest.mark.long
@needs_chromium
def test_the_results_page_of_20000_points_is_a_few_mb_and_draws_every_chart(large_study, tmp_path):
    """The page of 20,000 runs: every chart and run on it in a few MB (bench/results_page.py times it), and in
    Chromium every chart draws as it scrolls past and the table shows its first 100 runs."""
    folder = large_study / "results"
    for name in ("runs", "summary"):
        tables_csv.write(folder / f"{name}.parquet", folder / f"{name}.csv")
    page = results_page.write(folder)
    assert page.stat().st_size < 10e6, page.stat().st_size
    blocks = assert_page_holds_the_results(page, folder, run_folders=False)  # hand-made runs: no folders
    assert len(blocks["runs-data"]["rows"]) == 20000
    seen = open_in_chromium(page, tmp_path / "profile")
    drawn = catalog.read_index(folder / "charts")["drawn"]
    assert sorted(seen["charts"]) == sorted(drawn) and len(drawn) >= 15
    for name, chart in seen["charts"].items():
        assert chart["drawn"] and chart["marks"] > 0 and chart["width"] > 300, (name, chart)
    assert seen["rows"] == 100 and seen["shown"] == "1\u2013100 of 20,000"


@pytest.mark.slow
@needs_chromium
def test_a_screenshot_of_a_chart_in_the_report_is_not_blank(study, tmp_path):
    page = study / "open_chart.html"
    page.write_text(WALKER.replace("      await open(d, cat, sub);\n", "      break;\n")
                    % json.dumps([["Time and accuracy", catalog.subcategory("train_time_by_framework.svg")]]))
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", "--allow-file-access-from-files", "--virtual-time-budget=20000",
             "--window-size=1400,1000", f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), "Chromium wrote no screenshot"
    pixels = png_pixels(shot)
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) > 50, len(colours)
    # PyTorch's and TensorFlow's colours are in the picture only if the chart drew
    for rgb in ((0xEE, 0x4C, 0x2C), (0xFF, 0x8F, 0x00)):
        near = (np.abs(pixels - np.array(rgb)).sum(axis=2) < 60).sum()
        assert near > 20, (rgb, near)


def section(text: str, title: str) -> str:
    """A findings section's text, from its title to the next section's."""
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


NOT_TESTED = re.compile(r"not tested in this run \(.+\)")
NOT_TESTABLE = re.compile(r"not testable( \(.+\))?")  # the data ran, but cannot be tested (and why)


def assert_findings_say_what_the_runs_do(text: str, runs: pd.DataFrame) -> None:
    """findings.md of a study on the CPU (one preset, one batch size, no MNIST- or CIFAR-like dataset, no GPU) states
    its runs table's counts and names, each framework's mean time as the leaders' section words it, and every
    observation of the study, by its letter and words, with a verdict of the allowed words."""
    ok = runs[runs["status"] == "ok"]
    assert (f"{len(runs)} points ({len(ok)} ok, {len(runs) - len(ok)} failed); frameworks: "
            f"{', '.join(sorted(set(runs.framework)))}; datasets: {', '.join(sorted(set(runs.dataset)))}; "
            f"devices: {', '.join(sorted(set(runs.device)))};") in text
    # The leaders: the frameworks' ok points timed without outside load, at the preset's own learning rate (nothing
    # else varies; the sweep's other rates are not pooled in); each framework's mean (4 digits)
    assert (runs[["dataset", "device", "preset", "batch_size", "iterations", "threads"]].nunique() == 1).all()
    quiet = ok[~ok["contended"].map(lambda v: v is True or v == 1)] if "contended" in ok else ok
    (preset,), (dataset,) = set(runs.preset), set(runs.dataset)
    own_rate = presets.study_presets()[datasets_catalog.family(dataset)][preset]["learning_rate"]
    assert own_rate in set(runs.learning_rate) and runs.learning_rate.nunique() >= 2  # a sweep beside the preset
    compared = quiet[quiet.learning_rate == own_rate]
    leaders = section(text, "Fastest and most accurate framework")
    (place,) = {f"{d}/{dev}" for d, dev in zip(runs.dataset, runs.device)}
    if compared["framework"].nunique() >= 2:
        times = compared.groupby("framework")["train_time_s"].mean()
        accuracy = compared.groupby("framework")["accuracy"].mean() * 100
        # the headline names the fastest first, whatever the test could tell of it (told apart, equivalent,
        # inconclusive, or not testable with a run per point)
        where, fastest = f"{place}, caffe's whole preset", times.idxmin()
        top = f"{fastest} {times[fastest]:.3g} s"
        assert (f"**Fastest on {where}: {fastest}**" in leaders or f"No single fastest on {where}: {top} and " in
                leaders or f"No clear fastest on {where}: {top} and " in leaders
                or f"- Not testable on {where}: fewer than 3 runs on a side ({top}, " in leaders), leaders
        for fw in times.index:
            assert f" {fw} {times[fw]:.4g} s" in leaders and f" {fw} {accuracy[fw]:.4g}%" in leaders, (fw, leaders)
    else:
        assert "No dataset and device where two frameworks ran ok with the same defaults." in leaders, leaders
    # The observations: each one, in order, in its words, with a verdict of the allowed words
    seen = re.findall(r"^- \((\w)\) (.+) \*\*(.+?)\*\*", section(text, "The study's observations"), re.M)
    assert [(key, words) for key, words, _ in seen] == [(o.key, o.text) for o in observations.OBSERVATIONS]
    assert [key for key, _, _ in seen] == list("abcdefghij")
    verdict = {key: v for key, _, v in seen}
    allowed = {verdicts.AGREES, verdicts.DISAGREES, verdicts.EQUIVALENT, verdicts.INCONCLUSIVE}
    assert all(v in allowed or NOT_TESTED.fullmatch(v) or NOT_TESTABLE.fullmatch(v) for v in verdict.values()), verdict
    told = sum(v in (verdicts.AGREES, verdicts.DISAGREES, verdicts.EQUIVALENT) for v in verdict.values())
    assert f"Answered (agrees, disagrees or equivalent within the margin) for {told} of 10 observations" in text
    # What these runs cannot test says so: no GPU point, no MNIST- or CIFAR-like dataset, one preset and batch size
    assert not (runs.device == "gpu").any() and runs.batch_size.nunique() == 1 and runs.preset.nunique() == 1
    assert not set(runs.dataset) & {"mnist", "fashion_mnist", "cifar10"}
    assert verdict["c"] == "not tested in this run (no ok GPU point)"
    for key in "abdegij":
        assert NOT_TESTED.fullmatch(verdict[key]), (key, verdict[key])


@pytest.mark.slow
def test_findings_of_the_tiny_study(study):
    text = (study / "results/findings.md").read_text()
    runs = pd.read_parquet(study / "results/runs.parquet")
    assert_findings_say_what_the_runs_do(text, runs)
    if (runs.status == "ok").all():
        assert "None: every point finished ok." in text
    # one run per point: the leaders say so rather than name a winner, unless outside load left them out
    assert "## Does the framework matter?" in text
    busy = groups.contended_count(frames.points(runs))
    assert ("(a single run: no interval)" in text) if not busy else (f"{busy} ok point(s) trained while others" in text)


@pytest.mark.slow
def test_the_summary_of_the_tiny_study_has_a_row_per_setting_and_metric(study):
    table = pd.read_parquet(study / "results/summary.parquet")
    runs = frames.points(pd.read_parquet(study / "results/runs.parquet"))
    assert {"framework", "dataset", "device", "metric", "n", "mean", "sd", "ci_low", "ci_high", "min", "max",
            "n_failed", "n_contended"} <= set(table.columns)
    times = table[table["metric"] == "train_time_s"]
    assert len(times) == len(runs)  # the tiny study runs each setting once
    assert times["n_failed"].sum() == (runs["status"] != "ok").sum()
    assert times["n_contended"].sum() == groups.contended_count(runs)  # timed under outside load: apart
    ok = runs.loc[(runs["status"] == "ok") & ~runs["contended"], "train_time_s"]
    assert sorted(times.loc[times["n"] == 1, "mean"]) == pytest.approx(sorted(ok))
    assert times["ci_low"].isna().all()  # one run each: no interval
    assert "results/summary.parquet" in (study / "report.html").read_text()


@needs_chromium
def test_a_chart_html_renders_offline(tmp_path):
    """One chart's self-contained HTML, opened with the network cut off: Vega draws its marks."""
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "framework": ["pytorch", "tensorflow", "pytorch"],
                         "dataset": ["digits"] * 3, "preset": ["caffe"] * 3, "device": ["cpu"] * 3,
                         "status": ["ok", "ok", "diverged"], "train_time_s": [1.5, 2.5, None],
                         "accuracy": [0.95, 0.97, None], "batch_size": [32] * 3, "learning_rate": [0.01] * 3})
    chart = draw.draw("train_time_by_framework", runs, pd.DataFrame(), pd.DataFrame())
    draw.save(chart, tmp_path / "chart")
    page = tmp_path / "chart.html"
    assert "cdn.jsdelivr" not in page.read_text()
    proc = chromium(tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom", page.as_uri(), timeout=60)
    dom = proc.stdout
    assert re.search(r"<(svg|canvas)[^>]*class=\"marks\"", dom), dom[-2000:]
    marks = re.findall(r'class="mark-(\w+) role-mark', dom)
    assert {"rect", "symbol"} <= set(marks), marks
    # the bars and the dots are drawn as paths inside the marks' groups
    assert dom.count("<path") > 10 and "Training time per framework" in dom


def test_png_decoder_on_a_known_image(tmp_path):
    """The screenshot check's own decoder, on a tiny PNG built here (Sub, Up and Paeth rows)."""
    width, height = 3, 3
    pixels = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]],
                       [[10, 20, 30], [40, 50, 60], [70, 80, 90]],
                       [[1, 2, 3], [4, 5, 6], [200, 100, 50]]], np.int32)
    rows = []
    prev = np.zeros(width * 3, np.int32)
    for y, kind in enumerate((1, 2, 4)):
        cur = pixels[y].reshape(-1)
        if kind == 1:
            left = np.concatenate([np.zeros(3, np.int32), cur[:-3]])
            filt = (cur - left) % 256
        elif kind == 2:
            filt = (cur - prev) % 256
        else:
            filt = np.zeros_like(cur)
            for i in range(len(cur)):
                a, b, c = (cur[i - 3] if i >= 3 else 0), prev[i], (prev[i - 3] if i >= 3 else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                filt[i] = (cur[i] - pred) % 256
        rows.append(bytes([kind]) + bytes(filt.astype(np.uint8)))
        prev = cur

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
    (tmp_path / "t.png").write_bytes(png)
    assert (png_pixels(tmp_path / "t.png") == pixels).all()


# The compile and precision axes in miniature: TensorFlow and JAX (their compilers start in seconds; PyTorch's
# inductor takes about half a minute a point, tests/test_adapters.py runs it), eager and compiled, fp32 and bf16.
MODERN = {
    "datasets": ["digits"],
    "frameworks": ["tensorflow", "jax"],
    "preset": ["caffe"],
    "sweep": {"iterations": [40], "batch_size": [32], "threads": [1], "compile": ["eager", "compiled"],
              "precision": ["fp32", "bf16"]},
    "monitor": {"interval_s": 0.1},
}


@pytest.fixture(scope="module")
def modern(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("modern"), MODERN, "tiny.yaml")
    snakemake(root)
    return root


@pytest.mark.long
def test_the_modern_study_in_miniature_has_its_charts_and_findings(modern):
    runs = pd.read_parquet(modern / "results/runs.parquet")
    assert len(runs) == 8 and (runs.status == "ok").all(), runs[["run_id", "status", "reason"]]
    assert set(zip(runs.framework, runs.compile, runs.precision)) == {
        (fw, c, p) for fw in ("tensorflow", "jax") for c in ("eager", "compiled") for p in ("fp32", "bf16")}
    compiled = runs[runs.compile == "compiled"]
    assert (compiled.compile_time_s > 0.5).all() and compiled.compile_in_effect.str.contains("XLA").all()
    # bf16 points against the bfloat16 GEMM peak (PyTorch's, measured by machine_peak), fp32 against float32
    peak = json.loads((modern / "results/machine/peak.json").read_text())
    assert peak["gflops_by_threads"]["1"] > 0 and peak["bf16_gflops_by_threads"]["1"] > 0
    assert peak["bf16_measured_with"].startswith("torch ") and "cpu_bf16" in peak
    bf16 = runs[runs.precision == "bf16"]
    assert (bf16.peak_gflops == peak["bf16_gflops_by_threads"]["1"]).all()
    assert (runs[runs.precision == "fp32"].peak_gflops == peak["gflops_by_threads"]["1"]).all()
    for name in ("compile_speedup", "bf16_speedup"):
        svg = (modern / f"results/charts/{name}.svg").read_text()
        assert draw.NO_DATA not in svg and "could not be drawn" not in svg, name
        assert "jax" in svg and "tensorflow" in svg, name
    text = (modern / "results/findings.md").read_text()
    section = text.split("## Compiled or not, and in which precision", 1)[1].split("\n## ", 1)[0]
    fastest = next(line for line in section.splitlines() if line.startswith("**Fastest to"))
    first = guidance.fastest_configurations(runs, pd.read_parquet(modern / "results/curves.parquet")).iloc[0]
    assert f"{first.framework} {first.compile}, {first.precision} on 1 thread(s)" in fastest
    assert "- jax: compiled trained" in section and "- tensorflow: bf16 trained" in section
