"""What every chart is made of: the colours and shapes, titles, facets, tooltips, the rows a chart keeps and the
sample it draws of a large study (dlbench.present.charts.drawings draws the charts with them)."""

from __future__ import annotations

import textwrap

import altair as alt
import numpy as np
import pandas as pd

from dlbench.analysis.frames import FRAMEWORKS, PHASES, STATUSES
from dlbench.frameworks import registry

NO_DATA = "no data for this chart in this study"
MAX_SAMPLES = 1500  # readings per run drawn in a timeline
# Marks of one kind a chart draws (an SVG of much more than this is slow to open and to move in): past it a
# chart draws a random sample of its points or runs, fixed by SEED, says so in its subtitle, and computes
# every mean, front and count from all of them. The same in every study, so a chart's data never depends on
# anything but the points.
MAX_MARKS = 4000
SEED = 0


FRAMEWORK_COLORS = alt.Scale(domain=FRAMEWORKS, range=[registry.get(f).color for f in FRAMEWORKS])
FAILED_SHAPES = alt.Scale(domain=STATUSES[1:], range=["cross", "triangle-down", "triangle-down", "diamond", "square",
                                                     "triangle-up", "triangle-down"])
STATUS_COLORS = alt.Scale(domain=STATUSES, range=["#4c9f38", "#d62728", "#8c1a1a", "#e377c2", "#ff7f0e", "#9467bd",
                                                  "#7f7f7f", "#bcbd22"])
CONTENDED_COLOR = "#555555"  # points timed under outside load: no framework's colour
PHASE_COLORS = alt.Scale(domain=PHASES, range=["#d9d9d9", "#c6dbef", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0",
                                               "#fee391", "#f2f2f2"])




def framework_color(data: pd.DataFrame | None = None):
    """Colour by framework, the same colour for a framework in every chart; given the chart's data, the legend
    lists only the frameworks in it (a study without JAX shows no JAX)."""
    if data is None or "framework" not in data.columns:
        return alt.Color("framework:N", scale=FRAMEWORK_COLORS, title="framework")
    present = set(data["framework"].dropna())
    order = [f for f in FRAMEWORKS if f in present] + sorted(present - set(FRAMEWORKS))
    colours = dict(zip(FRAMEWORK_COLORS.domain, FRAMEWORK_COLORS.range))
    return alt.Color("framework:N", title="framework",
                     scale=alt.Scale(domain=order, range=[colours.get(f, "#7f7f7f") for f in order]))


def failed_shape(df: pd.DataFrame):
    """Shape by status for failed points: the same shape for a status in every chart; legend only if any failed."""
    present = [st for st in STATUSES[1:] if st in set(df["status"])]
    present += sorted(set(df["status"]) - set(STATUSES))
    if not present:
        return alt.Shape("status:N", legend=None)
    shapes = dict(zip(FAILED_SHAPES.domain, FAILED_SHAPES.range))
    return alt.Shape("status:N", title="failed point",
                     scale=alt.Scale(domain=present, range=[shapes.get(st, "circle") for st in present]))


SUBTITLE_CHARS = 110  # a subtitle line's length: about 700 px, within a 1,400 px screen beside the legend


def titled(text: str, *subtitle: str) -> alt.TitleParams:
    """A chart's title and its subtitle lines, each wrapped at its clauses ("; ") to SUBTITLE_CHARS, so that no
    line runs past the screen (a clause longer than that at its words)."""
    lines = [line for sub in subtitle for line in wrap_clauses(sub, SUBTITLE_CHARS)]
    return alt.TitleParams(text=text, subtitle=lines or alt.Undefined, anchor="start", fontSize=15)


