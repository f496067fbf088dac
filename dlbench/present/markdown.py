"""Text from the data (a failure reason, a settings label, a host name, a path) put into Markdown as text."""

from __future__ import annotations

import html


def escape(value) -> str:
    """`value` as Markdown text: HTML escaped (Markdown passes HTML on, and `<...>` is an autolink), a table's
    cell separator and line breaks neutralised, and an inline link's `](` broken, so that the data never becomes
    a tag, a link or a new table cell. Other characters stay as they are: an interval's brackets still read."""
    text = html.escape(str(value), quote=False).replace("\n", " ").replace("\r", " ")
    return text.replace("|", "\\|").replace("](", "]\\(")
