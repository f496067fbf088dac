"""Every chart rendered in headless Chromium and checked as a reader would see it: each mark inside its plot area,
no NaN in the SVG, and each framework's colour present exactly where the chart has that framework's data.

Two studies: the hand-made one of tests/test_charts.py (four frameworks, failures of several kinds, the compile,
precision and layout axes; no training), and the tiny study the workflow trains once per session (two
frameworks: no other framework's colour or legend entry may appear)."""

from __future__ import annotations

import pandas as pd
import pytest
from test_charts import html_rows  # tests/ is on sys.path

from dlbench.present.charts import catalog, draw
from dlbench.present.charts.pieces import NoData
from dlbench.testing.browser import CHROMIUM, MISSING
from dlbench.testing.rendered import Rendered, render
from dlbench.testing.study import (
    make_curves,
    make_modern_runs,
    make_runs,
    make_samples,
    one_default,
    with_preset_points,
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=MISSING)


def frameworks_in(page: str) -> set[str]:
    """The frameworks a chart page holds data for."""
    rows, _ = html_rows(page)
    return set(rows["framework"].dropna()) if "framework" in rows.columns else set()


def assert_reads_right(chart: Rendered, page: str, every_colour: bool = True) -> None:
    """Marks inside the plot area, no NaN, and the frameworks coloured exactly those with data: the legend names
    each framework with data and no other, and a mark in a framework's colour is drawn for each (`every_colour`:
    where every framework has a counted run; else, where a failed or contended run is drawn red or orange, no
    colour but theirs) and for no other."""
    assert chart.marks > 0, f"{chart.name}: no mark drawn"
    assert not chart.outside, f"{chart.name}: {len(chart.outside)} mark(s) outside the plot area: {chart.outside[:3]}"
    assert not chart.has_nan, f"{chart.name}: NaN in the SVG"
    if chart.legend:  # coloured by framework
        assert chart.legend == frameworks_in(page), (chart.name, sorted(chart.legend), sorted(frameworks_in(page)))
        if every_colour:
            assert chart.colours == chart.legend, (chart.name, sorted(chart.colours), sorted(chart.legend))
        else:
            assert chart.colours <= chart.legend, (chart.name, sorted(chart.colours), sorted(chart.legend))
    else:  # not coloured by framework: no mark takes a framework's colour
        assert not chart.colours, (chart.name, sorted(chart.colours))


@pytest.mark.parametrize("load", ["quiet", "every run contended"])
def test_every_chart_of_a_hand_made_study_reads_right(tmp_path, load):
    # make_runs' own points are a full factorial (no default point): the published comparison gets one of each
    runs = pd.concat([with_preset_points(make_runs()), make_modern_runs()], ignore_index=True)
    own = pd.concat([one_default(make_runs()), make_modern_runs()], ignore_index=True)
    if load != "quiet":  # a busy machine: nothing counted, every ok run drawn apart, in orange
        runs, own = runs.assign(contended=True), own.assign(contended=True)
    curves, samples = make_curves(runs), make_samples(runs)
    published = draw.read_published()
    svgs, pages = {}, {}
    for name, spec in draw.CHARTS.items():
        try:
            chart = spec.make(own if name == "published_comparison" else runs, curves, samples, published)
        except NoData:  # a chart of counted runs only (the speed-ups, the Pareto front): none when none counted
            assert load != "quiet", f"{name} drew nothing from a quiet study"
            continue
        draw.save(chart, tmp_path / name)
        svgs[name], pages[name] = tmp_path / f"{name}.svg", (tmp_path / f"{name}.html").read_text()
    for name, chart in render(svgs, tmp_path).items():
        assert_reads_right(chart, pages[name], every_colour=load == "quiet")


@pytest.mark.slow
def test_every_chart_the_tiny_study_draws_reads_right(tiny_run, tmp_path):
    folder = tiny_run / "results/charts"
    drawn = catalog.read_index(folder)["drawn"]
    assert drawn, "the tiny study drew no chart"
    rendered = render({name: folder / f"{name}.svg" for name in drawn}, tmp_path)
    runs = pd.read_parquet(tiny_run / "results/runs.parquet")
    counted = runs[(runs["status"] == "ok") & ~runs["contended"]].groupby("framework").size()
    for name, chart in rendered.items():  # a framework without a counted run may be drawn in orange alone
        assert_reads_right(chart, (folder / f"{name}.html").read_text(), every_colour=len(counted) == 2)
        # the tiny study ran PyTorch and TensorFlow alone
        assert chart.legend <= {"pytorch", "tensorflow"} and chart.colours <= {"pytorch", "tensorflow"}, name
    assert any(chart.legend == {"pytorch", "tensorflow"} for chart in rendered.values())


def test_the_check_catches_a_mark_off_its_plot_area_a_nan_and_a_stray_colour(tmp_path):
    """The checks themselves, on SVGs made wrong on purpose from a chart that reads right."""
    runs = with_preset_points(make_runs())
    name = "pareto_front"
    draw.save(draw.CHARTS[name].make(runs, make_curves(runs), make_samples(runs), None), tmp_path / name)
    good = (tmp_path / f"{name}.svg").read_text()
    off = tmp_path / "off.svg"  # the first mark moved far off the plot area
    first = good.index('<path transform="translate(', good.index("role-mark"))
    off.write_text(good[:first] + '<path transform="translate(-500,-500)" d="M2,0A2,2,0,1,1,-2,0A2,2,0,1,1,2,0"/>'
                   + good[first:])
    nan = tmp_path / "nan.svg"
    nan.write_text(good.replace('d="M', 'd="MNaN,', 1))
    out = render({"good": tmp_path / f"{name}.svg", "off": off, "nan": nan}, tmp_path)
    assert not out["good"].outside and not out["good"].has_nan
    assert out["off"].outside and out["nan"].has_nan
    page = (tmp_path / f"{name}.html").read_text()
    assert_reads_right(out["good"], page)
    for wrong in (out["off"], out["nan"],
                  Rendered("a stray colour", out["good"].marks, (), False, out["good"].colours | {"jax"},
                           out["good"].legend),
                  Rendered("a legend of a framework without data", out["good"].marks, (), False, out["good"].colours,
                           out["good"].legend | {"jax"}),
                  Rendered("a framework with data and no mark", out["good"].marks, (), False,
                           out["good"].colours - {"caffe"}, out["good"].legend)):
        with pytest.raises(AssertionError):
            assert_reads_right(wrong, page)
