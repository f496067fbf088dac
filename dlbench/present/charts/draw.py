"""The study's charts, drawn with Altair from the Parquet tables.

Each chart is saved, atomically, as self-contained HTML (Vega inlined: opens offline), SVG, PNG and PDF, and as its
Vega spec (`<name>.vega.json`, the data in it already computed: what the results page draws). A study draws the
charts it has data for: a drawing whose table is empty (no GPU point, one thread count, ...) raises NoData, no file
is written for it, and the folder's index.json lists the charts drawn and those not drawn with the reason (the
findings say it in one line). Failed points are drawn too (hollow red marks, or their
own bars in the status chart), so a missing bar is never mistaken for a failure. Each
chart is registered once, in dlbench.present.charts.catalog; dlbench.present.charts.drawings draws it, from
what `dlbench.analysis.frames` computes.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import pandas as pd
import vl_convert as vlc
from altair.utils.html import spec_to_html

from dlbench.analysis.published import PUBLISHED_CSV, read_published
from dlbench.atomic import atomic_path
from dlbench.atomic import write_text as atomic_write_text
from dlbench.paths import cache_root
from dlbench.present.charts import catalog
from dlbench.present.charts.catalog import category, chart_files, chart_name, read_index  # noqa: F401 - the rules' names, here too
from dlbench.present.charts.drawings import DRAWINGS
from dlbench.present.charts.pieces import MAX_SAMPLES, NO_DATA, NoData, titled  # noqa: F401 - MAX_SAMPLES, NO_DATA: the tests'

FORMATS = catalog.FORMATS
# Saving uses VegaFusion's data transformer: it evaluates the charts' remaining transforms (means, counts,
# filters) in Python, and lifts Altair's 5,000-row limit on inline data. A faceted chart still inlines its
# whole source, which is why the charts pass only the rows they draw.
SAVE_TRANSFORMER = "vegafusion"
# How a page embeds a chart: Vega drawing SVG, so that the page holds the marks (a reader's find, a test's count).
EMBED_OPTIONS = {"renderer": "svg", "mode": "vega"}
PNG_SCALE = 2  # twice the chart's own size: sharp on a high-density screen and in a slide


@dataclass(frozen=True)
class Spec:
    make: Callable
    category: str
    title: str


# Every chart of dlbench.present.charts.catalog with the function that draws it.
CHARTS: dict[str, Spec] = {name: Spec(DRAWINGS[c.drawing](*c.args), c.category, c.title)
                           for name, c in catalog.CHARTS.items()}


def save(chart, stem: Path) -> None:
    """The chart as stem.<format> for every format of FORMATS. Its Vega spec is computed once (VegaFusion evaluates
    the data), and every file is drawn from it: the SVG by vl-convert, the PNG and the PDF from the SVG."""
    spec = vega_spec(chart)
    svg = vlc.vega_to_svg(spec)
    content = {
        "html": spec_to_html(spec, mode="vega", vega_version=alt.VEGA_VERSION, vegaembed_version=alt.VEGAEMBED_VERSION,
                             vegalite_version=alt.VEGALITE_VERSION, embed_options=EMBED_OPTIONS,
                             json_kwds={"cls": ScriptSafeJson}, template="inline"),
        "svg": svg,
        "png": vlc.svg_to_png(svg, scale=PNG_SCALE),
        "pdf": vlc.svg_to_pdf(svg),
        "vega.json": json.dumps(spec, separators=(",", ":")),
    }
    for fmt in FORMATS:
        with atomic_path(stem.with_name(f"{stem.name}.{fmt}"), suffix=f".{fmt}") as tmp:
            tmp.chmod(0o644)  # readable like any other output (a temporary file starts private)
            data = content[fmt]
            tmp.write_bytes(data) if isinstance(data, bytes) else tmp.write_text(data)


def vega_spec(chart) -> dict:
    """The chart's Vega spec with its data computed (means, counts, filters evaluated in Python by VegaFusion)."""
    with alt.data_transformers.enable(SAVE_TRANSFORMER), alt.data_transformers.disable_max_rows():
        return chart.to_dict(format="vega")


