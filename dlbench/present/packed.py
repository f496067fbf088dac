"""Data carried inside an HTML page, packed: JSON, gzip-compressed, base64 text in a `<script type=
"application/gzip+json">` block, and the page's few lines of script that unpack it again (the browser's own
DecompressionStream: no library, no network).

A results page holds every chart's Vega spec and every run; at 20,000 runs that is about 25 MB of JSON, and about
3.5 MB packed. Base64 text cannot close the script block or open markup, whatever the data holds.
"""

from __future__ import annotations

import base64
import gzip
import json
import re

from dlbench import atomic

MEDIA_TYPE = "application/gzip+json"


def pack(value) -> str:
    """`value` as JSON (a value that is not finite as null: the browser's JSON.parse refuses NaN), gzip-compressed,
    as base64 text."""
    try:  # most values hold no NaN: written at once, without walking them first
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = atomic.dumps(value, separators=(",", ":"))
    return pack_json(text)


def pack_json(text: str) -> str:
    """JSON text (strict: no NaN) packed as pack packs a value."""
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=6, mtime=0)).decode("ascii")


def unpack(text: str):
    """What pack packed (the tests read a page's data with it)."""
    return json.loads(gzip.decompress(base64.b64decode(text)))


def block(element_id: str, value) -> str:
    """`value` packed into a script block of its own, found by its id."""
    return block_of_packed(element_id, pack(value))


def block_of_packed(element_id: str, packed: str) -> str:
    return f'<script type="{MEDIA_TYPE}" id="{element_id}">{packed}</script>'


def blocks(page: str) -> dict[str, object]:
    """Every packed block of a page, unpacked, by its id."""
    found = re.findall(rf'<script type="{re.escape(MEDIA_TYPE)}" id="([^"]+)">([A-Za-z0-9+/=]*)</script>', page)
    return {element_id: unpack(text) for element_id, text in found}


# unpack(id): a Promise of the block's value. Browsers without DecompressionStream (before 2023) get an error that
# says so, which the page shows where the chart or the table would be.
SCRIPT = """
function unpack(id) {
  if (typeof DecompressionStream === 'undefined')
    return Promise.reject(new Error('this browser cannot unpack the page\\'s data (DecompressionStream); ' +
                                    'open the chart\\'s SVG, or runs.csv, instead'));
  var text = atob(document.getElementById(id).textContent), bytes = new Uint8Array(text.length);
  for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Response(stream).text().then(JSON.parse);
}
"""
