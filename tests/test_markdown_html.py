"""The Markdown dlbench writes as HTML (dlbench.present.markdown_html): what Python-Markdown makes of it, and the data
in it never markup."""

from __future__ import annotations

import re

import markdown  # Python-Markdown, the docs site's (the test dependencies): the reference to agree with

from dlbench.present import markdown_html
from dlbench.present.markdown import escape

HOSTILE = '</script><script>alert(1)</script> <b>bold</b> & "q" | [x](javascript:alert(3)) *not* `code`'

SAMPLE = f"""# Findings of this run

28 points (28 ok, 0 failed); **frameworks**: caffe, pytorch; *means* over `ok` points, p < 0.001, 95 % [1.2, 3.4].
A second line of the same paragraph, with an_underscored_name and a [link](charts/x.svg).

## Fastest and most accurate framework

- **Fastest on mnist_5k/cpu, own defaults: pytorch**, 2.62 s against caffe 7.34 s (Welch's t, p < 0.001).
- No single most accurate: pytorch 96.2% and tensorflow are equivalent within 0.5 points
  (a continuation of the item).
- A reason from the data: {escape(HOSTILE)}

| dataset | device | fastest here | reason |
|---|---:|:---:|---|
| mnist_5k | cpu | pytorch | {escape(HOSTILE)} |
| digits | gpu | caffe | none |

1. first
2. second

### For a consumer: the soonest to a target accuracy

```
code block <kept> as text
```

Charts not drawn (no data in this study): tuning (`tune:` in a sub-study).
"""


def tags(text: str) -> list[str]:
    return re.findall(r"</?([a-z0-9]+)", text)


def words(text: str) -> str:
    import html

    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text))).strip()


def test_it_renders_what_python_markdown_renders():
    mine, headings = markdown_html.render(SAMPLE)
    reference = markdown.markdown(SAMPLE, extensions=["tables", "fenced_code"])
    assert tags(mine) == tags(reference)
    assert words(mine) == words(reference)
    assert headings == [(1, "findings-of-this-run", "Findings of this run"),
                        (2, "fastest-and-most-accurate-framework", "Fastest and most accurate framework"),
                        (3, "for-a-consumer-the-soonest-to-a-target-accuracy",
                         "For a consumer: the soonest to a target accuracy")]
    assert '<td style="text-align:right">cpu</td>' in mine and '<a href="charts/x.svg">link</a>' in mine


def test_the_data_in_it_is_text_never_markup():
    mine, _ = markdown_html.render(SAMPLE)
    assert "<script>" not in mine and "<b>" not in mine and 'href="javascript' not in mine
    # the hostile text reads back as it was written (its Markdown read as Markdown), in the list and the table cell
    said = HOSTILE.replace("*not*", "not").replace("`code`", "code")
    item = re.search(r"<li>A reason from the data: (.*?)</li>", mine).group(1)
    cell = re.search(r"<td>(&lt;/script.*?)</td>", mine).group(1)
    assert words(item) == words(cell) == said
    # a link's address is kept only where it is relative or http(s): another scheme leaves the link's text alone
    assert markdown_html.inline("[x](javascript:alert)") == "x" and markdown_html.inline(
        "[y](https://example.org/a)") == '<a href="https://example.org/a">y</a>'


def test_headings_on_a_page_take_ids_not_yet_taken_and_go_a_level_deeper():
    taken = {"findings", "runs"}
    text, headings = markdown_html.render("# Runs\n\n## Runs\n\ntext\n", taken, shift=1)
    assert [h[1] for h in headings] == ["runs-2", "runs-3"] and {"runs-2", "runs-3"} <= taken
    assert text.startswith('<h2 id="runs-2">Runs</h2>\n<h3 id="runs-3">Runs</h3>')