def javascript() -> str:
    """Vega, Vega-Lite and vega-embed as one script, from the installed vl-convert (what every saved chart page
    inlines): `vegaEmbed` on the page's window, nothing fetched. vl-convert bundles it in about 2 s; the bundle is
    kept in the cache (paths.cache_root()/vega/), one per vl-convert and Vega-Lite version."""
    from altair.utils._importers import vl_version_for_vl_convert

    version = vl_version_for_vl_convert()
    kept = cache_root() / "vega" / f"vega-embed-{vlc.__version__}-vl{version}.js"
    if kept.is_file():
        return kept.read_text()
    bundle = vlc.javascript_bundle(vl_version=version)
    with contextlib.suppress(OSError):  # a cache that cannot be written costs only time
        kept.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(kept, bundle)
    return bundle


class ScriptSafeJson(json.JSONEncoder):
    """JSON that can stand inside an HTML <script> block: `<`, `>` and `&` as \\u escapes, the same values to a
    JSON reader. Altair writes the chart's data there raw, and a failure reason holding `</script>` would
    otherwise end the block and run as the page's own markup."""

    def encode(self, o) -> str:
        return super().encode(o).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _frame(obj) -> pd.DataFrame:
    if obj is None:
        return pd.DataFrame()
    return obj if isinstance(obj, pd.DataFrame) else pd.read_parquet(obj)


def draw(name: str, runs: pd.DataFrame, curves: pd.DataFrame, samples: pd.DataFrame,
         published: pd.DataFrame | None = None):
    """The chart `name`; NoData (raised) where the study has nothing for it to draw; one whose drawing fails
    becomes a chart that says why (the others still get drawn)."""
    spec = CHARTS[name]
    try:
        chart = spec.make(runs, curves, samples, published)
        chart.to_dict()  # validate now, so that a bad spec is caught here
        return chart
    except NoData:
        raise
    except Exception as exc:  # noqa: BLE001 - one chart's bug must not lose the study's other charts
        print(f"dlbench: chart {name} could not be drawn: {exc!r}", file=sys.stderr)
        return alt.Chart(pd.DataFrame({"text": [f"this chart could not be drawn: {type(exc).__name__}: {exc}"[:300]]})
                         ).mark_text(size=13, color="#d62728").encode(text="text:N").properties(
            width=520, height=60, title=titled(spec.title))


def with_subtitle(chart, line: str):
    """The chart with one more subtitle line under its title (a partial study's "k of N points")."""
    title = chart.title
    if isinstance(title, alt.TitleParams):
        old = title.subtitle
        subtitle = [] if old is alt.Undefined else [old] if isinstance(old, str) else list(old)
        return chart.properties(title=alt.TitleParams(**{**title.to_dict(), "subtitle": [*subtitle, line]}))
    return chart.properties(title=titled("" if title is alt.Undefined else str(title), line))


def draw_all(runs, curves, samples, out_dir, published=None, subtitle: str | None = None) -> dict:
    """Draw every chart of CHARTS that has data into out_dir as <name>.<format> (FORMATS), and write out_dir's
    index (catalog.INDEX); runs/curves/samples: frames or paths; subtitle: a line added under every chart's
    title. Gives the index: {"drawn": [name, ...], "not_drawn": {name: why, ...}}, in CHARTS' order."""
    runs, curves, samples = _frame(runs), _frame(curves), _frame(samples)
    if published is None:
        published = read_published() if PUBLISHED_CSV.exists() else pd.DataFrame()
    elif not isinstance(published, pd.DataFrame):
        published = read_published(published)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    index: dict = {"drawn": [], "not_drawn": {}}
    for name in CHARTS:
        try:
            chart = draw(name, runs, curves, samples, published)
        except NoData as gap:
            index["not_drawn"][name] = gap.why
            for fmt in FORMATS:  # an earlier drawing's file (out_dir drawn again) must not stand for this study's
                (out / f"{name}.{fmt}").unlink(missing_ok=True)
            continue
        save(with_subtitle(chart, subtitle) if subtitle else chart, out / name)
        index["drawn"].append(name)
    with atomic_path(out / catalog.INDEX, suffix=".json") as tmp:
        tmp.chmod(0o644)
        tmp.write_text(json.dumps(index, indent=1) + "\n")
    return index
