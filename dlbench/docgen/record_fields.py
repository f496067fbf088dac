"""docs/record.md, every field of a point's record, written from dlbench/record/fields.py.

The field list is the one home of what a record holds: this module only lays it out, and a test compares the
page with what it would write, so the two cannot drift apart.

    python -m dlbench.docgen.record_fields            write docs/record.md (`dlbench docs` runs it)
    python -m dlbench.docgen.record_fields --check    exit 1 if docs/record.md differs from the field list
"""

from __future__ import annotations

import sys

from dlbench.docgen import DOCS, GENERATED, page_command
from dlbench.record import fields

PAGE = DOCS / "record.md"
SOURCE = "dlbench/record/fields.py"
INTRO = f"""\
{GENERATED.format(source=SOURCE)}

# The record

Every point's `metrics.json` holds the fields below, and `results/runs.parquet` has one column per
field, in this order (`id` is `run_id` there; `files` stays in `metrics.json`). A field marked
"only" is absent where it does not apply; in the Parquet table that column is then empty, or
absent where no record of the study has it. The fields are defined once, in
`{SOURCE}`; this page is written from it by `dlbench docs`.

A name ends in its unit: `_s` seconds, `_mb` MiB, `_pct` per cent of one core or of the device, `_w` watts,
`_j` joules, `_img_s` images per second. What each status means, and which are results and which failures of
the machine, is in [Faults](faults.md); what a run leaves beside the record, in
[Using dlbench](usage.md#what-a-run-leaves).

A record is made from its point's raw measurement (the trainer's events, the monitor's samples, the runner's
facts: `dlbench/record/raw.py`) by `dlbench/run/build_record.py`: the training job makes it as its point ends,
and the record rule makes every record again where the code that makes records changed, training nothing. A
field's description on this page is no such change.
"""


def render(sections=None) -> str:
    """The page: its introduction, then one table per section of the record."""
    out = [INTRO]
    for section in sections or fields.SECTIONS:
        out += [f"## {section.title}", "", f"From {section.source}.", "",
                "| field | type | unit | what it is |", "| --- | --- | --- | --- |"]
        for f in section.fields:
            where = f" ({f.where} only)" if f.where else ""
            out.append(f"| `{f.name}` | {fields.TYPE_NAMES[f.type]} | {f.unit or '-'} | {f.description}{where} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    return page_command(argv, "dlbench.docgen.record_fields", __doc__, PAGE, render, SOURCE)


if __name__ == "__main__":
    sys.exit(main())
