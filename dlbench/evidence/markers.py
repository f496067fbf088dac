"""Rewrite a document between marker comments, leaving every other line as it was.

A block named NAME lies between the lines `<!-- evidence:NAME -->` and `<!-- /evidence:NAME -->`; the lines
between them are replaced, the marker lines and everything outside them kept byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from dlbench import atomic


class MarkerError(ValueError):
    """A marker is missing, doubled or out of order: nothing is written."""


def opening(name: str) -> str:
    return f"<!-- evidence:{name} -->"


def closing(name: str) -> str:
    return f"<!-- /evidence:{name} -->"


def _line_of(lines: list[str], marker: str, name: str, where: str) -> int:
    found = [i for i, line in enumerate(lines) if line.rstrip("\r\n").strip() == marker]
    if len(found) != 1:
        what = "has no" if not found else f"has {len(found)} lines"
        raise MarkerError(f"{where} {what} `{marker}` (each evidence table `{name}` needs exactly one opening and one "
                          f"closing marker line: `{opening(name)}` ... `{closing(name)}`)")
    return found[0]


def replace_blocks(text: str, blocks: dict[str, str], where: str = "the document") -> str:
    """`text` with the lines between each block's markers replaced by that block's text. Raises MarkerError
    (one line) where a marker is missing, doubled or closes before it opens."""
    lines = text.splitlines(keepends=True)
    spans = {}
    for name in blocks:
        start = _line_of(lines, opening(name), name, where)
        end = _line_of(lines, closing(name), name, where)
        if end < start:
            raise MarkerError(f"{where}: `{closing(name)}` comes before `{opening(name)}`")
        spans[name] = (start, end)
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    for (a, (_, a_end)), (b, (b_start, _)) in zip(ordered, ordered[1:]):
        if b_start < a_end:
            raise MarkerError(f"{where}: the evidence tables `{a}` and `{b}` overlap (one's markers lie within the "
                              "other's)")
    # Replaced from the last block up, so that the earlier blocks' line numbers still hold.
    for name, (start, end) in reversed(ordered):
        newline = "\r\n" if lines[start].endswith("\r\n") else "\n"
        body = [line + newline for line in blocks[name].strip("\n").split("\n")]
        lines[start + 1:end] = [newline, *body, newline]  # a blank line each side: Markdown's tables need them
    return "".join(lines)


def rewrite(path: str | Path, blocks: dict[str, str]) -> None:
    """Replace the blocks in the file at `path`, atomically: a reader sees the old file or the whole new one, and a
    marker error leaves the file as it was."""
    path = Path(path)
    text = path.read_bytes().decode("utf-8")
    new = replace_blocks(text, blocks, where=str(path))
    if new != text:
        with atomic.atomic_path(path) as tmp:
            tmp.write_bytes(new.encode("utf-8"))
