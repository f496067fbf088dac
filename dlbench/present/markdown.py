"""Text from the data (a failure reason, a settings label, a host name, a path) put into Markdown as text."""

from __future__ import annotations

import re

# What Markdown would read as HTML: a "<" that opens a tag, a comment or an autolink, an "&" that opens an entity.
_TAG_OPENING = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY_OPENING = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def escape(value) -> str:
    """`value` as Markdown text: a "<" that would open a tag or an autolink and an "&" that would open an entity
    escaped, a table's cell separator and line breaks neutralised, and an inline link's `](` broken, so that the
    data never becomes a tag, a link or a new table cell. Every other character stays as it is, so that a table's
    "p < 0.001" reads as the prose's does, and an interval's brackets still read."""
    text = str(value).replace("\n", " ").replace("\r", " ")
    text = _ENTITY_OPENING.sub("&amp;", text)
    text = _TAG_OPENING.sub("&lt;", text)
    return text.replace("|", "\\|").replace("](", "]\\(")