def wrap_clauses(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken after a clause ("; ") where one fits, else at a word."""
    clauses = text.split("; ")
    tokens = [c + "; " for c in clauses[:-1]] + clauses[-1:]
    lines, line = [], ""
    for token in tokens:
        if len(line) + len(token.rstrip()) <= width:
            line += token
            continue
        if line:
            lines.append(line.rstrip())
        words = textwrap.wrap(token, width)
        lines += words[:-1]
        line = words[-1] + (" " if token.endswith(" ") else "") if words else ""
    if line.strip():
        lines.append(line.rstrip())
    return lines


class NoData(Exception):
    """Raised by a drawing whose table is empty in this study: the chart is not drawn, and `why` (a short phrase:
    "one thread count per setting") says so in the charts' index and the findings."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def no_data(title: str, why: str = "") -> alt.Chart:
    """A chart that says it has nothing to show: a valid file in every format (a chart whose file must exist,
    compare's; the study's charts raise NoData instead, and are not drawn)."""
    lines = [NO_DATA] + ([why] if why else [])
    return alt.Chart(pd.DataFrame({"text": ["\n".join(lines)]})).mark_text(
        size=14, lineBreak="\n", color="#555555").encode(text="text:N").properties(
        width=520, height=80, title=titled(title))


def faceted(chart, df: pd.DataFrame, row: str | None = "device", column: str | None = "dataset"):
    """`chart` in a panel per value of `row` and `column`; a facet with one value is left out (its header would
    only repeat the subtitle), and a chart with none is drawn as it is."""
    kw = {}
    if row and row in df.columns and df[row].nunique() > 1:
        kw["row"] = alt.Row(f"{row}:N", title=row.replace("_label", ""))
    if column and column in df.columns and df[column].nunique() > 1:
        kw["column"] = alt.Column(f"{column}:N", title=column.replace("_label", ""))
    return chart.facet(**kw) if kw else chart


def tooltip_columns(df: pd.DataFrame, *extra: str) -> list[str]:
    wanted = ["run_id", "framework", "status", "reason", "whose", "batch_size", "learning_rate", "length",
              "length_unit", "threads", *extra]
    seen = []
    for c in wanted:
        if c in df.columns and c not in seen and df[c].notna().any():
            seen.append(c)
    return seen


def slim(df: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    """Only the columns a chart uses (the runs table holds logs and JSON blobs that would bloat the file)."""
    keep = ["run_id", "framework", "dataset", "device", "status", "reason", "whose", "is_own", "batch_size",
            "learning_rate", "length", "length_unit", "threads", *extra]
    keep = [c for c in dict.fromkeys(keep) if c in df.columns]
    out = df[keep].copy()
    if "reason" in out.columns:
        out["reason"] = out["reason"].astype("string").str.slice(0, 160)
    return out


def drawn(df: pd.DataFrame, limit: int, by=("framework", "dataset", "device")) -> pd.Series:
    """Which rows a chart draws: all of them up to `limit`, else a random sample of about `limit` (seed SEED)
    taking the same share of every framework, dataset and device, at least one row of each."""
    if len(df) <= limit:
        return pd.Series(True, index=df.index)
    rng = np.random.default_rng(SEED)
    score = pd.Series(rng.random(len(df)), index=df.index)
    rank = score.groupby([df[c].astype(str) for c in by if c in df.columns]).rank(method="first")
    size = score.groupby([df[c].astype(str) for c in by if c in df.columns]).transform("size")
    return rank <= np.maximum(1, np.floor(size * limit / len(df)))


def drawn_groups(table: pd.DataFrame, group: str, limit: int) -> tuple[pd.DataFrame, list[str]]:
    """The rows of whole groups (a line, a run) a chart draws, about `limit` rows in all, and its subtitle note."""
    per_group = table.groupby(group, sort=False).first().reset_index()
    if len(table) <= limit:
        return table, []
    keep = per_group[drawn(per_group, max(1, limit * len(per_group) // len(table)))][group]
    return table[table[group].isin(set(keep))], sample_note(len(keep), len(per_group), "lines")


def sample_note(shown: int, total: int, what: str, *extra: str) -> list[str]:
    """The subtitle line of a chart that draws a sample (none when it draws everything)."""
    if shown >= total:
        return []
    return [f"drawn: a random sample of {shown:,} of the {total:,} {what}" + "".join(f"; {e}" for e in extra)]


def log_ticks(low: float, high: float) -> list[float]:
    """Tick values for a log axis from low to high, dense enough that every mark has a labelled value near it:
    Vega's own stop at the powers of ten and their multiples, so that a range of 3 to 15 labels nothing above 10."""
    if not (np.isfinite(low) and np.isfinite(high)) or low <= 0 or high <= low:
        return []
    decades = np.log10(high / low)
    steps = ((1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 9) if decades < 1 else (1, 1.5, 2, 3, 4, 5, 7)
             if decades < 2 else (1, 2, 5))
    ticks = [m * 10.0 ** e for e in range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
             for m in steps]
    return [float(f"{v:.3g}") for v in ticks if low <= v <= high]


def log_scale(values: pd.Series, padding: int) -> tuple[alt.Scale, alt.Axis | object]:
    """A log scale over the values drawn, and an axis labelling a value near every mark: Vega's nice log domain
    runs to whole decades (2.5-3 s drew 1-10 s)."""
    drawn = pd.to_numeric(values, errors="coerce")
    drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
    ticks = log_ticks(drawn.min(), drawn.max()) if len(drawn) else []
    return (alt.Scale(type="log", nice=False, padding=padding),
            alt.Axis(values=ticks) if ticks else alt.Undefined)
