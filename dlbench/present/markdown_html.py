"""The Markdown dlbench writes (the findings, a comparison) as HTML, for the results page: the standard library
only, no raw HTML let through.

The subset is CommonMark's and GitHub's as dlbench's own Markdown uses it: ATX headings (each with an id, for the
page's contents), paragraphs, bullet and numbered lists, pipe tables, fenced code, and inline code, strong and
emphasis, links with a relative or http(s) address, backslash escapes and entities. A `<` is always text: the
data in the findings (a failure reason, a host name) never becomes markup (dlbench.present.markdown escapes it
for Markdown readers; here it is escaped again for HTML).
"""

from __future__ import annotations

import html
import re

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
_FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")
_ESCAPABLE = r"\\`*_{}\[\]()#+\-.!|<>&~\"'"
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_SAFE_HREF = re.compile(r"^(https?://|mailto:|#|[^:]*$)", re.I)  # a relative address has no scheme
_INLINE = re.compile(
    r"(?P<code>`+)(?P<code_text>.+?)(?P=code)(?!`)"  # a code span
    r"|\\(?P<escaped>[" + _ESCAPABLE + r"])"  # a backslash escape
    r"|\[(?P<link_text>[^\]]+)\]\((?P<href>[^)\s]+)\)"  # a link
    r"|\*\*(?P<strong>\S(?:.*?\S)?)\*\*"  # strong
    r"|(?<![\w*])\*(?P<em>[^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"  # emphasis
    r"|(?<!\w)_(?P<em_>[^_\s](?:[^_]*[^_\s])?)_(?!\w)"
    r"|" + _ENTITY.pattern.replace("(", "(?P<entity>", 1)  # an entity, kept as one
)


def slug(text: str, taken: set[str]) -> str:
    """A heading's id: its words in lower case joined by hyphens, made unique on the page."""
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def inline(text: str) -> str:
    """One line's inline Markdown as HTML; everything that is not Markdown is escaped text."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()], quote=False))
        pos = m.end()
        if m.group("code"):
            out.append(f"<code>{html.escape(m.group('code_text').strip(), quote=False)}</code>")
        elif m.group("escaped"):
            out.append(html.escape(m.group("escaped"), quote=False))
        elif m.group("link_text"):
            href = m.group("href")
            label = inline(m.group("link_text"))
            out.append(f'<a href="{html.escape(href)}">{label}</a>' if _SAFE_HREF.match(href) else label)
        elif m.group("strong"):
            out.append(f"<strong>{inline(m.group('strong'))}</strong>")
        elif m.group("em") or m.group("em_"):
            out.append(f"<em>{inline(m.group('em') or m.group('em_'))}</em>")
        else:  # an entity: as written (html.unescape knows it, or it stays text)
            out.append(html.escape(html.unescape(m.group(0)), quote=False))
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def _cells(line: str) -> list[str]:
    """A table row's cells: split on every `|` that is not escaped, the outer ones dropped."""
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)]


def _table(lines: list[str]) -> str:
    heads, rule, rows = _cells(lines[0]), _cells(lines[1]), [_cells(line) for line in lines[2:]]
    align = ["right" if c.endswith(":") and not c.startswith(":") else "center" if c.startswith(":") and
             c.endswith(":") else "" for c in rule]

    styles = [f' style="text-align:{a}"' if a else "" for a in align + [""] * len(heads)]

    def row(cells: list[str], tag: str) -> str:
        cells = (cells + [""] * len(heads))[:len(heads)]
        return "<tr>" + "".join(f"<{tag}{s}>{inline(c)}</{tag}>" for c, s in zip(cells, styles)) + "</tr>"

    body = "".join(row(r, "td") for r in rows)
    return f"<table><thead>{row(heads, 'th')}</thead><tbody>{body}</tbody></table>"


def render(markdown: str, heading_ids: set[str] | None = None,
           shift: int = 0) -> tuple[str, list[tuple[int, str, str]]]:
    """The Markdown as HTML, and its headings as (level, id, text) for a table of contents (the Markdown's levels).
    `heading_ids`: the ids the page holds already (the new ones are added to it); shift: how many levels deeper
    each heading goes on the page (1: a `#` title under the page's own h1 is an h2)."""
    taken = set() if heading_ids is None else heading_ids
    lines = markdown.splitlines()
    out, headings, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence.group(1))),
                       len(lines))
            code = "\n".join(lines[i + 1:end])
            out.append(f"<pre><code>{html.escape(code, quote=False)}</code></pre>")
            i = end + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level, text = len(heading.group(1)), heading.group(2)
            words = html.unescape(re.sub(r"[`*\\]", "", text))
            anchor = slug(words, taken)
            headings.append((level, anchor, words))
            tag = f"h{min(level + shift, 6)}"
            out.append(f'<{tag} id="{anchor}">{inline(text)}</{tag}>')
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            end = i + 2
            while end < len(lines) and lines[end].strip() and "|" in lines[end]:
                end += 1
            out.append(_table(lines[i:end]))
            i = end
            continue
        item = _BULLET.match(line)
        if item:
            numbered = item.group(1)[0].isdigit()
            items = []
            while i < len(lines):
                item = _BULLET.match(lines[i])
                if item and item.group(1)[0].isdigit() == numbered:
                    items.append([item.group(2)])
                elif item or not lines[i].strip() or _HEADING.match(lines[i]):
                    break
                else:  # a continuation of the item above
                    items[-1].append(lines[i].strip())
                i += 1
            tag = "ol" if numbered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{inline(' '.join(parts))}</li>" for parts in items) + f"</{tag}>")
            continue
        paragraph = []
        while (i < len(lines) and lines[i].strip() and not _HEADING.match(lines[i]) and not _FENCE.match(lines[i])
               and not _BULLET.match(lines[i])
               and not ("|" in lines[i] and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]))):
            paragraph.append(lines[i].strip())
            i += 1
        out.append(f"<p>{inline(' '.join(paragraph))}</p>")
    return "\n".join(out), headings
