"""An MkDocs hook (mkdocs.yml `hooks:`): the search index also as a script, search/search_index.js.

The site's search (dlbench/docgen/theme/search/main.js) loads it with a <script> tag and runs lunr in the page, so
that it works where the site is opened from the file system: a browser refuses a file:// page the Worker and the
request for search_index.json that MkDocs' own search needs. Runs after the search plugin has written the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

VARIABLE = "dlbenchSearchIndex"  # the name main.js reads


def on_post_build(config, **kwargs) -> None:
    folder = Path(config["site_dir"]) / "search"
    index = json.loads((folder / "search_index.json").read_text(encoding="utf-8"))
    (folder / "search_index.js").write_text(f"var {VARIABLE} = {json.dumps(index)};\n", encoding="utf-8")
