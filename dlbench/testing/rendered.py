"""Charts as a reader sees them: their SVGs rendered in headless Chromium, each mark's box measured against its
plot area, and the colours and numbers the files hold read back.

A chart passes when every mark lies inside the plot area it belongs to (a mark cut by the frame, or drawn off it,
misleads), no number in it is NaN, and the frameworks it colours are exactly those with data in it (a legend or a
mark of a framework that did not run, or a framework with data and no mark, is a wrong chart).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from dlbench.frameworks import registry
from dlbench.testing.browser import chromium

# Run in the page: per chart, the marks measured and the ones outside their plot area (the background of the
# nearest group item that holds the mark's layer: the view, or the facet's cell).
_MEASURE = """
const out = {};
for (const div of document.querySelectorAll('div.chart')) {
  const outside = []; let marks = 0;
  for (const layer of div.querySelectorAll('g.role-mark')) {
    let owner = layer.parentElement;
    while (owner && !owner.querySelector(':scope > path.background')) owner = owner.parentElement;
    if (!owner) { outside.push('no plot area for ' + layer.getAttribute('class')); continue; }
    const area = owner.querySelector(':scope > path.background').getBoundingClientRect();
    for (const item of layer.children) {
      const box = item.getBoundingClientRect();
      if (box.width === 0 && box.height === 0 && box.x === 0 && box.y === 0) continue;  // an empty item
      marks++;
      const tol = 1.5;
      if (box.left < area.left - tol || box.right > area.right + tol || box.top < area.top - tol ||
          box.bottom > area.bottom + tol) {
        const at = [box.left, box.top, box.right, box.bottom].map(Math.round);
        const of = [area.left, area.top, area.right, area.bottom].map(Math.round);
        outside.push(layer.getAttribute('class') + ' ' + item.tagName + ' at [' + at + '] of [' + of + ']');
      }
    }
  }
  out[div.dataset.name] = {marks: marks, outside: outside};
}
document.getElementById('out').textContent = JSON.stringify(out);
"""


_SVG = "{http://www.w3.org/2000/svg}"


@dataclass(frozen=True)
class Rendered:
    """One chart as drawn: its marks counted and those outside their plot area (a description each), whether
    its SVG holds a NaN, the frameworks whose colours its marks use and those its legend names."""
    name: str
    marks: int
    outside: tuple[str, ...]
    has_nan: bool
    colours: frozenset[str]
    legend: frozenset[str]


def framework_colours() -> dict[str, str]:
    """Each framework's chart colour (registry), lower case, as an SVG writes it."""
    return {name: fw.color.lower() for name, fw in registry.FRAMEWORKS.items()}


def _mark_colours(svg: str) -> frozenset[str]:
    """The frameworks whose colours the SVG's marks (not its legend or axes) fill or stroke."""
    colour_of = {c: name for name, c in framework_colours().items()}
    found = set()
    for group in ElementTree.fromstring(svg).iter(f"{_SVG}g"):
        if "role-mark" not in group.get("class", "").split():
            continue
        for item in group:
            for colour in (item.get("fill"), item.get("stroke")):
                if colour and colour.lower() in colour_of:
                    found.add(colour_of[colour.lower()])
    return frozenset(found)


def _legend_frameworks(svg: str) -> frozenset[str]:
    """The values a legend titled "framework" lists (Vega names them in the legend's aria-label: "... with 4
    values: tensorflow, caffe, ..." or "with 1 value: pytorch")."""
    names = set()
    for label in re.findall(r'aria-label="([^"]*)"', svg):
        label = html.unescape(label)
        found = re.search(r"legend titled 'framework' .*? values?: (.*)$", label)
        if found:
            names |= {n.strip() for n in found.group(1).replace(", ending with ", ", ").split(",")}
    return frozenset(names)


def render(svgs: dict[str, Path], folder: Path) -> dict[str, Rendered]:
    """Render each named SVG file in one headless Chromium page and measure it (see the module's docstring)."""
    texts = {name: path.read_text() for name, path in svgs.items()}
    body = "\n".join(f'<div class="chart" data-name="{name}">{text}</div>' for name, text in texts.items())
    page = folder / "rendered.html"
    page.write_text(f'<!doctype html><html><body>{body}<pre id="out">pending</pre>'
                    f'<script>{_MEASURE}</script></body></html>')
    proc = chromium(folder / "profile", "--window-size=1400,1000", "--virtual-time-budget=20000", "--dump-dom",
                    page.as_uri(), timeout=180)
    found = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.S)
    if not found or found.group(1) == "pending":
        raise RuntimeError(f"Chromium measured nothing: {proc.stderr[-2000:]}")
    measured = json.loads(html.unescape(found.group(1)))
    return {name: Rendered(name, measured[name]["marks"], tuple(measured[name]["outside"]),
                           "NaN" in text, _mark_colours(text), _legend_frameworks(text))
            for name, text in texts.items()}
